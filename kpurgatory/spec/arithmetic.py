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
