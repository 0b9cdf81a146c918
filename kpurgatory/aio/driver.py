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

Bounded firings (R70): given the timer's ``LoopExecutor``, a firing queues the drain's
hand-overs instead of running them all, runs at most ``max_hand_overs`` of them, and
if more are left re-arms at once with ``call_soon``: every callback already ready on
the loop (I/O, other timers) runs before the next batch. The batches keep the drain's
due order and run nothing before its due time; no new drain starts until the backlog
is empty, and ``stop`` drops what is left of it.

Bounded drain (R72): a firing's ``advance`` drains the timer by at most
``max_drain_entries`` entries of timer work (cascaded or collected, the timer's
``advance_clock(0, max_entries)``); while the timer's ``drain_pending`` says work is left,
the driver goes on with the next piece in a ``call_soon`` callback once the backlog of the
last piece has run, so no callback does more than one bounded piece and one batch.

Bounded let-go (R71): given the wrapped purgatory (``let_go``), the unlinking of
finished operations that a let-go (R61) or a purge (R30) owes beyond its bound goes on
in ``call_soon`` callbacks of its own, one bounded pass each, until none is owed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kpurgatory._checks import require_at_least
from kpurgatory.aio.executor import LoopExecutor
from kpurgatory.spec.protocols import Clock

__all__ = ["DEFAULT_MAX_DRAIN_ENTRIES", "DEFAULT_MAX_HAND_OVERS", "LoopTimerDriver"]

DEFAULT_MAX_HAND_OVERS = 256
"""Hand-overs per firing by default: an expiry of an awaited operation with an empty
``on_expiration`` took a median 3.2 us of CPU in a batch (pure build, measured in
docs/performance.md), so a batch holds the loop about 0.8 ms, plus what the users'
``on_expiration`` callbacks do."""

DEFAULT_MAX_DRAIN_ENTRIES = 1024
"""Timer entries one firing drains by default (R72): cascaded to a finer wheel level or
collected for a hand-over. docs/performance.md measures the cost of an entry taken in a
cascade; at that cost a piece holds the loop well under a millisecond, about as long as a
batch of ``DEFAULT_MAX_HAND_OVERS`` hand-overs."""


LET_GO_PER_HAND_OVER = 1
"""A let-go pass unlinks at most ``LET_GO_PER_HAND_OVER * max_hand_overs`` finished
operations (R71). Unlinking a finished operation from its key through the purge
candidates took 4.9 us of the loop thread's CPU against 7.0 us for an expiry in a batch
(pure build, 50,000 overdue at once, load 11 on 2 cores), so one unlink per hand-over
keeps a pass no longer than a batch."""


class _LetGo(Protocol):
    """What the driver reads from an optimized purgatory to continue its let-go (R71)."""

    _let_go_owed: bool
    _let_go_bound: int

    def _let_go_step(self) -> bool: ...


class _Timer(Protocol):
    """What the driver reads from a timer of either implementation."""

    @property
    def next_due_time(self) -> int | None: ...

    @property
    def drain_pending(self) -> bool: ...


class LoopTimerDriver:
    """One ``call_at`` handle that runs ``advance`` when the timer's next task is due.

    ``advance(max_entries)`` is the purgatory's ``advance_clock(0, max_entries)``
    (drain what is due, at most ``max_drain_entries`` entries of it, R72, then purge if
    due, R30). ``direct``: loop time is the clock's reading in seconds (see the module
    docstring). ``executor``: the timer's ``LoopExecutor``, whose hand-overs a firing
    then runs at most ``max_hand_overs`` at a time (R70); without it a firing runs every
    hand-over of its piece. Costs: ``schedule`` O(1) (a ``call_at``, O(log n) in the
    loop's heap, only when the due time is earlier than the armed one); a callback is at
    most one piece of the drain and ``max_hand_overs`` hand-overs, then one
    ``next_due_time`` or one ``call_soon``.
    """

    __slots__ = (
        "_advance",
        "_armed_due",
        "_clock",
        "_continuing",
        "_direct",
        "_executor",
        "_handle",
        "_let_go",
        "_let_go_pending",
        "_loop",
        "_max_drain_entries",
        "_max_hand_overs",
        "_stopped",
        "_timer",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        timer: _Timer,
        clock: Clock,
        advance: Callable[[int], None],
        *,
        direct: bool,
        executor: LoopExecutor | None = None,
        max_hand_overs: int = DEFAULT_MAX_HAND_OVERS,
        let_go: _LetGo | None = None,
        max_drain_entries: int = DEFAULT_MAX_DRAIN_ENTRIES,
    ) -> None:
        max_hand_overs = require_at_least("max_hand_overs", max_hand_overs, 1)
        max_drain_entries = require_at_least("max_drain_entries", max_drain_entries, 1)
        if executor is not None and not isinstance(executor, LoopExecutor):
            raise TypeError(f"executor must be a LoopExecutor, not {type(executor).__name__}")
        self._executor = executor
        self._max_hand_overs = max_hand_overs
        self._max_drain_entries = max_drain_entries
        self._continuing = False
        self._loop = loop
        self._timer = timer
        self._clock = clock
        self._advance = advance
        self._direct = direct
        self._handle: asyncio.Handle | None = None
        self._armed_due: int | None = None
        self._stopped = False
        self._let_go = let_go
        self._let_go_pending = False
        if let_go is not None:
            let_go._let_go_bound = LET_GO_PER_HAND_OVER * max_hand_overs

    @property
    def armed_due(self) -> int | None:
        """The due time the handle is armed for, or None if no handle is armed."""
        return self._armed_due

    @property
    def max_hand_overs(self) -> int:
        """The most hand-overs one firing runs (R70)."""
        return self._max_hand_overs

    @property
    def max_drain_entries(self) -> int:
        """The most timer entries (cascaded or collected) one firing drains (R72)."""
        return self._max_drain_entries

    @property
    def continuing(self) -> bool:
        """Whether ``call_soon`` continuations are under way (the next batch of the
        backlog, R70, or the next piece of the drain, R72): no handle is armed for a due
        time until they are done; they re-arm then."""
        return self._continuing

    @property
    def backlog(self) -> int:
        """Hand-overs drained but not run yet: the next firing (a ``call_soon``) runs them."""
        executor = self._executor
        return 0 if executor is None else executor.backlog

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` has been called."""
        return self._stopped

    def schedule(self, due: int) -> None:
        """Make sure the loop wakes by ``due``: re-arm if nothing is armed or it is later."""
        armed = self._armed_due
        if (armed is None or due < armed) and not self._stopped:
            if self._continuing:
                return  # a call_soon continuation is pending; it re-arms when it is done
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
        if self._executor is not None:
            self._executor.drop_backlog()

    def _fire(self) -> None:
        self._handle = None
        self._armed_due = None
        if self._stopped:
            return
        self._continuing = True
        self._step()

    def _step(self) -> None:
        """One piece of the drain (R72), then the first batch of its hand-overs (R70)."""
        self._handle = None
        if self._stopped:
            return
        executor = self._executor
        if executor is None:
            try:
                self._advance(self._max_drain_entries)
            finally:
                self._next()
            return
        executor.defer(True)
        try:
            self._advance(self._max_drain_entries)
        finally:
            executor.defer(False)
            self._continue()

    def _continue(self) -> None:
        """Run one batch of the backlog, then go on (``_next``) (R70)."""
        self._handle = None
        if self._stopped:
            return
        executor = self._executor
        assert executor is not None
        try:
            executor.run_backlog(self._max_hand_overs)
        finally:
            self._next()

    def _next(self) -> None:
        """After a callback: ``call_soon`` the next batch (R70) while the backlog lasts,
        then the next piece of the drain (R72) while the timer has one pending; else
        re-arm for the next due time."""
        if self._stopped:
            return
        executor = self._executor
        if executor is not None and executor.backlog:
            self._handle = self._loop.call_soon(self._continue)
        elif self._timer.drain_pending:
            self._handle = self._loop.call_soon(self._step)
        else:
            self._continuing = False
            self.rearm()
        self.let_go_soon()

    def let_go_soon(self) -> None:
        """If the purgatory owes a let-go (R71), continue it in a ``call_soon`` callback
        (one pass per callback) unless one is pending already. O(1)."""
        let_go = self._let_go
        if (
            let_go is not None
            and let_go._let_go_owed
            and not self._let_go_pending
            and not self._stopped
        ):
            self._let_go_pending = True
            self._loop.call_soon(self._continue_let_go)

    def _continue_let_go(self) -> None:
        self._let_go_pending = False
        let_go = self._let_go
        if self._stopped or let_go is None:
            return
        try:
            let_go._let_go_step()
        finally:
            self.let_go_soon()

    def _loop_time_of(self, due: int) -> float:
        return self._loop.time() + (due - self._clock.now_ms()) / 1000

    def __repr__(self) -> str:
        backlog = self.backlog
        state = (
            "stopped"
            if self._stopped
            else f"backlog={backlog}"
            if backlog
            else "continuing"
            if self._continuing
            else f"armed_due={self._armed_due}"
        )
        return f"LoopTimerDriver({state})"
