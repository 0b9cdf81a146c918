"""Cost models: what Kafka's bucket delay queue and a per-request heap would do for a stream.

``WheelModel`` replays the timer-level effect of a stream (adds, cancels, drains) through
Kafka's hierarchical timing wheel — buckets per level, lazily created overflow levels, and
one delay queue (a heap) of *buckets*, offered only when a bucket's expiration changes
(``TimerTaskList.setExpiration``) — with this project's deterministic current-time rule
(R2). It counts bucket offers and polls (empty ones too: a bucket whose entries were all
cancelled is still polled), cascades (entries re-inserted into a finer level when a
coarse bucket is flushed), the level each entry was first placed at, and the heap's size
(the cost of each offer or poll is about log2 of it).

``HeapModel`` is the pre-2015 purgatory: a ``java.util.concurrent.DelayQueue`` holding one
element per *request*, offered when the request is watched and polled at its deadline
whether or not it completed meanwhile (completed requests stayed queued until then).

Both are fed by ``kpurgatory.pipeline.replay`` from the observations of the reference run,
so their numbers describe the workload and the algorithm, not one implementation's code.
The model's fired entries are checked against the expirations the run observed
(``mismatches``); a non-zero count means the model and the run disagree.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from kpurgatory.spec.arithmetic import round_down

__all__ = ["HeapModel", "WheelModel"]


@dataclass
class _Bucket:
    """One slot of one level: entries by label, and the slot start it is queued for."""

    ident: int
    entries: dict[str, int] = field(default_factory=dict)
    expiration: int | None = None


@dataclass
class _Level:
    """One wheel level: tick, span, current time (a multiple of the tick), slots."""

    tick: int
    interval: int
    current: int
    slots: dict[int, _Bucket] = field(default_factory=dict)


def _log2_cost(size: int) -> int:
    """Comparisons of one heap offer or poll on a heap of ``size`` elements (at least 1)."""
    return max(1, math.ceil(math.log2(size + 1)))


class WheelModel:
    """Kafka's hierarchical wheel with a delay queue of buckets, counting its work.

    ``add(label, expiration)`` returns True if the entry was placed in a bucket, False if
    it was due at once (handed over inside ``add``, R3). ``cancel(label)`` unlinks an
    entry (its bucket stays queued). ``drain(now)`` polls every bucket whose slot start is
    at or before ``now``, cascading or firing its entries, then moves the current time
    to ``now`` rounded down (R2); it returns the labels fired.
    """

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int) -> None:
        self.wheel_size = wheel_size
        self.levels = [_Level(tick_ms, tick_ms * wheel_size, round_down(start_ms, tick_ms))]
        self.queue: list[tuple[int, int]] = []
        self.buckets: list[_Bucket] = []
        self.where: dict[str, _Bucket] = {}
        self.first_level: dict[str, int] = {}
        self.cascades_of: dict[str, int] = {}
        self.bucket_offers = 0
        self.bucket_polls = 0
        self.empty_polls = 0
        self.cascades = 0
        self.fired = 0
        self.due_at_once = 0
        self.peak_queue = 0
        self.queue_cost = 0
        self.peak_pending = 0

    @property
    def pending(self) -> int:
        """Entries linked into some bucket (the timer's size)."""
        return len(self.where)

    def add(self, label: str, expiration: int) -> bool:
        """Place ``label`` by its absolute ``expiration``; False if it is due at once."""
        placed = self._place(label, expiration)
        if placed is None:
            self.due_at_once += 1
            self.fired += 1
            self.first_level.setdefault(label, -1)
            return False
        self.first_level[label] = placed
        self.cascades_of.setdefault(label, 0)
        self.peak_pending = max(self.peak_pending, len(self.where))
        return True

    def cancel(self, label: str) -> None:
        """Unlink ``label`` if it is in a bucket (no-op otherwise)."""
        bucket = self.where.pop(label, None)
        if bucket is not None:
            del bucket.entries[label]

    def drain(self, now: int) -> list[str]:
        """Poll and flush every bucket due at ``now``; return the labels that fired."""
        fired: list[str] = []
        queue = self.queue
        while queue and queue[0][0] <= now:
            self.queue_cost += _log2_cost(len(queue))
            expiration, ident = heapq.heappop(queue)
            self.bucket_polls += 1
            bucket = self.buckets[ident]
            self._advance(expiration)
            entries = bucket.entries
            bucket.entries = {}
            bucket.expiration = None
            if not entries:
                self.empty_polls += 1
            for label, entry_expiration in entries.items():
                del self.where[label]
                if self._place(label, entry_expiration) is None:
                    fired.append(label)
                    self.fired += 1
                else:
                    self.cascades += 1
                    self.cascades_of[label] = self.cascades_of.get(label, 0) + 1
        self._advance(now)
        return fired

    def _advance(self, time: int) -> None:
        """Kafka's ``TimingWheel.advanceClock``: each level follows the one below it."""
        for level in self.levels:
            if time < level.current + level.tick:
                return
            level.current = round_down(time, level.tick)
            time = level.current

    def _place(self, label: str, expiration: int) -> int | None:
        """Kafka's ``TimingWheel.add`` over the levels; the level used, or None if due."""
        index = 0
        while True:
            level = self.levels[index]
            if expiration < level.current + level.tick:
                return None
            if expiration < level.current + level.interval:
                virtual_id = expiration // level.tick
                slot = virtual_id % self.wheel_size
                bucket = level.slots.get(slot)
                if bucket is None:
                    bucket = _Bucket(len(self.buckets))
                    self.buckets.append(bucket)
                    level.slots[slot] = bucket
                bucket.entries[label] = expiration
                self.where[label] = bucket
                start = virtual_id * level.tick
                if bucket.expiration != start:
                    if bucket.expiration is not None:
                        raise AssertionError("a queued bucket changed its slot start")
                    bucket.expiration = start
                    self.queue_cost += _log2_cost(len(self.queue))
                    heapq.heappush(self.queue, (start, bucket.ident))
                    self.bucket_offers += 1
                    self.peak_queue = max(self.peak_queue, len(self.queue))
                return index
            if index + 1 == len(self.levels):
                interval = level.interval
                self.levels.append(
                    _Level(
                        interval, interval * self.wheel_size, round_down(level.current, interval)
                    )
                )
            index += 1


class HeapModel:
    """The old purgatory's ``DelayQueue`` of requests: offer at watch, poll at the deadline.

    ``offer(arrival, deadline)`` records one request; ``finish()`` replays the offers and
    the polls in time order and returns the queue's peak size and the summed log2 cost.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[int, int]] = []

    def offer(self, arrival_ms: int, deadline_ms: int) -> None:
        """A request entered the queue at ``arrival_ms`` and leaves at ``deadline_ms``."""
        self.requests.append((arrival_ms, deadline_ms))

    def finish(self) -> tuple[int, int, int, int]:
        """``(offers, polls, peak size, summed log2 cost)`` over the whole stream."""
        events = sorted(  # at equal times offers (0) come before polls (1)
            [(arrival, 0) for arrival, _ in self.requests]
            + [(max(deadline, arrival), 1) for arrival, deadline in self.requests]
        )
        size = peak = cost = 0
        for _, is_poll in events:
            cost += _log2_cost(size)
            size += -1 if is_poll else 1
            peak = max(peak, size)
        return len(self.requests), len(self.requests), peak, cost
