"""Virtual time for asyncio: an event loop whose ``time()`` is a ``ManualClock`` (R51).

asyncio has no first-party fake clock (trio has ``MockClock``; PyPI has ``looptime``).
``VirtualTimeLoop`` is a ``SelectorEventLoop`` whose ``time()`` is
``clock.now_ms() / 1000`` and whose selector *auto-jumps*: when the loop has nothing
ready to run and would block until its next timer (a ``call_at``, ``asyncio.sleep``,
``wait_for`` timeout, or an ``AsyncPurgatory``'s driver), the clock jumps to that
timer's time (in whole milliseconds, rounded up) instead of sleeping, after a
non-blocking poll for I/O. So ``await asyncio.sleep(0.05)`` lets exactly 50 virtual
milliseconds pass and runs every timer due meanwhile in time order, in no real time
(trio's ``MockClock(autojump_threshold=0)``).

Use it for loop-only code: a wait on a real socket or on another thread is cut short
by the jump to the next timer. ``run(main, clock)`` runs a coroutine on a fresh
virtual loop, as ``asyncio.run`` does on a real one.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from kpurgatory.clock import ManualClock

__all__ = ["VirtualTimeLoop", "run"]

R = TypeVar("R")

_SUB_MS = 1e-6
"""A fraction of a millisecond below which a timeout is float noise, not a wait."""


class _JumpingSelector(selectors.BaseSelector):
    """A selector that advances ``clock`` instead of blocking for a timeout."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._inner = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout <= 0:
            return self._inner.select(timeout)
        ready = self._inner.select(0)
        if ready:
            return ready
        ms = timeout * 1000
        if ms > _SUB_MS:
            self._clock.advance(max(1, math.ceil(ms - _SUB_MS)))
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a ``ManualClock`` that jumps to its next timer instead of sleeping.

    ``clock`` (default ``ManualClock(0)``) is the loop's time source; an
    ``AsyncPurgatory`` created on this loop reads the same clock, so the loop's timers
    and the purgatory's timing wheel share one virtual time.
    """

    def __new__(cls, clock: ManualClock | None = None) -> VirtualTimeLoop:
        # checked here, not in __init__: a half-built loop would complain in __del__
        if clock is not None and not isinstance(clock, ManualClock):
            raise TypeError(f"clock must be a ManualClock, not {type(clock).__name__}")
        return super().__new__(cls)

    def __init__(self, clock: ManualClock | None = None) -> None:
        self._virtual_clock = ManualClock(0) if clock is None else clock
        super().__init__(_JumpingSelector(self._virtual_clock))

    @property
    def clock(self) -> ManualClock:
        """The clock this loop's time follows."""
        return self._virtual_clock

    def time(self) -> float:
        """The clock's reading, in seconds."""
        return self._virtual_clock.now_ms() / 1000


def run(main: Coroutine[Any, Any, R], clock: ManualClock | None = None) -> R:
    """Run ``main`` to completion on a new ``VirtualTimeLoop`` on ``clock``, then close it."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(clock)) as runner:
        return runner.run(main)
