"""Issue 13's baselines: the bare heapq timer, asyncio's call_at, and the goals read from them.

No timing is asserted: the baselines must do the same work as the optimized timer (every
task either cancelled or run, in due order), and the goals must judge the ratios they
are given.
"""

from __future__ import annotations

from typing import Any

import pytest

import kpurgatory.optimized as optimized
from kpurgatory.bench import versus
from kpurgatory.bench.baselines.bare import (
    MIN_SCHEDULED_HANDLES,
    BareHeapTimer,
    asyncio_add_cancel,
)
from kpurgatory.bench.runner import goals
from kpurgatory.bench.scaling import lognormal_schedule


def test_bare_heap_runs_due_tasks_in_due_then_insertion_order() -> None:
    timer = BareHeapTimer()
    ran: list[str] = []
    for due, name in [(5, "a"), (3, "b"), (5, "c"), (9, "d")]:
        timer.call_at(due, name)
    assert timer.size == 4
    assert timer.run_due(4, ran.append) == 1
    assert timer.run_due(5, ran.append) == 2
    assert ran == ["b", "a", "c"]
    assert timer.size == 1


def test_bare_heap_cancel_is_lazy_and_idempotent() -> None:
    timer = BareHeapTimer()
    ran: list[str] = []
    first = timer.call_at(1, "first")
    timer.call_at(2, "second")
    timer.cancel(first)
    timer.cancel(first)
    assert timer.size == 1
    assert timer.run_due(10, ran.append) == 1
    assert ran == ["second"]
    assert timer.size == 0
    timer.cancel(first)  # after it left the heap: still a no-op
    assert timer.size == 0


def test_bare_heap_cancel_after_run_changes_nothing() -> None:
    timer = BareHeapTimer()
    handle = timer.call_at(1, "x")
    timer.call_at(50, "y")
    assert timer.run_due(1, lambda task: None) == 1
    timer.cancel(handle)
    assert timer.size == 1


def test_bare_heap_rebuilds_when_more_than_half_is_cancelled() -> None:
    """asyncio's rule: above 100 handles and half of them cancelled, drop them all."""
    timer = BareHeapTimer()
    handles = [timer.call_at(1000 + index, index) for index in range(2 * MIN_SCHEDULED_HANDLES)]
    for handle in handles[: MIN_SCHEDULED_HANDLES + 1]:
        timer.cancel(handle)
    assert timer.run_due(0, lambda task: None) == 0
    assert len(timer._heap) == MIN_SCHEDULED_HANDLES - 1
    assert timer.size == MIN_SCHEDULED_HANDLES - 1
    ran: list[int] = []
    timer.run_due(10_000, ran.append)
    assert ran == list(range(MIN_SCHEDULED_HANDLES + 1, 2 * MIN_SCHEDULED_HANDLES))


def test_asyncio_add_cancel_measures_a_real_loop() -> None:
    seconds = asyncio_add_cancel([1, 5, 9], ops=300, pending=50, batch=100)
    assert 0 < seconds < 1


def test_bare_lifecycle_cancels_or_runs_every_task() -> None:
    schedule = lognormal_schedule(500, seed=3)
    result = versus.bare_lifecycle(schedule)
    assert result.design == versus.BARE_HEAP
    assert result.expired + result.cancelled == 500
    assert result.cancelled == schedule.cancelled > 0
    assert result.peak_bytes_per_task is not None and result.peak_bytes_per_task > 0


def test_lifecycles_pair_the_optimized_timer_with_the_bare_heap() -> None:
    schedule = lognormal_schedule(300, seed=4)
    mine, bare = versus.lifecycles(optimized, "optimized", schedule, repeat=2)
    assert (mine.design, bare.design) == ("optimized", versus.BARE_HEAP)
    assert mine.expired == bare.expired == 300 - schedule.cancelled
    assert mine.peak_bytes_per_task and bare.peak_bytes_per_task


def test_add_cancel_pairs_the_optimized_timer_with_asyncio() -> None:
    rows = versus.add_cancel(optimized, "optimized", 20, ops=200, repeat=1, seed=1)
    assert [(row.design, row.pending) for row in rows] == [
        ("optimized", 20),
        (versus.ASYNCIO, 20),
    ]
    assert all(row.add_cancel_s > 0 for row in rows)
    assert rows[0].add_expire_s is not None and rows[0].add_expire_s > 0
    assert rows[1].add_expire_s is None


def _run(
    build: str, ratio: float, memory: float, add_cancel: float, flat: float = 1.0
) -> dict[str, Any]:
    """A run whose versus figures have the given optimized / baseline ratios."""

    def life(design: str, n: int, rate: float, peak: float) -> dict[str, Any]:
        return {"design": design, "n": n, "tasks_per_s": rate, "peak_bytes_per_task": peak}

    lifecycle = []
    for n in (2000, 1_000_000):
        lifecycle += [
            life("optimized", n, 100.0 * ratio, 100 * memory),
            life("bare-heap", n, 100, 100),
        ]
    return {
        "build": build,
        "versus": {
            "lifecycle": lifecycle,
            "add_cancel": [
                {
                    "design": "optimized",
                    "pending": 1000,
                    "add_cancel_s": add_cancel,
                    "add_expire_s": 1.0,
                },
                {"design": "asyncio", "pending": 1000, "add_cancel_s": 1.0, "add_expire_s": None},
                {
                    "design": "optimized",
                    "pending": 10**6,
                    "add_cancel_s": add_cancel * flat,
                    "add_expire_s": flat,
                },
                {"design": "asyncio", "pending": 10**6, "add_cancel_s": 1.0, "add_expire_s": None},
            ],
        },
    }


def _verdicts(runs: list[dict[str, Any]]) -> dict[str, bool | None]:
    return {
        goal["goal"]: goal["met"] for goal in goals(runs) if goal["goal"].startswith("Issue 13")
    }


def test_issue_13_goals_judge_each_build_against_its_own_target() -> None:
    met = _verdicts([_run("pure", 1.6, 0.5, 0.5), _run("compiled", 3.1, 0.4, 0.15, 1.2)])
    assert set(met.values()) == {True}
    assert len(met) == 7
    missed = _verdicts([_run("pure", 1.2, 0.7, 0.5), _run("compiled", 2.9, 0.4, 0.25, 1.4)])
    assert missed == {
        "Issue 13: lifecycle optimized / bare heap, pure build, every size": True,
        "Issue 13: lifecycle optimized / bare heap, pure build, largest size": False,
        "Issue 13: lifecycle optimized / bare heap, compiled build, largest size": False,
        "Issue 13: lifecycle peak memory per task, optimized / bare heap, every build": False,
        "Issue 13: add+cancel optimized / asyncio call_at+cancel, pure build": True,
        "Issue 13: add+cancel optimized / asyncio call_at+cancel, compiled build": False,
        "Issue 13: per-operation cost at the largest / smallest pending count, optimized": False,
    }


def test_issue_13_goals_are_unmeasured_without_the_versus_benchmark() -> None:
    assert set(_verdicts([{"build": "pure"}]).values()) == {None}


def test_api_floor_makes_the_lifecycle_calls_and_keeps_nothing() -> None:
    """The floor walks the whole schedule, cancels what the lifecycle cancels, runs nothing."""
    schedule = lognormal_schedule(300, seed=5)
    result = versus.api_floor(optimized, schedule, repeat=2)
    assert result.design == versus.API_FLOOR
    assert (result.n, result.expired, result.cancelled) == (300, 0, schedule.cancelled)
    assert result.add_s > 0 and result.walk_s > 0
    assert result.peak_bytes_per_task is None


def test_floor_timer_checks_its_arguments_and_reads_the_clock() -> None:
    from kpurgatory.bench.scaling import bench_task_class
    from kpurgatory.clock import ManualClock

    task_class = bench_task_class(optimized)
    clock = ManualClock(10)
    timer = versus.FloorTimer(clock, task_class)
    task = task_class(7)
    timer.add(task)
    assert task._entry_due == 17  # the due time a SystemTimer would compute (R1)
    assert timer.advance_clock(5) is False and clock.now_ms() == 15
    with pytest.raises(TypeError, match="task must be"):
        timer.add(object())
    with pytest.raises(ValueError, match=r"^timeout_ms"):
        timer.advance_clock(-1)
    with pytest.raises(ValueError, match="repeat"):
        versus.api_floor(optimized, lognormal_schedule(10, seed=1), repeat=0)
