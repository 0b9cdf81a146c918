"""Function pairs for ``crosshair diffbehavior``: the spec's arithmetic vs the optimized wheel.

Each ``spec_*`` function computes something the obvious way from
``kpurgatory.spec.arithmetic``; its ``opt_*`` twin computes the same through
``kpurgatory.optimized.wheel`` (the pure helpers, or a real ``TimingWheel``). CrossHair
looks for an input on which a pair differs. ``diffbehavior`` ignores ``pre:``
conditions, so every wrapper guards its domain itself and returns ``None`` outside it
(both sides alike), and keeps the numbers small where a real wheel is built.

``buggy_placement`` is a planted difference (a ``<=`` where the wheel has ``<``) that
``diffbehavior`` must find, so the comparison is known to be able to fail.
"""

from __future__ import annotations

import threading

from kpurgatory.optimized.bucket import TaskCounter
from kpurgatory.optimized.delay_queue import DelayQueue
from kpurgatory.optimized.wheel import (
    TimingWheel,
    advanced_time,
    bucket_expiration,
    expired_at_level,
    fits_level,
    slot_index,
    virtual_bucket_id,
    wheel_interval,
)
from kpurgatory.spec.arithmetic import (
    bucket_start,
    deadline_level,
    is_due,
    level_tick,
    next_current_time,
    overflow_start,
    overflow_tick,
    round_down,
    slot_of,
    virtual_bucket,
)
from tests.contracts.sequences import StandInTask

PAIRS: list[tuple[str, str]] = [
    ("spec_virtual_bucket", "opt_virtual_bucket"),
    ("spec_slot", "opt_slot"),
    ("spec_bucket_start", "opt_bucket_start"),
    ("spec_current_after", "opt_current_after"),
    ("spec_due_now", "opt_due_now"),
    ("spec_overflow", "opt_overflow"),
    ("spec_placement", "opt_placement"),
]
"""(spec function, optimized function) names in this module that must never differ."""

PLANTED: tuple[str, str] = ("spec_placement", "buggy_placement")
"""A pair that does differ (the wheel's window bound off by one)."""


def _ok_tick(tick_ms: int) -> bool:
    return 1 <= tick_ms <= 1_000


def _ok_wheel(wheel_size: int) -> bool:
    return 2 <= wheel_size <= 512


# -- pure helpers ---------------------------------------------------------------------------


def spec_virtual_bucket(due: int, tick_ms: int) -> int | None:
    """Spec: ``due // tick_ms``."""
    return virtual_bucket(due, tick_ms) if _ok_tick(tick_ms) else None


def opt_virtual_bucket(due: int, tick_ms: int) -> int | None:
    """Optimized: ``virtual_bucket_id``."""
    return virtual_bucket_id(due, tick_ms) if _ok_tick(tick_ms) else None


def spec_slot(due: int, tick_ms: int, wheel_size: int) -> int | None:
    """Spec: the slot of ``due``."""
    if not (_ok_tick(tick_ms) and _ok_wheel(wheel_size)):
        return None
    return slot_of(due, tick_ms, wheel_size)


def opt_slot(due: int, tick_ms: int, wheel_size: int) -> int | None:
    """Optimized: ``slot_index(virtual_bucket_id(...))``."""
    if not (_ok_tick(tick_ms) and _ok_wheel(wheel_size)):
        return None
    return slot_index(virtual_bucket_id(due, tick_ms), wheel_size)


def spec_bucket_start(due: int, tick_ms: int) -> int | None:
    """Spec: the start of the slot holding ``due``."""
    return bucket_start(due, tick_ms) if _ok_tick(tick_ms) else None


def opt_bucket_start(due: int, tick_ms: int) -> int | None:
    """Optimized: ``bucket_expiration(virtual_bucket_id(...))``."""
    return (
        bucket_expiration(virtual_bucket_id(due, tick_ms), tick_ms) if _ok_tick(tick_ms) else None
    )


def spec_current_after(current_time: int, now_ms: int, tick_ms: int) -> int | None:
    """Spec (R2): ``next_current_time``."""
    if not _ok_tick(tick_ms) or current_time % tick_ms:
        return None
    return next_current_time(current_time, now_ms, tick_ms)


def opt_current_after(current_time: int, now_ms: int, tick_ms: int) -> int | None:
    """Optimized: the wheel's ``advanced_time`` (moves only once a whole tick passed)."""
    if not _ok_tick(tick_ms) or current_time % tick_ms:
        return None
    return advanced_time(current_time, now_ms, tick_ms)


def spec_due_now(due: int, current_time: int, tick_ms: int) -> bool | None:
    """Spec (R3): ``is_due`` for tick-aligned due and current times."""
    if not _ok_tick(tick_ms) or due % tick_ms or current_time % tick_ms:
        return None
    return is_due(due, current_time)


def opt_due_now(due: int, current_time: int, tick_ms: int) -> bool | None:
    """Optimized: Kafka's per-level "already expired" test on the lowest wheel."""
    if not _ok_tick(tick_ms) or due % tick_ms or current_time % tick_ms:
        return None
    return expired_at_level(due, current_time, tick_ms)


def spec_overflow(current_time: int, tick_ms: int, wheel_size: int) -> tuple[int, int] | None:
    """Spec: (tick, current time) of the overflow wheel."""
    if not (_ok_tick(tick_ms) and _ok_wheel(wheel_size)) or current_time % tick_ms:
        return None
    return overflow_tick(tick_ms, wheel_size), overflow_start(current_time, tick_ms, wheel_size)


def opt_overflow(current_time: int, tick_ms: int, wheel_size: int) -> tuple[int, int] | None:
    """Optimized: the overflow wheel's tick (``wheel_interval``) and start rounding."""
    if not (_ok_tick(tick_ms) and _ok_wheel(wheel_size)) or current_time % tick_ms:
        return None
    interval = wheel_interval(tick_ms, wheel_size)
    return interval, round_down(current_time, interval)


# -- placement of a due time in a real wheel ----------------------------------------------------


def _placement_domain(due: int, current_time: int, tick_ms: int, wheel_size: int) -> bool:
    return (
        1 <= tick_ms <= 8
        and 2 <= wheel_size <= 4
        and current_time % tick_ms == 0
        and due % tick_ms == 0
        and -1_000 <= current_time <= 1_000
        and due - current_time <= 2_000
    )


def spec_placement(
    due: int, current_time: int, tick_ms: int, wheel_size: int
) -> tuple[int, int, int] | None:
    """Spec: (level, slot, bucket start) of ``due``, or (-1, -1, -1) if due at once."""
    if not _placement_domain(due, current_time, tick_ms, wheel_size):
        return None
    level = deadline_level(due, current_time, tick_ms, wheel_size)
    if level == -1:
        return -1, -1, -1
    tick = level_tick(tick_ms, wheel_size, level)
    return level, slot_of(due, tick, wheel_size), bucket_start(due, tick)


def opt_placement(
    due: int, current_time: int, tick_ms: int, wheel_size: int
) -> tuple[int, int, int] | None:
    """Optimized: add an entry due at ``due`` to a real ``TimingWheel``; report where it is."""
    if not _placement_domain(due, current_time, tick_ms, wheel_size):
        return None
    lock = threading.RLock()
    counter = TaskCounter()
    wheel = TimingWheel(tick_ms, wheel_size, current_time, counter, DelayQueue(lock), lock)
    entry = StandInTask(due)
    with lock:
        if not wheel.add(entry):
            return -1, -1, -1
    for level, layer in enumerate(wheel.levels()):
        for slot, bucket in enumerate(layer.buckets):
            if entry._entry_list is bucket:
                assert bucket.expiration is not None
                return level, slot, bucket.expiration
    raise AssertionError("entry linked nowhere")


def buggy_placement(
    due: int, current_time: int, tick_ms: int, wheel_size: int
) -> tuple[int, int, int] | None:
    """Planted bug: a wheel whose window includes its upper bound (``<=`` for ``<``)."""
    if not _placement_domain(due, current_time, tick_ms, wheel_size):
        return None
    current, tick, level = current_time, tick_ms, 0
    while True:
        if expired_at_level(due, current, tick):
            return -1, -1, -1
        interval = wheel_interval(tick, wheel_size)
        if fits_level(due, current, interval) or due == current + interval:
            vid = virtual_bucket_id(due, tick)
            return level, slot_index(vid, wheel_size), bucket_expiration(vid, tick)
        current, tick, level = round_down(current, interval), interval, level + 1
