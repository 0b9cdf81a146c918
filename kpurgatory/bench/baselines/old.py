"""The ``old`` baseline: Kafka 0.8's purgatory, the design the timing wheel replaced.

From the "Purgatory Redesign Proposal" and Kafka 0.8.2's ``RequestPurgatory``:

- The timer is a delay queue of *operations* (a binary heap ordered by due time). A
  completed (or cancelled) operation is **left in it** until its due time comes round
  (then it is skipped) or a purge removes it, so ``size`` (``num_delayed``, 0.8's
  ``delayed()``) counts completed operations too.
- The reaper loop (0.8's ``ExpiredRequestReaper.run``) waits up to 200 ms for the next
  due operation, expires **one** operation, then checks two size-triggered purges:
  if ``watched >= purge_interval`` it scans every watcher list for completed operations,
  and if the queue's size ``>= purge_interval`` it scans the whole queue. With many
  pending operations both scans run after every single expiry: the cost the proposal
  blames for the old design saturating.

Where this differs from the spec (and only there): R9/R12/R28 (size counts dead
entries until drained or purged), R30 (size-triggered purges, no estimate; the estimate
is still counted for the API) and R31 (a reaper step expires at most one operation).
``advance_clock`` called directly still drains every due operation (R5), then runs the
purge checks once. Everything else (due times, order, R11, the operation and
``try_complete_else_watch`` sequences, errors) is the spec's, so the harness drives it
through the same calls as every other design.
"""

from __future__ import annotations

from typing import cast

from kpurgatory.bench.baselines._core import (
    DelayedOperation,
    HeapTimerBase,
    PurgatoryBase,
    TimerTask,
)
from kpurgatory.reference.purgatory import REAPER_STEP_MS

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "SystemTimer", "TimerTask"]


class SystemTimer(HeapTimerBase):
    """Java's ``DelayQueue`` of operations: dead entries stay until due or purged.

    Unlike the ``heap`` baseline it never drops dead entries on its own (no asyncio
    rule, no dropping at ``add``); ``purge`` removes them all (O(n)), and ``size`` counts
    them (0.8's ``delayedQueue.size()``).
    """

    _drop_dead_heads = False

    def _live_size(self) -> int:
        return len(self._heap)

    def purge(self) -> int:
        """Remove every dead entry (0.8's ``purgeSatisfied`` over the queue); return how many."""
        return self._drop_dead_locked()

    def expire_one(self, timeout_ms: int) -> bool:
        """0.8's ``pollExpired``: wait up to ``timeout_ms``, hand over at most one due operation."""
        return self._advance(timeout_ms, 1)


class DelayedOperationPurgatory(PurgatoryBase):
    """Kafka 0.8's purgatory: watcher lists, a delay queue of operations, size-triggered purges.

    The reference purgatory with 0.8's purge check and reaper step in place of R30/R31's.
    """

    _timer_type = SystemTimer

    @property
    def _queue(self) -> SystemTimer:
        """The timer, typed as the delay queue it is (``_timer_type`` makes it one)."""
        return cast(SystemTimer, self._timer)

    def _purge_if_due(self) -> None:
        """0.8: purge watcher lists if ``watched >= purge_interval``; the queue if its size is."""
        with self._lock:
            if self.watched >= self._purge_interval:
                self._purge_watchers()
        if self._queue.size >= self._purge_interval:
            self._queue.purge()

    def _reaper_step(self) -> None:
        """0.8's reaper iteration: expire at most one operation, then the purge checks."""
        self._queue.expire_one(REAPER_STEP_MS)
        self._purge_if_due()
