"""The ``heap`` baseline: an asyncio-style ``heapq`` timer behind the spec's purgatory.

What a Python user would write today: one binary heap of scheduled tasks, ``cancel``
marks an entry dead (O(1)), and dead entries are dropped by asyncio's rule
(``BaseEventLoop._run_once``): at the start of every drain, if the heap holds more than
100 entries and more than half of them are dead, rebuild it without them and re-heapify
(O(n)); otherwise pop dead entries off its head. ``add`` also pops dead heads, so the
head is always live when it is compared with a new entry.

Semantics: exactly the reference's (R1-R37), checked by the equivalence machines in
tests/bench. Costs: ``add`` O(log n), ``cancel`` O(1), a drain of k tasks O(k log n),
plus the amortized rebuilds; n includes up to as many dead entries as live ones (or 100).
"""

from __future__ import annotations

from kpurgatory.bench.baselines._core import (
    DelayedOperation,
    HeapTimerBase,
    PurgatoryBase,
    TimerTask,
)

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "SystemTimer", "TimerTask"]

MIN_SCHEDULED_TIMER_HANDLES = 100
"""asyncio's ``_MIN_SCHEDULED_TIMER_HANDLES``: no rebuild for heaps this small."""

MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5
"""asyncio's ``_MIN_CANCELLED_TIMER_HANDLES_FRACTION``: rebuild above this dead share."""


class SystemTimer(HeapTimerBase):
    """A heapq timer with lazy cancellation and asyncio's re-heapify rule.

    ``size`` counts live entries only (R12), so it drops at once on ``cancel``; the
    memory of a dead entry is reclaimed at the next rebuild or when it reaches the head.
    """

    def _before_drain(self) -> None:
        length = len(self._heap)
        if (
            length > MIN_SCHEDULED_TIMER_HANDLES
            and self._dead / length > MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            self._drop_dead()
        else:
            self._pop_dead_heads()

    @property
    def dead_entries(self) -> int:
        """Cancelled entries still occupying the heap."""
        return self._dead


class DelayedOperationPurgatory(PurgatoryBase):
    """The reference purgatory (R22-R34) on a heap ``SystemTimer``."""

    _timer_type = SystemTimer
