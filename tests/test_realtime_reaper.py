"""Real-clock tests of the reaper, closed timers and a completion storm (R14, R25,
R30-R32): the reaper purges, steps by 200 ms and wakes at once on shutdown; a purge after
the timer was closed from outside; every winner of a real-thread storm is counted.

As in ``test_realtime.py``: every wait is bounded, every timer and purgatory closed in a
with block, and the assertions are about order and generous upper bounds.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.concurrency.lockset import Lockset
from tests.purgatory_support import make_purgatory
from tests.support import race_threads, ready_operation

pytestmark = pytest.mark.realtime


# -- the reaper, shutdown, closed timers, storms and reprs (R14, R25, R30-R32) -----------------


REAPER_WAIT_S = 10.0
"""Upper bound for a real-clock wait that should end far sooner (never asserted on)."""


# -- the reaper: purging, step, promptness (R30, R31, R32) ---------------------------------


@pytest.mark.realtime
def test_r30_r31_the_reaper_purges_completed_operations(impl: ModuleType) -> None:
    """R30 through the reaper, on a real clock: with ``purge_interval=0`` the reaper's own
    step unlinks the completed operations (nobody calls ``advance_clock`` here)."""
    purgatory = impl.DelayedOperationPurgatory("reaped", purge_interval=0)
    try:
        ops = [ready_operation(impl)(60_000) for _ in range(3)]
        for op in ops:
            assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        for op in ops[:2]:
            assert op.force_complete()
        deadline = time.monotonic() + REAPER_WAIT_S
        while purgatory.num_purged < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert purgatory.num_purged == 4  # two operations on two keys each
        assert purgatory.watched == 2  # the pending one, on a and b
    finally:
        purgatory.shutdown()
        assert purgatory.await_termination(REAPER_WAIT_S)


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
        assert stepped.wait(REAPER_WAIT_S)
    finally:
        purgatory.shutdown()
        assert purgatory.await_termination(REAPER_WAIT_S)
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
    assert purgatory.await_termination(REAPER_WAIT_S)
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
    purgatory = make_purgatory(impl, ManualClock(0), purge_interval=0, name="gaps")
    done, pending = ready_operation(impl)(10), ready_operation(impl)(10)
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
        purgatory = make_purgatory(impl, ManualClock(0), name="gaps")
        keys = [f"k{i}" for i in range(4)]
        ops = [ready_operation(impl)(60_000) for _ in range(400)]
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
        race_threads(threads, REAPER_WAIT_S)
        assert not any(thread.is_alive() for thread in threads)
        assert sum(counts) == len(ops) == purgatory.num_completed
        assert all(op.is_completed for op in ops)
        purgatory.shutdown()
    assert lockset.violations == []
