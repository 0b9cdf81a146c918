"""The reference ``DelayedOperationPurgatory``: watcher lists per key, one lock for all.

Operations wait here until ``check_and_complete`` on one of their keys finds their
condition true, or the timer expires them. One re-entrant lock guards the watcher
map and the estimate; it is never held while an operation's ``try_complete`` runs
(KAFKA-3994), and it is always taken after an operation's lock, never before.

The submission reads as R22; its rollback is an undo log (R38).

Rules: R22-R34, R36, R38-R41, R53-R56, R61, R64, R66, R67, R73.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from typing import ClassVar, Generic

from kpurgatory import sync
from kpurgatory._checks import (
    require_at_least,
    require_bool,
    require_hashable,
    require_int,
    require_str,
    watch_key_list,
)
from kpurgatory._lifecycle import (
    REAPER_STEP_MS,
    StopOnExit,
    UndoLog,
    await_purgatory_termination,
    run_reaper,
)
from kpurgatory._sweep import KeyFailedError, key_failed_in_purge, keyed, raise_collected
from kpurgatory._typing import TypeVar
from kpurgatory.clock import ManualClock
from kpurgatory.reference.operation import DelayedOperation
from kpurgatory.reference.timer import SystemTimer

__all__ = ["REAPER_STEP_MS", "DelayedOperationPurgatory"]

logger = logging.getLogger(__name__)


T = TypeVar("T", bound=DelayedOperation, default=DelayedOperation)
"""The operations a purgatory holds; ``DelayedOperationPurgatory(...)`` alone means any."""


class DelayedOperationPurgatory(StopOnExit, Generic[T]):
    """Holds delayed operations until they complete or expire (Kafka's purgatory).

    ``timer`` defaults to ``SystemTimer(purgatory_name)``; the purgatory owns it and
    closes it at ``shutdown``. With ``reaper_enabled`` a thread named
    ``ExpirationReaper-<broker_id>-<purgatory_name>`` loops ``advance_clock(200)``
    (R31); on a ``ManualClock`` disable it and call ``advance_clock`` yourself. With
    ``timer_enabled=False`` operations are never added to the timer and never expire
    (R33). ``purge_interval`` bounds how many completed operations may linger in
    watcher lists before the reaper purges them (R30).
    """

    _timer_type: ClassVar[type[SystemTimer]] = SystemTimer
    """The timer class accepted as ``timer`` and created by default."""

    _operation_type: ClassVar[type[object]] = DelayedOperation
    """The operation class ``try_complete_else_watch`` accepts (typed loosely: it is abstract)."""

    # The same parameters as the optimized purgatory's and AsyncPurgatory's, deliberately.
    def __init__(
        self,
        purgatory_name: str,
        timer: SystemTimer | None = None,
        broker_id: int = 0,
        purge_interval: int = 1000,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
    ) -> None:
        self._name = require_str("purgatory_name", purgatory_name)
        if timer is not None and not isinstance(timer, self._timer_type):
            raise TypeError(
                f"timer must be a {_qualified(self._timer_type)}, not {type(timer).__name__}"
            )
        self._broker_id = require_int("broker_id", broker_id)
        self._purge_interval = require_at_least("purge_interval", purge_interval, 0)
        self._reaper_enabled = require_bool("reaper_enabled", reaper_enabled)
        self._timer_enabled = require_bool("timer_enabled", timer_enabled)
        if reaper_enabled and timer is not None and isinstance(timer.clock, ManualClock):
            raise ValueError(
                "reaper_enabled=True needs a real clock: the reaper would advance the "
                "ManualClock on its own; pass reaper_enabled=False and call advance_clock"
            )
        self._timer = self._timer_type(purgatory_name) if timer is None else timer
        self._lock = sync.new_lock()
        self._watchers: dict[Hashable, list[T]] = {}
        self._estimated_total_operations = 0
        self._estimate_resets = 0
        """How many times a purge (R30) or a let-go (R61) set the estimate: a rollback
        takes its one back only if none did since it was added (R30)."""
        self._unfinished = 0
        """Operations that reached the watching step and have not finished (R61)."""
        self._purge_when_idle = True
        """R61: at no unfinished operation, unlink every finished one at once (a variant
        that behaves as Kafka, purging lazily, sets it False)."""
        self._num_purged = 0
        self._num_completed_by_purgatory = 0
        self._is_shut_down = False
        self._shutdown_done = False
        self._shutdown_finished = sync.new_condition(self._lock)
        self._stop_reaper = threading.Event()
        self._reaper = self._start_reaper() if reaper_enabled else None

    # -- read-only state -------------------------------------------------------------

    @property
    def purgatory_name(self) -> str:
        """The name given at construction."""
        return self._name

    @property
    def timer(self) -> SystemTimer:
        """The timer operations wait in."""
        return self._timer

    @property
    def watched(self) -> int:
        """Number of (key, operation) pairs in watcher lists, completed ones included (R27)."""
        with self._lock:
            return sum(len(ops) for ops in self._watchers.values())

    @property
    def num_delayed(self) -> int:
        """Tasks scheduled in the timer: the pending operations (R28)."""
        return self._timer.size

    @property
    def watched_keys(self) -> int:
        """Number of keys that have a watcher list (empty lists are dropped, R26)."""
        with self._lock:
            return len(self._watchers)

    @property
    def estimated_total_operations(self) -> int:
        """The purge estimate: operations watched since the last purge, plus the timer size then."""
        with self._lock:
            return self._estimated_total_operations

    @property
    def num_purged(self) -> int:
        """Completed operations removed from watcher lists by purges so far (R30)."""
        with self._lock:
            return self._num_purged

    @property
    def num_completed(self) -> int:
        """Operations completed by this purgatory's own calls (a True from
        ``try_complete_else_watch``, or counted by ``check_and_complete``)."""
        with self._lock:
            return self._num_completed_by_purgatory

    # -- operations ------------------------------------------------------------------

    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it on every key and time it.

        The sequence (R22), all while holding the operation's lock: ``try_complete``; if
        that fails, watch the operation on each distinct key while it is not completed
        (KAFKA-18027), count it once in the purge estimate, ``try_complete`` again, and if
        it is still not completed add it to the timer (when ``timer_enabled``). Returns
        True iff this call completed the operation (R23). An operation goes through this
        method at most once (R34). Raises ``TypeError``/``ValueError`` on bad arguments
        (R36) and ``RuntimeError`` after ``shutdown``; a call that raises leaves no trace
        (R38).
        """
        if not isinstance(operation, self._operation_type):
            raise TypeError(
                f"operation must be a {_qualified(self._operation_type)}, "
                f"not {type(operation).__name__}"
            )
        keys = watch_key_list(watch_keys)
        if self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if not operation._claim_submission(self):
            raise ValueError(
                f"operation {operation!r} was already passed to try_complete_else_watch"
            )
        if self._submit(operation, keys):
            with self._lock:
                self._num_completed_by_purgatory += 1
            return True
        return False

    def _submit(self, operation: T, keys: list[Hashable]) -> bool:
        """R22, step by step under the operation's lock; each step logs its undo (R38)."""
        undo = UndoLog(operation._release_submission)  # the claim is undone last
        with self._holding_lock(operation, undo):
            if operation.is_abandoned:  # abandoned between the claim and the lock (R40)
                return False
            operation._clear_pending()
            if operation.try_complete():
                return True
            self._enter(operation, undo)
            self._watch(operation, keys, undo)
            undo.push(self._take_back_estimate, self._add_to_estimate())
            if operation.try_complete():
                return True
            self._time(operation, undo)
        if not operation._knocked():  # a knock found the lock held: its attempt is ours (R41)
            return False
        with self._undone_on_error(operation, undo):  # part of the submission (R54)
            return self._retry(operation)

    @contextmanager
    def _holding_lock(self, operation: T, undo: UndoLog) -> Iterator[None]:
        """Hold the operation's lock; if a step raises, undo the submission (R38). A lock
        whose ``acquire`` raises has changed nothing: only the claim is undone (R54)."""
        try:
            operation.lock.acquire()
        except BaseException:
            undo.unwind()
            raise
        try:
            with self._undone_on_error(operation, undo):
                yield
        finally:
            operation.lock.release()

    @contextmanager
    def _undone_on_error(self, operation: T, undo: UndoLog) -> Iterator[None]:
        """If the body raises, unwind ``undo`` under the operation's lock, unless the
        operation finished meanwhile (its ``on_complete`` ran: it stays completed and
        submitted, R38) or is no longer submitted here. A step refused because the
        purgatory was shut down meanwhile says so (R64)."""
        try:
            yield
        except BaseException as exc:
            with operation.lock:
                if not operation._is_finished() and operation._owner is self:
                    undo.unwind()
            if isinstance(exc, RuntimeError) and self._is_shut_down:
                raise RuntimeError(f"purgatory {self._name!r} is shut down") from exc
            raise

    def _retry(self, operation: T) -> bool:
        """The attempt a knock left to the submission (R41): ``safe_try_complete``; an
        operation still unfinished after a shutdown meanwhile is refused (R64)."""
        if operation._safe_try_complete_for(self):
            return True
        if not operation._is_finished():
            self._refuse_if_shut_down()
        return False

    def _refuse_if_shut_down(self) -> None:
        if self._is_shut_down:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")

    def _enter(self, operation: T, undo: UndoLog) -> None:
        """Count the operation as unfinished if it is (R61), before its keys are watched,
        so that whatever finishes it from now on uncounts it; its undo uncounts it too."""
        if operation._is_finished():
            return
        with self._lock:
            self._unfinished += 1
            operation._counted = True
        undo.push(self._left_watching, operation)
        if operation._is_finished():  # finished while being counted: nobody else saw it
            self._left_watching(operation)

    def _watch(self, operation: T, keys: list[Hashable], undo: UndoLog) -> None:
        """Watch the operation on each key in order while it is unfinished (R24,
        KAFKA-18027), logging each watch's undo."""
        operation._watch_keys = tuple(keys)
        watched = False
        for key in keys:
            if operation._is_finished():
                break
            with self._lock:
                self._watchers.setdefault(key, []).append(operation)
            undo.push(self._unwatch, key, operation)
            watched = True
        if watched and operation._is_finished():  # its finisher's let-go (R61) may have
            self._let_go_if_idle()  # run before the last watch: let go again if idle

    def _add_to_estimate(self) -> int:
        """Count the operation in the estimate (R30); return the resets so far."""
        with self._lock:
            self._estimated_total_operations += 1
            return self._estimate_resets

    def _take_back_estimate(self, resets: int) -> None:
        """A rollback's undo of ``_add_to_estimate``: only if no purge or let-go has set
        the estimate since (R30); that reset left the operation out already."""
        with self._lock:
            if self._estimate_resets == resets:
                self._estimated_total_operations -= 1

    def _time(self, operation: T, undo: UndoLog) -> None:
        """Add the operation to the timer unless it finished, timers are off (R33), or a
        ``cancel_for_key`` made from its own callback took it out already (R66)."""
        if operation._is_finished():
            return
        if self._timer_enabled and not operation._untimed:
            undo.push(operation._unschedule)
            self._timer.add(operation)
            if operation._is_finished():  # completed meanwhile (lock-free, or run inline)
                operation._unschedule()
                return
        self._refuse_if_shut_down()  # by its own callback, or the add's hand-over (R64)

    def _left_watching(self, operation: T) -> None:
        """``operation`` no longer counts as unfinished, if it did (its flag, under this
        purgatory's lock, makes the finish and the submission agree on who uncounts it);
        at none left, unlink every finished operation (R61)."""
        with self._lock:
            if not operation._counted:
                return
            operation._counted = False
            self._unfinished -= 1
        self._let_go_if_idle()

    def _let_go_if_idle(self) -> None:
        """With no unfinished operation left (and R61 on), reset the estimate and unlink
        every finished operation: a purge at the moment nothing is left to wait for."""
        with self._lock:
            if self._unfinished or not self._purge_when_idle:
                return
            self._estimated_total_operations = self._timer.size
            self._estimate_resets += 1
            purged = self._purge_watchers()
        if purged:
            logger.debug("purgatory %r purged %d finished operations when idle", self._name, purged)

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched on ``key``; return how many this call completed.

        Operations are tried in the order they were watched, each under its own lock
        (``safe_try_complete``), with no purgatory lock held. Operations found already
        completed are unlinked but not counted (R25). A key left with no operation is
        dropped (R26). An unknown key is not created. ``TypeError`` if unhashable.
        """
        require_hashable("key", key)
        with self._lock:
            snapshot = list(self._watchers.get(key, ()))
        completed = 0
        errors: list[BaseException] = []
        for operation in snapshot:
            try:
                if operation._is_finished():
                    self._unwatch(key, operation)
                elif operation._safe_try_complete_for(self):
                    completed += 1
                    self._unwatch(key, operation)
            except BaseException as exc:  # the other operations are tried first (R53)
                errors.append(exc)
                if operation._is_finished():  # its on_complete raised: unlinked as completed
                    self._unwatch(key, operation)
        if completed:
            with self._lock:
                self._num_completed_by_purgatory += completed
        raise_collected(errors, f"check_and_complete({key!r})")
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: cancel each operation's timer entry and return them (R29).

        The operations are neither completed nor expired; they stay on their other keys.
        The list is in watch order and includes operations already completed. Each timer
        entry is cancelled under the operation's lock, so a submission still under way
        has added its entry before it is cancelled (R29, R22).
        """
        require_hashable("key", key)
        with self._lock:
            operations = self._watchers.pop(key, [])
        errors: list[BaseException] = []
        for operation in operations:
            try:
                with operation.lock:
                    operation._unschedule()
                    operation._untimed = True  # its submission, if under way, adds none (R66)
                # A maybe_try_complete that found the lock held left its attempt here (R55).
                if operation._knocked() and not operation._is_finished():
                    operation._safe_try_complete_for(self)
            except BaseException as exc:  # the other operations are handled first (R53)
                errors.append(exc)
        raise_collected(errors, f"cancel_for_key({key!r})")
        return operations

    def abandon(self, operation: T) -> bool:
        """Give up on a submitted operation: it will never complete or expire (R40).

        Holding the operation's lock, mark it finished without ``on_complete`` or
        ``on_expiration``, cancel its timer entry and unlink it from every key it is
        watched on. Returns True iff this call abandoned a pending operation; False if it
        had completed, expired or been abandoned already. ``ValueError`` if the operation
        was never submitted here; ``TypeError`` if it is not an operation.
        ``operation.cancel()`` on a submitted operation calls this.
        """
        if not isinstance(operation, self._operation_type):
            raise TypeError(
                f"operation must be a {_qualified(self._operation_type)}, "
                f"not {type(operation).__name__}"
            )
        if operation._owner is not self:
            raise ValueError(f"operation {operation!r} was not submitted to {self._name!r}")
        return self._abandon_submitted(operation)

    def _abandon_submitted(self, operation: T) -> bool:
        """``abandon`` without the argument checks (``cancel`` calls it, R56): False if the
        operation is finished or, by the time its lock is held, not submitted here."""
        with operation.lock:
            if operation._owner is not self or not operation._abandon():
                return False
            for key in operation._watch_keys:
                self._unwatch(key, operation)
            self._left_watching(operation)  # uncounts it if it was counted (R61)
        return True

    def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> None:
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

    def _stop(self) -> None:
        """How a ``with`` block ends (``StopOnExit``): ``shutdown``."""
        self.shutdown()

    def shutdown(self) -> None:
        """Refuse new calls, stop the reaper and close the timer (R32, R39): idempotent.

        Returns once the purgatory is shut down: later ``try_complete_else_watch`` and
        ``advance_clock`` raise ``RuntimeError``, the timer hands nothing more over, and
        the reaper starts no further step. A concurrent caller returns only then too. It
        does not wait for a task already handed over (an expiry running on the executor
        or the reaper), which may need a lock the caller holds; ``await_termination``
        waits for that. Pending operations are neither completed nor expired.
        """
        # kpurgatory.optimized.purgatory repeats this shutdown deliberately (no shared class).
        with self._lock:
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
            with self._lock:
                self._shutdown_done = True
                self._shutdown_finished.notify_all()

    def await_termination(self, timeout: float | None = None) -> bool:
        """After ``shutdown``, wait up to ``timeout`` seconds (None: no limit) for the
        reaper thread to exit and the timer's own executor to finish (R39).

        True iff both have; False at once before ``shutdown``. From the reaper or the
        executor thread it cannot wait for that thread itself and returns False.
        """
        return await_purgatory_termination(self._is_shut_down, self._reaper, self._timer, timeout)

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self._name!r}, watched={self.watched}, "
            f"num_delayed={self.num_delayed})"
        )

    # -- internals -------------------------------------------------------------------

    def _unwatch(self, key: Hashable, operation: T) -> None:
        with self._lock:
            operations = self._watchers.get(key)
            if operations is None:
                return
            for index, watched in enumerate(operations):
                if watched is operation:
                    del operations[index]
                    break
            if not operations:
                del self._watchers[key]

    def _purge_if_due(self) -> None:
        with self._lock:
            delayed = self._timer.size
            if self._estimated_total_operations - delayed <= self._purge_interval:
                return
            self._estimated_total_operations = delayed
            self._estimate_resets += 1
            purged = self._purge_watchers()
        if purged:
            logger.debug("purgatory %r purged %d completed operations", self._name, purged)

    def _purge_watchers(self) -> int:
        """Unlink finished operations from every watcher list; return how many (lock held).

        A key whose ``__hash__`` or ``__eq__`` raises is skipped: its list is left as it
        was, the error logged (R67). Housekeeping never lets a key's error escape into the
        unrelated call that purged; a ``BaseException`` that is not an ``Exception``
        propagates once the other keys are done."""
        purged = 0
        interrupt: BaseException | None = None
        for key, operations in list(self._watchers.items()):
            pending = [operation for operation in operations if not operation._is_finished()]
            try:
                if not pending:  # hashes the key: nothing changed if that raises
                    keyed(self._watchers.pop, key, None)
            except KeyFailedError as failed:
                interrupt = key_failed_in_purge(logger, self._name, key, failed.error) or interrupt
                continue
            purged += len(operations) - len(pending)
            operations[:] = pending
        self._num_purged += purged
        if interrupt is not None:
            raise interrupt
        return purged

    def _start_reaper(self) -> threading.Thread:
        """Start the reaper thread, named as Kafka names it (R31)."""
        reaper = threading.Thread(
            target=self._reap,
            name=f"ExpirationReaper-{self._broker_id}-{self._name}",
            daemon=True,
        )
        reaper.start()
        return reaper

    def _reap(self) -> None:
        run_reaper(self._stop_reaper, self._timer, self._reaper_step, self._name, logger)

    def _reaper_step(self) -> None:
        """One iteration of the reaper loop (R31): wait up to 200 ms for due tasks, then purge."""
        self._timer.advance_clock(REAPER_STEP_MS)
        self._purge_if_due()


def _qualified(cls: type) -> str:
    """``module.Name`` of ``cls``, for errors that say which design's class was expected."""
    return f"{cls.__module__}.{cls.__qualname__}"
