"""Idle cost: one operation due in an hour, and a purgatory with its reaper running.

Every design gets a purgatory (reaper on, real clock) whose timer reads a
``CountingClock``; each holds one operation with a one-hour timeout, and all of them
idle side by side for the same window. Per design: how many times the reaper's
``advance_clock`` waited and woke up, and the CPU its reaper thread used (from
/proc/self/task, so the designs can share the window); plus the whole process's CPU.
Kafka's reaper does the same thing: ``advanceClock(200)`` in a loop, so about five
wake-ups a second whatever the design.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.bench.harness import CountingClock, JsonResult, thread_cpu_seconds

__all__ = ["IdleResult", "idle_costs"]

IDLE_TIMEOUT_MS = 3_600_000
"""The waiting operation's timeout: one hour."""


@dataclass
class IdleResult(JsonResult):
    """What one design's reaper did during the idle window."""

    design: str
    window_s: float
    waits: int
    wakeups: int
    reaper_cpu_s: float | None
    DERIVED = ("wakeups_per_minute",)

    @property
    def wakeups_per_minute(self) -> float:
        """Wake-ups scaled to one minute."""
        return self.wakeups * 60.0 / self.window_s


def _idle_operation_class(impl: ModuleType) -> type[Any]:
    class IdleOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            return None

        def on_expiration(self) -> None:
            return None

    return IdleOperation


def _thread_by_name(name: str) -> threading.Thread | None:
    for thread in threading.enumerate():
        if thread.name == name:
            return thread
    return None


def _thread_cpu(thread: threading.Thread | None) -> float | None:
    """CPU seconds ``thread`` used so far; None if it is missing or /proc is unavailable."""
    native = None if thread is None else thread.native_id
    return None if native is None else thread_cpu_seconds(native)


def idle_costs(designs: dict[str, ModuleType], window_s: float) -> tuple[list[IdleResult], float]:
    """Idle every design side by side for ``window_s``; per-design results and process CPU s."""
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    setups = []
    for design, impl in designs.items():
        clock = CountingClock()
        name = f"idle-{design}"
        timer = impl.SystemTimer(name, clock=clock)
        purgatory = impl.DelayedOperationPurgatory(name, timer=timer)
        operation = _idle_operation_class(impl)(IDLE_TIMEOUT_MS)
        purgatory.try_complete_else_watch(operation, ["idle-key"])
        reaper = _thread_by_name(f"ExpirationReaper-0-{name}")
        setups.append((design, clock, purgatory, reaper))
    time.sleep(0.3)  # let every reaper reach its steady state
    starts = []
    for _design, clock, _purgatory, reaper in setups:
        starts.append((clock.waits, clock.wakeups, _thread_cpu(reaper)))
    process_start = time.process_time()
    started = time.monotonic()
    time.sleep(window_s)
    window = time.monotonic() - started
    process_cpu = time.process_time() - process_start
    results = []
    for (design, clock, purgatory, reaper), (waits, wakeups, cpu) in zip(
        setups, starts, strict=True
    ):
        cpu_end = _thread_cpu(reaper)
        reaper_cpu = None if cpu is None or cpu_end is None else cpu_end - cpu
        results.append(
            IdleResult(design, window, clock.waits - waits, clock.wakeups - wakeups, reaper_cpu)
        )
        purgatory.shutdown()
    return results, process_cpu
