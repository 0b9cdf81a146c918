"""Timer workloads: add+cancel with many pending, and the full lifecycle of n tasks.

Each ``*_time`` function has pyperf's ``bench_time_func`` signature: it runs ``loops``
repetitions and returns the process CPU seconds (``time.process_time``) they took, so
a shared machine's load moves the figures less than wall time would. Set-up (filling
a timer with pending tasks, drawing a schedule) is cached per worker process and never
timed. The designs are the optimized ``SystemTimer`` (on a ``ManualClock`` and a
``DirectExecutor``), ``BareHeapTimer`` (what a user writes with ``heapq``) and asyncio's
own ``loop.call_at`` in a running loop.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import heapq
import itertools
import math
import random
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from kpurgatory.clock import ManualClock
from kpurgatory.optimized import SystemTimer, TimerTask

__all__ = [
    "BareHeapTimer",
    "DirectExecutor",
    "Schedule",
    "add_cancel_time",
    "lifecycle_schedule",
    "lifecycle_time",
]

FAR_MS = 10_000_000
"""Pending tasks are due 10^7 .. 2*10^7 ms ahead: never reached while measuring."""

CANCEL_HORIZON_MS = 10_000
"""add+cancel: the cancelled task's delay is uniform in 1 .. this."""

POOL = 4096
"""add+cancel: distinct tasks (and delays) cycled through."""

BATCH = 1024
"""add+cancel: pairs between two turns of the loop (asyncio) or drains (bare heap)."""

MEDIAN_MS, SIGMA, STEP_MS, CANCELLED = 200, 1.0, 5, 0.9
"""Lifecycle: log-normal delays (median 200 ms, sigma 1), the clock walks in 5 ms steps,
90 % of the tasks are cancelled at a uniform time before they are due."""


class DirectExecutor(Executor):
    """Runs each hand-over at once in the caller and counts it (no ``Future`` per task)."""

    def __init__(self) -> None:
        self.submitted = 0
        self._done: Future[Any] = Future()
        self._done.set_result(None)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Call ``fn(*args, **kwargs)`` now; count it."""
        self.submitted += 1
        fn(*args, **kwargs)
        return self._done


class BareHeapTimer:
    """A bare ``heapq`` timer of ``[due, seq, task]`` handles with lazy cancellation and
    asyncio's rebuild rule (more than 100 handles, more than half cancelled: drop the
    cancelled ones and re-heapify). No lock, no checks: the cheapest honest heap timer."""

    __slots__ = ("_cancelled", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()
        self._cancelled = 0

    @property
    def size(self) -> int:
        """Handles neither cancelled nor run."""
        return len(self._heap) - self._cancelled

    def call_at(self, due: int, task: Any) -> list[Any]:
        """Schedule ``task`` at ``due``; return its handle. O(log n)."""
        handle = [due, next(self._seq), task]
        heapq.heappush(self._heap, handle)
        return handle

    def cancel(self, handle: list[Any]) -> None:
        """Cancel lazily: the handle stays in the heap until popped or rebuilt. O(1)."""
        if handle[2] is not None:
            handle[2] = None
            self._cancelled += 1

    def run_due(self, now: int, run: Callable[[Any], object]) -> int:
        """Run every live task due at or before ``now`` (and drop cancelled handles at the
        head, as asyncio does); return how many ran."""
        heap = self._heap
        if len(heap) > 100 and self._cancelled > len(heap) // 2:
            heap[:] = [handle for handle in heap if handle[2] is not None]
            heapq.heapify(heap)
            self._cancelled = 0
        ran = 0
        while heap and (heap[0][2] is None or heap[0][0] <= now):  # asyncio pops dead heads
            task = heapq.heappop(heap)[2]
            if task is None:
                self._cancelled -= 1
            else:
                run(task)
                ran += 1
        return ran


class _Task(TimerTask):
    __slots__ = ()

    def run(self) -> None:
        return None


class _Job:
    """What a bare-heap user schedules: an object with nothing in it."""

    __slots__ = ()


def _noop(*_: object) -> None:
    return None


# -- add+cancel ----------------------------------------------------------------------


@functools.cache
def _delays(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [1 + rng.randrange(CANCEL_HORIZON_MS) for _ in range(POOL)]


_KEPT: list[Any] = []
"""The asyncio handles pending far ahead, alive for the worker process's life."""


@functools.cache
def _pending_state(design: str, pending: int, seed: int) -> Any:
    """A timer of ``design`` holding ``pending`` tasks due far ahead (kept per process)."""
    rng = random.Random(seed)
    far = [FAR_MS + rng.randrange(FAR_MS) for _ in range(pending)]
    state: Any
    if design == "optimized":
        timer = SystemTimer("bench", clock=ManualClock(0), executor=DirectExecutor())
        for delay in far:
            timer.add(_Task(delay))
        state = timer
    elif design == "bare-heap":
        state = BareHeapTimer()
        for delay in far:
            state.call_at(delay, _Job())
    else:
        state = asyncio.new_event_loop()
        start = state.time()
        _KEPT.extend(state.call_at(start + delay / 1000, _noop) for delay in far)
        state.run_until_complete(asyncio.sleep(0))
    gc.collect()
    gc.freeze()  # the pending tasks are permanent: the collector does not re-scan them
    return state


def add_cancel_time(loops: int, design: str, pending: int, seed: int) -> float:
    """CPU seconds for ``loops`` add+cancel pairs with ``pending`` other tasks pending."""
    state = _pending_state(design, pending, seed)
    delays = _delays(seed)
    if design == "optimized":
        tasks = [_Task(delay) for delay in delays]
        add = state.add
        started = time.process_time()
        for index in range(loops):
            task = tasks[index % POOL]
            add(task)
            task.cancel()
        return time.process_time() - started
    if design == "bare-heap":
        call_at, cancel, run_due = state.call_at, state.cancel, state.run_due
        job = _Job()
        started = time.process_time()
        for index in range(loops):
            cancel(call_at(delays[index % POOL], job))
            if index % BATCH == 0:
                run_due(0, _noop)  # nothing is due: applies the rebuild rule, as a drain would
        elapsed = time.process_time() - started
        if state.size != pending:
            raise RuntimeError(f"bare heap holds {state.size} tasks, expected {pending}")
        return elapsed
    if design == "asyncio":
        return float(state.run_until_complete(_asyncio_pairs(loops, delays)))
    raise ValueError(f"design must be optimized, bare-heap or asyncio, got {design!r}")


async def _asyncio_pairs(loops: int, delays: list[int]) -> float:
    """``loop.call_at`` + ``TimerHandle.cancel`` pairs, the loop turning between batches
    (its ``_run_once`` drops cancelled handles by its own rule, as in an application)."""
    loop = asyncio.get_running_loop()
    call_at, start = loop.call_at, loop.time()
    seconds = [start + delay / 1000 for delay in delays]
    started = time.process_time()
    for first in range(0, loops, BATCH):
        for index in range(first, min(loops, first + BATCH)):
            call_at(seconds[index % POOL], _noop).cancel()
        await asyncio.sleep(0)
    return time.process_time() - started


# -- lifecycle -----------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """Delays, and the task indexes cancelled in each clock step of ``STEP_MS``."""

    delays: list[int]
    cancel_steps: list[list[int]]

    @property
    def cancelled(self) -> int:
        """How many tasks the schedule cancels."""
        return sum(len(step) for step in self.cancel_steps)


@functools.cache
def lifecycle_schedule(n: int, seed: int) -> Schedule:
    """The lifecycle of ``n`` tasks drawn from ``seed`` (the same for every design)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    delays = [max(1, int(rng.lognormvariate(math.log(MEDIAN_MS), SIGMA))) for _ in range(n)]
    cancel_steps: list[list[int]] = [[] for _ in range(max(delays) // STEP_MS + 1)]
    for index, delay in enumerate(delays):
        if rng.random() < CANCELLED:
            cancel_steps[rng.randrange(delay) // STEP_MS].append(index)
    return Schedule(delays, cancel_steps)


def _optimized_lifecycle(schedule: Schedule) -> tuple[float, int]:
    executor = DirectExecutor()
    timer = SystemTimer("bench", clock=ManualClock(0), executor=executor)
    tasks: list[Any] = [None] * len(schedule.delays)
    started = time.process_time()
    add, advance = timer.add, timer.advance_clock
    for index, delay in enumerate(schedule.delays):
        task = tasks[index] = _Task(delay)
        add(task)
    for step in schedule.cancel_steps:
        for index in step:
            tasks[index].cancel()
        advance(STEP_MS)
    elapsed = time.process_time() - started
    timer.close()
    return elapsed, executor.submitted


def _bare_lifecycle(schedule: Schedule) -> tuple[float, int]:
    timer = BareHeapTimer()
    handles: list[Any] = [None] * len(schedule.delays)
    ran = now = 0
    started = time.process_time()
    call_at, cancel, run_due = timer.call_at, timer.cancel, timer.run_due
    for index, delay in enumerate(schedule.delays):
        handles[index] = call_at(delay, _Job())
    for step in schedule.cancel_steps:
        for index in step:
            cancel(handles[index])
        now += STEP_MS
        ran += run_due(now, _noop)
    return time.process_time() - started, ran


def lifecycle_time(loops: int, design: str, n: int, seed: int) -> float:
    """CPU seconds for ``loops`` lifecycles of ``n`` tasks: add them all at time 0, then
    walk the clock in ``STEP_MS`` steps, cancelling 90 % before they are due and letting
    the rest expire. The garbage collector stays on (as in an application)."""
    schedule = lifecycle_schedule(n, seed)
    run = {"optimized": _optimized_lifecycle, "bare-heap": _bare_lifecycle}.get(design)
    if run is None:
        raise ValueError(f"design must be optimized or bare-heap, got {design!r}")
    total = 0.0
    for _ in range(loops):
        gc.collect()
        elapsed, ran = run(schedule)
        if ran + schedule.cancelled != n:
            raise RuntimeError(f"{design}: {ran} ran + {schedule.cancelled} cancelled != {n}")
        total += elapsed
    return total
