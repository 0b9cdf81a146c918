"""The optimized timer: ``TimerTask`` and ``SystemTimer`` on a hierarchical timing wheel.

Rules: R1-R12, R14, R15, R35, R37, R39, R43, R44, R53, R64, R65, R73.

Same API and observable behaviour as ``kpurgatory.reference.timer``; the
schedule is Kafka's structure instead of one flat dict: a ``TimingWheel`` with lazily
created overflow levels, buckets that are circular linked lists, a delay queue of
buckets, and a task counter shared by every bucket. ``add`` and ``cancel`` are O(1)
per wheel level (reference: O(1) dict insert/pop); ``advance_clock`` costs O(log B)
per due bucket plus O(1) per entry drained or cascaded (reference: O(n log n) per call
over every pending task). See docs/algorithm.md.

Locking scheme (Python has no read/write lock, so Kafka's read lock for ``add`` and
write lock for the drain become one exclusive lock):

* One process-wide re-entrant lock, ``_TIMER_LOCK`` (from ``kpurgatory.sync``, an
  ``RLock`` by default), guards every optimized timer's wheel, buckets, delay queue,
  counter and current time, and every task's entry slots (a task is its own
  ``TimerTaskEntry``, see ``kpurgatory.optimized.bucket``). Each timer captures it at
  construction (``self._lock``) and so does each holder of entries (every bucket and
  ``HandOver``: ``holder.lock``). ``add``, ``cancel`` and the whole drain of ``advance_clock`` run
  under it, so an add never sees a half-done drain, and moving a task between two
  timers (unlink in one, link in the other) is one atomic step: a task is linked in at
  most one bucket of one timer, and every ``size`` is exact at every instant (R10,
  R12). A real-clock wait releases it (``Condition.wait``); each timer has its own
  condition, so a notify wakes only that timer's waiter.
* Why not one lock per timer: a task moving between timers would need both timers'
  locks (or a lock per task), i.e. two acquisitions on every ``add``; the schedule
  exploration of tests/concurrency then grows beyond reach, and under the GIL a lock
  per timer buys little. The lock is held for O(levels) per add/cancel and for the
  collect phase of a drain only, never while a task runs.
* Hand-over happens after the lock is released, so a task run by an ``InlineExecutor``
  may call back into any timer (R37). Just before each hand-over the drain reads
  ``task._entry_list is marker`` (``marker``: the drain's own ``HandOver``; one atomic
  read, the hand-over's linearization point) and skips a task cancelled, re-added or
  collected by another drain meanwhile (R11); a cancel after that read is a cancel of a
  task already handed over (R9).
* Lock order (R37): operation lock, then purgatory shard lock, then the timer lock.
  The only user code run under the timer lock is the clock (``now_ms`` in ``add`` and
  ``wait`` in ``advance_clock``), exactly as in the reference.

The current time (R2) is kept separately from the wheel's lowest level, which moves to
each dequeued bucket's expiration during the drain; at the end of the drain the wheel
advances to the drain reading and the timer publishes its current time, so no reader
sees an intermediate value.

A bounded drain (``advance_clock(timeout_ms, max_entries)``, R73) stops once it has
taken ``max_entries`` entries (cascaded or collected), even inside a bucket: that bucket
goes back to the delay queue as its ``unfinished`` one, first for the next drain, and
the wheel stays at the expiration of the last bucket it took; only the published current
time moves to the reading. ``drain_pending`` says so until a later drain catches up.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Final, overload

from kpurgatory import sync
from kpurgatory._checks import (
    abstract_class_error,
    declared,
    refuse_override,
    require_at_least,
    require_clock_and_executor,
    require_int,
    require_str,
    unimplemented,
)
from kpurgatory._sweep import not_handed_over, raise_collected
from kpurgatory._typing import IntArg, StrArg
from kpurgatory.clock import MonotonicClock, deadline_reader
from kpurgatory.executors import SingleThreadExecutor, await_termination, run_logged
from kpurgatory.optimized._mypyc import mypyc_attr
from kpurgatory.optimized.bucket import (
    UNLINKED,
    HandOver,
    TaskCounter,
    TimerTaskEntry,
    TimerTaskList,
)
from kpurgatory.optimized.delay_queue import DelayQueue
from kpurgatory.optimized.wheel import TimingWheel, advanced_time
from kpurgatory.spec.arithmetic import round_down
from kpurgatory.spec.protocols import AbstractLock, Clock

__all__ = ["SystemTimer", "TimerTask"]

logger = logging.getLogger(__name__)

_TIMER_LOCK: AbstractLock = sync.new_lock()
"""Guards every optimized timer's schedule and every optimized task's entry pointer.

A re-entrant lock from ``kpurgatory.sync`` (an ``RLock`` by default), captured by each
timer at construction; controlled-schedule tests may rebind this module attribute to an
instrumented lock before building timers."""


_TASK_TYPES: Final[set[type]] = set()
"""Classes already checked to be ``TimerTask`` subclasses (``add``'s fast type check).

``isinstance`` against an ``ABCMeta`` class runs ``ABCMeta.__instancecheck__``, a Python
frame (about 130 ns, measured); a set lookup of the exact class costs a sixth of that.
Bounded: cleared when it reaches ``_TASK_TYPES_MAX`` classes. ``Final`` (never rebound):
the compiled build reads it from a C static, not from the module's dict on every add."""

_TASK_TYPES_MAX: Final = 256


def _require_task(task: object) -> None:
    """Raise ``TypeError`` unless ``task`` is an optimized ``TimerTask``; remember its class."""
    if not isinstance(task, TimerTask):
        raise TypeError(f"task must be an optimized TimerTask, not {type(task).__name__}")
    if len(_TASK_TYPES) >= _TASK_TYPES_MAX:
        _TASK_TYPES.clear()
    _TASK_TYPES.add(type(task))


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTask(TimerTaskEntry, metaclass=abc.ABCMeta):
    """A task a ``SystemTimer`` runs once its delay has passed (Kafka's ``TimerTask``).

    Reference equivalent: ``kpurgatory.reference.timer.TimerTask`` (same API and rules:
    any int delay, at most one schedule at a time, R9-R11). The task is its own timer
    entry (Kafka allocates a separate ``TimerTaskEntry`` per ``add``): the inherited
    ``_entry_*`` slots hold its current scheduling, guarded by the timer lock. The class
    has ``__slots__``; a subclass that declares ``__slots__`` too has no ``__dict__``.
    """

    __slots__ = ("_delay_ms",)

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Refuse a ``delay_ms`` override (R43); note a subclass left abstract.

        The compiled build has no ``ABCMeta`` check (mypyc classes carry no abstract
        marks), so the classes that leave a method of ``ABSTRACT_METHODS`` unimplemented
        are recorded here and ``__init__`` refuses them as ``abc`` does in the pure
        build. Runs once per subclass, never per task.
        """
        super().__init_subclass__(**kwargs)
        refuse_override(cls, "delay_ms", TimerTask)
        missing = unimplemented(cls, ABSTRACT_METHODS)
        if missing:
            ABSTRACT_CLASSES[cls] = missing

    def __init__(self, delay_ms: IntArg) -> None:
        if type(self) in ABSTRACT_CLASSES:  # one dict lookup: abc's check, in every build
            raise abstract_class_error(type(self), ABSTRACT_CLASSES[type(self)])
        # TimerTaskEntry.__init__ inlined (one call less per task), with UNLINKED links;
        # require_int inlined for the common case (an exact int), the call for the rest.
        self._entry_due = 0
        self._entry_list = None
        self._entry_next = UNLINKED
        self._entry_prev = UNLINKED
        # Declared int: the compiled build stores it unboxed and adds it to the clock
        # reading natively in ``SystemTimer.add`` (as ``object`` it would box both).
        self._delay_ms: int = (
            delay_ms if type(delay_ms) is int else require_int("delay_ms", delay_ms)
        )

    @property
    def delay_ms(self) -> int:
        """The delay given at construction, in milliseconds."""
        return self._delay_ms

    def cancel(self) -> None:
        """Remove the task from its timer's schedule (R9).

        Idempotent; ``size`` drops at once. A run already handed over is not stopped; a
        task that has left the schedule but whose hand-over turn has not come is not
        handed over (R11). O(1): ``holder.remove`` (``TimerTaskList.remove`` or
        ``HandOver.remove``) under the holder's lock. Reference equivalent:
        ``_pending.pop`` under the reference's global lock.
        """
        while True:
            holder = self._entry_list
            if holder is None:
                return
            lock = holder.lock
            lock.acquire()  # acquire/release: half the cost of a ``with`` block on an RLock
            try:
                if self._entry_list is holder:  # else re-added or cancelled meanwhile: re-read
                    holder.remove(self)
                    return
            finally:
                lock.release()

    @abc.abstractmethod
    def run(self) -> None:
        """The work to do when the task is due. Runs on the timer's executor."""
        raise NotImplementedError(f"{type(self).__name__}.run is abstract")


ABSTRACT_METHODS: Final[dict[str, object]] = {"run": declared(TimerTask, "run")}
"""The abstract declarations of ``TimerTask`` and ``DelayedOperation`` by name (the
operation module adds its own), for ``TimerTask.__init_subclass__``."""

ABSTRACT_CLASSES: Final[dict[type, tuple[str, ...]]] = {TimerTask: ("run",)}
"""Task classes that cannot be instantiated, with their unimplemented methods."""


class Drain(HandOver):
    """What one drain of ``advance_clock`` collected, and the holder of those entries.

    ``flush(bucket)`` is one turn of docs/algorithm.md's drain loop: advance the wheel
    to the bucket's expiration and flush the bucket through ``take``, Kafka's
    ``addTimerTaskEntry``: re-add the entry to the wheel (a cascade to a finer level)
    or, if it is due on the lowest wheel, collect it. A collected entry's holder is
    this ``Drain`` (a ``HandOver``) until its hand-over turn (R11). ``limit`` (-1: none)
    bounds the entries taken, cascaded or collected, over all its flushes (R73).

    Reference equivalent: the list the reference drain pops due entries into. Cost:
    one object per drain; O(1) per entry taken.
    """

    __slots__ = ("cascades", "collected", "limit", "wheel")

    def __init__(self, lock: AbstractLock, wheel: TimingWheel, limit: int = -1) -> None:
        super().__init__(lock)
        self.wheel = wheel
        self.collected: list[TimerTaskEntry] = []
        self.cascades = 0
        self.limit = limit

    def flush(self, bucket: TimerTaskList) -> bool:
        """Advance the wheel to ``bucket``'s expiration, then flush it through ``take``
        until the bucket is empty or the limit is spent; return whether it was emptied."""
        expiration = bucket.expiration
        if expiration is None:
            raise AssertionError(f"drain: {bucket!r} was queued without an expiration")
        wheel = self.wheel
        wheel.advance_clock(expiration)
        if wheel.current_time != expiration:  # else a cascade would re-link here forever
            raise AssertionError(f"drain: the wheel is at {wheel.current_time}, not {expiration}")
        left = self.limit
        if left >= 0:
            left -= self.cascades + len(self.collected)
        return bucket.flush(self.take, left)

    def spent(self) -> bool:
        """Whether the limit is spent (never, without one)."""
        return 0 <= self.limit <= self.cascades + len(self.collected)

    def take(self, entry: TimerTaskEntry) -> None:
        """Re-add ``entry`` to the wheel, or collect it if it is due there (R5)."""
        if self.wheel.add(entry):
            self.cascades += 1  # re-linked on a finer level: a cascade
        else:  # due on the lowest wheel: expired_at_level, i.e. due <= current time
            entry._entry_list = self
            self.collected.append(entry)


@mypyc_attr(allow_interpreted_subclasses=True)
class SystemTimer:
    """A hierarchical-timing-wheel timer that hands due tasks to an executor.

    Reference equivalent: ``kpurgatory.reference.timer.SystemTimer``: same constructor,
    properties and methods, same rules (R1-R15). ``tick_ms`` is the resolution and the
    lowest wheel's tick, ``wheel_size`` the buckets per level (default 20: levels of
    20 ms, 400 ms, 8 s, ...). ``start_ms`` sets the initial current time (default: the
    clock's reading). By default the timer reads a ``MonotonicClock`` and runs tasks on
    one worker thread named ``executor-<executor_name>`` (R15).

    Typed signatures: the checked arguments are annotated with the value-restricted type
    variables of ``kpurgatory._typing`` (``StrArg``, ``IntArg``), which a user's checker
    reads as ``str`` and ``int`` and mypyc compiles as ``object``; ``add`` declares
    ``task: TimerTask`` with one ``typing.overload`` over an ``object`` implementation.
    So the body's own checks run in both builds, with messages naming the argument (R35),
    and the compiled code is that of an ``object`` annotation (no cost).
    """

    def __init__(
        self,
        executor_name: StrArg,
        tick_ms: IntArg = 1,
        wheel_size: IntArg = 20,
        start_ms: IntArg | None = None,
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
        self._owns_executor = executor is None
        self._executor: Executor = (
            SingleThreadExecutor(f"executor-{self._name}") if executor is None else executor
        )
        self._lock: AbstractLock = _TIMER_LOCK
        self._counter = TaskCounter()
        self._queue = DelayQueue(self._lock, self._interrupted)
        self._condition = self._queue.condition
        self._next_due = self._queue.next_due  # bound once: the wait of every step passes it
        self._wheel = TimingWheel(
            self._tick_ms, self._wheel_size, start, self._counter, self._queue, self._lock
        )
        self._current_time = round_down(start, self._tick_ms)
        self._wake_requested = False
        self._closed = False
        self._cascades = 0

    # -- read-only state -------------------------------------------------------------

    @property
    def size(self) -> int:
        """Entries linked in buckets on every level: the scheduled tasks (R12). O(1)."""
        return self._counter.value

    @property
    def tick_ms(self) -> int:
        """The timer's resolution in milliseconds (the lowest wheel's tick)."""
        return self._tick_ms

    @property
    def wheel_size(self) -> int:
        """Buckets per wheel level."""
        return self._wheel_size

    @property
    def current_time(self) -> int:
        """The time against which ``add`` judges "due at once" (R2)."""
        return self._current_time

    @property
    def next_due_time(self) -> int | None:
        """The earliest due time of any scheduled task, or None if none is (R44).

        Reference equivalent: ``min`` over the pending dict (O(n)). Here the delay
        queue's ``earliest_due`` under the timer lock: O(1) when the least-expiration
        bucket is a non-empty lowest-level one (the common case), else O(k log k) for
        the k buckets it visits (emptied by cancels, or higher-level ones).
        """
        with self._lock:
            return self._queue.earliest_due()

    @property
    def drain_pending(self) -> bool:
        """Whether a bounded ``advance_clock`` stopped before the end of its drain (R73).

        True while the wheel has not caught up with the current time: a bucket is left
        half flushed, or a due one unflushed. Never True without a ``max_entries``
        (the sync API is unchanged). O(1). Reference equivalent: ``drain_pending``
        (a task due at the current time is still scheduled), which implies this one; this
        one may also be True when only cascades, or buckets emptied by cancels, are left.
        """
        with self._lock:
            return (
                self._queue.unfinished is not None or self._wheel.current_time != self._current_time
            )

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

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the wheel's work counters (extension; the reference has none).

        ``bucket_offers``: buckets offered to the delay queue (each offer: a bucket whose
        expiration changed); ``bucket_polls``: buckets the drains of ``advance_clock``
        took out of it (empty ones included); ``cascades``: entries a drain re-inserted
        into a finer level instead of handing them over. The same three counts as
        ``kpurgatory.pipeline.costs.WheelModel``. Read together under the timer lock, so
        they are consistent with each other; a fresh dict each call. Each count costs one
        integer increment under the lock already held.
        """
        with self._lock:
            queue = self._queue
            return {
                "bucket_offers": queue.offers,
                "bucket_polls": queue.polls,
                "cascades": self._cascades,
            }

    @property
    def levels(self) -> int:
        """Number of wheel levels created so far (overflow wheels are created on demand)."""
        with self._lock:
            return len(self._wheel.levels())

    # -- scheduling ------------------------------------------------------------------

    @overload  # type: ignore[misc]  # callers' signature: see the class docstring
    def add(self, task: TimerTask) -> None: ...

    def add(self, task: object) -> None:
        """Schedule ``task`` at its due time, or hand it over now if already due (R1, R3, R10).

        Pre: the timer is open (else ``RuntimeError``); ``task`` is an optimized
        ``TimerTask`` (else ``TypeError``). Post: either ``task`` is linked in exactly
        one bucket of this timer with due time ``round_down(now + delay_ms)``, or that
        due time is at or before ``current_time`` and the task was handed over. An
        earlier schedule, in this timer or another, is unlinked first. Cost: O(1) per
        wheel level visited, plus O(log B) when a bucket is newly queued. Reference
        equivalent: ``SystemTimer.add`` (a dict insert).
        """
        if type(task) not in _TASK_TYPES:
            _require_task(task)  # TypeError naming ``task``, or remembers its class
        checked: TimerTask = task  # type: ignore[assignment]  # checked just above
        lock = self._lock
        lock.acquire()  # acquire/release: half the cost of a ``with`` block on an RLock
        try:
            if self._closed:
                raise RuntimeError(f"timer {self._name!r} is closed; cannot add {checked!r}")
            # Inlined spec arithmetic (one interpreted call less each in the mypyc build):
            # the definitions of expiration_ms(now, delay) and due_time(expiration, tick).
            expiration = self._deadline_base() + checked._delay_ms  # expiration_ms(now, delay)
            due = expiration - expiration % self._tick_ms  # due_time: round_down(exp, tick)
            old = checked._entry_list
            if old is not None:
                if old.lock is lock:
                    old.remove(checked)
                else:  # a timer built under another lock (tests that rebind it)
                    with old.lock:
                        old.remove(checked)
            if due > self._current_time:  # not is_due(due, current_time): R3
                checked._entry_due = due
                self._wheel.add(checked)  # True: due > current_time is not expired (R3)
                queue = self._queue
                if queue.waiters:  # note_scheduled only matters to a waiting drain
                    queue.note_scheduled(due)
                return
        finally:
            lock.release()
        error = self._hand_over(checked)
        if error is not None:
            raise error

    def advance_clock(self, timeout_ms: IntArg, max_entries: IntArg | None = None) -> bool:
        """Let up to ``timeout_ms`` pass, then hand over every task due (R4-R8, R11).

        Under the timer lock: wait through the clock (R7, ``_wait``), then drain at the
        reading ``now`` (``_drain``, the pseudocode of docs/algorithm.md). Without the
        lock: hand each collected task over unless it was cancelled or re-added
        meanwhile (R11). Returns True iff a task was handed over (R8); False at once on a
        closed timer (R14). Cost: O(log B) per due bucket plus O(1) per entry drained or
        cascaded. Reference equivalent: scan, sort and pop every due entry.

        ``max_entries`` (an int >= 1, or None: no bound) bounds the drain (R73): it takes
        at most that many entries, cascaded or collected, and may stop inside a bucket;
        ``drain_pending`` then reads True and the next ``advance_clock`` goes on first
        with what this one left, in due order (R6).
        """
        timeout = (
            timeout_ms
            if type(timeout_ms) is int and timeout_ms >= 0
            else require_at_least("timeout_ms", timeout_ms, 0)
        )
        limit = -1 if max_entries is None else require_at_least("max_entries", max_entries, 1)
        lock = self._lock
        lock.acquire()  # acquire/release: half the cost of a ``with`` block on an RLock
        try:
            if self._closed:
                return False
            now = self._wait(timeout)
            if self._closed:
                return False
            drain = self._drain(now, limit)
        finally:
            lock.release()
        return drain is not None and self._hand_over_collected(drain)

    def _wait(self, timeout: int) -> int:
        """Let up to ``timeout`` ms pass through the clock (R7); return the drain reading.

        Counted in the delay queue's ``waiters`` (what ``add``'s ``note_scheduled``
        reads) while the clock waits. Called with the timer lock held; a real clock's
        wait releases it.
        """
        queue = self._queue
        queue.waiters += 1
        try:
            now = self._clock.wait(self._condition, timeout, self._next_due)
        finally:
            queue.waiters -= 1
            if not queue.waiters:
                queue.target = None
        self._wake_requested = False
        return now

    def _drain(self, now: int, limit: int = -1) -> Drain | None:
        """Take every due task out of the schedule at reading ``now``; under the timer lock.

        docs/algorithm.md's drain: each bucket whose expiration is at or before ``now``
        leaves the delay queue in expiration order, the wheel advances to its expiration
        and the bucket is flushed into the ``Drain`` (each entry cascades to a finer
        level or is collected); then the wheel, and with it the current time, advance
        to ``now`` (R2). Buckets leave in expiration order and a collected entry's due
        time is its bucket's expiration, so the collected list is in non-decreasing due
        order (R6). Returns the ``Drain``, or None if no bucket was due. Cost: O(log B)
        per due bucket plus O(1) per entry.

        With ``limit`` >= 0 (R73) the drain stops once it has taken ``limit`` entries: a
        bucket it stopped inside is put back as the queue's unfinished one, and while
        anything is left due the wheel stays at the last bucket's expiration (advancing it
        past a bucket still to flush would cascade that bucket's entries against a later
        time); only the published current time moves to the reading (R2). The next drain
        polls the unfinished bucket first, so the order of R6 holds across the pieces.
        """
        if now < self._current_time:  # no earlier than a reading a bounded drain stopped at
            now = self._current_time
        queue, wheel = self._queue, self._wheel
        drain: Drain | None = None  # none allocated while nothing is due (most steps)
        bucket = queue.poll(now)
        while bucket is not None:
            if drain is None:
                drain = Drain(self._lock, wheel, limit)
            if not drain.flush(bucket):  # stopped inside it: it is the first next time
                queue.put_back(bucket)
                break
            if drain.spent():
                break
            bucket = queue.poll(now)
        if drain is not None:
            self._cascades += drain.cascades
        if bucket is not None and queue.has_due(now):  # stopped early (R73): the wheel
            # stays at its last bucket (a loop that ran out of due buckets ends on None)
            self._current_time = advanced_time(self._current_time, now, self._tick_ms)
            return drain
        wheel.advance_clock(now)
        self._current_time = wheel.current_time
        return drain

    def _hand_over_collected(self, drain: Drain) -> bool:
        """Hand over each task ``drain`` collected that is still its own (R11), in order.

        Runs without the timer lock. A task cancelled, re-added or collected by another
        drain since is skipped. What ``submit`` raises is collected and raised once all
        were handed over (R53). Returns True iff a task was handed over (R8).
        """
        handed_over = False
        errors: list[BaseException] | None = None
        # The entries point at the drain (their R11 marker); a drain still holding the
        # list of them would make a reference cycle, freed only by the cyclic collector
        # (measured: twice the collector's work on the lifecycle benchmark). Taken out.
        collected = drain.collected
        drain.collected = []
        for entry in collected:
            if self._closed:
                break  # closed by a task of this drain: nothing more is handed over (R64)
            if entry._entry_list is not drain:
                continue  # cancelled, re-added or collected again before its turn (R11)
            task: TimerTask = entry  # type: ignore[assignment]  # only a root is a bare entry
            error = self._hand_over(task)
            if error is not None:  # the other tasks are handed over first (R53)
                if errors is None:
                    errors = []
                errors.append(error)
            handed_over = True
        if errors is not None:
            raise_collected(errors, f"the drain of timer {self._name!r}")
        return handed_over

    def wakeup(self) -> None:
        """End a blocked ``advance_clock`` early (it drains at the current reading)."""
        with self._lock:
            self._wake_requested = True
            self._queue.wake_all()

    # close, await_termination and the with block (__enter__, __exit__) repeat the reference
    # timer's on purpose (one API; close wakes its waiter through the delay queue): the
    # optimized package imports nothing from the reference, and a mypyc class cannot derive
    # from a pure-Python one.

    def close(self) -> None:
        """Stop the timer (R14): idempotent; scheduled tasks will never run.

        A blocked ``advance_clock`` returns False. An executor the timer created is shut
        down: it still runs what was already handed over, but ``close`` does not wait for
        that (R39: the caller may hold a lock those tasks need; ``await_termination``
        waits); a caller's executor is left running.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.wake_all()
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

    def __enter__(self) -> SystemTimer:
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

    # -- invariants ------------------------------------------------------------------

    def _check(self) -> None:
        """Assert the timer's representation invariants (``AssertionError`` with a message).

        The wheel's (``TimingWheel._check``: ranges, overflow ticks and current times,
        shared counter/queue/lock, bucket placement, every non-empty bucket queued,
        counter == linked entries), the delay queue's (heap, no duplicates, keys ==
        expirations, waiter bookkeeping), only this timer's buckets queued, the current
        time equals the lowest wheel's and is a multiple of the tick, and the class
        cache of ``add`` holds only ``TimerTask`` subclasses. Unless a bounded drain
        stopped with work due (R73), every linked entry is due strictly after the
        current time; that follows from the wheel's check: a queued
        bucket's expiration lies above its level's current time, which is the lowest
        wheel's rounded down to that level's tick, so (being a multiple of that tick) it
        lies above the lowest wheel's current time too, and entries are due at or after
        their bucket's expiration. ``add``'s fast path (no waiter: skip
        ``note_scheduled``) and ``advance_clock``'s (head of the heap not due: nothing
        to drain) read exactly what these invariants pin down.
        """
        with self._lock:
            wheel = self._wheel
            self._check_pending_drain()
            if self._current_time % self._tick_ms != 0:
                raise AssertionError(f"current time {self._current_time} not a tick multiple")
            self._queue._check()
            queued = {id(bucket) for bucket in self._queue.buckets()}
            own = {id(bucket) for level in wheel.levels() for bucket in level.buckets}
            unfinished = self._queue.unfinished
            if unfinished is not None:
                queued.add(id(unfinished))  # for the subset test only
            if not queued <= own:
                raise AssertionError("the delay queue holds a bucket of another timer")
            queued.discard(id(unfinished))
            wheel._check(queued, unfinished, self._queue.has_due(self._current_time))
            strangers = [cls for cls in list(_TASK_TYPES) if not issubclass(cls, TimerTask)]
            if strangers:
                raise AssertionError(f"the task class cache holds non-tasks {strangers}")

    def _check_pending_drain(self) -> None:
        """``_check`` of the current time against the wheel's (R2, R73).

        They are equal unless a bounded drain stopped before its end; then the wheel
        lags (or stands at an unfinished bucket's expiration) and work is due at the
        current time: the unfinished bucket, whose expiration is the wheel's time, or a
        queued bucket expiring by the current time."""
        wheel, queue = self._wheel, self._queue
        current, unfinished = self._current_time, queue.unfinished
        if wheel.current_time > current:
            raise AssertionError(f"wheel time {wheel.current_time} > current time {current}")
        if unfinished is not None and unfinished.expiration != wheel.current_time:
            raise AssertionError(
                f"unfinished {unfinished!r} expires at {unfinished.expiration}, not at the "
                f"wheel's time {wheel.current_time}"
            )
        if wheel.current_time != current and not queue.has_due(current):
            raise AssertionError(
                f"current time {current} != wheel time {wheel.current_time} with nothing due"
            )

    # -- internals -------------------------------------------------------------------

    def _interrupted(self) -> bool:
        return self._closed or self._wake_requested

    def _hand_over(self, task: TimerTask) -> BaseException | None:
        """Submit ``task`` to the executor; return what ``submit`` raised, with a note
        (``not_handed_over``), or None. A refusal is the call's error unless the timer was
        closed meanwhile (R65): then the task stays unrun, as every task of a closed
        timer (R14). Reference equivalent: ``SystemTimer._hand_over`` (which raises)."""
        try:
            self._executor.submit(run_logged, task, logger)
        except BaseException as exc:
            if self._closed and isinstance(exc, RuntimeError):
                return None
            return not_handed_over(exc, task)
        return None
