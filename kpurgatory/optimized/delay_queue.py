"""The delay queue of buckets (Kafka's ``DelayQueue<TimerTaskList>``).

Rules: R7, R73.

A binary heap of the buckets that hold (or held) entries, keyed by bucket expiration
(the start of the bucket's slot). The wheel offers a bucket only when its expiration
changes, and ``flush`` resets it after ``poll`` took it out, so a bucket is in the heap
at most once and its key never changes while it is there. The heap holds at most
``levels * (wheel_size - 1)`` buckets whatever the number of tasks.

A bounded drain (R73) that stops inside a bucket puts it back (``put_back``): it is kept
apart as ``unfinished``, outside the heap, and ``poll`` returns it before any other, so
the drain goes on exactly where it stopped.

Waiting: on a real clock, ``advance_clock`` lets time pass through
``clock.wait(condition, timeout_ms, next_due)`` exactly as the reference timer does
(R7); ``next_due`` is the earliest due time of any scheduled entry, found from the
heap (see ``earliest_due``). A ``ManualClock`` never blocks and never calls it, so an
idle timer does no per-tick work. An add with an earlier due time than the waiter's
target notifies the condition (``note_scheduled``). The timer does the waiter
bookkeeping itself (``waiters``, ``target``) around ``clock.wait``: no call per step.

All methods run with the owning timer's lock held (the condition is built on it).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

from kpurgatory import sync
from kpurgatory.optimized.bucket import TimerTaskList
from kpurgatory.spec.protocols import AbstractLock

__all__ = ["WAKE_NOW", "DelayQueue"]

WAKE_NOW = -(1 << 62)
"""A due time already passed on any clock: returned by ``next_due`` to end a wait."""


def _never() -> bool:
    """The default ``interrupted``: a queue without a timer is never woken early."""
    return False


class DelayQueue:
    """A heap of buckets by expiration, plus the condition a real-clock drain waits on.

    Reference equivalent: none (the reference sorts its pending dict at every drain).
    Costs: ``offer`` and ``poll`` O(log B) with B queued buckets; ``earliest_due``
    O(k log k) for the k buckets whose expiration lies below the answer (usually one or
    two), plus the entries of the coarse ones among them.
    """

    __slots__ = (
        "_condition",
        "_interrupted",
        "_seq",
        "heap",
        "offers",
        "polls",
        "target",
        "unfinished",
        "waiters",
    )

    def __init__(self, lock: AbstractLock, interrupted: Callable[[], bool] = _never) -> None:
        self._interrupted = interrupted
        self.heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()
        self._condition = sync.new_condition(lock)
        self.waiters = 0
        """Drains in their clock wait now: ``SystemTimer.advance_clock`` counts itself in
        around ``clock.wait`` and clears ``target`` when the last one leaves (read by
        ``add`` to skip ``note_scheduled``)."""
        self.target: int | None = None
        """The due time a blocked drain waits for (``next_due``), None with no waiter."""
        self.offers = 0
        """Buckets offered so far (each ``offer``); read through ``SystemTimer.stats``."""
        self.polls = 0
        """Buckets taken out by ``poll`` so far; read through ``SystemTimer.stats``."""
        self.unfinished: TimerTaskList | None = None
        """The bucket a bounded drain stopped inside (R73), if any: due, out of the heap,
        and the first ``poll`` returns it."""

    @property
    def condition(self) -> threading.Condition:
        """The condition ``advance_clock`` waits on (built on the timer's lock)."""
        return self._condition

    def __len__(self) -> int:
        """Number of queued buckets."""
        return len(self.heap)

    def offer(self, bucket: TimerTaskList) -> None:
        """Queue ``bucket`` under its current expiration. O(log B)."""
        expiration = bucket.expiration
        if expiration is None:
            raise ValueError(f"{bucket!r} has no expiration to be queued under")
        heapq.heappush(self.heap, (expiration, next(self._seq), bucket))
        self.offers += 1

    def poll(self, now: int) -> TimerTaskList | None:
        """Take out the bucket with the least expiration if that is <= ``now``, else None.

        An ``unfinished`` bucket comes first, whatever ``now`` (it was due when its drain
        began, and every queued bucket expires after it; not counted in ``polls`` again).
        O(log B). Kafka's ``delayQueue.poll()`` with the drain reading as "now".
        """
        unfinished = self.unfinished
        if unfinished is not None:
            self.unfinished = None
            return unfinished
        heap = self.heap
        if heap and heap[0][0] <= now:
            self.polls += 1
            return heapq.heappop(heap)[2]
        return None

    def put_back(self, bucket: TimerTaskList) -> None:
        """Keep ``bucket``, which a bounded drain stopped inside, for the next ``poll`` (R73)."""
        if self.unfinished is not None:
            raise AssertionError(f"put back {bucket!r} over unfinished {self.unfinished!r}")
        self.unfinished = bucket

    def has_due(self, now: int) -> bool:
        """Whether a drain at ``now`` has a bucket to take: an unfinished one, or a queued
        one expiring at or before ``now``. O(1)."""
        heap = self.heap
        return self.unfinished is not None or bool(heap and heap[0][0] <= now)

    def buckets(self) -> list[TimerTaskList]:
        """The queued buckets in heap order (a copy)."""
        return [item[2] for item in self.heap]

    def earliest_due(self) -> int | None:
        """The earliest due time of any entry in a queued bucket, or None if there is none.

        Exact, as the reference's ``min(entry.due)``: buckets are visited in expiration
        order, and the visit stops at the first bucket whose expiration (a lower bound
        of its entries' due times) is not below the best found. Empty buckets (all their
        entries cancelled) are skipped, so a real-clock wait never wakes for them.

        The visit walks the heap in order without sorting it (a frontier of heap
        indexes: pop the least, push its two children), so it costs O(k log k) for the
        k buckets it visits, plus the entries ``min_due`` reads in a coarse bucket. A
        non-empty bucket of the lowest wheel at the head answers at once: its entries
        are all due at its expiration. An ``unfinished`` bucket (R73) counts too: its
        entries are scheduled, and it expires before every queued one.
        """
        heap = self.heap
        unfinished = self.unfinished
        best: int | None = None if unfinished is None else unfinished.min_due()
        frontier: list[tuple[int, int, int]] = [(heap[0][0], heap[0][1], 0)] if heap else []
        size = len(heap)
        while frontier:
            expiration, _, index = heapq.heappop(frontier)
            if best is not None and expiration >= best:
                break
            due = heap[index][2].min_due()
            if due is not None and (best is None or due < best):
                best = due
            for child in (2 * index + 1, 2 * index + 2):
                if child < size:
                    key, seq, _ = heap[child]
                    heapq.heappush(frontier, (key, seq, child))
        return best

    def next_due(self) -> int | None:
        """What a real-clock wait waits for: ``WAKE_NOW`` once interrupted, else the
        earliest due time (remembered as the waiter's target for ``note_scheduled``)."""
        if self._interrupted():
            return WAKE_NOW
        due = self.earliest_due()
        self.target = due
        return due

    def note_scheduled(self, due: int) -> None:
        """Wake a waiter if an entry due at ``due`` was scheduled before its target. O(1)."""
        if self.waiters:
            target = self.target
            if target is None or due < target:
                self.target = due
                self._condition.notify_all()

    def wake_all(self) -> None:
        """Wake every waiter (wakeup, close): each re-reads ``next_due``."""
        self._condition.notify_all()

    def _check(self) -> None:
        """Assert the heap invariants: heap order, keys equal expirations, no duplicates,
        an unfinished bucket (R73) has an expiration and is not in the heap as well; and
        the waiter bookkeeping: ``waiters`` >= 0, no target without a waiter."""
        if self.waiters < 0:
            raise AssertionError(f"negative waiters count {self.waiters}")
        if not self.waiters and self.target is not None:
            raise AssertionError(f"target {self.target} kept with no waiter")
        heap = self.heap
        seen: set[int] = set()
        unfinished = self.unfinished
        if unfinished is not None:
            if unfinished.expiration is None:
                raise AssertionError(f"unfinished {unfinished!r} has no expiration")
            seen.add(id(unfinished))  # so it is never in the heap as well
        for index, (key, _, bucket) in enumerate(heap):
            if id(bucket) in seen:
                raise AssertionError(f"{bucket!r} is queued twice (or queued and unfinished)")
            seen.add(id(bucket))
            if key != bucket.expiration:
                raise AssertionError(
                    f"{bucket!r} is queued under {key} but its expiration is {bucket.expiration}"
                )
            for child in (2 * index + 1, 2 * index + 2):
                if child < len(heap) and heap[child][:2] < heap[index][:2]:
                    raise AssertionError("the delay queue is not a heap")
