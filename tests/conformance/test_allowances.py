"""Allowances are behaviour, not masks: ``--allow`` excuses what a Kafka difference causes, no more.

The judge (``kpurgatory.conformance.differences``) compares a port with the reference and,
once the port has shown an allowed difference, with the reference that behaves like
Kafka in that respect (``kpurgatory.conformance.kafka_model``). Here:

- a port that loses a task fails with and without ``--allow kafka``, on a Kafka-like
  port too (the sequence where masks let it pass: a stale current time showed first);
- Kafka's own consequences pass: an operation watched with delay 0 lingers in its list
  and ``cancel_for_key`` returns it;
- the masks' too-wide cases fail: an estimate miscount on abandon;
- the catalogue's bugs that a Kafka difference could hide are caught by the search with
  ``--allow kafka`` (one seed here, seeds 1-10 in the slow tier).
"""

from __future__ import annotations

import json
import shlex
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from kpurgatory import optimized
from kpurgatory.cli import main
from kpurgatory.conformance.adapter import DEFAULT_VECTORS_DIR, vector_paths
from kpurgatory.conformance.differences import Judge
from kpurgatory.conformance.driver import DriverSide
from kpurgatory.conformance.kafka_model import kafka_model
from kpurgatory.conformance.stateful import check_sequence, run_stateful
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    CancelForKey,
    Init,
    NextDueTime,
    Step,
    Watch,
    step_to_json,
)
from kpurgatory.conformance.vectors import load_vector, vector_steps
from kpurgatory.spec.known_differences import KAFKA, KNOWN_DIFFERENCES, resolve
from tests.conformance.kafka_like import kafka_like
from tests.conformance.ports.catalog import PORT_BUGS, TIMER_AREAS, planted, port_bug
from tests.support import load, needs_python_source

patches_python_source = needs_python_source()

ROOT = Path(__file__).resolve().parents[2]
PORT_ADAPTER = ROOT / "tests" / "conformance" / "ports" / "adapter.py"
KAFKA_ALL = resolve(KAFKA)

LOST_TASK: list[Step] = [
    Init(tick_ms=1, wheel_size=20),
    Advance(10),
    Add("a", 0),
    Add("b", 3),
    Add("c", 3),
    Advance(5),
    Advance(100),
    NextDueTime(),
]
"""The sequence on which ``--allow kafka`` used to pass a port that never runs ``c``."""

LINGERING: list[Step] = [Init(), Watch("op", 0, ("a",)), CancelForKey("a")]
"""Kafka: the operation expires at its submission but stays in ``a``'s list, so
``cancel_for_key`` returns it; the reference returns nothing."""


def lossy_kafka_like() -> types.ModuleType:
    """A Kafka-like port (every documented difference) whose bucket flush hands over only
    the first task due at each due time: the others are never run."""
    model = kafka_model(frozenset(d.id for d in KNOWN_DIFFERENCES))

    class LossyTimer(model.SystemTimer):  # type: ignore[name-defined,misc]
        def advance_clock(self, timeout_ms: int) -> bool:
            self._due_of = {id(entry.task): entry.due for entry in self._pending}
            self._flushed: set[int] = set()
            try:
                return bool(super().advance_clock(timeout_ms))
            finally:
                self._due_of = {}

        def _hand_over(self, task: Any) -> None:
            due = getattr(self, "_due_of", {}).get(id(task))
            if due is not None:
                if due in self._flushed:
                    return  # lost: the flush ended after the bucket's first task
                self._flushed.add(due)
            super()._hand_over(task)

    port = types.ModuleType("lossy_kafka_like")
    port.TimerTask = model.TimerTask  # type: ignore[attr-defined]
    port.DelayedOperation = model.DelayedOperation  # type: ignore[attr-defined]
    port.SystemTimer = LossyTimer  # type: ignore[attr-defined]
    port.DelayedOperationPurgatory = model.DelayedOperationPurgatory  # type: ignore[attr-defined]
    return port


def test_a_lost_task_fails_with_and_without_allow_on_a_kafka_like_port() -> None:
    reference = load("reference")
    without = check_sequence(LOST_TASK, DriverSide(lossy_kafka_like()), reference)
    assert without is not None and without.step_number == 3  # the stale current time
    with_allow = check_sequence(
        LOST_TASK, DriverSide(lossy_kafka_like()), reference, allow=KAFKA_ALL
    )
    assert with_allow is not None
    assert with_allow.step_number == 6 and "events differ" in with_allow.message
    # the report compares with Kafka's behaviour, where c runs with a and b
    assert "expected as upstream Kafka behaves with kafka-stale-current-time" in with_allow.message
    assert with_allow.expected is not None
    assert [e["task"] for e in with_allow.expected["events"]] == ["a", "b", "c"]


def test_the_honest_kafka_like_port_passes_the_lost_task_sequence_only_with_allow() -> None:
    reference = load("reference")
    assert check_sequence(LOST_TASK, DriverSide(kafka_like(KAFKA)), reference) is not None
    accepted: dict[str, int] = {}
    failure = check_sequence(
        LOST_TASK, DriverSide(kafka_like(KAFKA)), reference, allow=KAFKA_ALL, accepted=accepted
    )
    assert failure is None
    assert set(accepted) == {"kafka-stale-current-time"}, accepted


def test_the_search_with_allow_kafka_finds_the_lost_task() -> None:
    """Quick tier: seed 1 of the battery below."""
    _lost_task_search(1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", list(range(1, 11)))
def test_the_search_with_allow_kafka_finds_the_lost_task_on_every_seed(seed: int) -> None:
    _lost_task_search(seed)


def _lost_task_search(seed: int) -> None:
    assert _search_with_allow_kafka_fails(lossy_kafka_like(), seed)


def _search_with_allow_kafka_fails(port: types.ModuleType, seed: int) -> bool:
    """Whether the stateful search, judged with ``--allow kafka``, fails ``port``."""
    failure, _ = run_stateful(
        DriverSide(port), reference=load("reference"), seed=seed, allow=KAFKA_ALL, shrink=False
    )
    return failure is not None


@patches_python_source
def test_the_lost_task_port_fails_replay_with_allow_kafka_through_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    steps = tmp_path / "lost.jsonl"
    steps.write_text("".join(json.dumps(step_to_json(s)) + "\n" for s in LOST_TASK), "utf-8")
    adapter = shlex.join([sys.executable, str(PORT_ADAPTER), "--bug", "flush-runs-first-task-only"])
    for extra in ([], ["--allow", KAFKA]):
        code = main(["conformance", "--adapter", adapter, "--replay", str(steps), *extra])
        out = capsys.readouterr().out
        assert code == 1, out
        assert "FAIL replay: step 6 (advance)" in out, out


def test_a_finished_operation_lingering_in_its_list_passes_only_with_allow() -> None:
    reference = load("reference")
    failure = check_sequence(LINGERING, DriverSide(kafka_like(KAFKA)), reference)
    assert failure is not None and failure.message.startswith("state: ")
    accepted: dict[str, int] = {}
    failure = check_sequence(
        LINGERING, DriverSide(kafka_like(KAFKA)), reference, allow=KAFKA_ALL, accepted=accepted
    )
    assert failure is None
    assert set(accepted) == {"kafka-lazy-purge"}, accepted


@patches_python_source
def test_an_estimate_miscount_on_abandon_fails_with_allow_kafka() -> None:
    """Too wide before: the lazy-purge allowance excused the estimate field outright."""
    steps: list[Step] = [
        Init(purge_interval=1000),
        Watch("op", 50, ("a",)),
        Watch("op2", 50, ("a",)),
    ]
    from kpurgatory.conformance.steps import Cancel

    steps.append(Cancel("op"))
    with planted(port_bug("abandon-uncounts-estimate")):
        for allow in ((), KAFKA_ALL):
            failure = check_sequence(steps, DriverSide(optimized), load("reference"), allow=allow)
            assert failure is not None and "estimated_total_operations" in failure.message, allow


HIDDEN_BY_KAFKA: dict[str, str] = {
    "advance-result-counts-buckets": "kafka-advance-result",
    "cancel-is-not-abandon": "kafka-cancel-keeps-watch",
}
"""Catalogue bugs that *are* a documented Kafka behaviour: ``--allow`` of that difference
accepts them, rightly (the port behaves as Kafka does)."""

PURGATORY_AREAS_KAFKA_COULD_HIDE = frozenset(
    {
        "close",
        "purge threshold",
        "purge reset",
        "estimate arithmetic",
        "abandon",
        "cancel_for_key",
        "watched",
        "watched_keys",
    }
)

TIMER_BUGS_KAFKA_COULD_HIDE: tuple[str, ...] = tuple(
    bug.name
    for bug in PORT_BUGS
    if bug.name not in HIDDEN_BY_KAFKA
    and bug.area in (TIMER_AREAS - {"cancel", "next_due_time"}) | PURGATORY_AREAS_KAFKA_COULD_HIDE
)
"""The catalogue bugs whose effects lie in fields some Kafka difference lets differ
(events, results, counts, the purgatory's state): the ones a mask could hide."""


def _vectors_catch_with_allow_kafka(name: str) -> bool:
    """Whether the committed vectors, judged with ``--allow kafka``, fail the bugged port
    (in process: the judge and the comparison are the ones the adapter replay uses)."""
    with planted(port_bug(name)):
        for path in vector_paths([DEFAULT_VECTORS_DIR]):
            steps, expected = vector_steps(load_vector(path))
            judge = Judge(KAFKA_ALL)
            side = DriverSide(optimized)
            try:
                for step, expect in zip(steps, expected, strict=True):
                    try:
                        actual = side.execute(step)
                    except Exception:  # the port crashed: through an adapter, not consumed
                        return True
                    message, _ = judge.judge(step, expect, actual)
                    if message is not None:
                        return True
            finally:
                side.close()
                judge.close()
    return False


def _search_catches_with_allow_kafka(name: str, seed: int) -> bool:
    with planted(port_bug(name)):
        return _search_with_allow_kafka_fails(optimized, seed)


@patches_python_source
def test_the_bugs_that_are_kafka_behaviour_pass_with_their_own_allow() -> None:
    for name, ident in HIDDEN_BY_KAFKA.items():
        assert not _vectors_catch_with_allow_kafka(name), name
        with planted(port_bug(name)):
            failure, _ = run_stateful(
                DriverSide(optimized),
                reference=load("reference"),
                seed=1,
                max_examples=30,
                allow=resolve(ident),
                shrink=False,
            )
        assert failure is None, (name, failure and failure.message)


@patches_python_source
@pytest.mark.parametrize("name", ["flush-runs-first-task-only", "no-r11-recheck"])
def test_a_sample_of_bugs_a_kafka_difference_could_hide_is_caught_with_allow(name: str) -> None:
    assert _vectors_catch_with_allow_kafka(name) or _search_catches_with_allow_kafka(name, 1)


@pytest.mark.slow
@pytest.mark.timeout(0)
@patches_python_source
@pytest.mark.parametrize("name", TIMER_BUGS_KAFKA_COULD_HIDE)
def test_every_bug_a_kafka_difference_could_hide_is_caught_with_allow_on_every_seed(
    name: str,
) -> None:
    """The default run (the vectors, then the search) with ``--allow kafka``."""
    if _vectors_catch_with_allow_kafka(name):
        return
    missed = [seed for seed in range(1, 11) if not _search_catches_with_allow_kafka(name, seed)]
    assert not missed, f"{name}: with --allow kafka, vectors and search missed it on {missed}"
