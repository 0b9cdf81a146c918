"""``LoopTimerDriver``: advances a timer on an asyncio loop with one ``call_at`` (R45).

Kafka drives its timer with a reaper thread that loops ``advanceClock(200)``; the
threaded purgatory here does the same. On an event loop no thread is needed: the timer
publishes the earliest due time of its schedule (``next_due_time``, R44), so one
``loop.call_at`` handle armed at that time wakes the loop exactly when something is
due. The handle is re-armed earlier when an operation with an earlier due time is
submitted (``schedule``), and after every firing at the timer's new ``next_due_time``.
With nothing scheduled no handle is armed, so an idle purgatory costs nothing.

Time mapping: a ``MonotonicClock`` reads ``time.monotonic_ns`` and asyncio's loop
``time()`` is ``time.monotonic()``, the same clock, so due time ``d`` ms is loop time
``d / 1000``; a ``ManualClock`` is paired with a ``VirtualTimeLoop`` whose ``time()``
is that clock's reading in seconds, so the same mapping holds. Any other clock is
mapped through the two current readings at each arming. A firing that comes early
(an arbitrary clock) drains nothing and re-arms, so nothing ever runs early (R4).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kpurgatory.spec.protocols import Clock

__all__ = ["LoopTimerDriver"]


class _Timer(Protocol):
    """What the driver reads from a timer of either implementation."""

    @property
    def next_due_time(self) -> int | None: ...


class LoopTimerDriver:
    """One ``call_at`` handle that runs ``advance`` when the timer's next task is due.

    ``advance`` is the purgatory's ``advance_clock(0)`` (drain what is due, then purge
    if due, R30). ``direct``: loop time is the clock's reading in seconds (see the
    module docstring). Costs: ``schedule`` O(1) (a ``call_at``, O(log n) in the loop's
    heap, only when the due time is earlier than the armed one); a firing is the drain
    plus one ``next_due_time``.
    """

    __slots__ = (
        "_advance",
        "_armed_due",
        "_clock",
        "_direct",
        "_handle",
        "_loop",
        "_stopped",
        "_timer",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        timer: _Timer,
        clock: Clock,
        advance: Callable[[], None],
        *,
        direct: bool,
    ) -> None:
        self._loop = loop
        self._timer = timer
        self._clock = clock
        self._advance = advance
        self._direct = direct
        self._handle: asyncio.TimerHandle | None = None
        self._armed_due: int | None = None
        self._stopped = False

    @property
    def armed_due(self) -> int | None:
        """The due time the handle is armed for, or None if no handle is armed."""
        return self._armed_due

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` has been called."""
        return self._stopped

    def schedule(self, due: int) -> None:
        """Make sure the loop wakes by ``due``: re-arm if nothing is armed or it is later."""
        armed = self._armed_due
        if (armed is None or due < armed) and not self._stopped:
            handle = self._handle
            if handle is not None:
                handle.cancel()
            when = due / 1000 if self._direct else self._loop_time_of(due)
            self._armed_due = due
            self._handle = self._loop.call_at(when, self._fire)

    def rearm(self) -> None:
        """Arm for the timer's ``next_due_time`` (R44), if any and earlier than armed."""
        due = self._timer.next_due_time
        if due is not None:
            self.schedule(due)

    def stop(self) -> None:
        """Cancel the handle and never arm again (shutdown, R49). Idempotent."""
        self._stopped = True
        handle = self._handle
        self._handle = None
        self._armed_due = None
        if handle is not None:
            handle.cancel()

    def _fire(self) -> None:
        self._handle = None
        self._armed_due = None
        if self._stopped:
            return
        try:
            self._advance()
        finally:
            if not self._stopped:
                self.rearm()

    def _loop_time_of(self, due: int) -> float:
        return self._loop.time() + (due - self._clock.now_ms()) / 1000

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"armed_due={self._armed_due}"
        return f"LoopTimerDriver({state})"
