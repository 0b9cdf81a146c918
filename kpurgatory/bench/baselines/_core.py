"""The machinery both baselines share: a ``heapq`` timer of tasks, operations, a purgatory.

``HeapTimerBase`` keeps one binary heap of ``(due, seq, entry)`` tuples per timer, with
*lazy* cancellation: ``cancel`` only marks the entry dead and counts it; dead entries
leave the heap when they reach its head or when a subclass rebuilds the heap. The two
baselines differ only in the hooks: what ``size`` counts, when dead entries are
dropped, and how the purgatory purges (``heap`` and ``old`` modules).

Semantics are the spec's (R1-R15): due time ``floor((now + delay) / tick) * tick``,
current time moved only at the end of ``advance_clock`` (R2), hand-over outside the lock
with the R11 re-check, one process-wide re-entrant lock for every baseline timer and
task (as the reference does), so moving a task between timers is trivially atomic.
``DelayedOperation`` follows R16-R21 like the reference, with the optimized design's costs
(one flag lock, ``__slots__``) so the benchmarks compare timers, not operation objects;
it is written here because the reference operation is a reference ``TimerTask``.
``PurgatoryBase`` is the reference purgatory itself, told to accept the baseline classes.
"""

from __future__ import annotations

import abc
import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, ClassVar

from kpurgatory import sync
from kpurgatory._checks import require_at_least, require_int, require_str
from kpurgatory.clock import MonotonicClock
from kpurgatory.executors import SingleThreadExecutor, await_termination, run_logged
from kpurgatory.reference.purgatory import DelayedOperationPurgatory
from kpurgatory.spec.protocols import AbstractLock, Clock

__all__ = [
    "DelayedOperation",
    "HeapTimerBase",
    "PurgatoryBase",
    "TimerTask",
]

logger = logging.getLogger("kpurgatory.bench.baselines")

_STATE_LOCK = threading.RLock()
"""Guards every baseline timer's heap and every baseline task's entry."""

_SEQUENCE = itertools.count()
"""Tie-breaker for heap items with the same due time: insertion order, never compares entries."""

_WAKE_NOW = -(1 << 62)
"""A due time already passed on any clock: returned by ``next_due`` to end a wait."""


class _Entry:
    """One scheduling of a task in a timer. ``live`` is False once cancelled or drained."""

    __slots__ = ("due", "live", "task", "timer")

    def __init__(self, timer: HeapTimerBase, task: TimerTask, due: int) -> None:
        self.timer = timer
        self.task = task
        self.due = due
        self.live = True


class TimerTask(abc.ABC):
    """A task a baseline timer runs once its delay has passed (same contract as the reference).

    ``cancel`` is O(1): it marks the heap entry dead instead of removing it (asyncio's
    ``TimerHandle.cancel``); the timer counts dead entries to decide when to drop them.
    """

    __slots__ = ("_delay_ms", "_entry")

    def __init__(self, delay_ms: int) -> None:
        self._delay_ms = require_int("delay_ms", delay_ms)
        self._entry: _Entry | None = None

    @property
    def delay_ms(self) -> int:
        """The delay given at construction, in milliseconds."""
        return self._delay_ms

    def cancel(self) -> None:
        """Unschedule the task (R9): idempotent, O(1), the heap slot is reclaimed lazily."""
        with _STATE_LOCK:
            entry = self._entry
            if entry is not None:
                self._entry = None
                if entry.live:
                    entry.live = False
                    entry.timer._dead += 1

    _unschedule = cancel
    """The timer-level cancel, which ``DelayedOperation.cancel`` (abandon, R40) keeps."""

    @abc.abstractmethod
    def run(self) -> None:
        """The work to do when the task is due. Runs on the timer's executor."""


class HeapTimerBase:
    """A timer on a binary heap of tasks (asyncio's ``loop._scheduled``), lazy cancellation.

    Constructor arguments and validation are the reference ``SystemTimer``'s (R15, R35).
    Subclasses choose ``size`` (``_live_size``), whether dead heads are dropped at each
    ``add`` (``_drop_dead_heads``), and what happens before each drain (``_before_drain``).
    Costs: ``add`` O(log n) (n counts dead entries still in the heap), ``cancel`` O(1),
    draining k due tasks O(k log n).
    """

    _drop_dead_heads = True
    """Pop dead entries off the head of the heap at every ``add`` (asyncio does it per loop)."""

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
        if clock is not None and not isinstance(clock, Clock):
            raise TypeError(f"clock must provide now_ms() and wait(), not {type(clock).__name__}")
        if executor is not None and not isinstance(executor, Executor):
            raise TypeError(
                f"executor must be a concurrent.futures.Executor, not {type(executor).__name__}"
            )
        self._clock: Clock = MonotonicClock() if clock is None else clock
        start = self._clock.now_ms() if start_ms is None else require_int("start_ms", start_ms)
        self._current_time = start - start % self._tick_ms
        self._owns_executor = executor is None
        self._executor: Executor = (
            SingleThreadExecutor(f"executor-{self._name}") if executor is None else executor
        )
        self._heap: list[tuple[int, int, _Entry]] = []
        self._dead = 0
        self._condition = threading.Condition(_STATE_LOCK)
        self._wake_requested = False
        self._closed = False

    # -- read-only state -------------------------------------------------------------

    @property
    def size(self) -> int:
        """Scheduled tasks, as this design counts them (see ``_live_size``)."""
        return self._live_size()

    @property
    def next_due_time(self) -> int | None:
        """The least due time of a live entry, or None (R44).

        O(1) amortized where dead heads are dropped (heap: they are popped here, as
        ``add`` does); O(n) otherwise (old keeps its dead entries until a drain).
        """
        with _STATE_LOCK:
            heap = self._heap
            if self._drop_dead_heads:
                self._pop_dead_heads()
                return heap[0][0] if heap else None
            return min((due for due, _, entry in heap if entry.live), default=None)

    @property
    def heap_length(self) -> int:
        """Entries in the heap, dead ones included (what the memory really holds)."""
        return len(self._heap)

    @property
    def tick_ms(self) -> int:
        """The timer's resolution in milliseconds."""
        return self._tick_ms

    @property
    def wheel_size(self) -> int:
        """Accepted for API parity with the wheel; shapes nothing here."""
        return self._wheel_size

    @property
    def current_time(self) -> int:
        """The time against which ``add`` judges "due at once" (R2)."""
        return self._current_time

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
        """Schedule ``task`` (push on the heap) or hand it over now if already due (R1, R3, R10)."""
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a baseline TimerTask, not {type(task).__name__}")
        with _STATE_LOCK:
            if self._closed:
                raise RuntimeError(f"timer {self._name!r} is closed; cannot add {task!r}")
            expiration = self._clock.now_ms() + task._delay_ms
            due = expiration - expiration % self._tick_ms
            old = task._entry
            if old is not None:
                task._entry = None
                if old.live:
                    old.live = False
                    old.timer._dead += 1
            if due > self._current_time:
                heap = self._heap
                if self._drop_dead_heads:  # _pop_dead_heads inlined: add is the measured path
                    while heap and not heap[0][2].live:
                        heapq.heappop(heap)
                        self._dead -= 1
                entry = _Entry(self, task, due)
                task._entry = entry
                item = (due, next(_SEQUENCE), entry)
                heapq.heappush(heap, item)
                if heap[0] is item:  # a new earliest due time: shorten a real-clock wait
                    self._condition.notify_all()
                return
        self._hand_over(task)

    def advance_clock(self, timeout_ms: int) -> bool:
        """Let up to ``timeout_ms`` pass, then hand over every task due (R4-R8, R11)."""
        return self._advance(require_at_least("timeout_ms", timeout_ms, 0), None)

    def _advance(self, timeout: int, limit: int | None) -> bool:
        """``advance_clock``, handing over at most ``limit`` live tasks (None: all due)."""
        with _STATE_LOCK:
            if self._closed:
                return False
            now = self._clock.wait(self._condition, timeout, self._next_due)
            self._wake_requested = False
            if self._closed:
                return False
            self._before_drain()
            heap = self._heap
            drained: list[_Entry] = []
            while heap and heap[0][0] <= now and (limit is None or len(drained) < limit):
                entry = heapq.heappop(heap)[2]
                if entry.live:
                    entry.live = False
                    drained.append(entry)
                else:
                    self._dead -= 1
            current = self._current_time
            floor_now = now - now % self._tick_ms
            self._current_time = floor_now if floor_now > current else current
        handed_over = False
        for entry in drained:
            task = entry.task
            with _STATE_LOCK:
                if task._entry is not entry:
                    continue  # cancelled or re-added before its turn (R11)
                task._entry = None
            self._hand_over(task)
            handed_over = True
        return handed_over

    def wakeup(self) -> None:
        """End a blocked ``advance_clock`` early (it drains at the current reading)."""
        with _STATE_LOCK:
            self._wake_requested = True
            self._condition.notify_all()

    def close(self) -> None:
        """Stop the timer (R14, R39): idempotent; scheduled tasks will never run; an owned
        executor is shut down without waiting for what it was handed."""
        with _STATE_LOCK:
            if self._closed:
                return
            self._closed = True
            self._condition.notify_all()
        if self._owns_executor:
            self._executor.shutdown(wait=False)

    def await_termination(self, timeout: float | None = None) -> bool:
        """After ``close``, wait for the owned executor (R39), as the reference timer."""
        if not self._closed:
            return False
        return not self._owns_executor or await_termination(self._executor, timeout)

    def __enter__(self) -> HeapTimerBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
        self.await_termination()

    def __repr__(self) -> str:
        return (
            f"{type(self).__module__}.SystemTimer({self._name!r}, tick_ms={self._tick_ms}, "
            f"size={self.size}, heap={len(self._heap)}, current_time={self._current_time})"
        )

    # -- hooks and internals -----------------------------------------------------------

    def _live_size(self) -> int:
        """R12: live entries only."""
        return len(self._heap) - self._dead

    def _before_drain(self) -> None:
        """Called under the lock at the start of every drain; default: nothing."""

    def _drop_dead(self) -> int:
        """Rebuild the heap without dead entries (O(n)); return how many were dropped."""
        heap = self._heap
        dropped = self._dead
        heap[:] = [item for item in heap if item[2].live]
        heapq.heapify(heap)
        self._dead = 0
        return dropped

    def _drop_dead_locked(self) -> int:
        """``_drop_dead`` under the state lock, for callers outside a drain."""
        with _STATE_LOCK:
            return self._drop_dead()

    def _next_due(self) -> int | None:
        if self._closed or self._wake_requested:
            return _WAKE_NOW
        if self._drop_dead_heads:
            self._pop_dead_heads()
        heap = self._heap
        return heap[0][0] if heap else None

    def _pop_dead_heads(self) -> None:
        """Pop dead entries off the head of the heap (caller holds the state lock)."""
        heap = self._heap
        while heap and not heap[0][2].live:
            heapq.heappop(heap)
            self._dead -= 1

    def _hand_over(self, task: TimerTask) -> None:
        try:
            self._executor.submit(run_logged, task, logger)
        except RuntimeError:
            logger.error("timer %r could not hand over %r: executor is shut down", self._name, task)


class DelayedOperation(TimerTask):
    """A baseline operation: the reference's contract (R16-R21), flags behind one small lock.

    The three atomic flags (completed, try-complete pending, submitted) share one plain
    ``threading.Lock`` for their compare-and-set; ``lock`` (default ``sync.new_lock()``)
    guards ``try_complete`` and expiry exactly as in the reference, and the private
    protocol the reference purgatory uses (submission claim and rollback, abandon, the
    pending flag on blocking paths: R38, R40, R41) is the reference operation's.
    """

    __slots__ = (
        "_abandoned",
        "_completed",
        "_flags",
        "_lock",
        "_owner",
        "_pending",
        "_submitted",
        "_watch_keys",
    )

    def __init__(self, delay_ms: int, lock: AbstractLock | None = None) -> None:
        super().__init__(delay_ms)
        if lock is not None and not isinstance(lock, AbstractLock):
            raise TypeError(f"lock must provide acquire() and release(), not {type(lock).__name__}")
        self._lock: AbstractLock = sync.new_lock() if lock is None else lock
        self._flags = threading.Lock()
        self._completed = False
        self._pending = False
        self._submitted = False
        self._abandoned = False
        self._owner: Any = None
        self._watch_keys: tuple[object, ...] = ()

    @property
    def lock(self) -> AbstractLock:
        """The lock held around ``try_complete`` and expiry."""
        return self._lock

    @property
    def is_completed(self) -> bool:
        """Whether the operation has completed (early or by expiry); False once abandoned."""
        return self._completed and not self._abandoned

    @property
    def is_abandoned(self) -> bool:
        """Whether the operation was abandoned (R40)."""
        return self._abandoned

    def cancel(self) -> None:
        """Abandon if submitted to a purgatory, else unschedule (R40)."""
        with self._lock:  # a submission claims before it locks: decide under the lock
            owner = self._owner
            if owner is None:
                TimerTask.cancel(self)
                return
        owner.abandon(self)

    def force_complete(self) -> bool:
        """Complete once (R16): set the flag, cancel the timer entry, ``on_complete``."""
        with self._flags:
            if self._completed:
                return False
            self._completed = True
        TimerTask.cancel(self)
        self.on_complete()
        return True

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; if it holds, return ``self.force_complete()``, else False."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """The completion logic; called exactly once, whichever path completes."""

    @abc.abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed by expiring."""

    def run(self) -> None:
        """Expire (R17): holding the lock, ``force_complete``; if that won, ``on_expiration``."""
        with self._lock:
            if self.force_complete():
                self.on_expiration()

    def safe_try_complete(self) -> bool:
        """``try_complete`` under the lock; False at once if already completed (R18, R41)."""
        return self._safe_try_complete_for(None)

    def _safe_try_complete_for(self, owner: object) -> bool:
        while True:
            with self._lock:
                if self._completed or (owner is not None and self._owner is not owner):
                    return False
                self._pending = False
                if self.try_complete():
                    return True
            if not self._pending:
                return False

    def safe_try_complete_or_else(self, f: Callable[[], None]) -> bool:
        """Under the lock: ``try_complete``; if False, ``f()`` and ``try_complete`` again (R19)."""
        with self._lock:
            self._pending = False
            if self.try_complete():
                return True
            f()
            if self.try_complete():
                return True
        return self._pending and self.safe_try_complete()

    def maybe_try_complete(self) -> bool:
        """Kafka 1.1-2.6's non-blocking try-lock loop with the pending flag (R20)."""
        done = False
        while True:
            if self._lock.acquire(blocking=False):
                try:
                    with self._flags:
                        self._pending = False
                    done = self.try_complete()
                finally:
                    self._lock.release()
                retry = self._pending
            else:
                with self._flags:
                    previous = self._pending
                    self._pending = True
                retry = not previous
            if self._completed or not retry:
                return done

    def _is_finished(self) -> bool:
        return self._completed

    def _clear_pending(self) -> None:
        self._pending = False

    def _knocked(self) -> bool:
        return self._pending

    def _claim_submission(self, owner: Any) -> bool:
        """Mark the operation as submitted to ``owner``; False if it already was (R34)."""
        with self._flags:
            if self._submitted:
                return False
            self._submitted = True
        self._owner = owner
        return True

    def _release_submission(self) -> None:
        self._owner = None
        self._watch_keys = ()
        with self._flags:
            self._submitted = False

    def _abandon(self) -> bool:
        with self._flags:
            if self._completed:
                return False
            self._abandoned = True
            self._completed = True
        TimerTask.cancel(self)
        return True

    def __repr__(self) -> str:
        state = "completed" if self._completed else "pending"
        return f"<{type(self).__name__} delay_ms={self._delay_ms} {state}>"


class PurgatoryBase(DelayedOperationPurgatory[Any]):
    """The reference purgatory (R22-R34) on a baseline timer, for baseline operations.

    Every method is the reference's; only the accepted classes differ. A subclass
    names its timer class in ``_timer_type`` and may override the reference's
    ``_purge_if_due`` and ``_reaper_step`` (the ``old`` baseline does).
    """

    # The baseline classes share the reference's API, not its base classes.
    _timer_type: ClassVar[type[HeapTimerBase]] = HeapTimerBase  # type: ignore[assignment]
    _operation_type = DelayedOperation
