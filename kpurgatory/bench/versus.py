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

Every task object is a minimal class with ``__slots__ = ()`` beyond its base, so what
differs is what each timer keeps per task. CPU time (``time.process_time``).
"""

from __future__ import annotations

import gc
import random
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
    lifecycle,
    per_op_costs,
)
from kpurgatory.clock import ManualClock

__all__ = [
    "ASYNCIO",
    "BARE_HEAP",
    "AddCancelResult",
    "BareTask",
    "add_cancel",
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
