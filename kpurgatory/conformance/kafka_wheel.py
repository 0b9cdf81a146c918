"""Upstream Kafka's hierarchical timing wheel and delay queue of buckets, as a model.

``KafkaWheel`` keeps what Kafka's ``TimingWheel``, ``TimerTaskList`` and ``SystemTimer``'s
``DelayQueue`` keep for one timer: wheel levels (a tick, a current time and a ring of
buckets each; a level is created on demand, starting at the current time of the level
below rounded to its own tick), and the buckets whose expiration was set since they were
last flushed, in a queue ordered by expiration. ``kpurgatory.conformance.kafka_model``
drives it: which buckets an ``advanceClock`` dequeues decides Kafka's result and its
current time, where a task lands decides when it is handed over, and Kafka's ``add``
judges "due at once" on every level it walks through (an upper level whose current time
was rounded towards zero can already be past an expiration the lowest level is not).

The methods follow Kafka's code line for line (``add``, ``advance``, ``poll``); a bucket's
entries stay in insertion order, which is the order Kafka's flush hands them over in, and
the queue is Java's binary heap (``DelayQueue`` over ``PriorityQueue``), so buckets of
equal expiration (on different levels) come out in the order Java's heap gives them:
that order decides which of two tasks due at once runs first, which a task's run that
cancels the other can show.
Entries are the model's (``WheelEntry``); the wheel never decides whether one is still
scheduled: the caller checks that when a flush takes it out (a cancel or a re-add leaves
the stale entry in its bucket here, where Kafka unlinks it; the bucket stays queued in
both, which is what is observable).
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Bucket", "DelayQueue", "KafkaWheel", "WheelEntry", "trunc_down"]

T = TypeVar("T")


def trunc_down(ms: int, tick: int) -> int:
    """Java's ``ms - ms % tick``: rounds toward zero (up, for a negative ``ms``)."""
    return ms - (abs(ms) % tick) * (1 if ms >= 0 else -1)


def _trunc_div(ms: int, tick: int) -> int:
    """Java's ``ms / tick`` for a positive ``tick``: the quotient rounded toward zero."""
    return -(-ms // tick) if ms < 0 else ms // tick


class WheelEntry(Generic[T]):
    """One scheduling of a task in the wheel: the model's ``item`` and Kafka's unrounded
    expiration (the clock reading at ``add`` plus the delay), which is what Kafka compares."""

    __slots__ = ("expiration", "item")

    def __init__(self, item: T, expiration: int) -> None:
        self.item = item
        self.expiration = expiration


class Bucket(Generic[T]):
    """Kafka's ``TimerTaskList``: entries in insertion order and an expiration, ``None``
    (Kafka's -1) once flushed or never set."""

    __slots__ = ("entries", "expiration")

    def __init__(self) -> None:
        self.entries: list[WheelEntry[T]] = []
        self.expiration: int | None = None


class _Level(Generic[T]):
    """One ``TimingWheel``: its tick, its span (``tick * wheel_size``), its current time
    and its ring of buckets."""

    __slots__ = ("buckets", "current", "interval", "tick")

    def __init__(self, tick: int, wheel_size: int, current: int) -> None:
        self.tick = tick
        self.interval = tick * wheel_size
        self.current = current
        self.buckets: list[Bucket[T]] = [Bucket() for _ in range(wheel_size)]


class DelayQueue(Generic[T]):
    """``java.util.concurrent.DelayQueue`` of buckets over ``java.util.PriorityQueue``: the
    same array heap with the same sift rules, ordered by each bucket's expiration as it is
    when compared (Kafka's ``TimerTaskList.compareTo``; an unset one is Kafka's -1)."""

    def __init__(self) -> None:
        self._heap: list[Bucket[T]] = []

    @staticmethod
    def _key(bucket: Bucket[T]) -> int:
        return -1 if bucket.expiration is None else bucket.expiration

    def offer(self, bucket: Bucket[T]) -> None:
        """``PriorityQueue.offer``: append, then sift up while less than the parent."""
        heap, key = self._heap, self._key(bucket)
        index = len(heap)
        heap.append(bucket)
        while index > 0:
            parent = (index - 1) >> 1
            if key >= self._key(heap[parent]):
                break
            heap[index] = heap[parent]
            index = parent
        heap[index] = bucket

    def poll(self, now_ms: int) -> Bucket[T] | None:
        """``DelayQueue.poll()``: the head if its expiration is at or before ``now_ms`` (its
        delay is then zero), taken out as ``PriorityQueue.poll`` does (the last element
        sifts down from the root, preferring the left child on a tie); else None."""
        heap = self._heap
        if not heap or self._key(heap[0]) > now_ms:
            return None
        head, last = heap[0], heap.pop()
        size = len(heap)
        if size:
            key, index = self._key(last), 0
            while index < size >> 1:
                child = 2 * index + 1
                if child + 1 < size and self._key(heap[child]) > self._key(heap[child + 1]):
                    child += 1
                if key <= self._key(heap[child]):
                    break
                heap[index] = heap[child]
                index = child
            heap[index] = last
        return head


class KafkaWheel(Generic[T]):
    """Kafka's wheel levels and delay queue for one timer (module docstring).

    ``truncating``: Java's division, which rounds toward zero (``kafka-truncating-
    division``); otherwise floor division, as the spec's arithmetic (R1).
    """

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int, *, truncating: bool) -> None:
        self.wheel_size = wheel_size
        self.truncating = truncating
        self.levels: list[_Level[T]] = [_Level(tick_ms, wheel_size, self.round(start_ms, tick_ms))]
        self._queue: DelayQueue[T] = DelayQueue()

    @property
    def current_ms(self) -> int:
        """The lowest level's current time (what Kafka's ``add`` first compares with)."""
        return self.levels[0].current

    def round(self, ms: int, tick: int) -> int:
        """``ms`` rounded down to a multiple of ``tick`` as the port's arithmetic rounds."""
        return trunc_down(ms, tick) if self.truncating else ms - ms % tick

    def _divide(self, ms: int, tick: int) -> int:
        """``ms / tick`` as the port's arithmetic divides (Kafka's bucket's virtual id)."""
        return _trunc_div(ms, tick) if self.truncating else ms // tick

    def add(self, entry: WheelEntry[T], current_ms: int | None = None) -> bool:
        """``TimingWheel.add``: put ``entry`` in its bucket and return True, or return False
        if it is due at once on the level it reached (already expired there).

        ``current_ms`` stands for the lowest level's current time when the model's
        current time is ahead of its wheel (a drain that moved the current time to its
        reading before handing over, as the spec's R2 does)."""
        expiration = entry.expiration
        index = 0
        while True:
            level = self.levels[index]
            current = level.current if index or current_ms is None else current_ms
            if expiration < current + level.tick:
                return False
            if expiration < current + level.interval:
                virtual = self._divide(expiration, level.tick)
                bucket = level.buckets[virtual % self.wheel_size]
                bucket.entries.append(entry)
                if bucket.expiration != virtual * level.tick:  # TimerTaskList.setExpiration
                    bucket.expiration = virtual * level.tick
                    self._queue.offer(bucket)
                return True
            if index + 1 == len(self.levels):  # addOverflowWheel
                self.levels.append(
                    _Level(level.interval, self.wheel_size, self.round(current, level.interval))
                )
            index += 1

    def advance(self, ms: int) -> None:
        """``TimingWheel.advanceClock``: each level moves once a whole tick of its own passed,
        to ``ms`` rounded to that tick, and passes the rounded time up."""
        for level in self.levels:
            if ms < level.current + level.tick:
                return
            level.current = ms = self.round(ms, level.tick)

    def poll(self, now_ms: int) -> Bucket[T] | None:
        """``DelayQueue.poll()`` at the reading ``now_ms``: the queued bucket of least
        expiration if that expiration is at or before ``now_ms``, taken out of the queue."""
        return self._queue.poll(now_ms)

    def reset(self, bucket: Bucket[T]) -> None:
        """The end of ``TimerTaskList.flush``: the bucket's expiration is unset, so the next
        entry that lands in it queues it again."""
        bucket.expiration = None
