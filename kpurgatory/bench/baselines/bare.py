"""The baselines a Python user would pick instead of a timing wheel (issue 13).

- ``BareHeapTimer``: twenty lines of ``heapq``: a heap of ``[due, seq, task]`` handles
  (lists, so cancelling can clear the task in place), lazy cancellation and asyncio's
  rebuild rule (``BaseEventLoop._run_once``: when the heap holds more than 100 handles
  and more than half of them are cancelled, drop the cancelled ones and re-heapify;
  otherwise cancelled handles are popped when they reach the head). No lock, no
  argument checks, no executor: the cheapest honest heap timer, the one the wheel must
  beat. Costs: ``call_at`` O(log n), ``cancel`` O(1), a drain of k handles O(k log n)
  plus the amortized rebuilds.
- ``asyncio_add_cancel``: asyncio's own ``loop.call_at`` + ``TimerHandle.cancel`` in a
  real event loop (the loop runs between batches, so its ``_run_once`` cleans the
  cancelled handles up as in production).

Neither implements the spec's API (no ``SystemTimer``): the scaling benchmark drives them
with its own loops (``kpurgatory.bench.scaling``), doing the same work as the designs'.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "BareHeapTimer",
    "MIN_CANCELLED_FRACTION",
    "MIN_SCHEDULED_HANDLES",
    "asyncio_add_cancel",
]

MIN_SCHEDULED_HANDLES = 100
"""asyncio's ``_MIN_SCHEDULED_TIMER_HANDLES``: no rebuild for heaps this small."""

MIN_CANCELLED_FRACTION = 0.5
"""asyncio's ``_MIN_CANCELLED_TIMER_HANDLES_FRACTION``: rebuild above this cancelled share."""

Handle = list[Any]
"""``[due, seq, task]``; ``task`` is None once cancelled or popped."""


class BareHeapTimer:
    """A bare ``heapq`` timer of ``[due, seq, task]`` handles with lazy cancellation.

    ``call_at(due, task)`` schedules ``task`` and returns its handle; ``cancel(handle)``
    clears it (a no-op once cancelled or run); ``run_due(now, run)`` pops every handle
    due at or before ``now`` in (due, insertion) order and calls ``run(task)`` on each
    live one; ``size`` is the number of live handles.
    """

    __slots__ = ("_cancelled", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[Handle] = []
        self._seq = itertools.count()
        self._cancelled = 0

    @property
    def size(self) -> int:
        """Scheduled tasks not yet cancelled or run."""
        return len(self._heap) - self._cancelled

    def call_at(self, due: int, task: Any) -> Handle:
        """Schedule ``task`` at ``due``; return the handle that cancels it. O(log n)."""
        handle = [due, next(self._seq), task]
        heapq.heappush(self._heap, handle)
        return handle

    def cancel(self, handle: Handle) -> None:
        """Cancel ``handle`` lazily (it stays in the heap until popped or rebuilt). O(1)."""
        if handle[2] is not None:
            handle[2] = None
            self._cancelled += 1

    def run_due(self, now: int, run: Callable[[Any], object]) -> int:
        """Run every live task due at or before ``now``; return how many ran."""
        heap = self._heap
        if len(heap) > MIN_SCHEDULED_HANDLES and self._cancelled > MIN_CANCELLED_FRACTION * len(
            heap
        ):
            live = [handle for handle in heap if handle[2] is not None]
            heapq.heapify(live)
            heap[:] = live
            self._cancelled = 0
        ran = 0
        pop = heapq.heappop
        while heap and heap[0][0] <= now:
            handle = pop(heap)
            task = handle[2]
            if task is None:
                self._cancelled -= 1
                continue
            handle[2] = None
            run(task)
            ran += 1
        return ran


def _noop() -> None:
    return None


def asyncio_add_cancel(
    delays_ms: Sequence[int], ops: int, pending: int, batch: int = 1000
) -> float:
    """CPU seconds per ``loop.call_at`` + ``TimerHandle.cancel`` with ``pending`` other timers.

    Runs in a fresh event loop: ``pending`` handles scheduled far ahead, then ``ops``
    add+cancel pairs with delays taken round-robin from ``delays_ms``, yielding to the
    loop after every ``batch`` pairs (so its ``_run_once`` drops the cancelled handles
    by its own rule, as in a real application).
    """
    loop = asyncio.new_event_loop()
    try:

        async def measure() -> float:
            running = asyncio.get_running_loop()
            start = running.time()
            far = [running.call_at(start + 1e7 + index, _noop) for index in range(pending)]
            seconds = [delay / 1000.0 for delay in delays_ms]
            count = len(seconds)
            call_at = running.call_at
            started = time.process_time()
            done = 0
            while done < ops:
                end = min(ops, done + batch)
                for index in range(done, end):
                    call_at(start + seconds[index % count], _noop).cancel()
                done = end
                await asyncio.sleep(0)
            elapsed = time.process_time() - started
            for handle in far:
                handle.cancel()
            return elapsed / ops

        return loop.run_until_complete(measure())
    finally:
        loop.close()
