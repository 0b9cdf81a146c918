"""R73: a bounded drain, ``advance_clock(timeout_ms, max_entries)``, on every implementation.

Each test takes the ``impl`` fixture: the same checks run on the reference (an entry is a
due task) and on the wheel (an entry is a task collected or cascaded). On a ManualClock
with an InlineExecutor, tasks on several wheel levels fall due together; the drain then
goes in pieces, and between pieces the tests add, cancel, re-add and close. The oracle
is computed here from the delays, never read from the implementation.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.spec.events import TaskRan
from tests.support import Recorder, task_class

DELAYS = [3, 3, 7, 19, 20, 21, 45, 45, 46, 399, 400, 401, 450, 7_999, 8_000, 8_100, 9_000]
"""Due times spread over four wheel levels (tick 1, wheel size 20), some shared."""


def _timer(impl: ModuleType, clock: ManualClock) -> Any:
    return impl.SystemTimer("bounded", clock=clock, executor=InlineExecutor())


def _ran(recorder: Recorder) -> list[str]:
    return recorder.names(TaskRan)


def _check(timer: Any) -> None:
    check = getattr(timer, "_check", None)
    if check is not None:
        check()


def _work(timer: Any) -> int:
    """Entries cascaded so far (the wheel's count; the reference has none)."""
    stats = getattr(timer, "stats", None)
    return 0 if stats is None else int(stats["cascades"])


def _schedule(impl: ModuleType, timer: Any, recorder: Recorder) -> dict[str, int]:
    task = task_class(impl)
    dues = {}
    for index, delay in enumerate(DELAYS):
        name = f"t{index}"
        timer.add(task(delay, name, recorder))
        dues[name] = delay
    return dues


def _pieces(timer: Any, recorder: Recorder, limit: int, *, at_most: int = 10_000) -> list[int]:
    """Bounded advances until nothing is pending; checks each piece's bound (hand-overs
    plus cascades) and that a piece left pending spent all of it; returns the work per
    piece."""
    work: list[int] = []
    for _ in range(at_most):
        ran_before, cascades_before = len(recorder.events), _work(timer)
        timer.advance_clock(0, limit)
        _check(timer)
        spent = len(recorder.events) - ran_before + _work(timer) - cascades_before
        assert spent <= limit
        if not timer.drain_pending:
            work.append(spent)
            return work
        assert spent == limit  # stopped by its bound, not before
        work.append(spent)
    raise AssertionError(f"the drain did not end in {at_most} pieces")


@pytest.mark.parametrize("limit", [1, 2, 5, 64])
def test_r73_pieces_hand_over_in_due_order_never_early_and_end(
    impl: ModuleType, limit: int
) -> None:
    """R73, R4, R5, R6, R12, R44: every task due at the reading runs, over the pieces, in
    due order, none early; size and next_due_time count the tasks left; the current time
    is the reading from the first piece on (R2); the drain ends; later tasks stay."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    dues = _schedule(impl, timer, recorder)
    clock.advance(8_050)
    timer.advance_clock(0, limit)
    assert timer.current_time == 8_050  # R2: from the first piece on
    first = len(recorder.events) + _work(timer)
    assert first <= limit  # the first piece's bound
    assert timer.drain_pending == (limit < 15) and (first == limit or limit >= 15)
    _check(timer)
    work = _pieces(timer, recorder, limit)
    ran = _ran(recorder)
    due_now = sorted((due, name) for name, due in dues.items() if due <= 8_050)
    assert sorted(ran) == sorted(name for _, name in due_now)  # R5 once no piece is pending
    assert [dues[name] for name in ran] == sorted(dues[name] for name in ran)  # R6
    for event in recorder.events:  # R4: each ran at a reading at or after its due time
        assert isinstance(event, TaskRan) and event.at_ms >= dues[event.task]
    assert timer.size == len(DELAYS) - len(due_now)
    assert timer.next_due_time == 8_100
    assert timer.current_time == 8_050
    assert work[-1] <= limit
    timer.advance_clock(10_000)
    assert sorted(_ran(recorder)) == sorted(dues)


def test_r73_between_pieces_the_left_tasks_are_scheduled(impl: ModuleType) -> None:
    """R73, R12, R44: after a piece that stopped early, the tasks it left are counted in
    size and reported by next_due_time, and drain_pending reads True; an unbounded
    advance_clock then takes all that is left at once."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    dues = _schedule(impl, timer, recorder)
    clock.advance(500)
    timer.advance_clock(0, 2)
    _check(timer)
    ran = _ran(recorder)
    assert len(ran) <= 2 and timer.drain_pending
    left = {name: due for name, due in dues.items() if name not in ran}
    assert timer.size == len(left)
    assert timer.next_due_time == min(left.values())
    assert timer.next_due_time <= timer.current_time == 500
    timer.advance_clock(0)
    _check(timer)
    assert not timer.drain_pending
    assert sorted(_ran(recorder)) == sorted(name for name, due in dues.items() if due <= 500)


def test_r73_an_add_between_pieces_is_judged_against_the_reading(impl: ModuleType) -> None:
    """R73, R3, R4: between pieces a task due by the reading runs inside its add (before
    the tasks the drain left); one due later is scheduled, and never runs early."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    dues = _schedule(impl, timer, recorder)
    task = task_class(impl)
    clock.advance(450)
    timer.advance_clock(0, 1)
    assert timer.drain_pending
    timer.add(task(-100, "at-once", recorder))
    assert _ran(recorder)[-1] == "at-once"
    later = task(30, "later", recorder)
    timer.add(later)
    _check(timer)
    _pieces(timer, recorder, 3)
    assert "later" not in _ran(recorder)
    clock.advance(29)
    timer.advance_clock(0, 3)
    assert "later" not in _ran(recorder)
    clock.advance(1)
    _pieces(timer, recorder, 3)
    assert _ran(recorder)[-1] == "later"
    assert set(_ran(recorder)) == {name for name, due in dues.items() if due <= 480} | {
        "at-once",
        "later",
    }


def test_r73_cancel_and_re_add_between_pieces(impl: ModuleType) -> None:
    """R73, R9, R10, R11: a task the drain left can be cancelled (it never runs, size
    drops at once) or re-added (it moves to its new due time) between pieces."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    task = task_class(impl)
    tasks = [task(8_000 + index, f"t{index}", recorder) for index in range(40)]
    for each in tasks:
        timer.add(each)
    clock.advance(8_039)
    timer.advance_clock(0, 5)
    assert timer.drain_pending
    left = [each for each in tasks if each.name not in _ran(recorder)]
    cancelled, moved = left[-1], left[-2]
    size = timer.size
    cancelled.cancel()
    assert timer.size == size - 1
    timer.add(moved)  # re-added with its delay counted from now: due 8,039 + delay
    assert timer.size == size - 1
    _check(timer)
    _pieces(timer, recorder, 5)
    ran = _ran(recorder)
    assert cancelled.name not in ran and moved.name not in ran
    assert len(ran) == 38 and timer.size == 1
    assert timer.next_due_time == 8_039 + moved.delay_ms


def test_r73_close_between_pieces_runs_nothing_more(impl: ModuleType) -> None:
    """R73, R14: after close, a bounded advance_clock returns False and hands nothing
    over; the tasks the drain left stay scheduled and unrun."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    _schedule(impl, timer, recorder)
    clock.advance(9_000)
    timer.advance_clock(0, 3)
    ran = _ran(recorder)
    timer.close()
    assert timer.advance_clock(0, 3) is False
    assert timer.advance_clock(0) is False
    assert _ran(recorder) == ran
    assert timer.size == len(DELAYS) - len(ran)
    _check(timer)


def test_r73_without_a_bound_nothing_is_pending(impl: ModuleType) -> None:
    """R73: a plain advance_clock never leaves a drain pending, and max_entries larger
    than the work is the same as none."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    dues = _schedule(impl, timer, recorder)
    assert timer.drain_pending is False
    clock.advance(400)
    assert timer.advance_clock(0, 1_000) is True
    assert timer.drain_pending is False
    clock.advance(50)
    timer.advance_clock(0)
    assert timer.drain_pending is False
    assert sorted(_ran(recorder)) == sorted(name for name, due in dues.items() if due <= 450)


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError)]
)
def test_r73_max_entries_is_checked(impl: ModuleType, value: object, error: type) -> None:
    """R35, R73: a bad max_entries raises naming it, on the timer and on the purgatory,
    and leaves no trace (the manual clock has not moved, nothing ran)."""
    clock = ManualClock(0)
    timer, recorder = _timer(impl, clock), Recorder(clock)
    _schedule(impl, timer, recorder)
    with pytest.raises(error, match="max_entries"):
        timer.advance_clock(5, value)
    assert clock.now_ms() == 0 and _ran(recorder) == []
    purgatory = impl.DelayedOperationPurgatory("p", timer=timer, reaper_enabled=False)
    with pytest.raises(error, match="max_entries"):
        purgatory.advance_clock(5, value)
    assert clock.now_ms() == 0 and _ran(recorder) == []
    purgatory.advance_clock(3, 1)
    assert len(_ran(recorder)) <= 1 and clock.now_ms() == 3
    purgatory.shutdown()


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (1.5, TypeError)])
def test_r73_max_entries_is_checked_before_the_shutdown_refusal(
    impl: ModuleType, value: object, error: type
) -> None:
    """R35, R73, R32: a bad max_entries raises naming it on a shut-down purgatory and on
    a closed timer as on open ones: the argument checks come before the refusal, as the
    timeout's do (a caller's mistake is reported whatever the lifecycle)."""
    timer = _timer(impl, ManualClock(0))
    purgatory = impl.DelayedOperationPurgatory("p", timer=timer, reaper_enabled=False)
    purgatory.shutdown()
    with pytest.raises(error, match="max_entries"):
        purgatory.advance_clock(5, value)
    with pytest.raises(error, match="max_entries"):
        timer.advance_clock(5, value)
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.advance_clock(5, 1)
