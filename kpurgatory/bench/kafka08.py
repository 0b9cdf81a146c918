"""Kafka 0.8's purgatory, the design the timing wheel replaced (the proposal's ``old`` design).

From the "Purgatory Redesign Proposal" and Kafka 0.8.2's ``RequestPurgatory``: the timer
is a delay queue (a binary heap) of *operations*; a completed operation is left in it
until its due time comes round or a purge removes it, so the queue's size counts
completed operations too. The reaper waits up to 200 ms for the next due operation,
expires **one**, then checks two size-triggered purges: the watcher lists when
``watched >= purge_interval`` and the whole queue when its size is. With many pending
operations both O(n) scans follow every single expiry: the cost the proposal blames.

Built on the reference: its operations, its purgatory (only the purge check and the
reaper step differ), its timer's lock and ``_pending`` dict of live entries, plus the
heap that keeps the dead ones. Nothing else differs from the spec, so the enqueue
benchmark drives it through the same calls as the optimized purgatory.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

from kpurgatory._checks import require_at_least
from kpurgatory.reference import operation as _operation
from kpurgatory.reference import purgatory as _purgatory
from kpurgatory.reference import timer as _timer
from kpurgatory.reference.timer import TimerTask
from kpurgatory.spec.arithmetic import due_time, expiration_ms

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "SystemTimer", "TimerTask"]

_sequence = itertools.count()


class SystemTimer(_timer.SystemTimer):
    """Java's ``DelayQueue`` of operations: entries stay until due or purged.

    ``size`` counts the heap, dead entries included (0.8's ``delayed()``); ``purge``
    drops the dead ones (O(n)); ``expire(limit=1)`` is 0.8's ``pollExpired``.
    """

    def __init__(self, executor_name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(executor_name, *args, **kwargs)
        self._heap: list[tuple[int, int, Any]] = []

    @property
    def size(self) -> int:
        """Entries in the delay queue, completed operations included."""
        return len(self._heap)

    def add(self, task: TimerTask) -> None:
        """The reference ``add`` (R1, R3, R10) on the heap; like Java's ``DelayQueue.offer``
        it wakes the reaper only when the new entry is the earliest (the reference wakes
        it at every add)."""
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a reference TimerTask, not {type(task).__name__}")
        with _timer._STATE_LOCK:
            if self._closed:
                raise RuntimeError(f"timer {self._name!r} is closed; cannot add {task!r}")
            due = due_time(expiration_ms(self._clock.now_ms(), task.delay_ms), self._tick_ms)
            if task._entry is not None:
                task._unschedule()
            if due > self._current_time:
                entry = task._entry = _timer._Entry(self, task, due)
                self._pending[entry] = None
                item = (due, next(_sequence), entry)
                heapq.heappush(self._heap, item)
                if self._heap[0] is item:
                    self._condition.notify_all()
                return
        self._hand_over(task)

    def advance_clock(self, timeout_ms: int, max_entries: int | None = None) -> bool:
        """Wait up to ``timeout_ms``, then hand over every due operation (at most
        ``max_entries`` of them, R73)."""
        limit = None if max_entries is None else require_at_least("max_entries", max_entries, 1)
        return self.expire(require_at_least("timeout_ms", timeout_ms, 0), limit)

    def expire(self, timeout_ms: int, limit: int | None) -> bool:
        """Wait up to ``timeout_ms``, then hand over at most ``limit`` due operations."""
        with _timer._STATE_LOCK:
            now = self._wait(timeout_ms)  # the reference timer's wait; only the drain differs
            if now is None:
                return False
            due: list[Any] = []
            while self._heap and self._heap[0][0] <= now and (limit is None or len(due) < limit):
                entry = heapq.heappop(self._heap)[2]
                if entry.task._entry is entry:  # live: cancel and re-add unlink the entry
                    del self._pending[entry]
                    due.append(entry)
            self._current_time = max(self._current_time, now - now % self._tick_ms)
        handed_over = False
        for entry in due:
            with _timer._STATE_LOCK:
                if entry.task._entry is not entry:
                    continue  # cancelled or re-added before its turn (R11)
                entry.task._entry = None
            self._hand_over(entry.task)
            handed_over = True
        return handed_over

    def purge(self) -> None:
        """Drop every dead entry (0.8's ``purgeSatisfied`` over the queue)."""
        with _timer._STATE_LOCK:
            self._heap = [item for item in self._heap if item[2].task._entry is item[2]]
            heapq.heapify(self._heap)

    def _next_due(self) -> int | None:
        if self._closed or self._wake_requested:
            return _timer._WAKE_NOW
        return self._heap[0][0] if self._heap else None


class DelayedOperation(_operation.DelayedOperation):
    """The reference operation, as 0.8's purges see it: ``_is_finished``, which the
    watcher purge calls once per watched operation on every reaper step, reads one int
    field (the lifecycle state, R68), as cheap as 0.8's flag check."""


class DelayedOperationPurgatory(_purgatory.DelayedOperationPurgatory[Any]):
    """The reference purgatory with 0.8's purge check and reaper step."""

    _timer_type = SystemTimer
    _operation_type = DelayedOperation

    def _purge_if_due(self) -> None:
        with self._lock:
            if self.watched >= self._purge_interval:  # the one lock is the counters lock
                self._num_purged += self._purge_watchers()
        queue: SystemTimer = self._timer  # type: ignore[assignment]
        if queue.size >= self._purge_interval:
            queue.purge()

    def _reaper_step(self) -> None:
        queue: SystemTimer = self._timer  # type: ignore[assignment]
        queue.expire(_purgatory.REAPER_STEP_MS, 1)
        self._purge_if_due()
