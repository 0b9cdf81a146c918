"""Timer scaling: cost per operation against the number of pending tasks, memory per task,
and the full add / cancel / expire lifecycle.

All timers here run on a ``ManualClock`` with a ``DirectExecutor`` (no threads, no
``Future`` per hand-over), so what is measured is the timer's own work, and it is
measured as process CPU time (``time.process_time``): single-threaded work, so the load
other processes put on a shared machine barely moves it (wall time would).

- ``per_op_costs``: with ``n`` tasks pending far in the future (delays of 10^7 to
  2*10^7 ms, so they never come due), the cost of ``add`` + ``cancel`` of a task due
  within 10 s, and of ``add`` + expire (10,000 tasks due within 100 ms, then 1 ms
  ``advance_clock`` steps until all ran). The pending tasks are made permanent for the
  garbage collector (``gc.freeze``) during the measurement, so the figure is the timer's
  cost and not the collector's traversal of a large heap. Best of ``repeat``.
- ``memory_per_task``: ``tracemalloc`` bytes per pending task: the task object itself
  and what ``add`` allocates for it.
- ``lifecycle``: ``n`` tasks with delays uniform in 1..60,000 ms are added at time 0;
  then the clock walks forward in 10 ms steps; 90 % of the tasks are cancelled at a
  random time before their due time, the other 10 % expire as the clock passes them.
  Throughput is ``n`` over the whole run, with the garbage collector on (realistic);
  a second, traced run gives the peak memory per task.
"""

from __future__ import annotations

import functools
import gc
import math
import random
import time
import tracemalloc
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.bench.harness import DirectExecutor, GcTimer, JsonResult
from kpurgatory.clock import ManualClock

__all__ = [
    "LifecycleResult",
    "MemoryResult",
    "PerOpResult",
    "bench_task_class",
    "lifecycle",
    "memory_per_task",
    "per_op_costs",
]

FAR_MS = 10_000_000
"""Pending tasks are due 10^7 .. 2*10^7 ms ahead: never reached by a measurement."""

CANCEL_HORIZON_MS = 10_000
"""add+cancel: the cancelled task's delay is uniform in 1 .. this."""

EXPIRE_BATCH = 10_000
"""add+expire: tasks added per measurement."""

EXPIRE_WINDOW_MS = 100
"""add+expire: delays uniform in 1 .. this; the clock then moves 1 ms at a time."""

LIFECYCLE_HORIZON_MS = 60_000
"""Lifecycle: delays uniform in 1 .. this."""

LIFECYCLE_STEP_MS = 10
"""Lifecycle: the clock walks forward this many ms per ``advance_clock``."""

LIFECYCLE_CANCEL_FRACTION = 0.9
"""Lifecycle: share of tasks cancelled before their due time."""

LOGNORMAL_MEDIAN_MS = 200
"""Issue 13's lifecycle: median delay (log-normal delays)."""

LOGNORMAL_SIGMA = 1.0
"""Issue 13's lifecycle: sigma of the log-normal delays (p99 about 10 times the median)."""

LOGNORMAL_STEP_MS = 5
"""Issue 13's lifecycle: the clock walks forward this many ms per step."""


@functools.cache
def bench_task_class(impl: ModuleType) -> type[Any]:
    """A minimal ``impl.TimerTask`` whose ``run`` does nothing (no ``__dict__`` where the
    base class has ``__slots__``)."""

    class BenchTask(impl.TimerTask):  # type: ignore[misc,name-defined]
        __slots__ = ()

        def run(self) -> None:
            return None

    BenchTask.__name__ = BenchTask.__qualname__ = f"BenchTask[{impl.__name__}]"
    return BenchTask


def _timer(impl: ModuleType, executor: DirectExecutor) -> Any:
    return impl.SystemTimer("bench", clock=ManualClock(0), executor=executor)


def _prefill(impl: ModuleType, timer: Any, n: int, rng: random.Random) -> list[Any]:
    task_class = bench_task_class(impl)
    tasks = [task_class(FAR_MS + rng.randrange(FAR_MS)) for _ in range(n)]
    add = timer.add
    for task in tasks:
        add(task)
    return tasks


@dataclass
class PerOpResult(JsonResult):
    """Per-operation costs of one design with ``pending`` tasks pending (seconds per op)."""

    design: str
    pending: int
    add_cancel_s: float
    add_expire_s: float | None
    ops: int


def per_op_costs(
    impl: ModuleType,
    design: str,
    pending: int,
    *,
    ops: int,
    repeat: int,
    seed: int,
    expire: bool = True,
) -> PerOpResult:
    """Best-of-``repeat`` seconds per add+cancel and per add+expire with ``pending`` pending
    (add+expire only if ``expire``; else its figure is None)."""
    rng = random.Random(seed)
    executor = DirectExecutor()
    timer = _timer(impl, executor)
    background = _prefill(impl, timer, pending, rng)
    task_class = bench_task_class(impl)
    cancel_pool = [task_class(1 + rng.randrange(CANCEL_HORIZON_MS)) for _ in range(min(ops, 4096))]
    expire_pool = [task_class(1 + rng.randrange(EXPIRE_WINDOW_MS)) for _ in range(EXPIRE_BATCH)]
    gc.collect()
    gc.freeze()
    try:
        best_cancel = best_expire = float("inf")
        add = timer.add
        advance = timer.advance_clock
        pool_size = len(cancel_pool)
        for _ in range(repeat):
            started = time.process_time()
            for index in range(ops):
                task = cancel_pool[index % pool_size]
                add(task)
                task.cancel()
            best_cancel = min(best_cancel, (time.process_time() - started) / ops)
            if not expire:
                continue
            before = executor.submitted
            started = time.process_time()
            for task in expire_pool:
                add(task)
            for _ in range(EXPIRE_WINDOW_MS + 1):
                advance(1)
            best_expire = min(best_expire, (time.process_time() - started) / EXPIRE_BATCH)
            if executor.submitted - before != EXPIRE_BATCH:
                raise RuntimeError(
                    f"{design}: {executor.submitted - before} of {EXPIRE_BATCH} tasks ran"
                )
        if timer.size != pending:
            raise RuntimeError(f"{design}: size {timer.size} after the run, expected {pending}")
    finally:
        gc.unfreeze()
        timer.close()
    del background
    return PerOpResult(design, pending, best_cancel, best_expire if expire else None, ops)


@dataclass
class MemoryResult(JsonResult):
    """Traced bytes per pending task: the task object, and what ``add`` allocated."""

    design: str
    pending: int
    task_bytes: float
    timer_bytes: float
    DERIVED = ("total_bytes",)

    @property
    def total_bytes(self) -> float:
        """Task plus timer bytes per pending task."""
        return self.task_bytes + self.timer_bytes


def memory_per_task(impl: ModuleType, design: str, pending: int, *, seed: int) -> MemoryResult:
    """``tracemalloc`` bytes per task for ``pending`` tasks pending in one timer."""
    rng = random.Random(seed)
    delays = [FAR_MS + rng.randrange(FAR_MS) for _ in range(pending)]
    task_class = bench_task_class(impl)
    timer = _timer(impl, DirectExecutor())
    tasks: list[Any] = [None] * pending
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for index, delay in enumerate(delays):
            tasks[index] = task_class(delay)
        after_tasks = tracemalloc.get_traced_memory()[0]
        add = timer.add
        for task in tasks:
            add(task)
        after_add = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        timer.close()
    return MemoryResult(
        design,
        pending,
        (after_tasks - base) / pending,
        (after_add - after_tasks) / pending,
    )


@dataclass
class LifecycleResult(JsonResult):
    """The full lifecycle of ``n`` tasks in one design."""

    design: str
    n: int
    add_s: float
    walk_s: float
    expired: int
    cancelled: int
    gc_collections: int
    gc_s: float
    peak_bytes_per_task: float | None
    DERIVED = ("total_s", "tasks_per_s")

    @property
    def total_s(self) -> float:
        """Add phase plus walk phase."""
        return self.add_s + self.walk_s

    @property
    def tasks_per_s(self) -> float:
        """Tasks through their whole life per second."""
        return self.n / max(self.total_s, 1e-9)


@dataclass(frozen=True)
class LifecycleSchedule:
    """Delays, and which task indexes are cancelled in which clock step of ``step_ms``."""

    delays: list[int]
    cancel_steps: list[list[int]]
    step_ms: int = LIFECYCLE_STEP_MS

    @property
    def cancelled(self) -> int:
        """How many tasks the schedule cancels."""
        return sum(len(step) for step in self.cancel_steps)


def lifecycle_schedule(n: int, seed: int) -> LifecycleSchedule:
    """The lifecycle's random schedule: the same for every design at the same ``seed``."""
    rng = random.Random(seed)
    delays = [1 + rng.randrange(LIFECYCLE_HORIZON_MS) for _ in range(n)]
    steps = LIFECYCLE_HORIZON_MS // LIFECYCLE_STEP_MS + 1
    cancel_steps: list[list[int]] = [[] for _ in range(steps)]
    for index, delay in enumerate(delays):
        if rng.random() < LIFECYCLE_CANCEL_FRACTION:
            cancel_at = rng.randrange(delay)  # strictly before the due time
            cancel_steps[cancel_at // LIFECYCLE_STEP_MS].append(index)
    return LifecycleSchedule(delays, cancel_steps)


def lognormal_schedule(n: int, seed: int) -> LifecycleSchedule:
    """Issue 13's lifecycle: log-normal delays (median ``LOGNORMAL_MEDIAN_MS``, sigma
    ``LOGNORMAL_SIGMA``, at least 1 ms), 90 % cancelled at a uniform time before their
    due time, the clock walking in ``LOGNORMAL_STEP_MS`` steps until every task is due."""
    rng = random.Random(seed)
    mu = math.log(LOGNORMAL_MEDIAN_MS)
    delays = [max(1, int(rng.lognormvariate(mu, LOGNORMAL_SIGMA))) for _ in range(n)]
    steps = max(delays, default=0) // LOGNORMAL_STEP_MS + 1
    cancel_steps: list[list[int]] = [[] for _ in range(steps)]
    for index, delay in enumerate(delays):
        if rng.random() < LIFECYCLE_CANCEL_FRACTION:
            cancel_at = rng.randrange(delay)  # strictly before the due time
            cancel_steps[cancel_at // LOGNORMAL_STEP_MS].append(index)
    return LifecycleSchedule(delays, cancel_steps, LOGNORMAL_STEP_MS)


def _run_lifecycle(
    impl: ModuleType, schedule: LifecycleSchedule, traced: bool
) -> tuple[float, float, int, GcTimer, int]:
    """One lifecycle run: add CPU s, walk CPU s, tasks expired, the collections seen, and
    the traced peak in bytes (0 unless ``traced``)."""
    task_class = bench_task_class(impl)
    executor = DirectExecutor()
    timer = _timer(impl, executor)
    n = len(schedule.delays)
    tasks: list[Any] = [None] * n
    gc.collect()
    if traced:
        tracemalloc.start()
    gc_timer = GcTimer()
    try:
        with gc_timer.installed():
            started = time.process_time()
            add = timer.add
            for index, delay in enumerate(schedule.delays):
                task = task_class(delay)
                tasks[index] = task
                add(task)
            added = time.process_time()
            advance = timer.advance_clock
            step_ms = schedule.step_ms
            for step in schedule.cancel_steps:
                for index in step:
                    tasks[index].cancel()
                advance(step_ms)
            walked = time.process_time()
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
    finally:
        if traced:
            tracemalloc.stop()
        timer.close()
    return added - started, walked - added, executor.submitted, gc_timer, peak


def lifecycle(
    impl: ModuleType, design: str, schedule: LifecycleSchedule, *, traced: bool = True
) -> LifecycleResult:
    """Run the lifecycle untraced (throughput), then traced (peak memory) if ``traced``."""
    n = len(schedule.delays)
    add_s, walk_s, expired, gc_timer, _ = _run_lifecycle(impl, schedule, traced=False)
    if expired + schedule.cancelled != n:
        raise RuntimeError(
            f"{design}: {expired} expired + {schedule.cancelled} cancelled != {n} tasks"
        )
    peak_per_task = None
    if traced:
        peak = _run_lifecycle(impl, schedule, traced=True)[4]
        peak_per_task = peak / n
    return LifecycleResult(
        design,
        n,
        add_s,
        walk_s,
        expired,
        schedule.cancelled,
        gc_timer.collections,
        gc_timer.seconds,
        peak_per_task,
    )
