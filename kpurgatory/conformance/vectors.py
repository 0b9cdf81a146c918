"""Conformance vectors: step lists with the reference's expected observations, as JSON.

A vector is one deterministic run (``init`` first) of the step language where every
step carries the observation the reference implementation produced for it. A port, or
``kpurgatory.optimized``, passes a vector iff running the same steps yields observations
that ``compare_observations`` accepts at every step. Every vector records its
provenance: spec version, generator and its version, scenario, preset, seed, shard, the
implementation that produced the expectations, and a content hash of its steps and
expectations (so a changed expectation is a new vector, never a silent edit).

Two families exist: ``rule_vectors()`` (hand-written, one or a few rules each; the
scenario is ``rules`` and the preset names the rule) and vectors generated from the
workload generator the pipeline also replays (``kpurgatory.workloads``). docs/vectors.md
is the prose description; conformance/schema/vector.schema.json the JSON Schema.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kpurgatory.conformance.catalogue import RULE_GENERATOR_VERSION, RULE_RUNS
from kpurgatory.conformance.driver import Observation, first_divergence, run_steps
from kpurgatory.conformance.steps import (
    Step,
    step_to_json,
    steps_from_json,
)
from kpurgatory.conformance.timer_streams import GENERATOR_VERSION as TIMER_GENERATOR_VERSION
from kpurgatory.conformance.timer_streams import (
    NEGATIVE_START_SEED,
    TIMER_SEEDS,
    timer_stream,
)
from kpurgatory.spec.rules import SPEC_VERSION
from kpurgatory.workloads import GENERATOR_VERSION, PRESETS, stream_steps

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "RULE_GENERATOR_VERSION",
    "SCHEMA_PATH",
    "WORKLOAD_GENERATOR",
    "content_hash",
    "load_schema",
    "load_vector",
    "make_vector",
    "replay_all",
    "replay_vector",
    "rule_vectors",
    "validate_vector",
    "vector_file_name",
    "vector_steps",
    "workload_vector",
    "write_vector",
]

FORMAT = "kpurgatory-conformance-vector"
"""The ``format`` field of every vector."""

FORMAT_VERSION = 1
"""Bumped when the vector layout changes incompatibly."""

WORKLOAD_GENERATOR = "kpurgatory.workloads"
"""The ``provenance.generator`` of the workload vectors (the module that writes their steps)."""


def conformance_root(package_file: Path = Path(__file__)) -> Path:
    """The folder of the committed vectors and schema.

    An installed wheel carries them as package data in ``kpurgatory/conformance/data/``
    (setup.py copies the repository's ``conformance/`` there at build time); a source
    checkout or an editable install has no such folder and uses the checkout's
    ``conformance/`` beside the package. Never the working directory: the kit must
    behave the same wherever it is run from.
    """
    packaged = package_file.resolve().parent / "data"
    if (packaged / "schema" / "vector.schema.json").is_file():
        return packaged
    return package_file.resolve().parents[2] / "conformance"


SCHEMA_PATH = conformance_root() / "schema" / "vector.schema.json"
"""The JSON Schema of a vector (package data of a wheel, or the checkout's copy)."""


def content_hash(entries: Sequence[dict[str, Any]]) -> str:
    """``sha256:<hex>`` of the canonical JSON of a vector's ``steps`` (steps + expectations).

    Canonical: keys sorted, separators ``(",", ":")``, ASCII only. A port can recompute
    it to check a vector file was not edited by hand.
    """
    text = json.dumps(list(entries), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def make_vector(
    steps: Sequence[Step],
    *,
    name: str,
    description: str,
    rules: Sequence[str],
    generator: str,
    generator_version: str,
    scenario: str,
    preset: str,
    seed: int,
    shard: int = 0,
    impl: ModuleType | None = None,
) -> dict[str, Any]:
    """Run ``steps`` on ``impl`` (default: the reference) and package the expectations."""
    if impl is None:
        impl = importlib.import_module("kpurgatory.reference")
    observations = run_steps(impl, steps)
    rules = rules_shown(steps, observations, rules)
    entries = [
        {"step": step_to_json(step), "expect": obs.to_json()}
        for step, obs in zip(steps, observations, strict=True)
    ]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "name": name,
        "description": description,
        "rules": list(rules),
        "provenance": {
            "spec_version": SPEC_VERSION,
            "generator": generator,
            "generator_version": generator_version,
            "scenario": scenario,
            "preset": preset,
            "seed": seed,
            "shard": shard,
            "implementation": impl.__name__,
            "content_hash": content_hash(entries),
        },
        "steps": entries,
    }


def rules_shown(
    steps: Sequence[Step], observations: Sequence[Observation], declared: Sequence[str]
) -> list[str]:
    """The rule tags of a vector: the ``declared`` ones, then every rule that a port
    missing it breaks somewhere in this run, in the order the run breaks them.

    Found from the run itself: for each known difference of upstream Kafka (each is a
    rule a port may miss: R61's let-go at idle, R2's current time, R8's result, ...) the
    steps run on the kit's model of the reference with that one difference switched on
    (``kafka_model``); if an observation differs from the reference's, the difference's
    rule is tagged, ordered by the first step where it differs. So a port that misses a
    rule and fails a vector finds that rule among the vector's tags (a test plants a
    port without R61's let-go and checks it)."""
    from kpurgatory.conformance.compare import compare_observations
    from kpurgatory.conformance.kafka_model import kafka_model
    from kpurgatory.spec.known_differences import KNOWN_DIFFERENCES

    def first_difference(differences: frozenset[str]) -> int | None:
        try:
            model = run_steps(kafka_model(differences), steps)
        except Exception:  # the model crashed: the run breaks the rule at once
            model = []
        return next(
            (
                i
                for i, expected in enumerate(observations)
                if i >= len(model) or compare_observations(expected, model[i]) is not None
            ),
            None,
        )

    # Where the model with no difference on already departs from the reference, the run
    # is beyond what the model follows (a step it does not model): tags stop there.
    limit = first_difference(frozenset())
    first_broken: dict[str, int] = {}
    for difference in KNOWN_DIFFERENCES:
        index = first_difference(frozenset({difference.id}))
        if index is not None and (limit is None or index < limit):
            first_broken[difference.rule] = min(index, first_broken.get(difference.rule, index))
    found = sorted(first_broken, key=lambda rule: first_broken[rule])
    return list(declared) + [rule for rule in found if rule not in declared]


def vector_steps(vector: dict[str, Any]) -> tuple[list[Step], list[Observation]]:
    """The steps and expected observations of a loaded vector."""
    entries = vector["steps"]
    steps = steps_from_json([entry["step"] for entry in entries])
    expected = [Observation.from_json(entry["expect"]) for entry in entries]
    return steps, expected


def replay_vector(vector: dict[str, Any], impl: ModuleType) -> tuple[int, str] | None:
    """Run a vector's steps on ``impl``; the first divergence ``(index, why)`` or None."""
    steps, expected = vector_steps(vector)
    return first_divergence(steps, expected, run_steps(impl, steps))


def load_schema() -> dict[str, Any]:
    """The vector JSON Schema from ``SCHEMA_PATH``."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def validate_vector(vector: dict[str, Any], schema: dict[str, Any] | None = None) -> None:
    """Check ``vector`` against the JSON Schema and its content hash and spec version.

    Raises ``ValueError`` naming what is wrong. Needs ``jsonschema`` (a dev dependency).
    """
    jsonschema = importlib.import_module("jsonschema")  # dev dependency, untyped
    try:
        jsonschema.validate(vector, load_schema() if schema is None else schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        raise ValueError(
            f"vector {vector.get('name')!r} at {where or '<root>'}: {exc.message}"
        ) from None
    recorded = vector["provenance"]["content_hash"]
    actual = content_hash(vector["steps"])
    if recorded != actual:
        raise ValueError(
            f"vector {vector['name']!r}: provenance.content_hash is {recorded}, content is {actual}"
        )


def vector_file_name(vector: dict[str, Any]) -> str:
    """``<name>.json``: names are unique within a directory of vectors."""
    return f"{vector['name']}.json"


def write_vector(directory: Path, vector: dict[str, Any]) -> Path:
    """Write ``vector`` as indented JSON into ``directory``; returns the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / vector_file_name(vector)
    path.write_text(json.dumps(vector, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def load_vector(path: Path) -> dict[str, Any]:
    """Read one vector file (no validation: see ``validate_vector``)."""
    vector: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return vector


def rule_vectors(impl: ModuleType | None = None) -> list[dict[str, Any]]:
    """The hand-written rule vectors, with expectations from ``impl`` (default reference)."""
    return [
        make_vector(
            build(),
            name=name,
            description=description,
            rules=rules,
            generator="kpurgatory.conformance.vectors.rule_vectors",
            generator_version=RULE_GENERATOR_VERSION,
            scenario="rules",
            preset=name,
            seed=0,
            impl=impl,
        )
        for name, description, rules, build in RULE_RUNS
    ]


TIMER_GENERATOR = "kpurgatory.conformance.timer_streams"
"""The ``provenance.generator`` of the timer vectors."""

TIMER_RULES = ("R1", "R2", "R3", "R4", "R5", "R6", "R7", "R9", "R10", "R11", "R12", "R44")
"""The rules every timer stream exercises (its rule tags then add what its run shows)."""


def timer_vector(preset: str, seed: int) -> dict[str, Any]:
    """The vector of one timer stream (``kpurgatory.conformance.timer_streams``): timer
    steps only, so a ``--timer-only`` port answers it. Named ``timer-<preset>-s<seed>``."""
    negative = " from a negative clock reading" if seed == NEGATIVE_START_SEED else ""
    return make_vector(
        timer_stream(preset, seed),
        name=f"timer-{preset}-s{seed}",
        description=(
            f"Timer stream{negative}: preset {preset} ({PRESETS[preset].description}); adds, "
            f"re-adds, cancels, tasks acting on later ones, clock moves and drains."
        ),
        rules=TIMER_RULES,
        generator=TIMER_GENERATOR,
        generator_version=TIMER_GENERATOR_VERSION,
        scenario="timer",
        preset=preset,
        seed=seed,
    )


def timer_vectors() -> list[dict[str, Any]]:
    """Every committed timer vector: each preset of the workloads, seeds ``TIMER_SEEDS``."""
    return [timer_vector(preset, seed) for preset in sorted(PRESETS) for seed in TIMER_SEEDS]


def replay_all(vectors: Iterable[dict[str, Any]], impl: ModuleType) -> list[tuple[str, int, str]]:
    """Replay every vector on ``impl``: ``(name, step index, why)`` for each that diverges."""
    failures = []
    for vector in vectors:
        divergence = replay_vector(vector, impl)
        if divergence is not None:
            failures.append((vector["name"], *divergence))
    return failures


def workload_vector(
    scenario: str, preset: str, seed: int, shard: int, n_ops: int
) -> dict[str, Any]:
    """A vector from one stream of the workload generator (expectations: the reference).

    Named ``<scenario>-<preset>-s<seed>[-k<shard>]-n<n_ops>``.
    """
    steps = stream_steps(scenario, preset, seed, shard, n_ops)
    # The grid row's fields go on by keyword, deliberately in the shape of the pipeline's calls.
    shard_part = f"-k{shard}" if shard else ""
    return make_vector(
        steps,
        name=f"{scenario}-{preset}-s{seed}{shard_part}-n{n_ops}",
        description=(
            f"Workload stream: scenario {scenario}, preset {preset} "
            f"({PRESETS[preset].description}), {n_ops} operations."
        ),
        rules=("R1", "R2", "R3", "R6", "R16", "R17", "R22", "R25", "R29", "R30"),
        generator=WORKLOAD_GENERATOR,
        generator_version=GENERATOR_VERSION,
        scenario=scenario,
        preset=preset,
        seed=seed,
        shard=shard,
    )
