"""The delay queue of buckets (Kafka's ``DelayQueue<TimerTaskList>``).

A binary heap of the buckets that hold (or held) entries, keyed by bucket expiration
(the start of the bucket's slot). The wheel offers a bucket only when its expiration
changes, and ``flush`` resets it after ``poll`` took it out, so a bucket is in the heap
at most once and its key never changes while it is there. The heap holds at most
``levels * (wheel_size - 1)`` buckets whatever the number of tasks.

Waiting: on a real clock, ``advance_clock`` lets time pass through
``clock.wait(condition, timeout_ms, next_due)`` exactly as the reference timer does
(R7); ``next_due`` is the earliest due time of any scheduled entry, found from the
heap (see ``earliest_due``). A ``ManualClock`` never blocks and never calls it, so an
idle timer does no per-tick work. An add with an earlier due time than the waiter's
target notifies the condition (``note_scheduled``).

All methods run with the owning timer's lock held (the condition is built on it).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

from kpurgatory import sync
from kpurgatory.optimized.bucket import TimerTaskList
from kpurgatory.spec.protocols import AbstractLock, Clock

__all__ = ["WAKE_NOW", "DelayQueue"]

WAKE_NOW = -(1 << 62)
"""A due time already passed on any clock: returned by ``next_due`` to end a wait."""


class DelayQueue:
    """A heap of buckets by expiration, plus the condition a real-clock drain waits on.

    Reference equivalent: none (the reference sorts its pending dict at every drain).
    Costs: ``offer`` and ``poll`` O(log B) with B queued buckets; ``earliest_due``
    O(1) in the common case, O(k log k) for k buckets visited at worst (see there).
    """

    __slots__ = ("_condition", "_heap", "_seq", "_target", "_waiters", "offers", "polls")

    def __init__(self, lock: AbstractLock) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()
        self._condition = sync.new_condition(lock)
        self._waiters = 0
        self._target: int | None = None
        self.offers = 0
        """Buckets offered so far (each ``offer``); read through ``SystemTimer.stats``."""
        self.polls = 0
        """Buckets taken out by ``poll`` so far; read through ``SystemTimer.stats``."""

    @property
    def condition(self) -> threading.Condition:
        """The condition ``advance_clock`` waits on (built on the timer's lock)."""
        return self._condition

    def __len__(self) -> int:
        """Number of queued buckets."""
        return len(self._heap)

    def offer(self, bucket: TimerTaskList) -> None:
        """Queue ``bucket`` under its current expiration. O(log B)."""
        expiration = bucket.expiration
        if expiration is None:
            raise ValueError(f"{bucket!r} has no expiration to be queued under")
        heapq.heappush(self._heap, (expiration, next(self._seq), bucket))
        self.offers += 1

    def poll(self, now: int) -> TimerTaskList | None:
        """Take out the bucket with the least expiration if that is <= ``now``, else None.

        O(log B). Kafka's ``delayQueue.poll()`` with the drain reading as "now".
        """
        heap = self._heap
        if heap and heap[0][0] <= now:
            self.polls += 1
            return heapq.heappop(heap)[2]
        return None

    def buckets(self) -> list[TimerTaskList]:
        """The queued buckets in heap order (a copy)."""
        return [item[2] for item in self._heap]

    def earliest_due(self) -> int | None:
        """The earliest due time of any entry in a queued bucket, or None if there is none.

        Exact, as the reference's ``min(entry.due)``: buckets are visited in expiration
        order by a walk down the heap (a frontier heap of the children of the buckets
        visited, so nothing is sorted), and the walk stops at the first bucket whose
        expiration (a lower bound of its entries' due times) is not below the best
        found. Empty buckets (all their entries cancelled) are skipped, so a real-clock
        wait never wakes for them. Cost: O(1) when the least-expiration bucket is a
        non-empty lowest-level one (its first entry is due at its expiration), else
        O(k log k) for the k buckets visited plus their ``min_due`` scans.
        """
        heap = self._heap
        size = len(heap)
        if not size:
            return None
        best: int | None = None
        frontier: list[tuple[int, int, int]] = [(heap[0][0], heap[0][1], 0)]
        while frontier:
            expiration, _, index = heapq.heappop(frontier)
            if best is not None and expiration >= best:
                break
            due = heap[index][2].min_due()
            if due is not None and (best is None or due < best):
                best = due
            for child in (2 * index + 1, 2 * index + 2):
                if child < size:
                    heapq.heappush(frontier, (heap[child][0], heap[child][1], child))
        return best

    def await_due(self, clock: Clock, timeout_ms: int, interrupted: Callable[[], bool]) -> int:
        """Let time pass until the earliest due time or ``timeout_ms``; return the reading.

        Called with the timer's lock held. Delegates to ``clock.wait`` (R7): a real
        clock blocks on the condition (released while blocked) and re-reads ``next_due``
        at every wake-up; ``interrupted()`` (wakeup or close) ends the wait at once.
        """

        def next_due() -> int | None:
            if interrupted():
                return WAKE_NOW
            due = self.earliest_due()
            self._target = due
            return due

        self._waiters += 1
        try:
            return clock.wait(self._condition, timeout_ms, next_due)
        finally:
            self._waiters -= 1
            if not self._waiters:
                self._target = None

    def note_scheduled(self, due: int) -> None:
        """Wake a waiter if an entry due at ``due`` was scheduled before its target. O(1)."""
        if self._waiters:
            target = self._target
            if target is None or due < target:
                self._target = due
                self._condition.notify_all()

    def wake_all(self) -> None:
        """Wake every waiter (wakeup, close): each re-reads ``next_due``."""
        self._condition.notify_all()

    def _check(self) -> None:
        """Assert the heap invariants: heap order, keys equal expirations, no duplicates."""
        heap = self._heap
        seen: set[int] = set()
        for index, (key, _, bucket) in enumerate(heap):
            if id(bucket) in seen:
                raise AssertionError(f"{bucket!r} is queued twice")
            seen.add(id(bucket))
            if key != bucket.expiration:
                raise AssertionError(
                    f"{bucket!r} is queued under {key} but its expiration is {bucket.expiration}"
                )
            for child in (2 * index + 1, 2 * index + 2):
                if child < len(heap) and heap[child][:2] < heap[index][:2]:
                    raise AssertionError("the delay queue is not a heap")
