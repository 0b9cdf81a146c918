"""The benchmark workloads do the work they claim (the figures are never asserted)."""

from __future__ import annotations

import random

import pytest

from kpurgatory.bench import longpoll, timers
from kpurgatory.bench.enqueue import CASES, SWEEPS, make_workload, sweep


def test_bare_heap_runs_in_due_order_and_skips_cancelled() -> None:
    """Tasks run by (due, insertion); a cancelled one never runs; size counts live ones."""
    timer = timers.BareHeapTimer()
    handles = {name: timer.call_at(due, name) for name, due in [("a", 5), ("b", 3), ("c", 5)]}
    timer.cancel(handles["b"])
    timer.cancel(handles["b"])  # idempotent
    assert timer.size == 2
    ran: list[str] = []
    assert timer.run_due(4, ran.append) == 0
    assert timer.run_due(5, ran.append) == 2
    assert (ran, timer.size) == (["a", "c"], 0)


def test_bare_heap_rebuilds_by_asyncio_rule() -> None:
    """More than 100 handles and more than half cancelled: the next drain drops them."""
    timer = timers.BareHeapTimer()
    handles = [timer.call_at(1000 + i, i) for i in range(200)]
    for handle in handles[100:]:
        timer.cancel(handle)
    timer.run_due(0, print)  # exactly half: no rebuild, no dead head
    assert len(timer._heap) == 200
    timer.cancel(handles[99])
    timer.run_due(0, print)
    assert (len(timer._heap), timer.size) == (99, 99)


def test_lifecycle_schedule_is_reproducible_and_cancels_before_due() -> None:
    """Same seed, same schedule; each cancelled task is cancelled in a step before its due."""
    schedule = timers.lifecycle_schedule(5000, 7)
    assert schedule == timers.lifecycle_schedule.__wrapped__(5000, 7)
    assert 0.85 < schedule.cancelled / 5000 < 0.95
    for step, indexes in enumerate(schedule.cancel_steps):
        for index in indexes:
            assert step * timers.STEP_MS < schedule.delays[index]
    with pytest.raises(ValueError, match="n must be"):
        timers.lifecycle_schedule(0, 1)


@pytest.mark.parametrize("design", ["optimized", "bare-heap"])
def test_lifecycle_runs_every_task_once(design: str) -> None:
    """The time function checks expired + cancelled == n itself; it returns CPU seconds."""
    assert timers.lifecycle_time(2, design, 3000, 1) > 0


def test_lifecycle_refuses_an_unknown_design() -> None:
    with pytest.raises(ValueError, match="design must be"):
        timers.lifecycle_time(1, "wheel", 10, 1)


@pytest.mark.parametrize("design", ["optimized", "bare-heap", "asyncio"])
def test_add_cancel_leaves_the_pending_tasks_alone(design: str) -> None:
    """add+cancel pairs run; the timer still holds exactly the pending tasks."""
    assert timers.add_cancel_time(3000, design, 500, 3) > 0
    state = timers._pending_state(design, 500, 3)
    if design != "asyncio":  # asyncio's loop keeps its handles to itself
        assert state.size == 500


def test_add_cancel_refuses_an_unknown_design() -> None:
    with pytest.raises(ValueError, match="design must be"):
        timers.add_cancel_time(1, "wheel", 10, 1)


@pytest.mark.parametrize("approach", longpoll.APPROACHES)
def test_long_poll_answers_the_answered_keys_and_expires_the_rest(approach: str) -> None:
    """The pattern checks its own outcomes (90 % answered, the rest timed out)."""
    assert longpoll.long_poll_time(1, approach, 400, 100, 5) > 0


def test_long_poll_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="approach must be"):
        longpoll.long_poll_time(1, "threads", 10, 10, 5)
    with pytest.raises(ValueError, match="waits"):
        longpoll.long_poll_time(1, "aio", 0, 10, 5)


def test_workload_is_reproducible_and_keeps_the_mean_rate() -> None:
    """Same seed, same requests; intervals carry their remainders, so the rate holds."""
    case = CASES["high"]
    one, two = make_workload(case, 5000, 20_000, 3), make_workload(case, 5000, 20_000, 3)
    assert one == two
    assert abs(sum(one.intervals) - 20_000 / 5) < 0.05 * 20_000 / 5
    assert len(set(one.keys)) <= 3 and one.num == 20_000
    with pytest.raises(ValueError, match="rate"):
        make_workload(case, 0, 10, 1)


@pytest.mark.realtime
def test_enqueue_sweep_reports_both_designs() -> None:
    """A quick sweep: every request of both designs completes or expires; plateaus given."""
    result = sweep(SWEEPS["quick"], random.randrange(1000), lambda _: None)
    assert {p["design"] for p in result["points"]} == {"optimized", "old"}
    for point in result["points"]:
        assert point["enqueued"] > 0 and point["unfinished"] == 0
    assert set(result["plateau"]["high-timeout"]) == {"optimized", "old"}
