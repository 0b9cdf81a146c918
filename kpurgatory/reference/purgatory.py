"""The reference ``DelayedOperationPurgatory``: the purgatory protocol over a dict of lists.

What it does is ``kpurgatory.protocol.Purgatory`` (R22's submission with its undo log,
the sweeps, abandon, purge and let-go, shutdown): read that first. This class is its
simplest watcher store, a dict key -> list of operations in watch order, and one
re-entrant lock for the map, the counters and the shutdown latch. The lock is never
held while an operation's ``try_complete`` runs (KAFKA-3994), and it is always taken
after an operation's lock, never before.

Rules: R22, R23, R26, R27, R30, R31, R33, R34, R36, R38, R40, R67.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from typing import ClassVar

from kpurgatory import sync
from kpurgatory._checks import (
    require_at_least,
    require_bool,
    require_hashable,
    require_int,
    require_str,
    watch_key_list,
)
from kpurgatory._lifecycle import REAPER_STEP_MS
from kpurgatory._sweep import KeyFailedError, key_failed_in_purge, keyed
from kpurgatory._typing import TypeVar
from kpurgatory.clock import ManualClock
from kpurgatory.protocol import Purgatory
from kpurgatory.reference.operation import DelayedOperation
from kpurgatory.reference.timer import SystemTimer

__all__ = ["REAPER_STEP_MS", "DelayedOperationPurgatory"]

logger = logging.getLogger(__name__)


T = TypeVar("T", bound=DelayedOperation, default=DelayedOperation)
"""The operations a purgatory holds; ``DelayedOperationPurgatory(...)`` alone means any."""


class DelayedOperationPurgatory(Purgatory[T, Hashable]):
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
        name = require_str("purgatory_name", purgatory_name)
        if timer is not None and not isinstance(timer, self._timer_type):
            raise TypeError(
                f"timer must be a {_qualified(self._timer_type)}, not {type(timer).__name__}"
            )
        broker = require_int("broker_id", broker_id)
        interval = require_at_least("purge_interval", purge_interval, 0)
        reaper = require_bool("reaper_enabled", reaper_enabled)
        timed = require_bool("timer_enabled", timer_enabled)
        if reaper_enabled and timer is not None and isinstance(timer.clock, ManualClock):
            raise ValueError(
                "reaper_enabled=True needs a real clock: the reaper would advance the "
                "ManualClock on its own; pass reaper_enabled=False and call advance_clock"
            )
        self._lock = sync.new_lock()
        self._watchers: dict[Hashable, list[T]] = {}
        own_timer = self._timer_type(purgatory_name) if timer is None else timer
        super().__init__(
            name, own_timer, broker, interval, reaper, timed,
            self._lock, self._lock, sync.new_condition(self._lock),
        )  # fmt: skip

    # -- read-only state -------------------------------------------------------------

    @property
    def timer(self) -> SystemTimer:
        """The timer operations wait in."""
        return self._timer  # type: ignore[return-value]  # the one given or made above

    @property
    def watched(self) -> int:
        """Number of (key, operation) pairs in watcher lists, completed ones included (R27)."""
        with self._lock:
            return sum(len(ops) for ops in self._watchers.values())

    @property
    def watched_keys(self) -> int:
        """Number of keys that have a watcher list (empty lists are dropped, R26)."""
        with self._lock:
            return len(self._watchers)

    # -- operations ------------------------------------------------------------------

    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it on every key and time it.

        The sequence (R22, ``Purgatory._submit``), all while holding the operation's
        lock: ``try_complete``; if that fails, watch the operation on each distinct key
        while it is not completed (KAFKA-18027), count it once in the purge estimate,
        ``try_complete`` again, and if it is still not completed add it to the timer
        (when ``timer_enabled``). Returns True iff this call completed the operation
        (R23). An operation goes through this method at most once (R34). Raises
        ``TypeError``/``ValueError`` on bad arguments (R36) and ``RuntimeError`` after
        ``shutdown``; a call that raises leaves no trace (R38).
        """
        if not isinstance(operation, self._operation_type):
            raise TypeError(
                f"operation must be a {_qualified(self._operation_type)}, "
                f"not {type(operation).__name__}"
            )
        return self._submit(operation, tuple(watch_key_list(watch_keys)))

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

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self._name!r}, watched={self.watched}, "
            f"num_delayed={self.num_delayed})"
        )

    # -- the store: a dict of lists under the one lock --------------------------------

    def _watch_key(self, key: Hashable, operation: T) -> None:
        with self._lock:
            self._watchers.setdefault(key, []).append(operation)

    def _unwatch_key(self, key: Hashable, operation: T) -> None:
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

    def _snapshot(self, key: Hashable) -> tuple[Hashable, list[T]] | None:
        require_hashable("key", key)
        with self._lock:
            return key, list(self._watchers.get(key, ()))

    def _unlink(self, handle: Hashable, operation: T) -> None:
        self._unwatch_key(handle, operation)

    def _take_key(self, key: Hashable) -> list[T]:
        require_hashable("key", key)
        with self._lock:
            return self._watchers.pop(key, [])

    def _purge_pass(self) -> int:
        with self._lock:
            return self._purge_watchers()

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
        if interrupt is not None:
            raise interrupt
        return purged


def _qualified(cls: type) -> str:
    """``module.Name`` of ``cls``, for errors that say which design's class was expected."""
    return f"{cls.__module__}.{cls.__qualname__}"
