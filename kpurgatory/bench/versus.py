"""The optimized timer against the timers a Python user would pick (issue 13).

- ``lifecycles``: the full lifecycle of ``n`` tasks (``scaling.lognormal_schedule``:
  log-normal delays, median 200 ms; 90 % cancelled before due; the rest expire as a
  ``ManualClock`` walks in 5 ms steps), run by the optimized ``SystemTimer`` and by a
  ``BareHeapTimer`` driven through the same clock, in the same process, alternating
  the two for ``repeat`` rounds (best round of each: the least disturbed by the rest of
  the machine). Garbage collector on; a traced round of each gives the peak memory.
- ``add_cancel``: CPU per ``add`` + ``cancel`` of the optimized timer with ``pending``
  tasks pending, against asyncio's ``loop.call_at`` + ``TimerHandle.cancel`` with as
  many handles pending in a real event loop; alternating, best of ``repeat``.
- ``api_floor``: the lifecycle's CPU with only the work the spec's API obliges on every
  call (a ``FloorTimer``: argument check, lock, clock read or wait; no schedule at all):
  what is left of the bare heap's time after it is what a timer may spend on its
  structure (docs/performance.md, issue 13).

Every task object is a minimal class with ``__slots__ = ()`` beyond its base, so what
differs is what each timer keeps per task. CPU time (``time.process_time``).
"""

from __future__ import annotations

import gc
import random
import threading
import time
import tracemalloc
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.bench.baselines.bare import BareHeapTimer, asyncio_add_cancel
from kpurgatory.bench.harness import GcTimer, JsonResult
from kpurgatory.bench.scaling import (
    CANCEL_HORIZON_MS,
    LifecycleResult,
    LifecycleSchedule,
    bench_task_class,
    lifecycle,
    per_op_costs,
)
from kpurgatory.clock import ManualClock

__all__ = [
    "ASYNCIO",
    "BARE_HEAP",
    "AddCancelResult",
    "BareTask",
    "API_FLOOR",
    "FloorTimer",
    "add_cancel",
    "api_floor",
    "bare_lifecycle",
    "lifecycles",
]

BARE_HEAP = "bare-heap"
"""The bare heapq timer's design name in results."""

ASYNCIO = "asyncio"
"""asyncio's ``call_at`` + ``cancel`` design name in results."""


class BareTask:
    """What a bare-heap user schedules: an object with a ``run`` method and nothing else."""

    __slots__ = ()

    def run(self) -> None:
        return None


def _run_task(task: BareTask) -> None:
    task.run()


def _run_bare(schedule: LifecycleSchedule, traced: bool) -> tuple[float, float, int, GcTimer, int]:
    """One bare-heap lifecycle: add CPU s, walk CPU s, tasks run, collections, traced peak."""
    clock = ManualClock(0)
    timer = BareHeapTimer()
    n = len(schedule.delays)
    handles: list[Any] = [None] * n
    gc.collect()
    if traced:
        tracemalloc.start()
    gc_timer = GcTimer()
    ran = 0
    try:
        with gc_timer.installed():
            started = time.process_time()
            call_at = timer.call_at
            now = clock.now_ms()
            for index, delay in enumerate(schedule.delays):
                handles[index] = call_at(now + delay, BareTask())
            added = time.process_time()
            cancel = timer.cancel
            run_due = timer.run_due
            advance = clock.advance
            step_ms = schedule.step_ms
            for step in schedule.cancel_steps:
                for index in step:
                    cancel(handles[index])
                advance(step_ms)
                ran += run_due(clock.now_ms(), _run_task)
            walked = time.process_time()
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
    finally:
        if traced:
            tracemalloc.stop()
    if timer.size:
        raise RuntimeError(f"{BARE_HEAP}: {timer.size} tasks left after the walk")
    return added - started, walked - added, ran, gc_timer, peak


def bare_lifecycle(schedule: LifecycleSchedule, *, traced: bool = True) -> LifecycleResult:
    """The lifecycle on a ``BareHeapTimer``, untraced, then traced for the peak if ``traced``."""
    n = len(schedule.delays)
    add_s, walk_s, ran, gc_timer, _ = _run_bare(schedule, traced=False)
    if ran + schedule.cancelled != n:
        raise RuntimeError(f"{BARE_HEAP}: {ran} ran + {schedule.cancelled} cancelled != {n}")
    peak_per_task = _run_bare(schedule, traced=True)[4] / n if traced else None
    return LifecycleResult(
        BARE_HEAP,
        n,
        add_s,
        walk_s,
        ran,
        schedule.cancelled,
        gc_timer.collections,
        gc_timer.seconds,
        peak_per_task,
    )


def lifecycles(
    impl: ModuleType, design: str, schedule: LifecycleSchedule, repeat: int
) -> list[LifecycleResult]:
    """``repeat`` alternating rounds of ``design`` and the bare heap; the best of each,
    with the peak memory of one traced round each."""
    best: dict[str, LifecycleResult] = {}
    for round_index in range(repeat):
        order = (0, 1) if round_index % 2 == 0 else (1, 0)
        for which in order:
            result = (
                lifecycle(impl, design, schedule, traced=False)
                if which == 0
                else bare_lifecycle(schedule, traced=False)
            )
            kept = best.get(result.design)
            if kept is None or result.total_s < kept.total_s:
                best[result.design] = result
    best[design].peak_bytes_per_task = lifecycle(impl, design, schedule).peak_bytes_per_task
    best[BARE_HEAP].peak_bytes_per_task = bare_lifecycle(schedule).peak_bytes_per_task
    return [best[design], best[BARE_HEAP]]


@dataclass
class AddCancelResult(JsonResult):
    """CPU seconds per add+cancel (and per add+expire, None for asyncio) of ``design``
    with ``pending`` tasks pending."""

    design: str
    pending: int
    add_cancel_s: float
    add_expire_s: float | None
    ops: int


def add_cancel(
    impl: ModuleType, design: str, pending: int, *, ops: int, repeat: int, seed: int
) -> list[AddCancelResult]:
    """Alternating rounds of ``design``'s add+cancel (and add+expire, as in
    ``scaling.per_op_costs``) and asyncio's call_at+cancel; the best round of each."""
    rng = random.Random(seed)
    delays = [1 + rng.randrange(CANCEL_HORIZON_MS) for _ in range(min(ops, 4096))]
    cancel = {design: float("inf"), ASYNCIO: float("inf")}
    expire = float("inf")
    for round_index in range(repeat):
        order = (design, ASYNCIO) if round_index % 2 == 0 else (ASYNCIO, design)
        for name in order:
            if name == ASYNCIO:
                cancel[name] = min(cancel[name], asyncio_add_cancel(delays, ops, pending))
                continue
            result = per_op_costs(impl, design, pending, ops=ops, repeat=1, seed=seed)
            cancel[name] = min(cancel[name], result.add_cancel_s)
            if result.add_expire_s is not None:
                expire = min(expire, result.add_expire_s)
    return [
        AddCancelResult(design, pending, cancel[design], expire, ops),
        AddCancelResult(ASYNCIO, pending, cancel[ASYNCIO], None, ops),
    ]


class FloorTimer:
    """The least a ``SystemTimer`` must do per call, and nothing more: no schedule.

    ``add``: the task-type check, the timer lock, the closed check and one clock read
    with the due-time arithmetic (R1, R35, R37); ``cancel``: the lock and a holder reset
    (R9); ``advance_clock``: the argument check, the lock and the clock's ``wait`` (R7).
    It keeps nothing, so it runs no task: only for ``api_floor``.
    """

    __slots__ = ("_clock", "_closed", "_condition", "_lock", "_task_type", "_tick_ms")

    def __init__(self, clock: ManualClock, task_type: type[Any]) -> None:
        self._lock = threading.RLock()
        self._condition = threading.Condition(self._lock)
        self._clock = clock
        self._closed = False
        self._tick_ms = 1
        self._task_type = task_type

    def add(self, task: Any) -> None:
        """Check, lock, read the clock, compute the due time; keep nothing."""
        if type(task) is not self._task_type:
            raise TypeError(f"task must be a {self._task_type.__name__}")
        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                raise RuntimeError("closed")
            expiration = self._clock.now_ms() + task._delay_ms
            task._entry_due = expiration - expiration % self._tick_ms
        finally:
            lock.release()

    def cancel(self, task: Any) -> None:
        """Lock and forget the task's holder."""
        lock = self._lock
        lock.acquire()
        try:
            task._entry_list = None
        finally:
            lock.release()

    def advance_clock(self, timeout_ms: int) -> bool:
        """Check, lock, let the clock's ``wait`` move time; run nothing."""
        if type(timeout_ms) is not int or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be an int >= 0, got {timeout_ms!r}")
        lock = self._lock
        lock.acquire()
        try:
            self._clock.wait(self._condition, timeout_ms, _no_due)
            return False
        finally:
            lock.release()


def _no_due() -> int | None:
    return None


API_FLOOR = "api-floor"
"""The floor timer's design name in results."""


def api_floor(impl: ModuleType, schedule: LifecycleSchedule, repeat: int) -> LifecycleResult:
    """The lifecycle's calls on a ``FloorTimer``, best of ``repeat`` (CPU time).

    The same tasks (``impl``'s ``TimerTask``, as the lifecycle builds them), the same
    adds, cancels and clock steps as ``lifecycles``, garbage collector on; nothing
    expires (the floor keeps no schedule). Meaningful in the pure build only: the floor
    timer is interpreted Python in every build.
    """
    task_class = bench_task_class(impl)
    n = len(schedule.delays)
    best: LifecycleResult | None = None
    for _ in range(repeat):
        clock = ManualClock(0)
        timer = FloorTimer(clock, task_class)
        gc.collect()
        gc_timer = GcTimer()
        with gc_timer.installed():
            started = time.process_time()
            add, cancel, advance = timer.add, timer.cancel, timer.advance_clock
            tasks = [task_class(delay) for delay in schedule.delays]
            for task in tasks:
                add(task)
            added = time.process_time()
            step_ms = schedule.step_ms
            for step in schedule.cancel_steps:
                for index in step:
                    cancel(tasks[index])
                advance(step_ms)
            walked = time.process_time()
        if clock.now_ms() != step_ms * len(schedule.cancel_steps):
            raise RuntimeError(f"{API_FLOOR}: the clock did not walk the whole schedule")
        result = LifecycleResult(
            API_FLOOR,
            n,
            added - started,
            walked - added,
            0,
            schedule.cancelled,
            gc_timer.collections,
            gc_timer.seconds,
            None,
        )
        if best is None or result.total_s < best.total_s:
            best = result
    if best is None:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    return best
