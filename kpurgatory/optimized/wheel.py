"""The hierarchical timing wheel (Kafka's ``TimingWheel``), exact to the spec's arithmetic.

Rules: R3, R73.

A wheel has ``wheel_size`` buckets of ``tick_ms`` each, spanning ``interval =
tick_ms * wheel_size``. Its ``current_time`` is a multiple of its tick. An entry due at
``d`` goes to the lowest wheel whose window holds it:

* ``d < current_time + tick_ms``: already due here ("expired": ``add`` returns False);
* ``d < current_time + interval``: the bucket of virtual bucket id ``vid = d // tick_ms``,
  slot ``vid % wheel_size``, whose expiration becomes the slot start ``vid * tick_ms``;
* otherwise the overflow wheel (created on first need with ``tick = interval`` and
  ``start = current_time``, so its current time is the lower one rounded down).

Within one wheel the valid ids lie in ``(current_time/tick, current_time/tick +
wheel_size)``: at most ``wheel_size - 1`` of them, so two rounds never share a slot.
``advance_clock(t)`` moves ``current_time`` to ``round_down(t)`` once at least one tick
has passed and lets the overflow wheel follow. See docs/algorithm.md.

The module-level helpers are pure, int-only functions (they carry PEP 316 contracts
for CrossHair); every rounding goes through ``kpurgatory.spec.arithmetic`` (floor
semantics, also for negative readings).

All methods run with the owning timer's lock held.
"""

from __future__ import annotations

from kpurgatory.optimized.bucket import TaskCounter, TimerTaskEntry, TimerTaskList
from kpurgatory.optimized.delay_queue import DelayQueue
from kpurgatory.spec.arithmetic import round_down
from kpurgatory.spec.protocols import AbstractLock

__all__ = [
    "TimingWheel",
    "advanced_time",
    "bucket_expiration",
    "expired_at_level",
    "fits_level",
    "slot_index",
    "virtual_bucket_id",
    "wheel_interval",
]


def wheel_interval(tick_ms: int, wheel_size: int) -> int:
    """The span of one wheel: ``tick_ms * wheel_size`` (also the overflow wheel's tick).

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    post: __return__ >= 2 * tick_ms
    post: __return__ % tick_ms == 0
    """
    return tick_ms * wheel_size


def virtual_bucket_id(due: int, tick_ms: int) -> int:
    """The number of whole ticks before ``due``: which round of which slot holds it.

    pre: tick_ms >= 1
    post: __return__ * tick_ms <= due < (__return__ + 1) * tick_ms
    """
    return due // tick_ms


def slot_index(vid: int, wheel_size: int) -> int:
    """The bucket of a wheel that holds virtual bucket id ``vid``.

    pre: wheel_size >= 2
    post: 0 <= __return__ < wheel_size
    post: (vid - __return__) % wheel_size == 0
    """
    return vid % wheel_size


def bucket_expiration(vid: int, tick_ms: int) -> int:
    """The expiration of the bucket holding ``vid``: the start of its slot.

    pre: tick_ms >= 1
    post: __return__ % tick_ms == 0
    post: __return__ // tick_ms == vid
    """
    return vid * tick_ms


def expired_at_level(due: int, current_time: int, tick_ms: int) -> bool:
    """Kafka's "already expired" test on one wheel: ``due < current_time + tick_ms``.

    On the lowest wheel, where ``due`` and ``current_time`` are multiples of the tick,
    this is exactly ``is_due(due, current_time)`` (R3).

    pre: tick_ms >= 1
    post: __return__ == (due < current_time + tick_ms)
    """
    return due < current_time + tick_ms


def fits_level(due: int, current_time: int, interval: int) -> bool:
    """Whether a not-yet-expired ``due`` lies inside a wheel's window.

    post: __return__ == (due < current_time + interval)
    """
    return due < current_time + interval


def advanced_time(current_time: int, time_ms: int, tick_ms: int) -> int:
    """A wheel's current time after ``advance_clock(time_ms)`` (Kafka's rule, floor rounding).

    Moves only once a whole tick has passed, and never backwards.

    pre: tick_ms >= 1
    pre: current_time % tick_ms == 0
    post: __return__ >= current_time
    post: __return__ % tick_ms == 0
    post: __return__ == max(current_time, time_ms - time_ms % tick_ms)
    """
    if time_ms >= current_time + tick_ms:
        return time_ms - time_ms % tick_ms  # round_down(time_ms, tick_ms), see below
    return current_time


class TimingWheel:
    """One level of the hierarchical wheel, with a lazily created overflow wheel above it.

    ``TimingWheel(tick_ms, wheel_size, start_ms, counter, queue)`` as in Kafka; ``lock``
    is the owning timer's lock (stored in each bucket: entries reach it through their holder).
    Reference equivalent: none (the reference keeps one flat dict). Costs: ``add`` O(1)
    per level visited (levels grow as log_{wheel_size} of the delay); ``advance_clock``
    O(1) per existing level.
    """

    __slots__ = (
        "buckets",
        "counter",
        "current_time",
        "interval",
        "lock",
        "overflow",
        "queue",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        counter: TaskCounter,
        queue: DelayQueue,
        lock: AbstractLock,
    ) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms must be >= 1, got {tick_ms}")
        if wheel_size < 2:
            raise ValueError(f"wheel_size must be >= 2, got {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = wheel_interval(tick_ms, wheel_size)
        self.current_time = round_down(start_ms, tick_ms)
        self.counter = counter
        self.queue = queue
        self.lock = lock
        self.buckets = [TimerTaskList(counter, lock, slot, tick_ms) for slot in range(wheel_size)]
        self.overflow: TimingWheel | None = None

    def add_overflow_wheel(self) -> TimingWheel:
        """Create the wheel above (tick = this interval, start = this current time). O(size)."""
        overflow = self.overflow
        if overflow is None:
            overflow = TimingWheel(
                self.interval,
                self.wheel_size,
                self.current_time,
                self.counter,
                self.queue,
                self.lock,
            )
            self.overflow = overflow
        return overflow

    def add(self, entry: TimerTaskEntry) -> bool:
        """Link ``entry`` into the lowest wheel whose window holds its due time.

        Returns False, linking nothing, iff the entry is already due on this wheel
        (``expired_at_level``); the caller then hands it over. A bucket whose expiration
        changes (it was not queued) is offered to the delay queue. O(1) per level.
        Reference equivalent: ``self._pending[entry] = None`` after ``is_due``.
        """
        due = entry._entry_due
        wheel = self
        while not fits_level(due, wheel.current_time, wheel.interval):
            overflow = wheel.overflow
            wheel = overflow if overflow is not None else wheel.add_overflow_wheel()
        # Kafka tests "expired" before "fits" on each level. Only the first level can
        # answer yes (an expired due time fits its level, and one past a level's window
        # lies at least a tick past the next level's current time): one test suffices.
        if expired_at_level(due, wheel.current_time, wheel.tick_ms):
            return False
        vid = virtual_bucket_id(due, wheel.tick_ms)
        bucket = wheel.buckets[slot_index(vid, wheel.wheel_size)]
        bucket.add(entry)
        if bucket.set_expiration(bucket_expiration(vid, wheel.tick_ms)):
            wheel.queue.offer(bucket)
        return True

    def advance_clock(self, time_ms: int) -> None:
        """Move every level's current time to ``time_ms`` rounded down to its tick.

        A level moves only when a whole tick of its own has passed (``advanced_time``,
        Kafka's rule); an overflow wheel receives the rounded time of the level below,
        and a level that does not move leaves the levels above unmoved. O(levels).
        """
        wheel: TimingWheel | None = self
        while wheel is not None:
            moved = advanced_time(wheel.current_time, time_ms, wheel.tick_ms)
            if moved == wheel.current_time:
                return
            wheel.current_time = time_ms = moved
            wheel = wheel.overflow

    def levels(self) -> list[TimingWheel]:
        """This wheel and every overflow wheel above it, lowest first."""
        found: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            found.append(wheel)
            wheel = wheel.overflow
        return found

    def _check(
        self,
        queued: set[int] | None = None,
        unfinished: TimerTaskList | None = None,
        pending: bool = False,
    ) -> int:
        """Assert the wheel's invariants on this level and every level above it.

        Per level: the current time is a multiple of the tick; the interval is
        ``tick * wheel_size``; the overflow wheel's tick is this interval and its current
        time this one rounded down to its tick, and it shares this level's counter, queue
        and lock; each bucket's list is consistent; every
        non-empty bucket is queued (``queued``: ids of queued buckets, when given); a
        queued bucket's expiration is its slot start, lies in the window
        ``(current_time, current_time + interval)`` and maps to its own slot; an
        unqueued bucket is empty with no expiration, except ``unfinished``: the bucket a
        bounded drain stopped inside (R73), whose expiration is its level's current time
        (the drain moved the wheel there and no further); while such a drain is
        ``pending``, a queued bucket of another level may expire at its level's current
        time too (due at the time the drain stopped at: the next piece takes it); every
        entry lies in the slot its due time maps to. Returns the number of linked entries
        on all levels.
        """
        total = 0
        for level, wheel in enumerate(self.levels()):
            tick, size, current = wheel.tick_ms, wheel.wheel_size, wheel.current_time
            where = f"level {level} (tick {tick})"
            if current % tick != 0:
                raise AssertionError(f"{where}: current time {current} is not a multiple of tick")
            if wheel.interval != tick * size:
                raise AssertionError(f"{where}: interval {wheel.interval} != tick * wheel_size")
            if len(wheel.buckets) != size:
                raise AssertionError(f"{where}: {len(wheel.buckets)} buckets, not {size}")
            wheel._check_overflow(where)
            total += wheel._check_buckets(where, queued, unfinished, pending)
        if total != self.counter.value:
            raise AssertionError(
                f"task counter {self.counter.value} != {total} entries linked on all levels"
            )
        return total

    def _check_overflow(self, where: str) -> None:
        """``_check`` of the link to the overflow wheel: its tick is this interval, its
        current time this one rounded down, and it shares counter, queue and lock."""
        size, current = self.wheel_size, self.current_time
        overflow = self.overflow
        if overflow is not None:
            if overflow.tick_ms != self.interval:
                raise AssertionError(
                    f"{where}: overflow tick {overflow.tick_ms} != interval {self.interval}"
                )
            if overflow.wheel_size != size:
                raise AssertionError(f"{where}: overflow wheel_size {overflow.wheel_size}")
            if (
                overflow.counter is not self.counter
                or overflow.queue is not self.queue
                or overflow.lock is not self.lock
            ):
                raise AssertionError(f"{where}: overflow does not share counter/queue/lock")
            if overflow.current_time != round_down(current, overflow.tick_ms):
                raise AssertionError(
                    f"{where}: overflow current time {overflow.current_time} is not "
                    f"{current} rounded down to {overflow.tick_ms}"
                )

    def _check_buckets(
        self,
        where: str,
        queued: set[int] | None,
        unfinished: TimerTaskList | None = None,
        pending: bool = False,
    ) -> int:
        """``_check`` of this level's buckets; returns the entries linked in them."""
        tick, size, current = self.tick_ms, self.wheel_size, self.current_time
        total = 0
        for slot, bucket in enumerate(self.buckets):
            if bucket.slot != slot or bucket.tick_ms != tick:
                raise AssertionError(f"{where}: bucket {slot} has wrong slot/tick labels")
            if bucket.lock is not self.lock:
                raise AssertionError(f"{where}: bucket {slot} is guarded by another lock")
            count = bucket._check()
            total += count
            expiration = bucket.expiration
            is_queued = queued is None or id(bucket) in queued
            if expiration is None:
                if count:
                    raise AssertionError(f"{where}: bucket {slot} has entries, no expiration")
                if queued is not None and is_queued:
                    raise AssertionError(f"{where}: bucket {slot} queued, no expiration")
                continue
            if bucket is unfinished:
                if expiration != current:
                    raise AssertionError(
                        f"{where}: unfinished bucket {slot} expires at {expiration}, not at "
                        f"the level's current time {current}"
                    )
            elif not is_queued:
                raise AssertionError(
                    f"{where}: bucket {slot} has expiration {expiration} but is not queued"
                )
            if expiration % tick != 0 or slot_index(expiration // tick, size) != slot:
                raise AssertionError(
                    f"{where}: bucket {slot} expiration {expiration} is not its slot start"
                )
            earliest = current if pending else current + 1  # pending: due where it stopped
            if bucket is not unfinished and not earliest <= expiration < current + self.interval:
                raise AssertionError(
                    f"{where}: bucket {slot} expiration {expiration} outside the window "
                    f"({current}, {current + self.interval})"
                )
            for entry in bucket.entries():
                if not expiration <= entry._entry_due < expiration + tick:
                    raise AssertionError(
                        f"{where}: {entry!r} lies in bucket {slot} [{expiration}, "
                        f"{expiration + tick})"
                    )
        return total

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time={self.current_time}, overflow={self.overflow is not None})"
        )
