"""The reference ``DelayedOperation``: a timer task that completes exactly once.

An operation completes early (some thread sees its condition hold and calls
``force_complete``) or on expiry (the timer runs it). Its state changes by a
compare-and-set under its flag lock, so whichever path gets there first wins and
``on_complete`` runs once.
Follows Kafka 2.7-4.0, with two choices from Kafka 4.x made explicit (R17, R18):
expiry holds the operation's lock, and ``safe_try_complete`` skips ``try_complete``
on an operation that is already completed.

Its lifecycle is the table of docs/spec.md (R68), held in one field, ``_state``
(``kpurgatory.protocol``'s NEW, SUBMITTED, COMPLETED, ABANDONED bits): every ending
races for the one compare-and-set from unfinished to finished, which writes the
outcome with it, so a reader sees an operation pending, completed or abandoned, never
one after the other.

It abandons (R40), keeps the pending flag on the blocking paths (R41) and takes a
re-entrant lock (R63).

Rules: R16-R20, R22, R29, R38, R40, R41, R56, R61, R63, R66-R68.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from kpurgatory import sync
from kpurgatory._checks import abstract_class_error, require_operation_lock
from kpurgatory.protocol import ABANDONED, COMPLETED, FINISHED, NEW, WatchableBase
from kpurgatory.reference.timer import TimerTask
from kpurgatory.spec.protocols import AbstractLock
from kpurgatory.sync import AtomicFlag

__all__ = ["DelayedOperation"]


class _Owner(Protocol):
    """The purgatory an operation was submitted to (what ``cancel`` delegates to)."""

    def _abandon_submitted(self, operation: Any) -> bool: ...

    def _left_watching(self, operation: Any) -> None: ...


class DelayedOperation(TimerTask, WatchableBase):
    """An operation that completes when its condition holds or its delay runs out.

    Subclasses implement ``try_complete`` (check the condition; if it holds, return
    ``self.force_complete()``), ``on_complete`` (runs exactly once, either way) and
    ``on_expiration`` (runs after ``on_complete`` when expiry won). ``lock`` guards
    ``try_complete``; by default each operation gets its own re-entrant lock, and
    several operations may share one (Kafka's ``lockOpt``).
    """

    def __init__(self, delay_ms: int, lock: AbstractLock | None = None) -> None:
        missing = type(self).__abstractmethods__
        if missing:  # abc's check, which a compiled WatchableBase's constructor skips
            raise abstract_class_error(type(self), tuple(sorted(missing)))
        super().__init__(delay_ms)
        self._lock: AbstractLock = sync.new_lock() if lock is None else require_operation_lock(lock)
        self._flags: AbstractLock = sync.new_lock()  # guards the changes of _state
        self._state = NEW  # R68: NEW, SUBMITTED, COMPLETED, ABANDONED (kpurgatory.protocol)
        self._try_complete_pending: AtomicFlag = sync.new_flag(False)  # R41
        self._untimed = False  # cancel_for_key took its timer entry: never timed again (R66)
        self._owner: _Owner | None = None
        self._watch_keys: tuple[Hashable, ...] = ()  # given by the submission (R22)
        self._counted = False  # counted as unfinished by its purgatory (R61; its lock)

    @property
    def lock(self) -> AbstractLock:
        """The lock held around ``try_complete`` and expiry."""
        return self._lock

    @property
    def is_completed(self) -> bool:
        """Whether the operation has completed (early or by expiry); False once abandoned."""
        return self._state & COMPLETED != 0

    @property
    def is_abandoned(self) -> bool:
        """Whether the operation was abandoned (R40): it will never complete or expire."""
        return self._state & ABANDONED != 0

    def cancel(self) -> None:
        """Abandon the operation if it was submitted to a purgatory, else unschedule it (R40).

        On a submitted operation this is ``purgatory.abandon(self)``: it leaves every
        watcher list and the timer and never completes. On an operation never submitted
        it is ``TimerTask.cancel`` (a plain timer task added to a timer by hand), and so
        it is on one whose submission was rolled back meanwhile: it never raises (R56).
        """
        with self._lock:  # a submission claims before it locks: decide under the lock
            owner = self._owner
            if owner is None:
                self._unschedule()
                return
        owner._abandon_submitted(self)  # False if rolled back meanwhile: nothing scheduled

    def force_complete(self) -> bool:
        """Complete the operation if nobody has yet (R16).

        Exactly one call over the operation's life returns True: it makes the state
        completed (compare-and-set from unfinished), cancels the timer entry, then calls
        ``on_complete``. If ``on_complete`` raises, the operation stays completed and the
        exception reaches this method's caller. Every other call returns False.
        """
        with self._flags:  # compare-and-set: not finished -> completed (R68)
            won = self._state < FINISHED
            if won:
                self._state |= COMPLETED
        if won:
            self._unschedule()
            owner = self._owner
            try:
                if owner is not None:
                    owner._left_watching(self)  # uncounts it if counted; may let all go (R61)
            finally:  # whatever the purge raised (R67), on_complete runs exactly once
                self.on_complete()
            return True
        return False

    # The abstract methods repeat in kpurgatory.optimized.operation deliberately: one contract,
    # documented where each implementation's users read it.
    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; if it holds, return ``self.force_complete()``, else False."""
        raise NotImplementedError(f"{type(self).__name__}.try_complete is abstract")

    @abc.abstractmethod
    def on_complete(self) -> None:
        """The completion logic; called exactly once, whichever path completes."""
        raise NotImplementedError(f"{type(self).__name__}.on_complete is abstract")

    @abc.abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed by expiring."""
        raise NotImplementedError(f"{type(self).__name__}.on_expiration is abstract")

    def run(self) -> None:
        """Expire the operation (the timer's callback, R17).

        Holding the lock (Kafka 4.1, KAFKA-19312: ``on_complete`` never overlaps a
        ``try_complete``), ``force_complete``; if that won, ``on_expiration``. Nothing
        if ``cancel_for_key`` took the operation out of the timer after the timer had
        handed this run over (R29: an operation it returned never expires); then a
        ``maybe_try_complete`` that found the lock held by this run gets its attempt
        here (R41), as the operation is still pending.
        """
        with self._lock:
            if not self._untimed:
                if self.force_complete():
                    self.on_expiration()
                return
        if self._knocked() and not self._is_finished():
            self.safe_try_complete()

    def safe_try_complete(self) -> bool:
        """``try_complete`` while holding the lock; False at once if already completed (R18).

        Honours the pending flag (R41): it is cleared before ``try_complete``, and if a
        ``maybe_try_complete`` found the lock held and set it meanwhile, the attempt it
        left to the holder is made here, after the lock was released, so none is lost.
        """
        return self._safe_try_complete_for(None)

    def _safe_try_complete_for(self, owner: object) -> bool:
        """``safe_try_complete``, also False if ``owner`` is given and is not the purgatory
        the operation is submitted to (a submission rolled back meanwhile, R38)."""
        while True:
            with self._lock:
                if self._state >= FINISHED or (owner is not None and self._owner is not owner):
                    return False
                self._try_complete_pending.set(False)
                if self.try_complete():
                    return True
            if not self._try_complete_pending.get():
                return False

    def safe_try_complete_or_else(self, f: Callable[[], None]) -> bool:
        """Holding the lock: ``try_complete``; if that fails, ``f()`` and ``try_complete`` again.

        Returns the result of the last ``try_complete`` (R19). ``f`` runs at most once,
        and only when the first attempt failed. A ``maybe_try_complete`` that knocked while
        the lock was held gets its attempt afterwards, as in ``safe_try_complete`` (R41).
        """
        with self._lock:
            self._try_complete_pending.set(False)
            if self.try_complete():
                return True
            f()
            if self.try_complete():
                return True
        if self._try_complete_pending.get():  # a knocker left its attempt to us (R41)
            return self.safe_try_complete()
        return False

    def maybe_try_complete(self) -> bool:
        """Kafka 1.1-2.6's non-blocking ``try_complete`` with the "pending" flag (R20).

        Never blocks on the lock. If the lock is free, take it and ``try_complete``; if
        another caller knocked meanwhile, go round again. If the lock is busy, set the
        pending flag; the first knocker retries itself, later ones leave it to the
        holder. Guarantee: after every call at least one ``try_complete`` starts after
        the call began, provided the lock holder is inside ``maybe_try_complete`` or a
        blocking path of the operation (R41); a holder outside them, e.g. a thread using
        a shared lock for other work, does not see the flag (KAFKA-8334). Returns True
        iff a ``try_complete`` run by this call returned True.
        """
        done = False
        while True:
            if self._lock.acquire(blocking=False):
                try:
                    self._try_complete_pending.set(False)
                    done = self.try_complete()
                finally:
                    self._lock.release()
                retry = self._try_complete_pending.get()
            else:
                retry = not self._try_complete_pending.get_and_set(True)
            if self._state >= FINISHED or not retry:
                return done

    def _is_finished(self) -> bool:
        """Completed, expired or abandoned: no purgatory path may complete it any more."""
        return self._state >= FINISHED

    def _clear_pending(self) -> None:
        """Clear the try-complete pending flag before a blocking attempt (R41); lock held."""
        self._try_complete_pending.set(False)

    def _knocked(self) -> bool:
        """Whether a ``maybe_try_complete`` set the pending flag since it was cleared (R41)."""
        return self._try_complete_pending.get()

    def _abandon(self) -> bool:
        """Mark a pending operation finished without completing it (R40); lock held."""
        with self._flags:  # compare-and-set: not finished -> abandoned (R68)
            if self._state >= FINISHED:
                return False
            self._state |= ABANDONED
        self._unschedule()
        return True

    def __repr__(self) -> str:
        state = _STATE_NAMES[self._state & (COMPLETED | ABANDONED)]
        return f"<{type(self).__name__} delay_ms={self.delay_ms} {state}>"


_STATE_NAMES = {NEW: "pending", COMPLETED: "completed", ABANDONED: "abandoned"}
"""How ``__repr__`` names a state (its finished bits)."""
