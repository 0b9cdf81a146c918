"""The timer's arithmetic, as small pure functions with PEP 316 contracts.

These functions *define* the time rules of the spec (R1, R2, R3); every
implementation computes due times and current times through them, and CrossHair
checks their contracts. They use floor division throughout, so negative clock
readings round toward minus infinity (Java's ``%`` truncates toward zero; the
difference only shows for negative readings, which a monotonic clock never gives).
"""

from __future__ import annotations


def round_down(ms: int, tick_ms: int) -> int:
    """Largest multiple of ``tick_ms`` that is <= ``ms``.

    pre: tick_ms >= 1
    post: __return__ <= ms < __return__ + tick_ms
    post: __return__ % tick_ms == 0
    """
    return ms - ms % tick_ms


def expiration_ms(now_ms: int, delay_ms: int) -> int:
    """Absolute expiration of a task added at clock reading ``now_ms`` (rule R1).

    post: __return__ - now_ms == delay_ms
    """
    return now_ms + delay_ms


def due_time(expiration: int, tick_ms: int) -> int:
    """The time at which a task expiring at ``expiration`` becomes due (rule R1).

    A task may run up to ``tick_ms - 1`` ms before its expiration, never before this.

    pre: tick_ms >= 1
    post: __return__ <= expiration < __return__ + tick_ms
    """
    return round_down(expiration, tick_ms)


def is_due(due: int, current_time: int) -> bool:
    """Whether a task with due time ``due`` is due against ``current_time`` (rule R3).

    post: __return__ == (due <= current_time)
    """
    return due <= current_time


def next_current_time(current_time: int, now_ms: int, tick_ms: int) -> int:
    """The timer's current time after an ``advance_clock`` that drained at ``now_ms`` (R2).

    It never moves backwards, and it is always a multiple of the tick.

    pre: tick_ms >= 1
    pre: current_time % tick_ms == 0
    post: __return__ >= current_time
    post: __return__ % tick_ms == 0
    post: __return__ <= max(current_time, now_ms)
    """
    return max(current_time, round_down(now_ms, tick_ms))


# -- wheel arithmetic ---------------------------------------------------------------------
# Where a due time sits in a hierarchical timing wheel, computed the obvious way (floor
# division, powers, a loop over levels). The optimized wheel computes the same things
# incrementally (kpurgatory/optimized/wheel.py); `crosshair diffbehavior` compares the
# two (tests/contracts). Pure: no wheel state, only the numbers that define it.


def virtual_bucket(due: int, tick_ms: int) -> int:
    """The number of whole ticks from time 0 to ``due``: which tick-wide slot holds it.

    pre: tick_ms >= 1
    post: __return__ * tick_ms <= due < (__return__ + 1) * tick_ms
    """
    return due // tick_ms


def slot_of(due: int, tick_ms: int, wheel_size: int) -> int:
    """The bucket index of ``due`` in a wheel of ``wheel_size`` buckets of ``tick_ms``.

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    post: 0 <= __return__ < wheel_size
    post: (virtual_bucket(due, tick_ms) - __return__) % wheel_size == 0
    """
    return virtual_bucket(due, tick_ms) % wheel_size


def bucket_start(due: int, tick_ms: int) -> int:
    """The expiration of the bucket holding ``due``: the start of its tick-wide slot.

    pre: tick_ms >= 1
    post: __return__ == round_down(due, tick_ms)
    post: __return__ == virtual_bucket(due, tick_ms) * tick_ms
    """
    return virtual_bucket(due, tick_ms) * tick_ms


def level_tick(tick_ms: int, wheel_size: int, level: int) -> int:
    """The tick of wheel level ``level`` (0 is the lowest): ``tick_ms * wheel_size ** level``.

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    pre: 0 <= level <= 64
    post: __return__ >= tick_ms
    post: __return__ % tick_ms == 0
    post: level == 0 or __return__ == level_tick(tick_ms, wheel_size, level - 1) * wheel_size
    """
    tick = tick_ms
    for _ in range(level):  # not ``**``: CrossHair cannot model a symbolic power
        tick *= wheel_size
    return tick


def overflow_tick(tick_ms: int, wheel_size: int) -> int:
    """The tick of the overflow wheel above a wheel: that wheel's whole span (interval).

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    post: __return__ == level_tick(tick_ms, wheel_size, 1)
    post: __return__ >= 2 * tick_ms
    """
    return tick_ms * wheel_size


def overflow_start(current_time: int, tick_ms: int, wheel_size: int) -> int:
    """The current time of an overflow wheel made when the wheel below reads ``current_time``.

    Kafka creates it with ``startMs = currentTime`` and rounds that down to its own tick.

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    pre: current_time % tick_ms == 0
    post: __return__ <= current_time < __return__ + overflow_tick(tick_ms, wheel_size)
    post: __return__ % overflow_tick(tick_ms, wheel_size) == 0
    """
    return round_down(current_time, overflow_tick(tick_ms, wheel_size))


def level_holds(due: int, current_time: int, tick_ms: int, wheel_size: int, level: int) -> bool:
    """Whether level ``level``'s window holds ``due`` (not due there yet, and within span).

    The level's current time is ``current_time`` rounded down to its tick (an overflow
    wheel follows the one below it); its window is ``[current + tick, current + span)``.

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    pre: 0 <= level <= 64
    """
    tick = level_tick(tick_ms, wheel_size, level)
    current = round_down(current_time, tick)
    return current + tick <= due < current + tick * wheel_size


def deadline_level(due: int, current_time: int, tick_ms: int, wheel_size: int) -> int:
    """The wheel level a due time is placed in, or -1 when it is due at once (R3).

    The lowest level whose window holds ``due``; each level up multiplies the span by
    ``wheel_size``, so a due time ``d`` ahead lands about ``log_wheel_size(d / tick)`` up.

    pre: tick_ms >= 1
    pre: wheel_size >= 2
    pre: current_time % tick_ms == 0
    pre: due % tick_ms == 0
    post: (__return__ == -1) == is_due(due, current_time)
    post: __return__ == -1 or level_holds(due, current_time, tick_ms, wheel_size, __return__)
    post: __return__ <= 0 or not level_holds(due, current_time, tick_ms, wheel_size, __return__ - 1)
    """
    if is_due(due, current_time):
        return -1
    level = 0
    tick = tick_ms
    while due >= round_down(current_time, tick) + tick * wheel_size:
        tick *= wheel_size
        level += 1
    return level
