"""The optimized ``DelayedOperation``: a timer task of the wheel that completes exactly once.

Rules: R16-R22, R29, R30, R34, R38, R40, R41, R48, R56, R58, R61, R66-R68.

Behaviour is that of ``kpurgatory.reference.operation`` (CAS completed flag, ``run``
holding the operation lock (R21) as in Kafka 4.1, ``safe_try_complete`` skipping a
completed operation as in Kafka 4.0, the 1.1-2.6 ``maybe_try_complete`` loop); the
difference is the base class, the optimized ``TimerTask``, so ``force_complete``'s
``cancel`` is an O(1) unlink from a wheel bucket, and the three flags (completed,
try-complete pending, submitted) are plain booleans guarded by one flag lock
(reference: three ``AtomicFlag`` objects, each with its own lock). The flag lock is
process-wide, ``_FLAGS_LOCK``, shared by every optimized operation: it is held only
around a flag's test-and-write, which calls nothing and takes no other lock, so sharing
it cannot deadlock, and an operation costs one lock allocation (its own ``lock``)
instead of four. Both locks come from ``kpurgatory.sync.new_lock`` so controlled-schedule
tests can instrument them (they rebind ``_FLAGS_LOCK`` before building operations, as
they do the timer's ``_TIMER_LOCK``).

Extensions: ``run`` counts an expiry that won in the purgatory the operation was
submitted to (``DelayedOperationPurgatory.num_expired``); an optional *waiter* (slot
``_waiter``, None unless ``kpurgatory.aio`` sets it) is told once how the operation
finished, natively, so the awaitable operations of ``kpurgatory.aio`` need no
Python-level override of ``force_complete``, ``run`` or ``__init__``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable
from threading import get_ident
from typing import Any, Protocol

from kpurgatory import sync
from kpurgatory._checks import declared, require_operation_lock
from kpurgatory._typing import IntArg
from kpurgatory.optimized._mypyc import mypyc_attr
from kpurgatory.optimized.timer import ABSTRACT_CLASSES, ABSTRACT_METHODS, TimerTask
from kpurgatory.protocol import ABANDONED, COMPLETED, FINISHED, NEW, Watchable
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["DelayedOperation"]

_FLAGS_LOCK: AbstractLock = sync.new_lock()
"""Guards the lifecycle state and the pending flag of every optimized operation
(``_state``, ``_try_complete_pending``): each operation's ``_flags``
is this lock, read at construction (tests rebind it to an instrumented lock first).

Shared rather than per operation: a fresh ``RLock`` per operation was one of the two
lock allocations of every operation (each also a garbage-collector-tracked object);
the critical sections are a test-and-write of booleans, so threads contend for a few
bytecodes at most."""


class _Owner(Protocol):
    """The purgatory an operation was submitted to (what ``cancel`` delegates to)."""

    def _abandon_submitted(self, operation: Any) -> bool: ...

    def _count_expired(self) -> None: ...

    def _note_completed(self, operation: Any) -> None: ...

    def _left_watching(self, operation: Any) -> None: ...


class _Waiter(Protocol):
    """Told once how an operation finished (``kpurgatory.aio.Waiter``): by a winning
    ``force_complete`` (``expired``: the win came from ``run``), by an ``on_complete``
    that raised, or by an abandon (R40)."""

    def _completed(self, expired: bool) -> None: ...

    def _raised(self, exc: BaseException) -> None: ...

    def _abandoned(self) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation(TimerTask, Watchable):
    """An operation that completes when its condition holds or its delay runs out.

    Reference equivalent: ``kpurgatory.reference.DelayedOperation`` (same API). Subclasses
    implement ``try_complete`` (check the condition; if it holds, return
    ``self.force_complete()``), ``on_complete`` (runs exactly once, either way) and
    ``on_expiration`` (runs after ``on_complete`` when expiry won). ``lock`` guards
    ``try_complete``; by default each operation gets its own re-entrant lock, and
    several operations may share one (Kafka's ``lockOpt``).

    The lifecycle state ``_state`` (R68: ``kpurgatory.protocol``'s NEW, SUBMITTED,
    COMPLETED, ABANDONED bits, one int) and the flag ``_try_complete_pending`` are
    plain values: read without a lock (a Python attribute read is
    atomic, like Java's volatile read), written only while holding ``_flags`` (the
    process-wide ``_FLAGS_LOCK``), so each compare-and-set or get-and-set is one
    ``with self._flags:`` test-and-write (R16, R20, R34).
    """

    __slots__ = (
        "_counted",
        "_expiring",
        "_flags",
        "_lock",
        "_owner",
        "_state",
        "_try_complete_pending",
        "_untimed",
        "_waiter",
        "_watch_keys",
    )

    def __init__(self, delay_ms: IntArg, lock: AbstractLock | None = None) -> None:
        super().__init__(delay_ms)
        self._lock: AbstractLock = sync.new_lock() if lock is None else require_operation_lock(lock)
        self._flags: AbstractLock = _FLAGS_LOCK  # shared: no allocation per operation
        self._state = NEW  # R68: one field for new, submitted, completed, abandoned
        self._try_complete_pending = False
        self._counted = False  # counted as unfinished by its purgatory (R61; counters lock)
        self._untimed = False  # cancel_for_key took its timer entry: never timed again (R66)
        self._owner: Any = None  # the _Owner it was submitted to, or None
        self._watch_keys: tuple[Hashable, ...] = ()  # given by the submission (R22)
        self._waiter: _Waiter | None = None
        self._expiring = 0  # the thread running ``run`` (its id), for the waiter's outcome

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

        On a submitted operation this is ``purgatory.abandon(self)``; on one never
        submitted, or whose submission was rolled back meanwhile, ``TimerTask.cancel``: it
        never raises (R56). Reference equivalent: ``DelayedOperation.cancel``.
        """
        with self._lock:  # a submission claims before it locks: decide under the lock
            owner: _Owner | None = self._owner
            if owner is None:
                TimerTask.cancel(self)
                return
        owner._abandon_submitted(self)  # False if rolled back meanwhile: nothing scheduled

    def force_complete(self) -> bool:
        """Complete the operation if nobody has yet (R16).

        Exactly one call over the operation's life returns True: it sets the completed
        flag (compare-and-set), cancels the timer entry (O(1) unlink), then calls
        ``on_complete``. If ``on_complete`` raises, the operation stays completed and the
        exception reaches this method's caller. Every other call returns False.
        Reference equivalent: ``DelayedOperation.force_complete`` (same, with the
        compare-and-set done under the flag lock). Once it has won on a watched
        operation, it records it with its purgatory as a purge candidate (O(1)).
        Extension: a waiter, if any, is told after ``on_complete`` (the exception it
        raised, if it did), at most once.
        """
        with self._flags:  # compare-and-set: not finished -> completed (R68)
            won = self._state < FINISHED
            if won:
                self._state |= COMPLETED
        if won:
            # watched, or being watched
            owner: _Owner | None = self._owner if self._watch_keys else None
            if owner is not None:
                # A purge candidate (R30) before the timer entry goes: a purge that took the
                # candidates before this line read a timer size still counting the
                # operation, so its estimate keeps the next purge due.
                owner._note_completed(self)
            TimerTask.cancel(self)
            if owner is not None:
                try:
                    owner._left_watching(self)  # the last unfinished one: unlink them all (R61)
                except BaseException:  # a key's interrupt in that purge (R67): after on_complete
                    self._on_complete_told()
                    raise
            self._on_complete_told()
            return True
        return False

    def _on_complete_told(self) -> None:
        """``on_complete``, then tell the waiter, if any, how it went (once)."""
        waiter = self._waiter
        if waiter is None:
            self.on_complete()
            return
        self._waiter = None
        try:
            self.on_complete()
        except BaseException as exc:  # anything, CancelledError included (R48, R58)
            waiter._raised(exc)
            raise
        waiter._completed(self._expiring == get_ident())

    # The reference operation's abstract methods, deliberately (one contract, documented
    # where each implementation's users read it; a mypyc class cannot share a Python base).
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

        Holding the lock (Kafka 4.1, KAFKA-19312), ``force_complete``; if that won,
        count the expiry in the purgatory it was submitted to (``num_expired``), then
        ``on_expiration``. Nothing if ``cancel_for_key`` took the operation out of the
        timer after the timer had handed this run over (R29); then a knock that found
        the lock held by this run gets its attempt here (R41). O(1) plus the callbacks.
        Reference equivalent: ``DelayedOperation.run``.
        """
        with self._lock:
            if not self._untimed:
                self._expiring = get_ident()  # a force_complete won in this thread expires
                if self.force_complete():
                    owner: _Owner | None = self._owner  # not a bound-method hook per submission
                    if owner is not None:
                        owner._count_expired()
                    self.on_expiration()
                return
        if self._try_complete_pending and self._state < FINISHED:
            self._safe_try_complete_for(None)

    def safe_try_complete(self) -> bool:
        """``try_complete`` while holding the lock; False at once if already completed (R18).

        Honours the pending flag (R41): cleared before ``try_complete``; if a
        ``maybe_try_complete`` set it while the lock was held, the attempt it left to the
        holder is made after the lock is released. Reference equivalent: same.
        """
        return self._safe_try_complete_for(None)

    def _safe_try_complete_for(self, owner: object) -> bool:
        """``safe_try_complete``, also False if ``owner`` is given and is not the purgatory
        the operation is submitted to (a submission rolled back meanwhile, R38)."""
        while True:
            with self._lock:
                if self._state >= FINISHED or (owner is not None and self._owner is not owner):
                    return False
                if self._try_complete_pending:  # clear (R41); a False needs no lock round trip
                    with self._flags:
                        self._try_complete_pending = False
                if self.try_complete():
                    return True
            if not self._try_complete_pending:
                return False

    def safe_try_complete_or_else(self, f: Callable[[], None]) -> bool:
        """Holding the lock: ``try_complete``; if that fails, ``f()`` and ``try_complete`` again.

        Returns the result of the last ``try_complete`` (R19); ``f`` runs at most once,
        only when the first attempt failed. A ``maybe_try_complete`` that knocked while
        the lock was held gets its attempt afterwards, as in ``safe_try_complete`` (R41).
        """
        with self._lock:
            if self._try_complete_pending:  # clear (R41); a False needs no lock round trip
                with self._flags:
                    self._try_complete_pending = False
            if self.try_complete():
                return True
            f()
            if self.try_complete():
                return True
        if self._try_complete_pending:  # a knocker left its attempt to us (R41)
            return self.safe_try_complete()
        return False

    def maybe_try_complete(self) -> bool:
        """Kafka 1.1-2.6's non-blocking ``try_complete`` with the "pending" flag (R20).

        Never blocks on the lock. If the lock is free, take it, clear the pending flag and
        ``try_complete``, then go round again if someone knocked meanwhile. If the lock
        is busy, set the pending flag; only the first knocker retries itself. At least
        one ``try_complete`` starts after each call began, provided the lock holder is
        in ``maybe_try_complete`` or a blocking path of the operation (R41; any other
        holder does not see the flag: KAFKA-8334). Returns True iff a
        ``try_complete`` run by this call returned True.
        """
        done = False
        while True:
            if self._lock.acquire(blocking=False):
                try:
                    with self._flags:
                        self._try_complete_pending = False
                    done = self.try_complete()
                finally:
                    self._lock.release()
                retry = self._try_complete_pending
            else:
                with self._flags:  # get-and-set True
                    retry = not self._try_complete_pending
                    self._try_complete_pending = True
            if self._state >= FINISHED or not retry:
                return done

    def _is_finished(self) -> bool:
        """Completed, expired or abandoned: no purgatory path may complete it any more."""
        return self._state >= FINISHED

    def _clear_pending(self) -> None:
        """Clear the pending flag before a blocking attempt (R41); lock held. The
        submission calls it only when it read the flag set (a False flag needs no lock
        round trip)."""
        with self._flags:
            self._try_complete_pending = False

    def _unschedule(self) -> None:
        """Take the operation out of its timer (``TimerTask.cancel``; ``cancel`` abandons)."""
        TimerTask.cancel(self)

    def _abandon(self) -> bool:
        """Mark a pending operation finished without completing it (R40); lock held.

        The waiter, if any, is told (after the timer entry is cancelled)."""
        with self._flags:  # compare-and-set: not finished -> abandoned (R68)
            won = self._state < FINISHED
            if won:
                self._state |= ABANDONED
        if won:
            TimerTask.cancel(self)
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                waiter._abandoned()
        return won

    def __repr__(self) -> str:
        done = "completed" if self._state & COMPLETED else "pending"
        state = "abandoned" if self._state & ABANDONED else done
        return f"<{type(self).__name__} delay_ms={self.delay_ms} {state}>"


_ABSTRACT = ("on_complete", "on_expiration", "try_complete")
ABSTRACT_METHODS.update({name: declared(DelayedOperation, name) for name in _ABSTRACT})
ABSTRACT_CLASSES[DelayedOperation] = _ABSTRACT
