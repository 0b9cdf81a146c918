"""Real-clock tests: MonotonicClock, the executor-<name> worker and the reaper's first steps (R7,
R14, R15, R31, R32), and never early (R60: tasks and waits measured against ``time.monotonic``,
only the lower bound asserted; lateness depends on the load, docs/performance.md).

Each test finishes in well under a second when healthy and stops by itself: every wait
is an Event or join with a timeout, every timer and purgatory is closed in a with block.
Assertions are about order and about generous upper bounds (an early wake-up must
happen long before the multi-second timeout it cuts short), never about exact timings.
The reaper's purging, step and promptness, closed timers and a completion storm on
real threads are in ``test_realtime_reaper.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock, MonotonicClock
from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome, ReferenceDelayedOperation
from kpurgatory.clock import deadline_reader
from tests.purgatory_support import make_purgatory
from tests.support import NextDue, pending_operation, ready_operation, task_class

pytestmark = pytest.mark.realtime


WAIT_S = 2.0
"""Generous bound for anything that should take milliseconds."""

LONG_MS = 5_000
"""A timeout an early wake-up must cut short (the tests never wait this long)."""


def short(impl: ModuleType) -> str:
    """The implementation's short name, to keep thread names unique per run."""
    return str(impl.__name__.rsplit(".", 1)[-1])


def monotonic_ms() -> int:
    """The reading a MonotonicClock would give now."""
    return time.monotonic_ns() // 1_000_000


def event_task_class(impl: ModuleType) -> type[Any]:
    """A ``TimerTask`` of ``impl`` that records its thread and reading, then sets ``done``."""

    class EventTask(impl.TimerTask):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.done = threading.Event()
            self.thread_name = ""
            self.ran_at = -1

        def run(self) -> None:
            self.thread_name = threading.current_thread().name
            self.ran_at = monotonic_ms()
            self.done.set()

    return EventTask


def expiring_op_class(impl: ModuleType) -> type[Any]:
    """A never-ready ``DelayedOperation`` of ``impl`` that sets ``expired`` on expiry."""

    class ExpiringOp(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.expired = threading.Event()
            self.expired_on = ""

        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            self.expired_on = threading.current_thread().name
            self.expired.set()

    return ExpiringOp


def in_background(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``fn`` on a daemon thread; its result lands in the returned list."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


def thread_alive(name: str) -> bool:
    """Whether a live thread has exactly this name."""
    return any(t.name == name for t in threading.enumerate())


# ---- R15: defaults ---------------------------------------------------------------------


def test_r15_defaults_are_monotonic_milliseconds_tick_1_wheel_20(impl: ModuleType) -> None:
    """R15: SystemTimer(name) reads monotonic milliseconds; tick_ms=1 and wheel_size=20.

    With start_ms = the monotonic reading, a task due 10 minutes ahead is scheduled and
    one due 10 minutes ago runs at once: a clock in seconds, nanoseconds or wall time
    would flip one of the two.
    """
    parameters = inspect.signature(impl.SystemTimer).parameters
    assert parameters["tick_ms"].default == 1
    assert parameters["wheel_size"].default == 20
    name = f"rt-defaults-{short(impl)}"
    with impl.SystemTimer(name, start_ms=monotonic_ms()) as timer:
        ahead = event_task_class(impl)(600_000)
        behind = event_task_class(impl)(-600_000)
        timer.add(ahead)
        timer.add(behind)
        assert timer.size == 1
        assert behind.done.wait(WAIT_S)
        assert behind.thread_name == f"executor-{name}"
        assert not ahead.done.is_set()


def test_r15_r4_small_delay_runs_on_worker_after_advance_clock(impl: ModuleType) -> None:
    """R15/R4/R8: a 20 ms task runs on executor-<name>, never before its due reading."""
    name = f"rt-run-{short(impl)}"
    with impl.SystemTimer(name) as timer:
        task = event_task_class(impl)(20)
        added_no_later_than = monotonic_ms()
        timer.add(task)
        assert timer.size == 1
        assert timer.advance_clock(LONG_MS) is True
        assert task.done.wait(WAIT_S)
        assert task.thread_name == f"executor-{name}"
        assert task.ran_at >= added_no_later_than + 20
        assert timer.size == 0
    assert not thread_alive(f"executor-{name}")


# ---- R7 / R14: waking a blocked advance_clock ------------------------------------------


def test_r7_earlier_add_wakes_blocked_advance_clock(impl: ModuleType) -> None:
    """R7: an add with an earlier due time ends a long advance_clock wait early."""
    with impl.SystemTimer(f"rt-wake-{short(impl)}") as timer:
        far = event_task_class(impl)(60_000)
        timer.add(far)
        thread, result = in_background(lambda: timer.advance_clock(LONG_MS))
        time.sleep(0.05)  # let it block
        near = event_task_class(impl)(10)
        timer.add(near)
        thread.join(WAIT_S)
        assert not thread.is_alive(), "advance_clock was not woken by the earlier add"
        assert result == [True]
        assert near.done.wait(WAIT_S)
        assert not far.done.is_set() and timer.size == 1


def test_r14_close_wakes_blocked_advance_clock(impl: ModuleType) -> None:
    """R14: close ends a blocked advance_clock, which returns False; nothing runs after."""
    timer = impl.SystemTimer(f"rt-close-{short(impl)}")
    task = event_task_class(impl)(60_000)
    timer.add(task)
    thread, result = in_background(lambda: timer.advance_clock(LONG_MS))
    time.sleep(0.05)
    timer.close()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "close did not wake advance_clock"
    assert result == [False]
    assert timer.advance_clock(LONG_MS) is False  # closed: returns at once
    assert not task.done.is_set()


# ---- R31 / R32: the reaper -------------------------------------------------------------


def test_r31_reaper_expires_by_itself_and_shutdown_is_prompt(impl: ModuleType) -> None:
    """R31/R32: the reaper thread expires a due op on its own; shutdown stops it promptly."""
    name = f"rt-reaper-{short(impl)}"
    purgatory = impl.DelayedOperationPurgatory(name, broker_id=7)
    try:
        reaper = f"ExpirationReaper-7-{name}"
        assert thread_alive(reaper)
        op = expiring_op_class(impl)(30)
        assert purgatory.try_complete_else_watch(op, ["k"]) is False
        assert op.expired.wait(WAIT_S), "the reaper did not expire the operation"
        assert op.expired_on == f"executor-{name}"
        assert op.is_completed
        pending = expiring_op_class(impl)(60_000)
        purgatory.try_complete_else_watch(pending, ["k"])
        time.sleep(0.05)  # the reaper is now blocked in advance_clock(200)
    finally:
        started = time.monotonic()
        purgatory.shutdown()
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert purgatory.await_termination(WAIT_S)  # R39: the reaper exits after shutdown
    assert not thread_alive(reaper)
    assert not pending.is_completed and not pending.expired.is_set()  # R32


def test_r32_idle_purgatory_shuts_down_promptly(impl: ModuleType) -> None:
    """R31/R32: shutdown of an idle purgatory wakes the waiting reaper rather than waiting."""
    name = f"rt-idle-{short(impl)}"
    with impl.DelayedOperationPurgatory(name) as purgatory:
        time.sleep(0.05)
        started = time.monotonic()
        purgatory.shutdown()
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert not thread_alive(f"ExpirationReaper-0-{name}")
    with pytest.raises(RuntimeError):
        purgatory.advance_clock(0)


class FlakyClock(MonotonicClock):
    """A MonotonicClock whose first ``wait`` raises, to make one reaper step fail."""

    def __init__(self) -> None:
        self.failures_left = 1

    def wait(self, condition: threading.Condition, timeout_ms: int, next_due: NextDue) -> int:
        """Raise once, then wait like a MonotonicClock."""
        if self.failures_left:
            self.failures_left -= 1
            raise OSError("flaky clock")
        return super().wait(condition, timeout_ms, next_due)


def test_r31_a_purgatory_never_shut_down_does_not_keep_the_process_alive(
    impl: ModuleType,
) -> None:
    """R31, R32: the reaper runs until shutdown; a program that forgets to call
    ``shutdown`` still exits when its main thread ends (the reaper does not hold the
    interpreter open)."""
    program = (
        f"import {impl.__name__} as impl\n"
        "purgatory = impl.DelayedOperationPurgatory('forgotten')\n"
        "print('started')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "started\n"), done.stderr


def test_r31_reaper_logs_a_failed_step_and_carries_on(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """R31: an exception in a reaper step is logged; the reaper still expires operations."""
    caplog.set_level(logging.ERROR, logger="kpurgatory")
    name = f"rt-flaky-{short(impl)}"
    clock = FlakyClock()
    timer = impl.SystemTimer(name, clock=clock)
    with impl.DelayedOperationPurgatory(name, timer) as purgatory:
        op = expiring_op_class(impl)(30)
        purgatory.try_complete_else_watch(op, ["k"])
        assert op.expired.wait(WAIT_S), "the reaper stopped after a failed step"
    assert clock.failures_left == 0
    assert any(
        r.name.startswith("kpurgatory") and r.exc_info is not None and "flaky" in str(r.exc_info[1])
        for r in caplog.records
    )


def test_r31_reaper_on_manual_clock_is_refused(impl: ModuleType) -> None:
    """R31: a reaper would advance a ManualClock by itself, so it is a ValueError."""
    timer = impl.SystemTimer(f"rt-manual-{short(impl)}", clock=ManualClock(0))
    try:
        with pytest.raises(ValueError, match="reaper"):
            impl.DelayedOperationPurgatory("manual", timer)
    finally:
        timer.close()


# -- never early on a real clock (R60), both implementations and the aio layer -----------------


COUNT = 120
"""Tasks or waits per test: enough to land on every sub-millisecond phase many times."""


@pytest.mark.timeout(60)
def test_r60_the_monotonic_deadline_base_rounds_up_and_manual_clocks_are_exact() -> None:
    """R60: MonotonicClock counts a deadline from its reading rounded up; a clock with no
    deadline_base_ms (a ManualClock) is read as it is, so virtual time stays exact."""
    clock = MonotonicClock()
    for _ in range(1000):
        before = time.monotonic_ns()
        base = clock.deadline_base_ms()
        assert base * 1_000_000 >= before
    manual = ManualClock(7)
    assert deadline_reader(manual)() == 7
    assert deadline_reader(clock) == clock.deadline_base_ms


@pytest.mark.timeout(60)
def test_r60_timer_tasks_never_run_before_their_delay(impl: ModuleType) -> None:
    """R60: tasks added at random sub-millisecond phases to a real-clock timer driven by
    a thread; each run happens at least delay_ms after its add began."""
    late: list[float] = []
    early: list[str] = []
    base = task_class(impl)
    timer = impl.SystemTimer("never-early", executor=InlineExecutor())
    stop = threading.Event()

    def drive() -> None:
        while not stop.is_set():
            timer.advance_clock(5)

    class Timed(base):  # type: ignore[misc,valid-type]
        def __init__(self, delay_ms: int, added_ns: int) -> None:
            super().__init__(delay_ms, "t", self)
            self.added_ns = added_ns

        def ran(self, name: str) -> None:
            elapsed_ms = (time.monotonic_ns() - self.added_ns) / 1e6
            if elapsed_ms < self.delay_ms:
                early.append(f"delay {self.delay_ms} ran after {elapsed_ms:.3f} ms")
            late.append(elapsed_ms - self.delay_ms)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        rng = random.Random(60)
        for _ in range(COUNT):
            time.sleep(rng.random() / 1000)
            timer.add(Timed(rng.randint(1, 5), time.monotonic_ns()))
        deadline = time.monotonic() + 30
        while len(late) < COUNT and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        stop.set()
        timer.close()
        driver.join(5)
    assert not early, early[:5]
    assert len(late) == COUNT


@pytest.mark.timeout(60)
@pytest.mark.parametrize("implementation", ["optimized", "reference"])
def test_r60_aio_waits_never_expire_before_timeout_ms(implementation: Any) -> None:
    """R60: on a real asyncio loop, every wait that expires does so at least
    timeout_ms after wait was called (measured with time.monotonic)."""
    base = DelayedOperation if implementation == "optimized" else ReferenceDelayedOperation
    poll = pending_operation(base)

    early: list[str] = []

    async def one(purgatory: AsyncPurgatory[Any], timeout_ms: int, phase_s: float) -> None:
        await asyncio.sleep(phase_s)
        started = time.monotonic()
        outcome = await purgatory.wait(poll(timeout_ms), ["k"])
        elapsed_ms = (time.monotonic() - started) * 1000
        assert outcome is Outcome.EXPIRED
        if elapsed_ms < timeout_ms:
            early.append(f"timeout {timeout_ms} expired after {elapsed_ms:.3f} ms")

    async def main() -> None:
        rng = random.Random(61)
        async with AsyncPurgatory[Any]("polls", implementation=implementation) as purgatory:
            await asyncio.gather(
                *(one(purgatory, rng.randint(1, 20), rng.random() / 50) for _ in range(COUNT))
            )

    asyncio.run(main())
    assert not early, early[:5]


def _bare_task(impl: ModuleType) -> type[Any]:
    class Bare(impl.TimerTask):  # type: ignore[misc,name-defined]
        def run(self) -> None:
            pass

    return Bare


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

    purgatory = make_purgatory(impl, ManualClock(0), name="gaps")
    pending, done, dropped = (ready_operation(impl)(10) for _ in range(3))
    assert repr(pending) == "<Ready delay_ms=10 pending>"
    assert purgatory.try_complete_else_watch(pending, ["k"]) is False
    assert purgatory.try_complete_else_watch(dropped, ["k"]) is False
    assert done.force_complete()
    assert repr(done) == "<Ready delay_ms=10 completed>"
    assert purgatory.abandon(dropped)
    assert repr(dropped) == "<Ready delay_ms=10 abandoned>"
    assert repr(purgatory) == "DelayedOperationPurgatory('gaps', watched=1, num_delayed=1)"
    purgatory.shutdown()
