"""Clocks and executors the timers are driven by (R7, R15, R35).

These building blocks are shared by every implementation, so the tests use them
directly; threads here are bounded by joins with timeouts and stop by themselves.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from kpurgatory import InlineExecutor, ManualClock, MonotonicClock, SingleThreadExecutor
from kpurgatory.spec.protocols import Clock

WAIT_S = 5.0
"""Upper bound for joining a helper thread."""


def no_due() -> int | None:
    """A ``next_due`` callback for a timer with nothing scheduled."""
    return None


# ---- ManualClock (R7) --------------------------------------------------------------------


def test_r7_manual_clock_moves_only_when_told() -> None:
    """R7: a ManualClock starts where told and moves only by advance/wait."""
    clock = ManualClock(42)
    assert isinstance(clock, Clock)
    assert clock.now_ms() == 42
    clock.advance(0)
    assert clock.now_ms() == 42
    clock.advance(8)
    assert clock.now_ms() == 50
    assert ManualClock().now_ms() == 0
    assert ManualClock(-7).now_ms() == -7


def test_r7_manual_clock_wait_moves_by_exactly_timeout_and_never_blocks() -> None:
    """R7: wait(t) moves the clock by exactly t, ignores next_due, and returns the new reading."""
    clock = ManualClock(10)
    condition = threading.Condition()
    with condition:
        assert clock.wait(condition, 25, lambda: 12) == 35  # an earlier due time does not matter
        assert clock.wait(condition, 0, no_due) == 35
        assert clock.wait(condition, 86_400_000, no_due) == 86_400_035  # a virtual day
    assert clock.now_ms() == 86_400_035


def test_r35_manual_clock_advance_is_thread_safe() -> None:
    """R35/R37: concurrent advances never lose an increment."""
    clock = ManualClock(0)
    barrier = threading.Barrier(4)

    def advance_many() -> None:
        barrier.wait(WAIT_S)
        for _ in range(2000):
            clock.advance(1)

    threads = [threading.Thread(target=advance_many, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert clock.now_ms() == 8000


# ---- MonotonicClock (R15, R7) -----------------------------------------------------------


def test_r15_monotonic_clock_reads_milliseconds_of_monotonic_ns() -> None:
    """R15: now_ms is time.monotonic_ns() // 1e6, bracketed by readings taken around it."""
    clock = MonotonicClock()
    assert isinstance(clock, Clock)
    for _ in range(100):
        before = time.monotonic_ns() // 1_000_000
        reading = clock.now_ms()
        after = time.monotonic_ns() // 1_000_000
        assert before <= reading <= after


def test_r7_monotonic_clock_wait_returns_when_due_time_has_come() -> None:
    """R7: a due time already reached ends the wait at once, whatever the timeout."""
    clock = MonotonicClock()
    condition = threading.Condition()
    start = clock.now_ms()
    with condition:
        reading = clock.wait(condition, 60_000, lambda: start - 1)
    assert start <= reading < start + 60_000


def test_r7_monotonic_clock_wait_is_ended_by_notify_and_earlier_due() -> None:
    """R7: a notify that makes next_due earlier wakes the waiter before its long timeout."""
    clock = MonotonicClock()
    condition = threading.Condition()
    due: list[int] = []
    returned: list[int] = []

    def waiter() -> None:
        with condition:
            returned.append(clock.wait(condition, 60_000, lambda: due[0] if due else None))

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    time.sleep(0.02)
    with condition:
        due.append(clock.now_ms())
        condition.notify_all()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert returned and returned[0] >= due[0]


# ---- InlineExecutor ---------------------------------------------------------------------


def test_inline_executor_runs_now_in_the_caller() -> None:
    """R7/R37: InlineExecutor runs fn at once in the calling thread; the future is done."""
    executor = InlineExecutor()
    seen: list[str] = []

    def job(x: int, *, y: int) -> int:
        seen.append(threading.current_thread().name)
        return x + y

    future = executor.submit(job, 2, y=3)
    assert future.done() and future.result() == 5
    assert seen == [threading.current_thread().name]


def test_inline_executor_stores_exceptions_and_refuses_after_shutdown() -> None:
    """R13: an exception is stored in the future, not raised by submit; shutdown refuses more."""
    executor = InlineExecutor()

    def fail() -> None:
        raise KeyError("stored")

    future = executor.submit(fail)
    assert isinstance(future.exception(), KeyError)
    executor.shutdown()
    with pytest.raises(RuntimeError):
        executor.submit(int)


# ---- SingleThreadExecutor (R15) ---------------------------------------------------------


def test_r15_single_thread_executor_names_its_one_worker() -> None:
    """R15: all tasks run on one worker named exactly as given, in submission order."""
    executor = SingleThreadExecutor("executor-clock-test")
    names: list[str] = []
    order: list[int] = []

    def job(i: int) -> None:
        names.append(threading.current_thread().name)
        order.append(i)

    futures = [executor.submit(job, i) for i in range(20)]
    for future in futures:
        future.result(WAIT_S)
    executor.shutdown(wait=True)
    assert set(names) == {"executor-clock-test"}
    assert order == list(range(20))
    assert executor.thread_name == "executor-clock-test"
    assert all(t.name != "executor-clock-test" for t in threading.enumerate())


def test_r14_single_thread_executor_shutdown_from_its_worker_does_not_deadlock() -> None:
    """R14: a task that shuts its own executor down (a task closing its timer) returns."""
    executor = SingleThreadExecutor("executor-self-stop")
    future: Future[None] = executor.submit(executor.shutdown, True)
    assert future.result(WAIT_S) is None
    with pytest.raises(RuntimeError):
        executor.submit(int)


def test_r35_single_thread_executor_name_must_be_str() -> None:
    """R35: a non-str name raises TypeError naming it."""
    with pytest.raises(TypeError, match="name"):
        SingleThreadExecutor(5)  # type: ignore[arg-type]
