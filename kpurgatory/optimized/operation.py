"""The optimized ``DelayedOperation``: a timer task of the wheel that completes exactly once.

Behaviour is that of ``kpurgatory.reference.operation`` (R16-R21: CAS completed flag,
``run`` holding the operation lock as in Kafka 4.1, ``safe_try_complete`` skipping a
completed operation as in Kafka 4.0, the 1.1-2.6 ``maybe_try_complete`` loop); the
difference is the base class, the optimized ``TimerTask``, so ``force_complete``'s
``cancel`` is an O(1) unlink from a wheel bucket, and the three flags (completed,
try-complete pending, submitted) are plain booleans guarded by one per-operation flag
lock (reference: three ``AtomicFlag`` objects, each with its own lock), which saves
three allocations per operation. Both locks come from ``kpurgatory.sync.new_lock`` so
controlled-schedule tests can instrument them.

Extension: a purgatory that accepts the operation registers an expiry hook, so it can
count the operations whose expiry won (``DelayedOperationPurgatory.num_expired``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable

from kpurgatory import sync
from kpurgatory._checks import declared
from kpurgatory._typing import IntArg
from kpurgatory.optimized._mypyc import mypyc_attr
from kpurgatory.optimized.timer import ABSTRACT_CLASSES, ABSTRACT_METHODS, TimerTask
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["DelayedOperation"]


@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation(TimerTask):
    """An operation that completes when its condition holds or its delay runs out.

    Reference equivalent: ``kpurgatory.reference.DelayedOperation`` (same API). Subclasses
    implement ``try_complete`` (check the condition; if it holds, return
    ``self.force_complete()``), ``on_complete`` (runs exactly once, either way) and
    ``on_expiration`` (runs after ``on_complete`` when expiry won). ``lock`` guards
    ``try_complete``; by default each operation gets its own re-entrant lock, and
    several operations may share one (Kafka's ``lockOpt``).

    The flags ``_completed``, ``_try_complete_pending`` and ``_submitted`` are plain
    booleans: read without a lock (a Python attribute read is atomic, like Java's
    volatile read), written only while holding ``_flags``, so each compare-and-set or
    get-and-set is one ``with self._flags:`` test-and-write (R16, R20, R34).
    """

    __slots__ = (
        "_completed",
        "_flags",
        "_lock",
        "_on_expired",
        "_submitted",
        "_try_complete_pending",
    )

    def __init__(self, delay_ms: IntArg, lock: AbstractLock | None = None) -> None:
        super().__init__(delay_ms)
        if lock is not None and not isinstance(lock, AbstractLock):
            raise TypeError(f"lock must provide acquire() and release(), not {type(lock).__name__}")
        self._lock: AbstractLock = sync.new_lock() if lock is None else lock
        self._flags: AbstractLock = sync.new_lock()
        self._completed = False
        self._try_complete_pending = False
        self._submitted = False
        self._on_expired: Callable[[], None] | None = None

    @property
    def lock(self) -> AbstractLock:
        """The lock held around ``try_complete`` and expiry."""
        return self._lock

    @property
    def is_completed(self) -> bool:
        """Whether the operation has completed (early or by expiry)."""
        return self._completed

    def force_complete(self) -> bool:
        """Complete the operation if nobody has yet (R16).

        Exactly one call over the operation's life returns True: it sets the completed
        flag (compare-and-set), cancels the timer entry (O(1) unlink), then calls
        ``on_complete``. If ``on_complete`` raises, the operation stays completed and the
        exception reaches this method's caller. Every other call returns False.
        Reference equivalent: ``DelayedOperation.force_complete`` (same, with the
        compare-and-set done under the flag lock).
        """
        with self._flags:  # compare-and-set False -> True
            won = not self._completed
            self._completed = True
        if won:
            self.cancel()
            self.on_complete()
            return True
        return False

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
        notify the purgatory's expiry counter, then ``on_expiration``. O(1) plus the
        callbacks. Reference equivalent: ``DelayedOperation.run``.
        """
        with self._lock:
            if self.force_complete():
                hook = self._on_expired
                if hook is not None:
                    hook()
                self.on_expiration()

    def safe_try_complete(self) -> bool:
        """``try_complete`` while holding the lock; False at once if already completed (R18)."""
        with self._lock:
            if self._completed:
                return False
            return self.try_complete()

    def safe_try_complete_or_else(self, f: Callable[[], None]) -> bool:
        """Holding the lock: ``try_complete``; if that fails, ``f()`` and ``try_complete`` again.

        Returns the result of the last ``try_complete`` (R19); ``f`` runs at most once,
        only when the first attempt failed.
        """
        with self._lock:
            if self.try_complete():
                return True
            f()
            return self.try_complete()

    def maybe_try_complete(self) -> bool:
        """Kafka 1.1-2.6's non-blocking ``try_complete`` with the "pending" flag (R20).

        Never blocks on the lock. If the lock is free, take it, clear the pending flag and
        ``try_complete``, then go round again if someone knocked meanwhile. If the lock
        is busy, set the pending flag; only the first knocker retries itself. At least
        one ``try_complete`` starts after each call began, provided the lock holder is
        itself in ``maybe_try_complete`` (KAFKA-8334). Returns True iff a
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
            if self._completed or not retry:
                return done

    def _claim_submission(self) -> bool:
        """Mark the operation as submitted to a purgatory; False if it already was (R34)."""
        with self._flags:  # compare-and-set False -> True
            claimed = not self._submitted
            self._submitted = True
        return claimed

    def __repr__(self) -> str:
        state = "completed" if self.is_completed else "pending"
        return f"<{type(self).__name__} delay_ms={self.delay_ms} {state}>"


_ABSTRACT = ("on_complete", "on_expiration", "try_complete")
ABSTRACT_METHODS.update({name: declared(DelayedOperation, name) for name in _ABSTRACT})
ABSTRACT_CLASSES[DelayedOperation] = _ABSTRACT
