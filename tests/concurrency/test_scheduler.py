"""The controlled scheduler itself: exhaustive enumeration, bounds, deadlock and stuck
detection, replay, and the instrumented primitives (so the schedule tests can be trusted).
"""

from __future__ import annotations

import math
import threading

import pytest

from kpurgatory import sync
from tests.concurrency.scheduler import (
    Chooser,
    ListChooser,
    PriorityChooser,
    ScheduleError,
    Scheduler,
    checkpoint,
    explore,
    instrumented,
)


def _steps_program(chooser: Chooser, threads: int, steps: int, traces: list[str]) -> None:
    sched = Scheduler(chooser)
    for index in range(threads):

        def body(index: int = index) -> None:
            for step in range(steps):
                checkpoint(f"s{step}")

        sched.spawn(f"t{index}", body)
    result = sched.run()
    traces.append(" ".join(result.trace))


@pytest.mark.parametrize(("threads", "steps"), [(2, 1), (2, 2), (3, 1), (2, 3)])
def test_unbounded_exploration_enumerates_every_interleaving_once(threads: int, steps: int) -> None:
    """Each thread has ``steps + 1`` steps (start + checkpoints): the multinomial count."""
    traces: list[str] = []
    found = explore(
        lambda chooser: _steps_program(chooser, threads, steps, traces),
        preemption_bound=None,
        max_runs=10_000,
    )
    per_thread = steps + 1
    expected = math.factorial(threads * per_thread) // math.factorial(per_thread) ** threads
    assert found.complete and found.failure is None
    assert found.runs == expected == len(set(traces))


def test_preemption_bound_zero_runs_threads_to_completion_in_each_order() -> None:
    traces: list[str] = []
    found = explore(
        lambda chooser: _steps_program(chooser, 3, 2, traces),
        preemption_bound=0,
        max_runs=100,
    )
    assert found.complete
    assert found.runs == len(set(traces)) == 6  # 3! orders, no switch mid-thread


def test_exploration_cap_is_reported_as_incomplete() -> None:
    found = explore(
        lambda chooser: _steps_program(chooser, 2, 3, []),
        preemption_bound=None,
        max_runs=5,
    )
    assert (found.runs, found.complete, found.failure) == (5, False, None)


def _lock_order_inversion(chooser: Chooser) -> None:
    sched = Scheduler(chooser)
    first, second = sched.lock("first"), sched.lock("second")

    def forward() -> None:
        with first, second:
            pass

    def backward() -> None:
        with second, first:
            pass

    sched.spawn("forward", forward)
    sched.spawn("backward", backward)
    sched.run()


def test_deadlock_is_a_failure_that_prints_the_schedule() -> None:
    found = explore(_lock_order_inversion, preemption_bound=None, max_runs=1_000)
    assert isinstance(found.failure, ScheduleError)
    assert found.failure.kind == "deadlock"
    text = str(found.failure)
    assert "forward waits to acquire second" in text
    assert "backward waits to acquire first" in text
    assert "schedule:" in text and "choices:" in text


def test_printed_choices_replay_the_same_schedule() -> None:
    found = explore(_lock_order_inversion, preemption_bound=None, max_runs=1_000)
    assert isinstance(found.failure, ScheduleError)
    with pytest.raises(ScheduleError) as replayed:
        _lock_order_inversion(ListChooser(found.failure.choices))
    assert replayed.value.trace == found.failure.trace


def test_step_limit_reports_livelock() -> None:
    sched = Scheduler(ListChooser([]), max_steps=50)

    def spin() -> None:
        while True:
            checkpoint("spin")

    sched.spawn("spinner", spin)
    with pytest.raises(ScheduleError) as failure:
        sched.run()
    assert failure.value.kind == "livelock"


def test_a_thread_blocked_outside_the_instrumentation_is_reported_stuck() -> None:
    real = threading.Lock()
    real.acquire()
    sched = Scheduler(ListChooser([]), stuck_timeout=0.2)

    def blocked() -> None:
        checkpoint("before")
        real.acquire(timeout=3)  # bounded, so the thread ends after the test

    sched.spawn("blocked", blocked)
    try:
        with pytest.raises(ScheduleError) as failure:
            sched.run(total_timeout=0.3)
    finally:
        real.release()
    assert failure.value.kind == "stuck"


def test_thread_exceptions_are_reported_per_thread() -> None:
    sched = Scheduler(ListChooser([]))

    def boom() -> None:
        checkpoint("x")
        raise KeyError("boom")

    sched.spawn("ok", lambda: 7)
    sched.spawn("boom", boom)
    result = sched.run()
    assert result.results["ok"] == 7
    assert isinstance(result.errors["boom"], KeyError)


def test_lock_semantics_reentrant_try_and_ownership() -> None:
    sched = Scheduler(ListChooser([]))
    lock = sched.lock("l")
    plain = sched.lock("p", reentrant=False)
    assert lock.acquire() and lock.acquire(blocking=False)
    lock.release()
    assert lock.held
    lock.release()
    assert not lock.held
    assert plain.acquire()
    assert plain.acquire(blocking=False) is False
    plain.release()
    with pytest.raises(RuntimeError, match="does not own"):
        plain.release()


def test_flag_operations_are_atomic_steps() -> None:
    sched = Scheduler(ListChooser([]))
    flag = sched.flag(False, "f")
    assert flag.compare_and_set(False, True)
    assert not flag.compare_and_set(False, True)
    assert flag.get_and_set(False) is True
    flag.set(True)
    assert flag.get()


def test_a_flag_reads_as_the_value_it_holds() -> None:
    """The protocol reads R41's pending flag as a value (``if operation._try_complete_pending``):
    an ``AtomicFlag``, and the scheduler's through its ``get`` step, is true exactly when
    it holds True."""
    plain = sync.AtomicFlag(False)
    assert not plain
    plain.set(True)
    assert plain
    flag = Scheduler(ListChooser([])).flag(False, "f")
    assert not flag
    flag.set(True)
    assert flag


def test_condition_wait_is_woken_by_notify_and_can_time_out() -> None:
    """A waiter with a timeout may wake at any point; without one only on notify."""
    outcomes: set[tuple[bool, ...]] = set()

    def run_one(chooser: Chooser) -> None:
        sched = Scheduler(chooser)
        with instrumented(sched):
            lock = sync.new_lock()
            cond = sync.new_condition(lock)
        woke: list[bool] = []

        def waiter() -> None:
            with lock:
                woke.append(cond.wait(timeout=1.0))

        def notifier() -> None:
            with lock:
                cond.notify_all()

        sched.spawn("waiter", waiter)
        sched.spawn("notifier", notifier)
        sched.run()
        outcomes.add(tuple(woke))

    found = explore(run_one, preemption_bound=None, max_runs=1_000)
    assert found.complete and found.failure is None
    assert outcomes == {(True,), (False,)}


def test_condition_wait_without_timeout_and_without_notify_deadlocks() -> None:
    sched = Scheduler(ListChooser([]))
    lock = sched.lock("l")
    cond = sched.condition(lock)

    def waiter() -> None:
        with lock:
            cond.wait()

    sched.spawn("waiter", waiter)
    with pytest.raises(ScheduleError) as failure:
        sched.run()
    assert failure.value.kind == "deadlock"


def test_override_restores_the_default_factories() -> None:
    before = (sync.lock_factory, sync.flag_factory, sync.condition_factory)
    sched = Scheduler(ListChooser([]))
    with instrumented(sched):
        assert type(sync.new_lock()).__name__ == "SchedLock"
        assert type(sync.new_flag()).__name__ == "SchedFlag"
    assert (sync.lock_factory, sync.flag_factory, sync.condition_factory) == before
    assert isinstance(sync.new_flag(), sync.AtomicFlag)


def test_priority_chooser_runs_highest_priority_and_demotes() -> None:
    chooser = PriorityChooser([0, 5], [2])
    assert chooser.choose([0, 1], False) == 1  # thread 1 has priority 5
    assert chooser.choose([1, 0], True) == 1  # point 2: running thread 1 demoted
    assert chooser.choose([0, 1], True) == 0


def test_shared_dicts_are_instrumented_and_each_call_is_one_step() -> None:
    """A dict shared without a lock (``sync.new_shared_dict``) is the scheduler's inside
    ``instrumented``: two threads' single calls interleave at every call, each call whole
    (both orders of two stores are explored), and the factory is restored afterwards."""
    finals: set[tuple[tuple[str, int], ...]] = set()

    def run(chooser: Chooser) -> None:
        sched = Scheduler(chooser)
        with instrumented(sched, lock_discipline=False):
            shared = sync.new_shared_dict()
        for index in range(2):

            def store(index: int = index) -> None:
                shared["k"] = index

            sched.spawn(f"t{index}", store)
        sched.run()
        finals.add(tuple(shared.items()))

    found = explore(run, preemption_bound=None, max_runs=50)
    assert found.complete and found.failure is None
    assert finals == {(("k", 0),), (("k", 1),)}
    assert type(sync.new_shared_dict()) is dict


def test_the_optimized_purge_candidates_are_a_shared_dict() -> None:
    """The optimized purgatory's candidates are shared without a lock, so the schedules
    must be able to switch between their calls (the let-go race was invisible before)."""
    from kpurgatory.optimized import DelayedOperationPurgatory, SystemTimer

    sched = Scheduler(ListChooser([]))
    with instrumented(sched, lock_discipline=False):
        purgatory = DelayedOperationPurgatory(
            "probe", timer=SystemTimer("probe"), reaper_enabled=False, shards=1
        )
    assert type(purgatory._candidates).__name__ == "SchedDict"
    purgatory.shutdown()
