"""The threads benchmark's workloads do what they say (kpurgatory/bench/threads.py)."""

from __future__ import annotations

import pytest

import kpurgatory.optimized.timer as timer_module
from kpurgatory.bench import threads


@pytest.mark.parametrize("implementation", ["reference", "optimized"])
@pytest.mark.parametrize("count", [1, 2])
def test_acks_all_completes_every_operation(implementation: str, count: int) -> None:
    """Each thread's operations complete and leave nothing watched (checked inside)."""
    assert threads.acks_all_time(1, implementation, count) > 0


@pytest.mark.parametrize("layout", threads.TIMER_LAYOUTS)
def test_timer_layouts_leave_nothing_and_restore_the_lock(layout: str) -> None:
    shared = timer_module._TIMER_LOCK
    assert threads.timer_time(1, "optimized", 2, layout) > 0
    assert timer_module._TIMER_LOCK is shared


def test_own_locks_are_really_distinct() -> None:
    timers = threads._timers(threads._implementation("optimized"), 2, own_locks=True)
    try:
        assert timers[0]._lock is not timers[1]._lock
        assert timer_module._TIMER_LOCK not in (timers[0]._lock, timers[1]._lock)
    finally:
        for timer in timers:
            timer.close()


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="layout"):
        threads.timer_time(1, "optimized", 1, "two timers")
    with pytest.raises(ValueError, match="implementation"):
        threads.acks_all_time(1, "fast", 1)


def test_every_benchmark_says_its_gil() -> None:
    names = [name for name, *_ in threads.benchmarks()]
    assert len(names) == len(set(names)) == 10
    assert all(name.endswith(("GIL on", "GIL off")) for name in names)


@pytest.mark.parametrize("count", [1, 2])
def test_the_control_runs_on_every_thread(count: int) -> None:
    assert threads.control_time(1, count) > 0


def test_contention_counts_every_shared_lock_and_restores_them() -> None:
    import kpurgatory.optimized.operation as operation_module

    shared = (timer_module._TIMER_LOCK, operation_module._FLAGS_LOCK)
    found = threads.contention(threads=2, operations=200)
    assert timer_module._TIMER_LOCK is shared[0]
    assert operation_module._FLAGS_LOCK is shared[1]
    assert set(found) == {
        "flags (process-wide)",
        "purgatory counters",
        "shards",
        "timer (process-wide)",
    }
    # add + cancel of each operation's timer entry, claim + completion of its flags
    assert found["timer (process-wide)"][0] == pytest.approx(2.0)
    assert found["flags (process-wide)"][0] == pytest.approx(2.0)
    assert all(0.0 <= held <= 1.0 for _, held in found.values())


def test_lock_costs_times_both_schemes() -> None:
    costs = threads.lock_costs(number=100, repeat=1)
    assert set(costs) == {"one RLock", "read side + bucket lock"}
    assert all(seconds > 0 for seconds in costs.values())
