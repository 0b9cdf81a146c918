"""The benchmark machinery: workloads, probes, saturation and goal logic, the report.

No timing is asserted anywhere: these tests check that the harness computes what it says
from the numbers it is given.
"""

from __future__ import annotations

import statistics
import threading
from typing import Any

import pytest

from kpurgatory.bench import enqueue
from kpurgatory.bench.designs import available_designs, build_label, is_compiled, load_design
from kpurgatory.bench.harness import CountingClock, DirectExecutor, interleaved
from kpurgatory.bench.idle import IdleResult
from kpurgatory.bench.report import render
from kpurgatory.bench.runner import goals, saturation
from kpurgatory.bench.scaling import lifecycle_schedule


def test_designs_registry() -> None:
    """Every registered design that imports exports the four API names; bad names refused."""
    names = available_designs()
    assert {"heap", "old", "reference"} <= set(names)
    for name in names:
        module = load_design(name)
        assert all(hasattr(module, attr) for attr in ("SystemTimer", "DelayedOperation"))
    with pytest.raises(ValueError, match="design must be one of"):
        load_design("nope")
    assert build_label() == ("compiled" if is_compiled() else "pure")


def test_direct_executor_runs_and_counts() -> None:
    """The benchmark executor calls at once, counts, and returns a done future."""
    calls: list[int] = []
    executor = DirectExecutor()
    future = executor.submit(calls.append, 7)
    assert calls == [7] and executor.submitted == 1 and future.done()


def test_counting_clock_counts_waits_and_wakeups() -> None:
    """A 20 ms wait with nothing due: one wait, at least one wake-up."""
    clock = CountingClock()
    condition = threading.Condition()
    with condition:
        clock.wait(condition, 20, lambda: None)
    assert clock.waits == 1 and clock.wakeups >= 1


def test_result_json_carries_the_derived_figures() -> None:
    """A result's JSON form is its fields plus each property named in ``DERIVED``."""
    result = IdleResult("heap", 2.0, 10, 4, None)
    assert result.to_json() == {
        "design": "heap",
        "window_s": 2.0,
        "waits": 10,
        "wakeups": 4,
        "reaper_cpu_s": None,
        "wakeups_per_minute": 120.0,
    }


def test_interleaved_rotates_the_order() -> None:
    """Each sweep point starts with the next design, so none always runs first."""
    designs = ["a", "b", "c"]
    assert [interleaved(designs, i)[0] for i in range(4)] == ["a", "b", "c", "a"]
    assert sorted(interleaved(designs, 5)) == designs
    assert interleaved([], 3) == []


def test_workload_matches_kafka_distributions() -> None:
    """Mean interval 1000/rate ms (carry keeps it), latency median ~pct50, p75 ~pct75."""
    case = enqueue.CASES["high"]
    workload = enqueue.make_workload(case, 2000.0, 40_000, seed=1)
    assert workload == enqueue.make_workload(case, 2000.0, 40_000, seed=1)
    assert statistics.fmean(workload.intervals) == pytest.approx(0.5, rel=0.05)
    ordered = sorted(workload.latencies)
    assert ordered[len(ordered) // 2] == pytest.approx(case.pct50, rel=0.1)
    assert ordered[3 * len(ordered) // 4] == pytest.approx(case.pct75, rel=0.1)
    assert len(workload.keys) == enqueue.NUM_KEYS
    assert all(key.startswith("fakeKey") for key in workload.keys)
    with pytest.raises(ValueError, match="rate"):
        enqueue.make_workload(case, 0.0, 10, seed=1)
    with pytest.raises(ValueError, match="num"):
        enqueue.make_workload(case, 10.0, 0, seed=1)


def test_replay_completes_or_expires_every_request() -> None:
    """The virtual-time replay sees each request complete early or expire, never both."""
    case = enqueue.CASES["low"]
    workload = enqueue.make_workload(case, 5000.0, 500, seed=3)
    for design in ("heap", "reference"):
        result = enqueue.replay(load_design(design), design, case, workload)
        early = sum(1 for latency in workload.latencies if latency < enqueue.TIMEOUT_MS)
        assert result.unfinished == 0
        assert result.completed_early + result.expired <= workload.num
        assert result.completed_early <= early
        assert result.expired >= workload.num - early


def test_lifecycle_schedule_cancels_before_due() -> None:
    """Every cancellation step starts before the cancelled task's due time."""
    schedule = lifecycle_schedule(2000, seed=5)
    for step, indexes in enumerate(schedule.cancel_steps):
        for index in indexes:
            assert step * 10 < schedule.delays[index]
    assert 0.85 < schedule.cancelled / 2000 < 0.95


def _point(design: str, target: float, achieved: float, saturated: bool) -> dict[str, Any]:
    return {
        "case": "high-timeout",
        "design": design,
        "requested_rate": target,
        "target_rate": target,
        "achieved_rate": achieved,
        "saturated": saturated,
        "enqueued": 100,
        "cpu_s": 0.5,
        "rss_peak_mb": 30.0,
        "gc_collections": 1,
        "gc_s": 0.001,
        "expired": 10,
    }


def _run(points: list[dict[str, Any]], build: str = "pure") -> dict[str, Any]:
    timings = {"add_s": 1.0, "walk_s": 2.0, "gc_collections": 0, "gc_s": 0.0}
    lifecycle = [
        {"design": "optimized", "n": 1000, "tasks_per_s": 300.0, "peak_bytes_per_task": 50.0},
        {"design": "heap", "n": 1000, "tasks_per_s": 100.0, "peak_bytes_per_task": 100.0},
        {"design": "reference", "n": 10, "tasks_per_s": 1.0, "peak_bytes_per_task": 1.0},
    ]
    for row in lifecycle:
        row.update(timings)
    per_op = [
        {"design": "optimized", "pending": 1000, "add_cancel_s": 1.0, "add_expire_s": 2.0},
        {"design": "optimized", "pending": 10**6, "add_cancel_s": 1.2, "add_expire_s": 3.0},
    ]
    return {
        "build": build,
        "designs": ["optimized", "heap", "old"],
        "machine": {
            "cpu": "x",
            "cores": 2,
            "load_average_at_start": [0.0],
            "python": "3.11",
            "implementation": "CPython",
            "platform": "p",
            "git_commit": "c",
            "date": "d",
        },
        "enqueue": {
            "points": points,
            "replay": [],
            "replay_rate": 1.0,
            "saturation": saturation(points),
        },
        "scaling": {
            "per_op": per_op,
            "memory": [],
            "lifecycle": lifecycle,
            "reference_pending_cap": 10,
            "reference_lifecycle_n": 10,
        },
    }


def test_saturation_and_goals_from_synthetic_runs() -> None:
    """Plateaus, lower bounds and verdicts follow from the numbers given."""
    points = [
        _point("old", 1000, 1000, False),
        _point("old", 2000, 1500, True),
        _point("optimized", 1000, 1000, False),
        _point("optimized", 2000, 2000, False),
        _point("optimized", 8000, 7600, False),
    ]
    table = saturation(points)["high-timeout"]
    assert table["old"] == {"plateau": 1500, "kept_up_to": 1000, "saturated": True}
    assert table["optimized"]["saturated"] is False
    issue_5 = [goal for goal in goals([_run(points)]) if not goal["goal"].startswith("Issue 13")]
    verdicts = {goal["target"]: goal for goal in issue_5}
    assert verdicts[">= 5"]["met"] is True  # 7600 / 1500, a lower bound
    assert verdicts[">= 5"]["measurements"][0]["value"] == pytest.approx(7600 / 1500)
    assert verdicts[">= 1.5"]["met"] is True  # 300 / 100
    assert verdicts["<= 0.6"]["met"] is True  # 50 / 100
    assert verdicts["<= 1.3"]["met"] is False  # add+expire 3.0 / 2.0
    old_unsaturated = [_point("old", 1000, 1000, False), _point("optimized", 1000, 1000, False)]
    assert {g["target"]: g["met"] for g in goals([_run(old_unsaturated)])}[">= 5"] is None


def test_report_renders_goals_and_command() -> None:
    """The markdown carries the command, the quick-run warning and every goal."""
    run = _run([_point("old", 1000, 900, True), _point("optimized", 1000, 1000, False)])
    goal_list = goals([run])
    results = {"command": "kpurgatory bench --quick", "mode": "quick", "runs": [run]}
    results["goals"] = goal_list
    text = render(results, ["enqueue-high-timeout.png"], analysis="## Reading\n\nhand-written")
    assert "`kpurgatory bench --quick`" in text
    assert "quick (smoke) run" in text
    assert "## Reading" in text
    for goal in goal_list:
        assert goal["goal"] in text
    assert "![enqueue-high-timeout.png](perf/enqueue-high-timeout.png)" in text
