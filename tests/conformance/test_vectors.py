"""Conformance vectors: schema, provenance, replay on every implementation, and the comparison.

The committed vectors under conformance/vectors/ are replayed through the same driver a
port's adapter uses (``kpurgatory.conformance``), on every implementation present.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kpurgatory import reference
from kpurgatory.conformance.driver import (
    Driver,
    Observation,
    RecordedEvent,
    State,
    StepError,
    compare_observations,
    run_steps,
)
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    ClockAdvance,
    ForceComplete,
    Init,
    Shutdown,
    Step,
    Watch,
    step_from_json,
    step_to_json,
)
from kpurgatory.conformance.vectors import (
    SCHEMA_PATH,
    WORKLOAD_GENERATOR,
    content_hash,
    load_schema,
    load_vector,
    replay_vector,
    rule_vectors,
    validate_vector,
    workload_vector,
)
from kpurgatory.spec.events import OperationCompleted, OperationExpired, TaskRan
from kpurgatory.spec.rules import SPEC_VERSION
from tests.support import implementation_names, load

VECTOR_DIR = SCHEMA_PATH.parents[1] / "vectors"
VECTOR_FILES = sorted(VECTOR_DIR.glob("*.json"))
SCHEMA = load_schema()


def test_committed_vectors_exist_and_are_small() -> None:
    assert len(VECTOR_FILES) >= 36
    assert sum(path.stat().st_size for path in VECTOR_FILES) < 2_000_000


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_matches_schema_hash_and_spec_version(path: Path) -> None:
    vector = load_vector(path)
    validate_vector(vector, SCHEMA)
    assert vector["provenance"]["spec_version"] == SPEC_VERSION
    assert path.name == f"{vector['name']}.json"


@pytest.mark.parametrize("impl_name", implementation_names())
@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_replays_on_every_implementation(path: Path, impl_name: str) -> None:
    """Every committed vector passes on every implementation (R1-R36 as the vectors cite)."""
    assert replay_vector(load_vector(path), load(impl_name)) is None


def test_committed_rule_vectors_are_current() -> None:
    """Regenerating the rule vectors from the reference reproduces the committed files."""
    for vector in rule_vectors():
        assert load_vector(VECTOR_DIR / f"{vector['name']}.json") == vector


def test_a_changed_expectation_is_detected() -> None:
    vector = load_vector(VECTOR_DIR / "r30-purge.json")
    broken = copy.deepcopy(vector)
    broken["steps"][-1]["expect"]["state"]["num_purged"] += 1
    divergence = replay_vector(broken, reference)
    assert divergence is not None
    assert divergence[0] == len(vector["steps"]) - 1
    assert "num_purged" in divergence[1]


def test_an_edited_vector_fails_its_content_hash() -> None:
    vector = load_vector(VECTOR_DIR / "r01-due-time.json")
    vector["steps"][1]["expect"]["result"] = True
    with pytest.raises(ValueError, match="content_hash"):
        validate_vector(vector, SCHEMA)
    vector["provenance"]["content_hash"] = content_hash(vector["steps"])
    with pytest.raises(ValueError, match="steps/1/expect/result"):
        # null is the only result an add may have
        validate_vector(_with_result_type(vector), SCHEMA)


def _with_result_type(vector: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(vector)
    broken["steps"][1]["expect"]["result"] = {"not": "allowed"}
    broken["provenance"]["content_hash"] = content_hash(broken["steps"])
    return broken


def test_schema_rejects_unknown_step_kind() -> None:
    vector = load_vector(VECTOR_DIR / "r01-due-time.json")
    vector["steps"][2]["step"]["step"] = "teleport"
    vector["provenance"]["content_hash"] = content_hash(vector["steps"])
    with pytest.raises(ValueError, match="steps/2/step"):
        validate_vector(vector, SCHEMA)


# ---- the step language ---------------------------------------------------------------------


def test_steps_round_trip_through_json() -> None:
    for vector in rule_vectors():
        for entry in vector["steps"]:
            step = step_from_json(entry["step"])
            assert step_to_json(step) == entry["step"]
            assert json.loads(json.dumps(entry["step"])) == entry["step"]


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        ({"step": "jump"}, ValueError, "unknown step kind"),
        ({"step": "add", "task": "a"}, ValueError, "missing required"),
        ({"step": "add", "task": "a", "delay_ms": "5"}, TypeError, "add.delay_ms"),
        ({"step": "add", "task": "a", "delay_ms": True}, TypeError, "add.delay_ms"),
        ({"step": "watch", "operation": "o", "delay_ms": 1, "keys": [1.5]}, TypeError, "keys"),
        ({"step": "advance", "ms": 1, "colour": "red"}, ValueError, "colour"),
        ({"step": "init", "tick_ms": 0}, ValueError, "init.tick_ms"),
        ({"step": "init", "wheel_size": 1}, ValueError, "init.wheel_size"),
        ({"step": "init", "purge_interval": -1}, ValueError, "init.purge_interval"),
        (
            {"step": "watch", "operation": "o", "delay_ms": 1, "keys": ["k"], "ready_on_try": 0},
            ValueError,
            "watch.ready_on_try",
        ),
        ({"step": "init", "timers": ["a", "a"]}, ValueError, "init.timers"),
        (
            {
                "step": "add",
                "task": "a",
                "delay_ms": 1,
                "on_run": [{"step": "clock_advance", "ms": 1}],
            },
            ValueError,
            "on_run",
        ),
        (
            {
                "step": "watch",
                "operation": "o",
                "delay_ms": 1,
                "keys": ["k"],
                "on_try": [{"step": "init"}],
            },
            ValueError,
            'watch.on_try: an operation\'s on_try may not perform "init"',
        ),
        (
            {"step": "watch", "operation": "o", "delay_ms": 1, "keys": ["k"], "on_complete": {}},
            TypeError,
            "watch.on_complete must be an array",
        ),
    ],
)
def test_bad_step_json_names_the_field(data: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        step_from_json(data)


def test_driver_refuses_steps_that_do_not_fit_the_run() -> None:
    with pytest.raises(StepError, match="init"):
        run_steps(reference, [Advance(1)])
    with pytest.raises(StepError, match="unknown timer"):
        run_steps(reference, [Init(), Add("a", 1, timer="nope")])
    with pytest.raises(StepError, match="repeat"):
        run_steps(reference, [Init(), Add("a", 1), Add("a", 2)])
    with pytest.raises(StepError, match="operation"):
        run_steps(reference, [Init(), Watch("o", 1, ("k",)), Add("o", 1)])


def test_a_failed_add_does_not_relabel_the_schedule_in_force() -> None:
    """``add`` on the closed main timer raises (R14) and leaves the task scheduled in aux
    at due 5: its hand-over there is labelled due 5, not the failed add's due 7."""
    steps: list[Step] = [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Add("t", 5, timer="aux"),
        Shutdown(),  # closes main, the purgatory's timer
        ClockAdvance(2),
        Add("t", 5, timer="main"),
        Advance(3, timer="aux"),
    ]
    observations = run_steps(reference, steps)
    assert observations[4].raised == "RuntimeError"
    (ran,) = observations[5].events
    assert (ran.unit, ran.due_ms, ran.event) == ("t", 5, TaskRan("t", 5))


@pytest.mark.parametrize(
    "again",
    [
        Watch("o", 1, ("k",), ready=True),
        Watch("o", 1, ("k",), ready_on_try=2),
        Watch("o", 2, ("k",)),
        Watch("o", 1, ("k", "j")),
    ],
)
def test_a_repeated_watch_must_repeat_every_field(again: Watch) -> None:
    """A repeated watch submits the same operation: it cannot change its flag, its try
    threshold, its delay or its keys (docs/vectors.md)."""
    with pytest.raises(StepError, match="must repeat every field"):
        run_steps(reference, [Init(), Watch("o", 1, ("k",)), again])
    observations = run_steps(reference, [Init(), Watch("o", 1, ("k",)), Watch("o", 1, ("k",))])
    assert observations[2].raised == "ValueError" and observations[2].tries == ()


def test_a_task_run_ends_at_its_first_failing_step() -> None:
    """The run is one call of user code: the add on the closed main timer raises, so the
    force_complete after it never happens; the drain goes on (the other task runs)."""
    steps: list[Step] = [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Watch("op", 50, ("k",)),
        Add("q", 9),
        Add("w", 2, "aux", on_run=(Add("q", 9), ForceComplete("op"))),
        Add("v", 2, "aux", on_run=(ForceComplete("op"),)),
        Shutdown(),
        Advance(2, "aux"),
    ]
    last = run_steps(reference, steps)[-1]
    ran = [(e.event, e.unit) for e in last.events]
    assert ran == [
        (TaskRan("w", 2), "w"),
        (TaskRan("v", 2), "v"),
        (OperationCompleted("op", 2, "force_complete"), "v"),
    ] or ran == [
        (TaskRan("v", 2), "v"),
        (OperationCompleted("op", 2, "force_complete"), "v"),
        (TaskRan("w", 2), "w"),
    ]


def test_driver_refuses_a_module_without_the_api_and_a_bad_state_every() -> None:
    with pytest.raises(TypeError, match="must export SystemTimer"):
        Driver(json)
    with pytest.raises(TypeError, match="state_every must be an int"):
        Driver(reference, state_every=True)
    with pytest.raises(ValueError, match="state_every must be >= 1"):
        Driver(reference, state_every=0)


# ---- the comparison (R6: same due time is a multiset) -----------------------------------


def _state() -> State:
    return State(0, (("main", 0),), 0, 0, 0, 0, 0)


def _obs(*events: RecordedEvent) -> Observation:
    return Observation(True, None, events, (), _state())


def _expiry(label: str, due: int) -> tuple[RecordedEvent, RecordedEvent]:
    return (
        RecordedEvent(OperationCompleted(label, due, "expiry"), label, due),
        RecordedEvent(OperationExpired(label, due), label, due),
    )


def test_r6_same_due_hand_overs_compare_as_a_multiset() -> None:
    a, b = _expiry("a", 5), _expiry("b", 5)
    assert compare_observations(_obs(*a, *b), _obs(*b, *a)) is None


def test_r6_different_due_hand_overs_compare_in_order() -> None:
    a, b = _expiry("a", 5), _expiry("b", 6)
    assert compare_observations(_obs(*a, *b), _obs(*b, *a)) is not None


def test_r17_order_inside_a_unit_is_exact() -> None:
    completed, expired = _expiry("a", 5)
    assert compare_observations(_obs(completed, expired), _obs(expired, completed)) is not None


def test_direct_events_compare_in_order() -> None:
    first = RecordedEvent(OperationCompleted("x", 1, "check_and_complete"))
    second = RecordedEvent(OperationCompleted("y", 1, "check_and_complete"))
    assert compare_observations(_obs(first, second), _obs(second, first)) is not None


def test_result_state_and_tries_are_compared() -> None:
    ran = RecordedEvent(TaskRan("t", 3), "t", 3)
    base = _obs(ran)
    assert compare_observations(base, base) is None
    other_result = Observation(False, None, (ran,), (), _state())
    assert "result" in (compare_observations(base, other_result) or "")
    other_state = Observation(True, None, (ran,), (), State(0, (("main", 1),), 0, 0, 0, 0, 0))
    assert "timer_sizes" in (compare_observations(base, other_state) or "")
    other_tries = Observation(True, None, (ran,), (("o", 1),), _state())
    assert "tries" in (compare_observations(base, other_tries) or "")
    raised = Observation(None, "ValueError", (ran,), (), _state())
    assert "raised" in (compare_observations(base, raised) or "")


def test_observation_json_round_trip() -> None:
    for vector in rule_vectors():
        for entry in vector["steps"]:
            assert Observation.from_json(entry["expect"]).to_json() == entry["expect"]


def test_committed_workload_vectors_are_current() -> None:
    """Regenerating each workload vector from its provenance reproduces the committed file."""
    workload_files = [
        path
        for path in VECTOR_FILES
        if load_vector(path)["provenance"]["generator"] == WORKLOAD_GENERATOR
    ]
    assert len(workload_files) >= 24
    for path in workload_files:
        vector = load_vector(path)
        source = vector["provenance"]
        n_ops = len(
            {e["step"]["operation"] for e in vector["steps"] if e["step"]["step"] == "watch"}
        )
        again = workload_vector(
            source["scenario"], source["preset"], source["seed"], source["shard"], n_ops
        )
        assert again == vector, path.name


def test_conformance_root_is_the_package_data_else_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed wheel's package data (``kpurgatory/conformance/data``) wins; without it
    the checkout's ``conformance/`` beside the package; never the working directory."""
    from kpurgatory.conformance import vectors

    assert vectors.conformance_root() == vectors.SCHEMA_PATH.parents[1]
    assert (vectors.conformance_root() / "schema" / "vector.schema.json").is_file()
    site = tmp_path / "site-packages"
    installed = site / "kpurgatory" / "conformance" / "vectors.py"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conformance" / "schema").mkdir(parents=True)
    (tmp_path / "conformance" / "schema" / "vector.schema.json").write_text("{}")
    assert vectors.conformance_root(installed) == site / "conformance"  # not ./conformance
    data = installed.parent / "data" / "schema"
    data.mkdir(parents=True)
    (data / "vector.schema.json").write_text("{}", encoding="utf-8")
    assert vectors.conformance_root(installed) == installed.parent / "data"
