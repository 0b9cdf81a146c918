"""The reference timer: ``TimerTask`` and ``SystemTimer``, written to be obviously correct.

Scheduled tasks live in one insertion-ordered dict per timer; ``advance_clock`` scans
it, sorts what is due, and hands it over. Every reference timer and task shares one
process-wide re-entrant lock, so moving a task between timers, cancelling it, and
draining are trivially atomic. The cost is O(n log n) per ``advance_clock``; the
optimized package exists for speed and must behave exactly like this module.

Rules: R1-R4, R7-R12, R14, R15, R39, R40, R43, R44, R53, R64, R65, R73.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Self

from kpurgatory import sync
from kpurgatory._checks import (
    refuse_override,
    require_at_least,
    require_clock_and_executor,
    require_int,
    require_str,
)
from kpurgatory._sweep import not_handed_over, raise_collected
from kpurgatory.clock import MonotonicClock, deadline_reader
from kpurgatory.executors import SingleThreadExecutor, await_termination, run_logged
from kpurgatory.spec.arithmetic import (
    due_time,
    expiration_ms,
    is_due,
    next_current_time,
    round_down,
)
from kpurgatory.spec.protocols import AbstractLock, Clock

__all__ = ["SystemTimer", "TimerTask"]

logger = logging.getLogger(__name__)

_STATE_LOCK: AbstractLock = sync.new_lock()
"""Guards every reference timer's schedule and every reference task's entry.

A re-entrant lock from ``kpurgatory.sync`` (a ``threading.RLock`` by default); the
controlled-schedule tests rebind this module attribute to an instrumented lock."""

_WAKE_NOW = -(1 << 62)
"""A due time already passed on any clock: returned by ``next_due`` to end a wait."""


class _Entry:
    """One scheduling of a task in a timer; a re-add or cancel makes it stale."""

    __slots__ = ("due", "task", "timer")

    def __init__(self, timer: SystemTimer, task: TimerTask, due: int) -> None:
        self.timer = timer
        self.task = task
        self.due = due


class TimerTask(abc.ABC):
    """A task a ``SystemTimer`` runs once its delay has passed (Kafka's ``TimerTask``).

    ``delay_ms`` is relative to the clock reading at ``add``; any int is accepted and a
    due time at or before the timer's current time means "due at once" (R3). A task is
    scheduled in at most one timer at a time: adding it again, to the same or another
    timer, replaces the earlier schedule (R10).
    """

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Refuse a subclass that redefines ``delay_ms``: it is fixed at construction (R43)."""
        super().__init_subclass__(**kwargs)
        refuse_override(cls, "delay_ms", TimerTask)

    def __init__(self, delay_ms: int) -> None:
        self._delay_ms = require_int("delay_ms", delay_ms)
        self._entry: _Entry | None = None

    @property
    def delay_ms(self) -> int:
        """The delay given at construction, in milliseconds."""
        return self._delay_ms

    def cancel(self) -> None:
        """Remove the task from its timer's schedule (R9).

        Idempotent. ``size`` drops at once. A run already handed over to the executor is
        not stopped; a task that has left the schedule but whose turn in the hand-over
        has not come yet is not handed over (R11).
        """
        with _STATE_LOCK:
            entry = self._entry
            if entry is not None:
                entry.timer._pending.pop(entry, None)
                self._entry = None

    _unschedule = cancel
    """The timer-level cancel, which ``DelayedOperation.cancel`` (abandon, R40) keeps; the
    purgatory unschedules an operation through it."""

    @abc.abstractmethod
    def run(self) -> None:
        """The work to do when the task is due. Runs on the timer's executor."""
        raise NotImplementedError(f"{type(self).__name__}.run is abstract")


class SystemTimer:
    """A timer that hands tasks to an executor when they are due (Kafka's ``SystemTimer``).

    ``tick_ms`` is the resolution (due times are multiples of it, R1); ``wheel_size``
    is accepted and validated for API parity with the optimized wheel but shapes
    nothing here. ``start_ms`` sets the initial current time (default: the clock's
    reading). By default the timer reads a ``MonotonicClock`` and runs tasks on one
    worker thread named ``executor-<executor_name>`` (R15); pass ``clock`` and
    ``executor`` (e.g. ``ManualClock`` and ``InlineExecutor``) for determinism.
    """

    def __init__(
        self,
        executor_name: str,
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int | None = None,
        *,
        clock: Clock | None = None,
        executor: Executor | None = None,
    ) -> None:
        self._name = require_str("executor_name", executor_name)
        self._tick_ms = require_at_least("tick_ms", tick_ms, 1)
        self._wheel_size = require_at_least("wheel_size", wheel_size, 2)
        require_clock_and_executor(clock, executor)
        self._clock: Clock = MonotonicClock() if clock is None else clock
        self._deadline_base: Callable[[], int] = deadline_reader(self._clock)
        start = self._clock.now_ms() if start_ms is None else require_int("start_ms", start_ms)
        self._current_time = round_down(start, self._tick_ms)
        self._owns_executor = executor is None
        self._executor: Executor = (
            SingleThreadExecutor(f"executor-{self._name}") if executor is None else executor
        )
        self._pending: dict[_Entry, None] = {}
        self._condition = sync.new_condition(_STATE_LOCK)
        self._wake_requested = False
        self._closed = False

    # -- read-only state -------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of tasks scheduled and not yet due-drained or cancelled (R12)."""
        return len(self._pending)

    @property
    def tick_ms(self) -> int:
        """The timer's resolution in milliseconds."""
        return self._tick_ms

    @property
    def wheel_size(self) -> int:
        """Buckets per wheel level (validated; unused by the reference)."""
        return self._wheel_size

    @property
    def current_time(self) -> int:
        """The time against which ``add`` judges "due at once" (R2)."""
        return self._current_time

    @property
    def next_due_time(self) -> int | None:
        """The earliest due time of any scheduled task, or None if none is (R44).

        What a driver passes to ``loop.call_at`` (kpurgatory.aio): advancing the clock
        before this time hands nothing over. O(n): a scan of the pending dict.
        """
        with _STATE_LOCK:
            return min((entry.due for entry in self._pending), default=None)

    @property
    def drain_pending(self) -> bool:
        """Whether a bounded ``advance_clock`` left a task due at the current time still
        scheduled (R73): the next ``advance_clock`` hands it over first. O(n): a scan."""
        with _STATE_LOCK:
            return any(is_due(entry.due, self._current_time) for entry in self._pending)

    @property
    def clock(self) -> Clock:
        """The clock this timer reads."""
        return self._clock

    @property
    def executor(self) -> Executor:
        """The executor due tasks are handed to."""
        return self._executor

    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called."""
        return self._closed

    # -- scheduling ------------------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` at its due time, or hand it over now if already due (R1, R3, R10).

        Pre: the timer is open (else ``RuntimeError``); ``task`` is a reference
        ``TimerTask`` (else ``TypeError``). Post: either ``task`` is scheduled here (and
        nowhere else) with due time ``round_down(now + delay_ms)``, or that due time is
        at or before ``current_time`` and the task has been handed to the executor.
        """
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a reference TimerTask, not {type(task).__name__}")
        with _STATE_LOCK:
            if self._closed:
                raise RuntimeError(f"timer {self._name!r} is closed; cannot add {task!r}")
            due = due_time(expiration_ms(self._deadline_base(), task.delay_ms), self._tick_ms)
            old = task._entry
            if old is not None:
                old.timer._pending.pop(old, None)
                task._entry = None
            if not is_due(due, self._current_time):
                entry = _Entry(self, task, due)
                task._entry = entry
                self._pending[entry] = None
                self._condition.notify_all()
                return
        self._hand_over(task)

    def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> bool:
        """Let up to ``timeout_ms`` pass, then hand over every task due (R4-R8, R11).

        On a virtual clock time moves by exactly ``timeout_ms``; on a real clock the
        call returns as soon as a task is due or ``timeout_ms`` has passed (R7). Tasks
        leave the schedule in non-decreasing due order and the current time becomes
        the drain reading rounded down (R2). Returns True iff at least one task was
        handed over. On a closed timer it does nothing and returns False (R14).

        ``max_entries`` (an int >= 1, or None: no bound) bounds the drain (R73): only
        the first ``max_entries`` due tasks in due order leave the schedule; the others
        stay scheduled (``drain_pending``) for the next ``advance_clock``.
        """
        timeout = require_at_least("timeout_ms", timeout_ms, 0)
        limit = None if max_entries is None else require_at_least("max_entries", max_entries, 1)
        with _STATE_LOCK:
            now = self._wait(timeout)
            if now is None:
                return False
            # A bounded drain may have left tasks due by a later reading (R73): drain at
            # the current time at least (without one, nothing scheduled is due by then).
            reading = max(now, self._current_time)
            due_entries = sorted(
                (entry for entry in self._pending if is_due(entry.due, reading)),
                key=lambda entry: entry.due,
            )
            if limit is not None:
                del due_entries[limit:]
            for entry in due_entries:
                del self._pending[entry]
            self._current_time = next_current_time(self._current_time, now, self._tick_ms)
        return self._hand_over_drained(due_entries)

    def wakeup(self) -> None:
        """End a blocked ``advance_clock`` early (it drains at the current reading)."""
        with _STATE_LOCK:
            self._wake_requested = True
            self._condition.notify_all()

    # close, await_termination and the with block stand again in kpurgatory.optimized.timer,
    # deliberately.
    def close(self) -> None:
        """Stop the timer (R14): idempotent; scheduled tasks will never run.

        A blocked ``advance_clock`` returns False. An executor the timer created is shut
        down: it still runs what was already handed over, but ``close`` does not wait for
        that (R39: the caller may hold a lock those tasks need; ``await_termination``
        waits); a caller's executor is left running.
        """
        with _STATE_LOCK:
            if self._closed:
                return
            self._closed = True
            self._condition.notify_all()
        if self._owns_executor:
            self._executor.shutdown(wait=False)

    def await_termination(self, timeout: float | None = None) -> bool:
        """After ``close``, wait up to ``timeout`` seconds (None: no limit) until the
        executor the timer created has run what was handed over and stopped (R39).

        True iff it has; False at once if the timer is not closed, or when called from
        that executor's own thread. A caller's executor is not waited for.
        """
        if not self._closed:
            return False
        return not self._owns_executor or await_termination(self._executor, timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close, then wait for the owned executor (``close`` + ``await_termination``)."""
        self.close()
        self.await_termination()

    def __repr__(self) -> str:
        return (
            f"SystemTimer({self._name!r}, tick_ms={self._tick_ms}, size={self.size}, "
            f"current_time={self._current_time}{', closed' if self._closed else ''})"
        )

    # -- internals -------------------------------------------------------------------

    def _wait(self, timeout: int) -> int | None:
        """Let up to ``timeout`` ms pass through the clock (R7); return the drain reading,
        or None on a closed timer (R14), before or after the wait. Called with
        ``_STATE_LOCK`` held (a real clock's wait releases it)."""
        if self._closed:
            return None
        now = self._clock.wait(self._condition, timeout, self._next_due)
        self._wake_requested = False
        return None if self._closed else now

    def _next_due(self) -> int | None:
        if self._closed or self._wake_requested:
            return _WAKE_NOW
        return min((entry.due for entry in self._pending), default=None)

    def _hand_over_drained(self, due_entries: list[_Entry]) -> bool:
        """Hand over the entries a drain took out of the schedule, in order; return whether
        any was. Each is skipped if it was cancelled or re-added before its turn (R11);
        a close by one of them stops the rest (R64); the other tasks are handed over
        before the first error is raised (R53)."""
        handed_over = False
        errors: list[BaseException] = []
        for entry in due_entries:
            with _STATE_LOCK:
                if self._closed:
                    break  # closed by a task of this drain: nothing more is handed over (R64)
                if entry.task._entry is not entry:
                    continue  # cancelled or re-added before its turn (R11)
                entry.task._entry = None
            try:
                self._hand_over(entry.task)
            except BaseException as exc:  # the other tasks are handed over first (R53)
                errors.append(exc)
            handed_over = True
        raise_collected(errors, f"the drain of timer {self._name!r}")
        return handed_over

    def _hand_over(self, task: TimerTask) -> None:
        """Submit ``task`` to the executor. A refusal is the call's error (R65), unless the
        timer was closed meanwhile: then the task stays unrun, as every task of a closed
        timer (R14)."""
        try:
            self._executor.submit(run_logged, task, logger)
        except BaseException as exc:
            if self._closed and isinstance(exc, RuntimeError):
                return  # the timer was closed meanwhile: the task stays unrun (R14)
            not_handed_over(exc, task)
            raise
