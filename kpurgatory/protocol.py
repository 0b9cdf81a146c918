"""The purgatory protocol, written once: what both ``DelayedOperationPurgatory`` classes do.

``Purgatory`` holds R22's submission with its undo log, the sweep, ``cancel_for_key``,
``abandon``, the reaper step, ``shutdown`` and the purge and let-go (R30, R61), and the
counters and latch they share. A subclass is the watcher store: it keeps which
operations wait on which key, behind the six methods of "the store" below. The
reference's store is a dict of lists under one lock; the optimized one shards lists by
key hash and keeps purge candidates. The protocol imports neither implementation.

Rules: R21-R26, R28-R34, R36, R38-R41, R53-R56, R61, R64, R66-R68, R73, R75.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from typing import Any, Final, Generic, Protocol, Self, TypeVar

from kpurgatory._checks import require_at_least
from kpurgatory._lifecycle import REAPER_STEP_MS, await_purgatory_termination, run_reaper
from kpurgatory._mypyc import mypyc_attr, trait
from kpurgatory._sweep import raise_collected
from kpurgatory._typing import IntArg
from kpurgatory.spec.protocols import AbstractLock

__all__ = [
    "ABANDONED",
    "COMPLETED",
    "FINISHED",
    "NEW",
    "SUBMITTED",
    "Purgatory",
    "Watchable",
    "WatchableBase",
]

logger = logging.getLogger(__name__)


# R68's lifecycle, one int field ``_state`` of each operation, changed only under its
# ``_flags`` lock and read without it: new (0), submitted (SUBMITTED), completed
# (COMPLETED, with SUBMITTED if it was), abandoned (ABANDONED | SUBMITTED). Finished, a
# final state, is ``_state >= FINISHED``.
NEW: Final = 0
SUBMITTED: Final = 1
COMPLETED: Final = 2
ABANDONED: Final = 4
FINISHED: Final = 2


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Watchable:
    """What the protocol reads and calls on an operation. The optimized operation
    inherits it; the reference operation through ``WatchableBase``. A mypyc trait: in
    the compiled build the protocol reads these fields and calls these methods natively
    (why: docs/algorithm.md, "One protocol, two builds"); pure Python ignores the
    decorator. ``_watch_keys`` is ``()`` until the submission gives it its keys."""

    # No __dict__ for the operations that inherit it. Its subclasses hold the fields it
    # declares: mypy, seeing no slot for them here, is told so where its methods set them.
    __slots__ = ()

    _lock: AbstractLock  # its lock (R21)
    _flags: AbstractLock  # guards the changes of _state (and the optimized pending flag)
    _state: int  # R68: NEW, SUBMITTED, COMPLETED, ABANDONED bits (under its flag lock)
    _counted: bool  # counted as unfinished (R61), under the counters lock
    _untimed: bool  # cancel_for_key took its timer entry: never timed again (R66)
    _watch_keys: tuple[Hashable, ...]
    _owner: Any  # the purgatory it was submitted to, or None
    # R41's flag, read for its truth: true while a maybe_try_complete that found the
    # lock held waits for the holder's attempt (the reference's is an AtomicFlag).
    _try_complete_pending: object

    def try_complete(self) -> bool:
        raise NotImplementedError

    def _clear_pending(self) -> None:
        raise NotImplementedError

    def _safe_try_complete_for(self, owner: object) -> bool:
        raise NotImplementedError

    def _claim_submission(self, owner: Any) -> bool:
        """Mark the operation as submitted to ``owner``; False if it already was (R34)."""
        with self._flags:  # compare-and-set of the submitted bit
            claimed = not self._state & SUBMITTED
            self._state |= SUBMITTED  # type: ignore[misc]
        if claimed:
            self._owner = owner
        return claimed

    def _release_submission(self, unchanged: bool = False) -> None:
        """Undo ``_claim_submission`` after a failed submission (R38). One that finished
        meanwhile (a lock-free ``force_complete``, even from a callback of the rollback
        itself) stays completed and submitted, unless ``unchanged``: the submission's
        lock failed, before anything else, so even a finished one is released (R54)."""
        with self._flags:  # compare-and-set: only an unfinished operation is released
            if self._state >= FINISHED and not unchanged:
                return
            self._owner = None
            self._watch_keys = ()  # type: ignore[misc]
            self._untimed = False  # type: ignore[misc]
            self._state &= ~SUBMITTED  # type: ignore[misc]

    def _abandon(self) -> bool:
        raise NotImplementedError

    def _unschedule(self) -> None:
        raise NotImplementedError


@mypyc_attr(allow_interpreted_subclasses=True)
class WatchableBase(Watchable):
    """``Watchable`` as a class for an operation class that is not compiled (the
    reference's: an interpreted class cannot inherit a trait). In the compiled build its
    fields are native, so the protocol reads either operation the same way."""

    __slots__ = ()


class _Timer(Protocol):
    """What the protocol calls on either ``SystemTimer``."""

    @property
    def size(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def add(self, task: Any) -> None: ...

    def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> bool: ...

    def wakeup(self) -> None: ...

    def close(self) -> None: ...

    def await_termination(self, timeout: float | None = None) -> bool: ...


T = TypeVar("T", bound=Watchable)
"""The operations a purgatory holds."""

H = TypeVar("H")
"""The store's handle on one key's watcher list (what ``_snapshot`` returns with it)."""


# The undo log (R38): the steps a submission took, in a list unwound newest first.
# A step is one of these ints; a watch's key and the estimate's reset count are logged
# just before their step, so unwinding pops the step, then its argument (no tuple per
# step: in the compiled build a tuple is an allocation, an int here is not).
_CLAIM: Final = 0
_COUNT: Final = 1
_WATCH: Final = 2
_ESTIMATE: Final = 3
_TIMER: Final = 4


def _resubmitted(operation: object) -> ValueError:
    """R34's refusal of an operation submitted before."""
    return ValueError(f"operation {operation!r} was already passed to try_complete_else_watch")


@mypyc_attr(allow_interpreted_subclasses=True)
class Purgatory(Generic[T, H]):
    """The purgatory protocol over a watcher store (the subclass).

    The store's methods, each called with no lock of the protocol's held:
    ``_watch_key(key, op)`` appends a watch; ``_unwatch_key(key, op)`` unlinks one if
    there; ``_snapshot(key)`` returns ``(handle, operations)`` in watch order or None
    for an unknown key, and ``_unlink(handle, op)`` unlinks from that very list (R26);
    ``_take_key(key)`` removes the key and returns its operations (R29);
    ``_purge_pass()`` unlinks finished operations and returns how many (R30, R61, R67).
    The key methods raise ``TypeError`` naming ``key`` if it is unhashable (R36).
    ``_note_completed(op)`` hears of an operation that finished while being watched.

    Locks: an operation's lock, then the store's locks, then ``_counters_lock``
    (the estimate, R30; the unfinished count, R61; ``num_purged``; ``num_completed``),
    never the other way; ``_shutdown_lock`` guards the latch (R32, R39). The reference
    passes its one lock for all three.
    """

    def __init__(
        self,
        name: str,
        timer: _Timer,
        broker_id: int,
        purge_interval: int,
        reaper_enabled: bool,
        timer_enabled: bool,
        counters_lock: AbstractLock,
        shutdown_lock: AbstractLock,
        shutdown_finished: threading.Condition,
    ) -> None:
        """Arguments already checked by the subclass; its store is set up already."""
        self._name = name
        self._timer = timer
        self._broker_id = broker_id
        self._purge_interval = purge_interval
        self._reaper_enabled = reaper_enabled
        self._timer_enabled = timer_enabled
        self._counters_lock = counters_lock
        self._estimated_total_operations = 0
        self._estimate_resets = 0  # purges and let-gos that set the estimate (R30)
        self._unfinished = 0  # reached the watching step, not finished (R61)
        self._purge_when_idle = True  # R61 (False: Kafka's lazy purge only)
        self._num_purged = 0
        self._num_completed = 0
        self._shutdown_lock = shutdown_lock
        self._shutdown_finished = shutdown_finished
        self._is_shut_down = False
        self._shutdown_done = False
        self._stop_reaper = threading.Event()
        self._reaper: threading.Thread | None = None
        if reaper_enabled:
            self._reaper = threading.Thread(
                target=self._reap, name=f"ExpirationReaper-{broker_id}-{name}", daemon=True
            )
            self._reaper.start()

    # -- read-only state -------------------------------------------------------------

    @property
    def purgatory_name(self) -> str:
        """The name given at construction."""
        return self._name

    @property
    def num_delayed(self) -> int:
        """Tasks scheduled in the timer: the pending operations (R28). O(1)."""
        return self._timer.size

    @property
    def estimated_total_operations(self) -> int:
        """The purge estimate: operations watched since the last purge, plus the timer size then."""
        with self._counters_lock:
            return self._estimated_total_operations

    @property
    def num_purged(self) -> int:
        """Completed operations removed from watcher lists by purges so far (R30)."""
        with self._counters_lock:
            return self._num_purged

    @property
    def num_completed(self) -> int:
        """Operations completed by this purgatory's own calls (a True from
        ``try_complete_else_watch``, or counted by ``check_and_complete``)."""
        with self._counters_lock:
            return self._num_completed

    # -- the store (the subclass) ----------------------------------------------------

    def _watch_key(self, key: Hashable, operation: T) -> None:
        raise NotImplementedError

    def _unwatch_key(self, key: Hashable, operation: T) -> None:
        raise NotImplementedError

    def _snapshot(self, key: Hashable) -> tuple[H, list[T]] | None:
        raise NotImplementedError

    def _unlink(self, handle: H, operation: T) -> None:
        raise NotImplementedError

    def _take_key(self, key: Hashable) -> list[T]:
        raise NotImplementedError

    def _purge_pass(self) -> int:
        raise NotImplementedError

    def _note_completed(self, operation: T) -> None:
        """An operation finished while its submission watched it (the optimized store
        records a purge candidate); nothing by default."""

    # -- submission (R22) ------------------------------------------------------------

    def _submit(self, operation: T, keys: tuple[Hashable, ...], claimed: bool = False) -> bool:
        """``try_complete_else_watch`` after its argument checks: refuse after shutdown and
        claim the operation (R34) unless the caller did (``claimed``: the Kafka model, by
        Kafka's rules); then R22 under its lock, each step logging its undo (R38): try;
        watch (``_watch``); try again; time it. Then the attempt a knock left to the
        submission (R41), still part of it (R54). Counts a completion (R23)."""
        if not claimed:
            if self._is_shut_down:
                raise RuntimeError(f"purgatory {self._name!r} is shut down")
            if not operation._claim_submission(self):
                raise _resubmitted(operation)
        undo: list[Any] = [_CLAIM]  # the claim is undone last
        lock = operation._lock
        try:
            lock.acquire()
        except BaseException:  # the lock failed before anything changed: no claim (R54)
            operation._release_submission(unchanged=True)
            raise
        try:
            if operation._state & ABANDONED:  # abandoned between the claim and the lock (R40)
                return False
            if operation._try_complete_pending:  # clear it (R41); False needs no lock
                operation._clear_pending()
            completed = operation.try_complete()
            if not completed:
                self._watch(operation, keys, undo)
                completed = operation.try_complete()
                if not completed:
                    self._time(operation, undo)
        except BaseException as exc:
            self._rolled_back(operation, exc, undo)
            raise
        finally:
            lock.release()
        if not completed and operation._try_complete_pending:  # a knock found the lock held
            completed = self._retry(operation, undo)  # ours to try
        if completed:
            with self._counters_lock:
                self._num_completed += 1
        return completed

    def _retry(self, operation: T, undo: list[Any]) -> bool:
        """The attempt a knock left to the submission (R41): ``safe_try_complete``; an
        operation still unfinished after a shutdown meanwhile is refused (R64). A raise
        rolls the submission back (R54)."""
        try:
            if operation._safe_try_complete_for(self):
                return True
            if operation._state < FINISHED and self._is_shut_down:
                self._refuse_if_shut_down()
            return False
        except BaseException as exc:
            with operation._lock:
                self._rolled_back(operation, exc, undo)
            raise

    def _rolled_back(self, operation: T, exc: BaseException, undo: list[Any]) -> None:
        """A step raised ``exc``; the operation's lock is held. Unwind ``undo`` unless the
        operation finished (its ``on_complete`` ran: it stays completed and submitted,
        R38) or is no longer submitted here. A refusal caused by a shutdown meanwhile
        says so (R64)."""
        if operation._state < FINISHED and operation._owner is self:
            while undo:
                self._undo(undo.pop(), undo, operation)
        if isinstance(exc, RuntimeError) and self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down") from exc

    def _undo(self, step: int, undo: list[Any], operation: T) -> None:
        """Revert one step of a submission (R38), popping its argument from ``undo``."""
        if step == _TIMER:
            operation._unschedule()
        elif step == _ESTIMATE:  # only if no purge or let-go set the estimate since (R30)
            resets = undo.pop()
            with self._counters_lock:
                if self._estimate_resets == resets:
                    self._estimated_total_operations -= 1
        elif step == _WATCH:
            self._unwatch_key(undo.pop(), operation)
        elif step == _COUNT:
            self._left_watching(operation)
        else:
            operation._release_submission()

    def _watch(self, operation: T, keys: tuple[Hashable, ...], undo: list[Any]) -> None:
        """Count the operation as unfinished if it is (R61), give it its keys (a
        ``force_complete`` reads them to know it is watched), watch it on each key in
        order while it is unfinished (R24, KAFKA-18027), then count it once in the purge
        estimate (R30), logging each step's undo."""
        counted = operation._state < FINISHED
        if counted:
            with self._counters_lock:  # before its keys are set: a finish sees it
                self._unfinished += 1
                operation._counted = True
            undo.append(_COUNT)
        operation._watch_keys = keys
        if counted and operation._state >= FINISHED:  # finished while being counted: nobody
            self._left_watching(operation)  # else saw it
        watched = False
        for key in keys:
            if operation._state >= FINISHED:
                break
            self._watch_key(key, operation)
            undo.append(key)
            undo.append(_WATCH)
            watched = True
        if watched and operation._state >= FINISHED:  # finished meanwhile by a lock-free
            self._note_completed(operation)  # caller, maybe before its last watch: its
            self._let_go_if_idle()  # finisher's let-go (R61) may have missed a watch
        with self._counters_lock:
            self._estimated_total_operations += 1
            resets = self._estimate_resets
        undo.append(resets)
        undo.append(_ESTIMATE)

    def _time(self, operation: T, undo: list[Any]) -> None:
        """Add the operation to the timer unless it finished, timers are off (R33), or a
        ``cancel_for_key`` made from its own callback took it out already (R66)."""
        if operation._state >= FINISHED:
            return
        if self._timer_enabled and not operation._untimed:
            undo.append(_TIMER)
            self._timer.add(operation)
            if operation._state >= FINISHED:  # completed meanwhile (lock-free, or run inline)
                operation._unschedule()
                return
        if self._is_shut_down:  # by its own callback, or the add's hand-over (R64)
            self._refuse_if_shut_down()

    def _refuse_if_shut_down(self) -> None:
        if self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")

    # -- finishing and letting go (R61) ----------------------------------------------

    def _left_watching(self, operation: T) -> None:
        """``operation`` no longer counts as unfinished, if it did (its winning
        ``force_complete``, an abandon, a rollback, a submission that finds it finished:
        its flag, under the counters lock, makes them agree on who uncounts it). At none
        left, unlink every finished operation at once (R61)."""
        with self._counters_lock:
            if not operation._counted:
                return
            operation._counted = False
            self._unfinished -= 1
            if not self._idle():
                return
        self._let_go()

    def _let_go_if_idle(self) -> None:
        """R61 for a submission whose operation finished while it was being watched: its
        finisher's let-go may have run before the last watch; with none unfinished, let go."""
        with self._counters_lock:
            if not self._idle():
                return
        self._let_go()

    def _idle(self) -> bool:
        """Counters lock held: if no operation is unfinished (and R61 is on), reset the
        estimate as a purge does (R30) and return True: the caller lets go."""
        if self._unfinished or not self._purge_when_idle:
            return False
        self._estimated_total_operations = self._timer.size
        self._estimate_resets += 1
        return True

    def _let_go(self) -> None:
        """Unlink every finished operation (R61), as a purge pass."""
        purged = self._purge_pass()
        if purged:
            with self._counters_lock:
                self._num_purged += purged

    def _purge_if_due(self) -> None:
        """R30: when the estimate exceeds the timer's size by more than
        ``purge_interval``, reset it to that size and unlink every finished operation."""
        with self._counters_lock:
            delayed = self._timer.size
            if self._estimated_total_operations - delayed <= self._purge_interval:
                return
            self._estimated_total_operations = delayed
            self._estimate_resets += 1
        purged = self._purge_pass()
        if purged:
            with self._counters_lock:
                self._num_purged += purged
            logger.debug("purgatory %r purged %d completed operations", self._name, purged)

    # -- sweeps ----------------------------------------------------------------------

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched on ``key``; return how many this call completed.

        Operations are tried in the order they were watched, on a snapshot of the key's
        list (R75), each under its own lock (``safe_try_complete``), with no purgatory
        lock held. Operations found already completed are unlinked but not counted
        (R25). A key left with no operation is dropped (R26); an unknown key is not
        created. ``TypeError`` if unhashable. Errors are raised after the sweep (R53).
        """
        taken = self._snapshot(key)
        if taken is None:
            return 0
        handle, snapshot = taken
        completed = 0
        errors: list[BaseException] | None = None
        for operation in snapshot:
            try:
                if operation._state >= FINISHED:
                    self._unlink(handle, operation)
                elif operation._safe_try_complete_for(self):
                    completed += 1
                    self._unlink(handle, operation)
            except BaseException as exc:  # the other operations are tried first (R53)
                if errors is None:
                    errors = []
                errors.append(exc)
                if operation._state >= FINISHED:  # its on_complete raised: unlinked as completed
                    self._unlink(handle, operation)
        if completed:
            with self._counters_lock:
                self._num_completed += completed
        if errors is not None:  # no message built unless something raised
            raise_collected(errors, f"check_and_complete({key!r})")
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: cancel each operation's timer entry and return them (R29).

        The operations are neither completed nor expired; they stay on their other keys.
        The list is in watch order and includes operations already completed. Each timer
        entry is cancelled under the operation's lock, so a submission still under way
        has added its entry before it is cancelled (R29, R22); one that has not yet adds
        none (R66). A knock that found the lock held gets its attempt (R55).
        """
        operations = self._take_key(key)
        errors: list[BaseException] | None = None
        for operation in operations:
            try:
                with operation._lock:
                    operation._unschedule()
                    operation._untimed = True  # its submission, if under way, adds none (R66)
                # A maybe_try_complete that found the lock held left its attempt here (R55).
                if operation._try_complete_pending and operation._state < FINISHED:
                    operation._safe_try_complete_for(self)
            except BaseException as exc:  # the other operations are handled first (R53)
                if errors is None:
                    errors = []
                errors.append(exc)
        if errors is not None:
            raise_collected(errors, f"cancel_for_key({key!r})")
        return operations

    def _abandon_submitted(self, operation: T) -> bool:
        """``abandon`` after its argument checks (``cancel`` calls it, R56): holding the
        operation's lock, mark it abandoned, unlink it from each of its keys and uncount
        it (R40, R61). False if it is finished or, by then, not submitted here."""
        with operation._lock:
            if operation._owner is not self or not operation._abandon():
                return False
            for key in operation._watch_keys:
                self._unwatch_key(key, operation)
            self._left_watching(operation)  # uncounts it if it was counted (R61)
        return True

    # -- the clock, the reaper and shutdown ------------------------------------------

    def advance_clock(self, timeout_ms: IntArg, max_entries: IntArg | None = None) -> None:
        """One reaper step: ``timer.advance_clock(timeout_ms)``, then purge if due (R30).

        ``max_entries``: a bounded drain (R73), ``timer.advance_clock(timeout_ms,
        max_entries)``; the timer's ``drain_pending`` says whether it left work due.

        ``RuntimeError`` after ``shutdown``.
        """
        if max_entries is not None:
            require_at_least("max_entries", max_entries, 1)
        require_at_least("timeout_ms", timeout_ms, 0)
        if self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if max_entries is None:
            self._timer.advance_clock(timeout_ms)
        else:
            self._timer.advance_clock(timeout_ms, max_entries)
        self._purge_if_due()

    def _reap(self) -> None:
        run_reaper(self._stop_reaper, self._timer, self._reaper_step, self._name, logger)

    def _reaper_step(self) -> None:
        """One iteration of the reaper loop (R31): wait up to 200 ms for due tasks, then purge."""
        self._timer.advance_clock(REAPER_STEP_MS)
        self._purge_if_due()

    def shutdown(self) -> None:
        """Refuse new calls, stop the reaper and close the timer (R32, R39): idempotent.

        Returns once the purgatory is shut down: later ``try_complete_else_watch`` and
        ``advance_clock`` raise ``RuntimeError``, the timer hands nothing more over, and
        the reaper starts no further step. A concurrent caller returns only then too. It
        does not wait for a task already handed over (an expiry running on the executor
        or the reaper), which may need a lock the caller holds; ``await_termination``
        waits for that. Pending operations are neither completed nor expired.
        """
        with self._shutdown_lock:
            if self._is_shut_down:
                while not self._shutdown_done:
                    self._shutdown_finished.wait()
                return
            self._is_shut_down = True
        try:
            self._stop_reaper.set()
            self._timer.wakeup()
            self._timer.close()
        finally:
            with self._shutdown_lock:
                self._shutdown_done = True
                self._shutdown_finished.notify_all()

    def await_termination(self, timeout: float | None = None) -> bool:
        """After ``shutdown``, wait up to ``timeout`` seconds (None: no limit) for the
        reaper thread to exit and the timer's own executor to finish (R39).

        True iff both have; False at once before ``shutdown``. From the reaper or the
        executor thread it cannot wait for that thread itself and returns False.
        """
        return await_purgatory_termination(self._is_shut_down, self._reaper, self._timer, timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Shut down, then wait for the reaper and executor (``await_termination``)."""
        self.shutdown()
        self.await_termination()
