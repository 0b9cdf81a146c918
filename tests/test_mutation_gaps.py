"""Behaviours a sampled mutation run left unchecked (issue 11, "Test gaps found by sampled
mutation"), on every implementation: the reaper's purge and step, shutdown promptness,
a purge after the timer was closed from outside, ``SystemTimer.closed``, the reprs, a
completion storm counted by ``num_completed``, and ``_check()`` on a corrupted
purgatory. (The lock-removal mutants of that run, such as ``watched`` or the drain
without their lock, are caught by the lockset checks: tests/concurrency/
test_lock_mutants.py.)"""

from __future__ import annotations

import sys
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.concurrency.lockset import Lockset

WAIT_S = 10.0
"""Upper bound for a real-clock wait that should end far sooner (never asserted on)."""


def _bare_task(impl: ModuleType) -> type[Any]:
    class Bare(impl.TimerTask):  # type: ignore[misc,name-defined]
        def run(self) -> None:
            pass

    return Bare


def _operation(impl: ModuleType) -> type[Any]:
    class Ready(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        """Completes when ``ready``; no ``__repr__`` of its own."""

        def __init__(self, delay_ms: int, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.ready = False

        def try_complete(self) -> bool:
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    return Ready


def _manual(impl: ModuleType, purge_interval: int = 1000) -> Any:
    timer = impl.SystemTimer("gaps", clock=ManualClock(0), executor=InlineExecutor())
    return impl.DelayedOperationPurgatory(
        "gaps", timer=timer, reaper_enabled=False, purge_interval=purge_interval
    )


# -- the reaper: purging, step, promptness (R30, R31, R32) ---------------------------------


@pytest.mark.realtime
def test_r30_r31_the_reaper_purges_completed_operations(impl: ModuleType) -> None:
    """R30 through the reaper, on a real clock: with ``purge_interval=0`` the reaper's own
    step unlinks the completed operations (nobody calls ``advance_clock`` here)."""
    purgatory = impl.DelayedOperationPurgatory("reaped", purge_interval=0)
    try:
        ops = [_operation(impl)(60_000) for _ in range(3)]
        for op in ops:
            assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        for op in ops[:2]:
            assert op.force_complete()
        deadline = time.monotonic() + WAIT_S
        while purgatory.num_purged < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert purgatory.num_purged == 4  # two operations on two keys each
        assert purgatory.watched == 2  # the pending one, on a and b
    finally:
        purgatory.shutdown()
        assert purgatory.await_termination(WAIT_S)


@pytest.mark.realtime
def test_r31_the_reaper_steps_by_200_ms(impl: ModuleType) -> None:
    """R31: each reaper step is ``advance_clock(200)`` (Kafka's ``advanceClock(200L)``)."""
    seen: list[object] = []
    stepped = threading.Event()

    class Recording(impl.SystemTimer):  # type: ignore[misc,name-defined]
        def advance_clock(self, timeout_ms: Any) -> bool:
            seen.append(timeout_ms)
            stepped.set()
            return bool(super().advance_clock(timeout_ms))

    purgatory = impl.DelayedOperationPurgatory("stepping", timer=Recording("stepping"))
    try:
        assert stepped.wait(WAIT_S)
    finally:
        purgatory.shutdown()
        assert purgatory.await_termination(WAIT_S)
    assert seen and set(seen) == {200} == {impl.purgatory.REAPER_STEP_MS}


@pytest.mark.realtime
def test_r32_shutdown_wakes_the_waiting_reaper_at_once(impl: ModuleType) -> None:
    """Shutdown promptness: the reaper waits up to 200 ms per step; ``shutdown`` plus
    ``await_termination`` ends that wait instead of sitting it out. Measured as a ratio
    of the step, and generous: under half a step (waking it takes microseconds)."""
    step_s = impl.purgatory.REAPER_STEP_MS / 1000
    purgatory = impl.DelayedOperationPurgatory("prompt")
    time.sleep(step_s / 4)  # the reaper is inside a step's wait
    started = time.monotonic()
    purgatory.shutdown()
    assert purgatory.await_termination(WAIT_S)
    elapsed = time.monotonic() - started
    assert elapsed < step_s / 2, f"shutdown took {elapsed / step_s:.2f} of a reaper step"


# -- a purge after the timer was closed from outside; SystemTimer.closed (R14, R30) -----------


def test_r14_closed_reports_close(impl: ModuleType) -> None:
    timer = impl.SystemTimer("closing", clock=ManualClock(0), executor=InlineExecutor())
    assert timer.closed is False
    timer.close()
    assert timer.closed is True
    timer.close()  # idempotent
    assert timer.closed is True


def test_r30_purge_after_the_timer_was_closed_from_outside(impl: ModuleType) -> None:
    """Closing the timer under the purgatory stops expiry, not purging: a completed
    operation is still unlinked by the next purge, a pending one stays watched."""
    purgatory = _manual(impl, purge_interval=0)
    done, pending = _operation(impl)(10), _operation(impl)(10)
    assert purgatory.try_complete_else_watch(done, ["k"]) is False
    assert purgatory.try_complete_else_watch(pending, ["k"]) is False
    assert done.force_complete()
    purgatory.timer.close()
    purgatory.advance_clock(10)
    assert purgatory.num_purged == 1
    assert purgatory.watched == 1
    assert not pending.is_completed  # the closed timer expired nothing
    purgatory.shutdown()


# -- num_completed counts every winner of a real-thread storm (R25) -----------------------------


@pytest.mark.realtime
def test_r25_completion_storm_counts_every_winner(impl: ModuleType) -> None:
    """Threads race ``check_and_complete`` on keys whose operations are all ready, under a
    1 µs switch interval, with the lockset checks on (real locks): ``num_completed`` equals
    the sum of the winners' counts, and every counter write held its lock."""
    lockset = Lockset()
    with lockset.installed():
        purgatory = _manual(impl)
        keys = [f"k{i}" for i in range(4)]
        ops = [_operation(impl)(60_000) for _ in range(400)]
        for index, op in enumerate(ops):
            assert purgatory.try_complete_else_watch(op, [keys[index % 4], "all"]) is False
            op.ready = True
        counts: list[int] = []
        guard = threading.Lock()

        def race(order: list[str]) -> None:
            mine = sum(purgatory.check_and_complete(key) for key in order)
            with guard:
                counts.append(mine)

        orders = [keys, keys[::-1], ["all", *keys], [*keys, "all"]]
        threads = [threading.Thread(target=race, args=(o,), daemon=True) for o in orders]
        previous = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT_S)
        finally:
            sys.setswitchinterval(previous)
        assert not any(thread.is_alive() for thread in threads)
        assert sum(counts) == len(ops) == purgatory.num_completed
        assert all(op.is_completed for op in ops)
        purgatory.shutdown()
    assert lockset.violations == []


# -- reprs: tasks (never added, scheduled), timers, operations ----------------------------------


def test_reprs_of_tasks_timers_and_operations(impl: ModuleType) -> None:
    timer = impl.SystemTimer("shown", clock=ManualClock(0), executor=InlineExecutor())
    task = _bare_task(impl)(5)
    never_added = repr(task)
    assert never_added  # a task never added has a repr (the optimized one says "unlinked")
    if impl.__name__.endswith("optimized"):
        assert "unlinked" in never_added and "due=" in never_added
    timer.add(task)
    assert repr(timer) == "SystemTimer('shown', tick_ms=1, size=1, current_time=0)"
    if impl.__name__.endswith("optimized"):
        assert "in bucket" in repr(task) and "due=5" in repr(task)
    timer.close()
    assert repr(timer).endswith(", closed)")

    purgatory = _manual(impl)
    pending, done, dropped = (_operation(impl)(10) for _ in range(3))
    assert repr(pending) == "<Ready delay_ms=10 pending>"
    assert purgatory.try_complete_else_watch(pending, ["k"]) is False
    assert purgatory.try_complete_else_watch(dropped, ["k"]) is False
    assert done.force_complete()
    assert repr(done) == "<Ready delay_ms=10 completed>"
    assert purgatory.abandon(dropped)
    assert repr(dropped) == "<Ready delay_ms=10 abandoned>"
    assert repr(purgatory) == "DelayedOperationPurgatory('gaps', watched=1, num_delayed=1)"
    purgatory.shutdown()


# -- the optimized purgatory's _check() on deliberately corrupted structures ----------------------


def _corruptible() -> Any:
    from kpurgatory import optimized

    timer = optimized.SystemTimer("corrupt", clock=ManualClock(0), executor=InlineExecutor())
    purgatory: Any = optimized.DelayedOperationPurgatory(
        "corrupt", timer=timer, reaper_enabled=False, shards=4
    )
    for index in range(3):
        op = _operation(optimized)(10)
        assert purgatory.try_complete_else_watch(op, [f"k{index}"]) is False
    purgatory._check()  # sound before the corruption
    return purgatory


def _shard_of(purgatory: Any, key: str) -> Any:
    return purgatory._shards[abs(hash(key)) % purgatory.shards]


def _other_shard(purgatory: Any, key: str) -> Any:
    own = _shard_of(purgatory, key)
    return next(shard for shard in purgatory._shards if shard is not own)


@pytest.mark.parametrize(
    ("corruption", "says"),
    [
        ("count", "counts"),
        ("misplaced", "not its own"),
        ("empty", "empty watcher list"),
        ("wrong_id", "wrong id"),
        ("foreign_list", "maps to the list of"),
        ("negative", "negative"),
    ],
)
def test_optimized_purgatory_check_raises_on_corruption(corruption: str, says: str) -> None:
    from kpurgatory.optimized.purgatory import WatcherList

    purgatory = _corruptible()
    shard = _shard_of(purgatory, "k0")
    watchers = shard.watchers["k0"]
    if corruption == "count":
        shard.count += 1
    elif corruption == "misplaced":
        other = _other_shard(purgatory, "k0")  # counts moved along: only the key is wrong
        other.watchers["k0"] = shard.watchers.pop("k0")
        other.count += len(watchers)
        shard.count -= len(watchers)
    elif corruption == "empty":
        shard.watchers["k0"] = WatcherList("k0")
    elif corruption == "wrong_id":
        (op,) = watchers.ops.values()
        watchers.ops.clear()
        watchers.ops[id(op) + 1] = op
    elif corruption == "foreign_list":
        shard.watchers["k0"] = WatcherList("elsewhere")
        shard.watchers["k0"].ops.update(watchers.ops)
    else:
        purgatory._num_purged = -1
    with pytest.raises(AssertionError, match=says):
        purgatory._check()
