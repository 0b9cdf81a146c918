"""Clocks: a monotonic real-time clock and a manual clock for deterministic tests.

Both satisfy ``kpurgatory.spec.protocols.Clock``. A timer reads the clock when a task
is added (``deadline_base_ms`` where a clock has it, else ``now_ms``: R60) and lets
time pass through ``wait`` inside ``advance_clock`` (rule R7).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kpurgatory._checks import require_at_least, require_int

__all__ = ["ManualClock", "MonotonicClock", "deadline_reader"]

_NextDue = Callable[[], "int | None"]
"""The ``next_due`` a timer passes to ``wait`` (the Clock protocol's parameter)."""


class MonotonicClock:
    """Milliseconds from ``time.monotonic_ns()``: Kafka's ``hiResClockMs`` in Python."""

    __slots__ = ()

    def now_ms(self) -> int:
        """The current reading, in whole milliseconds (truncated)."""
        return time.monotonic_ns() // 1_000_000

    def deadline_base_ms(self) -> int:
        """The reading a deadline counts from: rounded up to a whole millisecond (R60).

        A task added at 10.9 ms with a 5 ms delay is due at 16, not 15: the truncated
        reading would make it due 0.1 ms after it was added plus 4.1 ms, up to a
        millisecond early. Timers read this when they add a task; drains still read
        ``now_ms`` (truncated), so a task is handed over only once its due time has
        really passed."""
        return -(-time.monotonic_ns() // 1_000_000)

    def wait(self, condition: threading.Condition, timeout_ms: int, next_due: _NextDue) -> int:
        """Block on ``condition`` until ``next_due()`` is reached or ``timeout_ms`` passes.

        Called with ``condition`` held. Re-reads ``next_due`` after every wake-up, so a
        task added with an earlier due time (which notifies ``condition``) shortens the
        wait. Returns the reading at which the caller should drain. Any ``timeout_ms``
        >= 0 works, however large: the wait goes in slices of at most
        ``threading.TIMEOUT_MAX`` seconds (R42).
        """
        deadline = self.now_ms() + timeout_ms
        while True:
            now = self.now_ms()
            due = next_due()
            if now >= deadline or (due is not None and due <= now):
                return now
            wake_at = deadline if due is None else min(deadline, due)
            # Condition.wait refuses more than TIMEOUT_MAX seconds; any int timeout is valid
            # (R42, Kafka's Long.MAX_VALUE included), so wait in slices and loop.
            condition.wait(min((wake_at - now) / 1000.0, threading.TIMEOUT_MAX))

    def __repr__(self) -> str:
        return "MonotonicClock()"


class ManualClock:
    """A clock that moves only when told to: ``advance`` or a timer's ``advance_clock``.

    ``wait`` moves it forward by exactly ``timeout_ms`` and returns at once, so
    ``SystemTimer.advance_clock(t)`` on a manual clock means "let t ms pass, then run
    everything due" on every implementation (R7). Thread-safe.
    """

    __slots__ = ("_lock", "_now")

    def __init__(self, start_ms: int = 0) -> None:
        self._now = require_int("start_ms", start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The current reading."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms`` >= 0 milliseconds."""
        step = ms if type(ms) is int and ms >= 0 else require_at_least("ms", ms, 0)
        lock = self._lock
        lock.acquire()
        try:
            self._now += step
        finally:
            lock.release()

    def wait(self, condition: threading.Condition, timeout_ms: int, next_due: _NextDue) -> int:
        """Advance by exactly ``timeout_ms`` without blocking; return the new reading.

        A timer calls this once per ``advance_clock``, so it is ``advance`` written out
        (no call, no ``with`` block, no validating call for an exact int >= 0).
        """
        step = (
            timeout_ms
            if type(timeout_ms) is int and timeout_ms >= 0
            else require_at_least("timeout_ms", timeout_ms, 0)
        )
        lock = self._lock
        lock.acquire()
        try:
            now = self._now = self._now + step
        finally:
            lock.release()
        return now

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now})"


def deadline_reader(clock: object) -> Callable[[], int]:
    """The clock's ``deadline_base_ms`` if it has one, else its ``now_ms`` (R60)."""
    reader = getattr(clock, "deadline_base_ms", None)
    if callable(reader):
        return reader  # type: ignore[no-any-return]
    now_ms: Callable[[], int] = clock.now_ms  # type: ignore[attr-defined]
    return now_ms
