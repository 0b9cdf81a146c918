"""The ``old`` design (Kafka 0.8) differs from the spec only where Kafka 0.8 did.

Checked against the reference on the hand-overs it must share (R1, R4-R6, R11) and on
each of its documented differences: completed operations stay in the delay queue (R28
differs), purges are triggered by size (R30 differs), and a reaper step expires one
operation (R31 differs).
"""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import pytest

import kpurgatory.reference as reference
from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.bench import kafka08
from kpurgatory.reference.purgatory import REAPER_STEP_MS
from kpurgatory.spec.events import OperationCompleted, OperationExpired, TaskRan
from tests.support import Recorder, operation_class, recorded_clock, task_class
from tests.timer_support import random_timer_steps


def _timer(impl: ModuleType, clock: ManualClock) -> Any:
    return impl.SystemTimer("t", clock=clock, executor=InlineExecutor())


def _random_timer_script(impl: ModuleType, seed: int) -> list[tuple[str, int]]:
    """Adds, cancels, re-adds and advances drawn from ``seed``; the (task, time) runs."""
    rng = random.Random(seed)
    clock, recorder = recorded_clock()
    timer = _timer(impl, clock)
    task_type = task_class(impl)
    tasks = [task_type(rng.randrange(-5, 400), f"t{i}", recorder) for i in range(60)]
    random_timer_steps(
        rng, timer, tasks, 400, add_below=0.45, cancel_below=0.7, advances=[0, 1, 3, 17, 60]
    )
    timer.advance_clock(1000)
    timer.close()
    return [(event.task, event.at_ms) for event in recorder.events if isinstance(event, TaskRan)]


def test_old_timer_hands_over_like_the_reference_r1_r4_r5_r6_r11() -> None:
    """Same tasks run at the same clock readings in the same order (its size differs)."""
    for seed in range(5):
        assert _random_timer_script(kafka08, seed) == _random_timer_script(reference, seed)


def _purgatory(impl: ModuleType, clock: ManualClock, purge_interval: int) -> Any:
    return impl.DelayedOperationPurgatory(
        "p", timer=_timer(impl, clock), purge_interval=purge_interval, reaper_enabled=False
    )


def test_old_keeps_completed_operations_in_the_delay_queue_r28_differs() -> None:
    """A completed operation stays counted in num_delayed until its due time passes."""
    clock, recorder = recorded_clock()
    with _purgatory(kafka08, clock, 1000) as purgatory, _purgatory(reference, clock, 1000) as ref:
        ops = [
            operation_class(kafka08)(100, "a", recorder),
            operation_class(reference)(100, "a", recorder),
        ]
        for operation, target in zip(ops, (purgatory, ref), strict=True):
            assert target.try_complete_else_watch(operation, ["k"]) is False
            assert operation.force_complete() is True
        assert (purgatory.num_delayed, ref.num_delayed) == (1, 0)
        purgatory.advance_clock(100)  # due: the dead entry leaves, nothing runs
        assert purgatory.num_delayed == 0
        assert recorder.names(OperationExpired) == []
        assert recorder.names(OperationCompleted) == ["a", "a"]


def test_old_purges_by_size_not_by_estimate_r30_differs() -> None:
    """watched >= purge_interval purges the watcher lists; a queue that big purges the queue."""
    clock, recorder = recorded_clock()
    with _purgatory(kafka08, clock, 3) as purgatory:
        ops = [operation_class(kafka08)(500, f"o{i}", recorder) for i in range(3)]
        for operation in ops:
            purgatory.try_complete_else_watch(operation, ["k"])
        ops[0].force_complete()
        assert (purgatory.watched, purgatory.num_delayed) == (3, 3)
        purgatory.advance_clock(1)  # watched 3 >= 3 and queue 3 >= 3: both purged
        assert (purgatory.watched, purgatory.num_delayed) == (2, 2)
        assert purgatory.num_purged == 1
        ops[1].force_complete()
        purgatory.advance_clock(1)  # 2 < 3: nothing purged, the dead entry stays
        assert (purgatory.watched, purgatory.num_delayed) == (2, 2)


def test_old_reaper_step_expires_one_operation_r31_differs() -> None:
    """0.8's pollExpired: one step hands over at most one due operation."""
    clock, recorder = recorded_clock()
    with _purgatory(kafka08, clock, 1000) as purgatory:
        for i in range(3):
            purgatory.try_complete_else_watch(operation_class(kafka08)(10, f"o{i}", recorder), [i])
        clock.advance(10)
        purgatory.timer.expire(0, 1)
        assert len(recorder.names(OperationExpired)) == 1
        purgatory.advance_clock(0)  # the public call drains everything due (R5)
        assert sorted(recorder.names(OperationExpired)) == ["o0", "o1", "o2"]


def test_old_reaper_step_replaces_the_reference_step_r31_differs() -> None:
    """The reaper's step on ``old`` waits up to 200 ms, then expires one operation only."""
    clock, recorder = recorded_clock()
    with _purgatory(kafka08, clock, 1000) as purgatory:
        for i in range(3):
            purgatory.try_complete_else_watch(operation_class(kafka08)(10, f"o{i}", recorder), [i])
        purgatory._reaper_step()
        assert clock.now_ms() == REAPER_STEP_MS
        assert len(recorder.names(OperationExpired)) == 1


def test_old_purgatory_refuses_a_reference_timer_r35() -> None:
    """The old purgatory takes only its own delay queue (R35)."""
    with _timer(reference, ManualClock(0)) as timer, pytest.raises(TypeError, match="timer"):
        kafka08.DelayedOperationPurgatory("p", timer=timer, reaper_enabled=False)


def test_old_timer_checks_its_timeout_r35() -> None:
    """advance_clock names the bad argument, as the reference does."""
    with _timer(kafka08, ManualClock(0)) as timer, pytest.raises(ValueError, match="timeout_ms"):
        timer.advance_clock(-1)


def test_old_wakes_the_reaper_only_for_a_new_earliest_entry() -> None:
    """Java's DelayQueue.offer signals only when the new entry is the head."""
    import threading

    class CountingCondition(threading.Condition):
        notified = 0

        def notify_all(self) -> None:
            CountingCondition.notified += 1
            super().notify_all()

    clock = ManualClock(0)
    with _timer(kafka08, clock) as timer:
        timer._condition = CountingCondition(timer._condition._lock)
        recorder = Recorder(clock)
        for delay in (50, 60, 40, 70, 40):
            timer.add(task_class(kafka08)(delay, f"t{delay}", recorder))
        assert CountingCondition.notified == 2  # 50 (first head), then 40
