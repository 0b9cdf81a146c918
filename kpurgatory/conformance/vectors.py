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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kpurgatory.conformance.driver import Observation, first_divergence, run_steps
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    Cancel,
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    NextDueTime,
    PurgatoryAdvance,
    SetReady,
    Shutdown,
    Step,
    Watch,
    step_to_json,
    steps_from_json,
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

RULE_GENERATOR_VERSION = "3"
"""Version of the hand-written rule vectors below; bump it when one changes."""


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


# ---- the hand-written rule vectors -------------------------------------------------------

_RuleVector = tuple[str, str, tuple[str, ...], Callable[[], list[Step]]]


def _r1_due_time() -> list[Step]:
    return [
        Init(tick_ms=10, wheel_size=4, start_ms=0, clock_ms=3),
        Add("d5", 5),  # expiration 8 -> due 0 <= current 0: handed over inside add (R3)
        Add("d7", 7),  # expiration 10 -> due 10
        Add("d16", 16),  # expiration 19 -> due 10: may run 9 ms before its expiration
        Add("d17", 17),  # expiration 20 -> due 20
        Advance(6),  # now 9: nothing due yet (R4)
        Advance(1),  # now 10: d7 and d16 (same due: a multiset, R6)
        Advance(9),  # now 19: nothing
        Advance(1),  # now 20: d17
    ]


def _r2_r3_current_time() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, start_ms=0, clock_ms=0),
        ClockAdvance(50),  # the clock moves, the timer's current time stays 0 (R2)
        Add("late", -10),  # due 40: passed on the clock, but after current time: waits (R3)
        Add("now", -50),  # due 0 <= current 0: handed over at once
        Advance(0),  # drains at 50: "late" runs; current time becomes 50
        Add("zero", 0),  # due 50 <= 50: at once
        Add("one", 1),  # due 51: scheduled
        Advance(1),
    ]


def _r6_order() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=1, wheel_size=2, start_ms=0, clock_ms=0)]
    for delay in (9, 3, 27, 1, 3, 81, 9, 2):
        steps.append(Add(f"t{len(steps)}-{delay}", delay))
    steps += [Advance(5), Advance(100)]
    return steps


def _r8_result() -> list[Step]:
    return [
        Init(tick_ms=2, wheel_size=3),
        Advance(10),  # nothing scheduled: False
        Add("a", 3),  # due 12
        Add("b", 4),  # due 14
        Cancel("b"),
        Advance(1),  # now 11: False
        Advance(1),  # now 12: a runs: True
        Advance(5),  # b was cancelled: False
    ]


def _r9_r10_cancel_readd() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=3, timers=("main", "other")),
        Add("a", 10),
        Cancel("a"),
        Cancel("a"),  # idempotent (R9)
        Add("a", 10),  # re-adding a cancelled task schedules it again (R10)
        Advance(4),
        Add("a", 10, timer="other"),  # moves it: main drops, other grows (R10)
        Advance(10),  # main drains at 14: a is no longer there
        Advance(0, timer="other"),  # other drains at 14: a (due 14) runs
        Cancel("a"),  # a task that is not scheduled: no-op
        Add("a", 10, timer="other"),  # a task that already ran is scheduled again
        Advance(10, timer="other"),
    ]


def _r11_cancel_before_turn() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Add("first", 3, on_run=(Cancel("second"), Add("third", 0))),
        Add("second", 5),
        Add("fourth", 6, on_run=(Add("second", 5),)),
        Advance(10),  # first runs (third at once, nested), second skipped, fourth re-adds second
        Advance(4),
        Advance(1),
    ]


def _r16_r17_force_and_expiry() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=3),
        Watch("op", 20, ("k",)),
        ForceComplete("op"),  # wins: cancels the timer entry, on_complete (R16)
        ForceComplete("op"),  # False
        Watch("exp", 5, ("k", "j")),
        Advance(5),  # exp expires: completed(via expiry) then expired (R17)
        ForceComplete("exp"),
        CheckAndComplete("k"),  # both completed already: unlinked, not counted (R25)
        CheckAndComplete("j"),
    ]


def _r22_r23_watch() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("first-try", 10, ("a", "b"), ready=True),  # never watched, counted or timed
        Watch("second-try", 10, ("a", "b"), ready_on_try=2),  # watched and counted, not timed
        Watch("pending", 10, ("a", "b", "c")),
        Watch("third-try", 10, ("c",), ready_on_try=3),
        CheckAndComplete("c"),  # third-try completes on its third try; pending stays
        CheckAndComplete("a"),  # unlinks second-try (completed), tries pending
        Advance(10),
    ]


def _r24_keys() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("dup", 10, ("k", "k", 7, "k", 7)),  # watched once per distinct key
        Watch("int-vs-str", 10, (7, "7")),
        CheckAndComplete("7"),
        SetReady("int-vs-str"),
        CheckAndComplete(7),
        Watch("empty", 10, ()),  # ValueError (R36)
    ]


def _r25_r26_check() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("x", 50, ("p",)),
        Watch("y", 50, ("p", "q")),
        Watch("z", 50, ("p",)),
        CheckAndComplete("missing"),  # 0; never creates a key
        SetReady("x"),
        SetReady("z"),
        CheckAndComplete("p"),  # 2 (x and z), y stays
        SetReady("y"),
        CheckAndComplete("q"),  # 1: y completes; q dropped; y still linked on p
        CheckAndComplete("p"),  # 0: y unlinked but not counted; p dropped (R26)
    ]


def _r44_next_due_time() -> list[Step]:
    return [
        Init(tick_ms=5, wheel_size=2, timers=("main", "other")),
        NextDueTime(),  # null: nothing scheduled
        Add("late", 400),
        Add("soon", 12),
        NextDueTime(),  # 10: floor(12, 5), below the overflow level holding late
        Cancel("soon"),
        NextDueTime(),  # 400: past the emptied bucket, into the overflow level
        Add("late", 400, "other"),  # moved
        NextDueTime(),  # null
        NextDueTime("other"),  # 400
        Advance(399, "other"),
        NextDueTime("other"),  # 400: a drain before it hands nothing over
        Advance(1, "other"),
        NextDueTime("other"),  # null
    ]


def _r29_cancel_for_key() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("a", 30, ("k", "m")),
        Watch("b", 30, ("k",)),
        Watch("c", 30, ("k",), ready_on_try=2),
        CancelForKey("k"),  # [a, b, c], c completed included; a and b leave the timer
        CancelForKey("k"),  # []
        Advance(40),  # nothing expires
        SetReady("a"),
        CheckAndComplete("m"),  # a is still watched on m (R29)
    ]


def _r30_purge() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=1, wheel_size=4, purge_interval=2)]
    for index in range(5):
        steps.append(Watch(f"op{index}", 100, ("k", f"own{index}")))
    steps += [
        ForceComplete("op0"),
        ForceComplete("op1"),
        PurgatoryAdvance(1),  # estimate 5 - delayed 3 = 2: not > 2, no purge
        ForceComplete("op2"),
        PurgatoryAdvance(1),  # 5 - 2 = 3 > 2: estimate := 2, purge op0..op2
        PurgatoryAdvance(200),  # op3, op4 expire; 2 - 0 = 2: no purge
        Watch("op5", 1, ("k",)),
        PurgatoryAdvance(1),  # 3 - 0 > 2: purge
    ]
    return steps


def _r32_r33_r34() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timer_enabled=False),
        Watch("op", 5, ("k",)),
        Watch("op", 5, ("k",)),  # second submission: ValueError (R34)
        Advance(100),  # timer_enabled=False: never expires (R33)
        SetReady("op"),
        CheckAndComplete("k"),
        Shutdown(),
        Shutdown(),  # idempotent
        Watch("late", 5, ("k",)),  # RuntimeError (R32)
        PurgatoryAdvance(1),  # RuntimeError
    ]


def _r35_inputs() -> list[Step]:
    return [
        Init(tick_ms=5, wheel_size=2),
        Advance(-1),  # ValueError
        ClockAdvance(-1),  # ValueError
        PurgatoryAdvance(-5),  # ValueError
        Add("neg", -100),  # any delay is accepted; due at once
        Watch("negop", -3, ("k",)),  # due at once: expires inside the watch
    ]


def _r40_cancel_submitted() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, purge_interval=0),
        Watch("op", 20, ("k", "m")),
        Watch("other", 20, ("k",)),
        Cancel("op"),  # an abandon (R40): off both lists and the timer; the estimate stays
        Cancel("op"),  # abandoned already: nothing changes
        CheckAndComplete("k"),  # tries other only
        SetReady("op"),
        CheckAndComplete("m"),  # m's list was dropped with op: 0, no try
        PurgatoryAdvance(1),  # estimate 2 - delayed 1 > 0: purge check resets it to 1
        Advance(30),  # op never expires; other does
    ]


def _r14_closed_timer() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Add("t", 10),
        Watch("op", 20, ("k",)),
        Add("u", 5, "aux"),
        Shutdown(),  # closes main: its tasks stay counted and scheduled, never run (R14)
        NextDueTime(),  # 10, still
        Advance(50),  # False; the clock does not move (R14)
        Advance(-1),  # a negative timeout is a ValueError, closed or not (R8)
        PurgatoryAdvance(-1),  # ValueError before the shutdown's RuntimeError (R35)
        PurgatoryAdvance(1),  # RuntimeError (R32)
        Cancel("t"),  # still works on a closed timer: main's size drops
        Add("t", 10),  # RuntimeError: a closed timer schedules nothing
        Advance(5, "aux"),  # the other timer is open: u runs
        NextDueTime(),  # 20 (op)
    ]


def _r22_error_precedence() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("op", 20, ("k",)),
        Watch("op", 20, ("k",)),  # ValueError: a resubmission (R34)
        Shutdown(),
        Watch("empty", 20, ()),  # ValueError: empty keys come first (R36)
        Watch("late", 20, ("k",)),  # RuntimeError: shut down (R32)
        Watch("op", 20, ("k",)),  # RuntimeError: the shutdown before the resubmission
        CheckAndComplete("k"),  # still works after shutdown
        CancelForKey("k"),
    ]


def _on_run_stops_at_exception() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Watch("op", 50, ("k",)),
        Watch("op2", 50, ("k",)),
        Add("quiet", 3),
        Add(
            "worker",
            5,
            "aux",
            on_run=(
                Cancel("worker"),  # unscheduling itself changes nothing in its own run
                ForceComplete("op"),  # recorded in worker's unit, with worker's due time
                Add("quiet", 3),  # RuntimeError (main is closed): the run ends here
                ForceComplete("op2"),  # never happens
            ),
        ),
        Shutdown(),
        Advance(5, "aux"),  # worker runs: op completes, op2 does not
        CheckAndComplete("k"),  # op unlinked, not counted; op2 tried once
    ]


def _repeated_watch() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("op", 50, ("k",), ready_on_try=3),  # two tries: pending
        Watch("op", 50, ("k",), ready_on_try=3),  # ValueError (R34): no try, no reset
        CheckAndComplete("k"),  # the third try: completes
        Watch("op", 50, ("k",), ready_on_try=3),  # ValueError still
    ]


def _wheel_windows() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=2, wheel_size=3, start_ms=1, clock_ms=1)]
    for move in (0, 5, 13, 4):  # place tasks at every level's window edges from here
        steps.append(Advance(move))
        for span in (6, 18, 54):  # interval of levels 0, 1, 2 (tick 2, wheel 3)
            for jitter in (-2, -1, 0, 1, 2):
                steps.append(Add(f"a{len(steps)}-{span + jitter}", span + jitter))
    for move in (1, 1, 2, 3, 5, 8, 13, 21, 34, 55):
        steps.append(Advance(move))
    return steps


def _deep_levels() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=1, wheel_size=2, start_ms=0, clock_ms=0)]
    for delay in (1, 2, 3, 4, 7, 8, 15, 16, 31, 33, 64, 1000, 1023, 1024, 4096):
        steps.append(Add(f"d{delay}", delay))
    for step_ms in (1, 1, 2, 4, 8, 16, 32, 64, 1000, 3000, 100):
        steps.append(Advance(step_ms))
    return steps


def _r07_letting_time_pass() -> list[Step]:
    return [
        Init(tick_ms=2, wheel_size=4, start_ms=0, clock_ms=0, timers=("main", "aux")),
        Add("m5", 5),  # due 4 on main
        Add("a9", 9, "aux"),  # due 8 on aux
        ClockAdvance(7),  # the shared clock moves; nothing drains (R7: only advance_clock)
        NextDueTime(),
        Advance(0),  # drains main at 7: m5 runs
        Advance(0, "aux"),  # aux drains at 7 too: a9 (due 8) waits
        Advance(1, "aux"),  # the clock moves by exactly 1 to 8: a9 runs
        Add("m3", 3),  # now 8: due 10
        Advance(1),  # 9: nothing
        Advance(1),  # 10: m3
        Advance(0),  # again at 10: nothing
    ]


def _r12_size() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=3, timers=("main", "other")),
        Add("now", 0),  # handed over inside add: never counted
        Add("a", 2),
        Add("b", 7),  # a level up
        Add("c", 40),  # two levels up
        Add("a", 2),  # a re-add replaces: still 3
        Add("b", 7, "other"),  # moves: main 2, other 1
        Cancel("c"),
        Cancel("c"),
        Advance(2),  # a drains
        Advance(10, "other"),  # b drains
        Add("c", 40),
        Advance(100),
    ]


def _timer_inputs() -> list[Step]:
    return [
        Init(tick_ms=5, wheel_size=2, start_ms=3, clock_ms=3),
        Advance(-1),  # ValueError (R8, R35), the clock and the timer unchanged
        ClockAdvance(-1),  # ValueError
        Add("neg", -100),  # any delay is accepted; due at once (R3)
        Add("zero", 0),  # expiration 3, due 0: at once
        Add("far", 1 << 40),
        Add("tick", 2),  # expiration 5, due 5: waits
        NextDueTime(),
        Advance(-5),  # ValueError again, nothing drained
        Advance(2),
        NextDueTime(),
        Advance(1 << 40),
    ]


def _idle_drains() -> list[Step]:
    return [
        Init(tick_ms=3, wheel_size=4, start_ms=0, clock_ms=0),
        Advance(3),  # nothing scheduled: the current time still moves to 3 (R2)
        Add("at-once", 0),  # due 3 <= 3: handed over inside add (R3)
        Advance(2),  # 5: less than a tick, the current time stays 3
        Add("next", 0),  # due 3: at once
        Add("one", 1),  # expiration 6, due 6: waits
        Advance(1),  # 6: one runs
        Advance(6),  # 12: idle, two ticks
        Add("late", -1),  # due 9: at once
        Add("edge", 2),  # expiration 14, due 12: at once
    ]


def _idle_upper_levels() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=2, start_ms=0, clock_ms=0),
        Add("far", 1000),  # builds levels up to a tick of 512
        Cancel("far"),  # its bucket stays queued, due at 512
        Advance(100),  # nothing due: every level's time moves to 100, not the lowest alone
        Add("x", 3),  # due 103: one level up from 100, not in a bucket already expired
        Advance(1),
        Advance(2),  # 103: x runs
        Advance(500),
    ]


def _bucket_shapes() -> list[Step]:
    """Shapes published timer ports got wrong: several tasks in one bucket at each level,
    a cancel of a task in a bucket of each level, adds right after the clock moved with
    no drain, and due times on either side of every bucket's rounding."""
    steps: list[Step] = [Init(tick_ms=2, wheel_size=4, start_ms=1, clock_ms=1)]
    for span in (3, 9, 37, 131):  # levels 0 to 3 (intervals 8, 32, 128)
        for jitter in (0, 1, 1, 2):
            steps.append(Add(f"s{span}+{jitter}-{len(steps)}", span + jitter))
    for label in ("s9+1-7", "s37+0-9", "s131+2-16"):
        steps.append(Cancel(label))
    steps += [Advance(5), ClockAdvance(30)]
    for delay in (1, 2, 3, 7, 8, 9, 31, 32, 33):
        steps.append(Add(f"late{delay}", delay))
    steps.append(NextDueTime())
    for move in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89):
        steps.append(Advance(move))
    return steps


_RULE_VECTORS: tuple[_RuleVector, ...] = (
    (
        "r01-due-time",
        "Due time is the expiration rounded down to the tick.",
        ("R1", "R3", "R4"),
        _r1_due_time,
    ),
    (
        "r02-current-time",
        "Current time moves only in advance_clock, to the drain reading before the hand-over; "
        "add judges due-at-once against it.",
        ("R2", "R3", "R12"),
        _r2_r3_current_time,
    ),
    (
        "r06-hand-over-order",
        "One drain hands over in non-decreasing due order.",
        ("R5", "R6"),
        _r6_order,
    ),
    (
        "r08-advance-result",
        "advance_clock returns True iff it handed something over.",
        ("R8", "R9"),
        _r8_result,
    ),
    (
        "r09-cancel-readd",
        "Cancel is idempotent; re-adding moves a task, also across timers.",
        ("R9", "R10", "R12"),
        _r9_r10_cancel_readd,
    ),
    (
        "r11-cancel-before-turn",
        "A task cancelled or re-added by an earlier task in the same "
        "drain is not handed over; adds during a hand-over follow R3 against the drain reading.",
        ("R2", "R6", "R11"),
        _r11_cancel_before_turn,
    ),
    (
        "r16-force-and-expiry",
        "force_complete exactly once; expiry completes then expires.",
        ("R16", "R17", "R25"),
        _r16_r17_force_and_expiry,
    ),
    (
        "r22-watch-sequence",
        "try_complete_else_watch: first try, second try, pending.",
        ("R22", "R23", "R25"),
        _r22_r23_watch,
    ),
    (
        "r24-keys",
        "Watch keys are deduplicated; 7 and '7' differ; empty keys raise.",
        ("R24", "R36"),
        _r24_keys,
    ),
    (
        "r25-check-and-complete",
        "check_and_complete counts only what it completed; empty lists are dropped.",
        ("R25", "R26", "R27"),
        _r25_r26_check,
    ),
    (
        "r29-cancel-for-key",
        "cancel_for_key returns the watchers and cancels their timers.",
        ("R29", "R28"),
        _r29_cancel_for_key,
    ),
    (
        "r44-next-due-time",
        "next_due_time: the least scheduled due time, past emptied buckets and levels.",
        ("R44", "R1", "R9", "R10"),
        _r44_next_due_time,
    ),
    (
        "r30-purge",
        "Purge when estimate - num_delayed > purge_interval, strictly.",
        ("R30", "R27", "R28"),
        _r30_purge,
    ),
    (
        "r32-shutdown-timer-disabled-resubmit",
        "timer_enabled=False, one submission per operation, shutdown.",
        ("R32", "R33", "R34"),
        _r32_r33_r34,
    ),
    (
        "r35-inputs",
        "Negative advances raise ValueError; negative delays are due at once.",
        ("R35", "R3"),
        _r35_inputs,
    ),
    (
        "r40-cancel-submitted",
        "cancel() on a submitted operation abandons it: it leaves its watcher lists and "
        "the timer, never completes or expires, and the purge estimate stays.",
        ("R40", "R9", "R26", "R27", "R28", "R30"),
        _r40_cancel_submitted,
    ),
    (
        "r14-closed-timer",
        "A closed timer keeps its tasks in size and next_due_time, moves no clock and "
        "schedules nothing; a negative timeout is a ValueError even there.",
        ("R14", "R12", "R44", "R8", "R35", "R32"),
        _r14_closed_timer,
    ),
    (
        "r22-error-precedence",
        "try_complete_else_watch's errors in order: empty keys, then shut down, then "
        "resubmission; check_and_complete and cancel_for_key still work after shutdown.",
        ("R36", "R32", "R34", "R29"),
        _r22_error_precedence,
    ),
    (
        "on-run-stops-at-exception",
        "A task's run is one call: a step of its on_run that raises ends the run, the later "
        "steps do not happen; the unit's events keep the due time of its hand-over.",
        ("R14", "R16", "R25"),
        _on_run_stops_at_exception,
    ),
    (
        "repeated-watch",
        "A repeated watch submits the same operation again: refused, and it resets nothing "
        "(the try count goes on).",
        ("R34", "R22", "R23", "R25"),
        _repeated_watch,
    ),
    (
        "wheel-windows",
        "Tasks one and two ticks either side of every level's window edge, from an unaligned "
        "start and after moves that leave the levels mid-window.",
        ("R1", "R4", "R5", "R6", "R2"),
        _wheel_windows,
    ),
    (
        "deep-levels",
        "Delays across many overflow levels of a 2-bucket wheel.",
        ("R1", "R4", "R5", "R6"),
        _deep_levels,
    ),
    (
        "r07-letting-time-pass",
        "advance_clock moves the shared clock by exactly its timeout and drains at the new "
        "reading; a clock move alone drains nothing; each timer drains only when advanced.",
        ("R7", "R2", "R4", "R5", "R44"),
        _r07_letting_time_pass,
    ),
    (
        "r12-size",
        "size counts scheduled tasks: not those handed over inside add; a re-add replaces, a "
        "move to another timer moves the count, cancel and drain remove.",
        ("R12", "R3", "R9", "R10"),
        _r12_size,
    ),
    (
        "timer-inputs",
        "The timer's inputs alone: negative timeouts and clock moves raise ValueError and "
        "change nothing; any delay is accepted, a negative one is due at once.",
        ("R35", "R8", "R3", "R1", "R44"),
        _timer_inputs,
    ),
    (
        "idle-drains",
        "A drain with nothing due still moves the current time to the reading, by whole "
        "ticks: a task due at the new current time is handed over inside add.",
        ("R2", "R3", "R8"),
        _idle_drains,
    ),
    (
        "idle-upper-levels",
        "A drain with nothing due moves the time of every wheel level, so a task added "
        "after it is placed against the current time, never in a bucket already expired.",
        ("R2", "R4", "R5"),
        _idle_upper_levels,
    ),
    (
        "bucket-shapes",
        "Several tasks per bucket at every level, cancels in buckets of every level, adds "
        "right after the clock moved without a drain, due times either side of a rounding.",
        ("R1", "R2", "R4", "R5", "R6", "R9", "R12", "R44"),
        _bucket_shapes,
    ),
)


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
        for name, description, rules, build in _RULE_VECTORS
    ]


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
