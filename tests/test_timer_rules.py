"""Timer rules R1-R8 through the public API, on a ManualClock with InlineExecutor: due
times, current time, never early or late, hand-over order, letting time pass.

Every test takes the ``impl`` fixture, so the same checks run on the reference and on
every other implementation package present. Expected due times are computed here with
floor division (an oracle independent of ``kpurgatory.spec.arithmetic``), never copied
from the implementation. Helpers: ``tests.timer_support``.
"""

from __future__ import annotations

import threading
from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.support import NextDue, Recorder, floor_to, recorded_clock, task_class
from tests.timer_support import ManualExecutor, callback_task_class, make_timer, runs

# ---- R1: expiration and due time -------------------------------------------------------


@pytest.mark.parametrize("tick_ms", [1, 2, 5, 10])
@pytest.mark.parametrize("start", [0, 7, -13])
def test_r1_r3_r4_every_small_delay_runs_exactly_at_its_due_time(
    impl: ModuleType, tick_ms: int, start: int
) -> None:
    """R1/R3/R4: due = floor(t + delay, tick); it runs at once iff due <= current, else at due.

    Covers negative and zero delays, tick_ms > 1 (runs up to tick-1 ms before its
    expiration, never before its due time) and start readings off the tick grid.
    """
    for delay in range(-2 * tick_ms - 1, 3 * tick_ms + 2):
        clock = ManualClock(start)
        recorder = Recorder(clock)
        with make_timer(impl, clock, tick_ms) as timer:
            timer.add(task_class(impl)(delay, "x", recorder))
            expiration = start + delay
            due = floor_to(expiration, tick_ms)
            if due <= floor_to(start, tick_ms):
                assert runs(recorder) == [("x", start)], (delay, "due at once in add")
                assert timer.size == 0
                continue
            assert timer.size == 1 and runs(recorder) == []
            while not runs(recorder):
                assert clock.now_ms() < due, (delay, "not run at its due time")
                timer.advance_clock(1)
            assert runs(recorder) == [("x", due)], delay
            assert expiration - (tick_ms - 1) <= due <= expiration
            assert timer.size == 0


def test_r1_due_time_uses_floor_for_negative_readings(impl: ModuleType) -> None:
    """R1: expiration -5 with tick 10 is due at -10 (floor), not at 0 (truncation)."""
    clock = ManualClock(-100)
    recorder = Recorder(clock)
    with make_timer(impl, clock, tick_ms=10) as timer:
        timer.add(task_class(impl)(95, "neg", recorder))
        assert timer.size == 1
        assert timer.advance_clock(89) is False  # clock -11
        assert timer.advance_clock(1) is True  # clock -10
        assert runs(recorder) == [("neg", -10)]


def test_r1_expiration_counts_from_the_clock_reading_at_add(impl: ModuleType) -> None:
    """R1: the delay is relative to the reading at add, not to construction or current time."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        clock.advance(30)
        timer.add(task_class(impl)(10, "late-add", recorder))
        assert timer.advance_clock(9) is False
        assert timer.advance_clock(1) is True
        assert runs(recorder) == [("late-add", 40)]


# ---- R2 / R3: current time and "due at once" -------------------------------------------


def test_r2_current_time_starts_at_start_ms_rounded_down(impl: ModuleType) -> None:
    """R2/R3: start_ms 37 with tick 10 gives current time 30, judged by add."""
    clock = ManualClock(37)
    recorder = Recorder(clock)
    task = task_class(impl)
    with make_timer(impl, clock, tick_ms=10, start_ms=37) as timer:
        timer.add(task(2, "exp39-due30", recorder))  # due 30 <= 30: at once
        assert runs(recorder) == [("exp39-due30", 37)]
        timer.add(task(3, "exp40-due40", recorder))  # due 40 > 30: scheduled
        assert timer.size == 1
        assert runs(recorder) == [("exp39-due30", 37)]


def test_r2_start_ms_defaults_to_clock_reading(impl: ModuleType) -> None:
    """R2: without start_ms the current time is round_down(clock at construction)."""
    clock = ManualClock(1234)
    recorder = Recorder(clock)
    task = task_class(impl)
    with make_timer(impl, clock, tick_ms=5) as timer:  # current time 1230
        timer.add(task(0, "now", recorder))  # due 1230: at once
        timer.add(task(-4, "past", recorder))  # due 1230: at once
        timer.add(task(1, "next", recorder))  # expiration 1235: due 1235, scheduled
        assert sorted(runs(recorder)) == [("now", 1234), ("past", 1234)]
        assert timer.size == 1


def test_r2_start_ms_behind_the_clock_makes_past_tasks_wait(impl: ModuleType) -> None:
    """R2/R3: an explicit start_ms behind the clock is the current time, until advance_clock."""
    clock = ManualClock(100)
    recorder = Recorder(clock)
    with make_timer(impl, clock, start_ms=0) as timer:
        timer.add(task_class(impl)(-50, "due50", recorder))  # due 50 > current 0
        assert timer.size == 1 and runs(recorder) == []
        assert timer.advance_clock(0) is True
        assert runs(recorder) == [("due50", 100)]


def test_r2_current_time_never_moves_backwards(impl: ModuleType) -> None:
    """R2: current = max(current, round_down(now)); a start_ms ahead of the clock is kept."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, start_ms=100) as timer:
        assert timer.advance_clock(10) is False  # now 10 < current 100
        timer.add(task(50, "due60", recorder))  # due 60 <= 100: at once
        assert runs(recorder) == [("due60", 10)]
        timer.add(task(91, "due101", recorder))  # due 101 > 100: scheduled
        assert timer.size == 1


def test_r2_advance_clock_sets_current_time_to_drain_reading(impl: ModuleType) -> None:
    """R2: after advance_clock drains at 25 (tick 10) the current time is 20."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, tick_ms=10) as timer:
        assert timer.advance_clock(25) is False
        timer.add(task(-5, "due20", recorder))
        timer.add(task(-4, "exp21-due20", recorder))
        timer.add(task(0, "exp25-due20", recorder))
        assert Counter(runs(recorder)) == Counter(
            [("due20", 25), ("exp21-due20", 25), ("exp25-due20", 25)]
        )
        timer.add(task(5, "due30", recorder))
        assert timer.size == 1


def test_r3_clock_advanced_directly_task_waits_for_next_advance(impl: ModuleType) -> None:
    """R2/R3: clock.advance does not move the current time; a passed due time waits.

    The task's due time (40) has passed on the clock (50) but lies after the timer's
    current time (0): add schedules it, and advance_clock(0) then runs it.
    """
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock) as timer:
        clock.advance(50)
        timer.add(task(-10, "stale", recorder))
        assert timer.size == 1 and runs(recorder) == []
        assert timer.advance_clock(0) is True
        assert runs(recorder) == [("stale", 50)]
        assert timer.size == 0 and clock.now_ms() == 50
        timer.add(task(-10, "after", recorder))  # current time is now 50: at once
        assert runs(recorder)[-1] == ("after", 50) and timer.size == 0


def test_r3_stale_looking_case_with_coarse_tick(impl: ModuleType) -> None:
    """R3: tick 10, clock moved to 57 directly; due 50 > current 0 waits; then current is 50."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, tick_ms=10) as timer:
        clock.advance(57)
        timer.add(task(-5, "due50", recorder))
        assert timer.size == 1 and runs(recorder) == []
        assert timer.advance_clock(0) is True
        assert runs(recorder) == [("due50", 57)]
        timer.add(task(0, "exp57-due50", recorder))  # due 50 <= current 50: at once
        assert runs(recorder)[-1] == ("exp57-due50", 57)
        timer.add(task(3, "exp60-due60", recorder))
        assert timer.size == 1


def test_r3_hand_over_happens_inside_add(impl: ModuleType) -> None:
    """R3: an already-due task is handed over before add returns (seen with a queueing executor)."""
    clock, recorder = recorded_clock()
    executor = ManualExecutor()
    with make_timer(impl, clock, executor=executor) as timer:
        timer.add(task_class(impl)(0, "zero", recorder))
        assert len(executor.queue) == 1 and timer.size == 0
        timer.add(task_class(impl)(1, "one", recorder))
        assert len(executor.queue) == 1 and timer.size == 1
        assert executor.run_all() == 1
        assert runs(recorder) == [("zero", 0)]


# ---- R4 / R5: never early, never late --------------------------------------------------


def test_r4_clock_advance_alone_never_runs_a_task(impl: ModuleType) -> None:
    """R4: a task leaves the schedule only inside advance_clock, never on clock.advance."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        timer.add(task_class(impl)(5, "x", recorder))
        clock.advance(100)
        assert runs(recorder) == [] and timer.size == 1
        assert timer.advance_clock(0) is True
        assert runs(recorder) == [("x", 100)]


def test_r4_r5_one_big_advance_runs_exactly_the_due_tasks(impl: ModuleType) -> None:
    """R4/R5: after advance_clock(t) every task due <= now ran; none due later did."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, tick_ms=5) as timer:
        for delay in range(5, 201, 3):
            timer.add(task(delay, f"d{delay}", recorder))
        assert timer.advance_clock(100) is True
        ran = {name for name, _ in runs(recorder)}
        expected = {f"d{d}" for d in range(5, 201, 3) if floor_to(d, 5) <= 100}
        assert ran == expected
        assert timer.size == len(range(5, 201, 3)) - len(expected)
        assert all(at == 100 for _, at in runs(recorder))


# ---- R6: hand-over order ---------------------------------------------------------------


def test_r6_hand_over_in_non_decreasing_due_order_ties_as_multisets(impl: ModuleType) -> None:
    """R6: one drain hands over by due time; tasks sharing a due time compare as a multiset."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    delays = [37, 13, 20, 21, 13, 29, 11, 40, 12, 14, 38, 15]
    due_of = {f"t{i}": floor_to(d, 10) for i, d in enumerate(delays)}
    with make_timer(impl, clock, tick_ms=10) as timer:
        for i, delay in enumerate(delays):
            timer.add(task(delay, f"t{i}", recorder))
        assert timer.advance_clock(50) is True
    order = [name for name, _ in runs(recorder)]
    dues = [due_of[name] for name in order]
    assert dues == sorted(dues)
    assert Counter(order) == Counter(due_of.keys())
    by_due: dict[int, Counter[str]] = {}
    for name in order:
        by_due.setdefault(due_of[name], Counter())[name] += 1
    assert by_due == {
        due: Counter(n for n, d in due_of.items() if d == due) for due in set(due_of.values())
    }


def test_r6_task_added_during_hand_over_is_judged_by_r3(impl: ModuleType) -> None:
    """R6/R3/R37: a task added by a running task is judged on its own against the new current time.

    The drain at 10 moves the current time to 10 before the hand-over, so a delay-0 add
    runs at once (inline, nested) and a delay-1 add waits for a later advance_clock.
    """
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock) as timer:
        now_task = task(0, "added-now", recorder)
        later_task = task(1, "added-later", recorder)

        def add_both() -> None:
            timer.add(now_task)
            timer.add(later_task)

        timer.add(callback_task_class(impl)(10, "adder", recorder, add_both))
        assert timer.advance_clock(10) is True
        assert runs(recorder) == [("adder", 10), ("added-now", 10)]
        assert timer.size == 1
        assert timer.advance_clock(1) is True
        assert runs(recorder)[-1] == ("added-later", 11)


# ---- R7 / R8: letting time pass, result ------------------------------------------------


def test_r7_manual_advance_clock_moves_clock_by_exactly_timeout(impl: ModuleType) -> None:
    """R7: advance_clock(t) on a ManualClock moves it by exactly t, even past earlier due tasks."""
    clock = ManualClock(5)
    recorder = Recorder(clock)
    with make_timer(impl, clock) as timer:
        assert timer.advance_clock(0) is False
        assert clock.now_ms() == 5
        timer.add(task_class(impl)(1, "early", recorder))
        assert timer.advance_clock(3_600_000) is True  # an hour of virtual time, no sleep
        assert clock.now_ms() == 3_600_005
        assert runs(recorder) == [("early", 3_600_005)]
        assert timer.advance_clock(7) is False
        assert clock.now_ms() == 3_600_012


def test_r8_result_is_true_iff_a_task_was_handed_over(impl: ModuleType) -> None:
    """R8: False with nothing due; True when a task is handed over; at-once adds do not count."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock) as timer:
        assert timer.advance_clock(10) is False
        timer.add(task(0, "at-once", recorder))  # handed over inside add
        assert timer.advance_clock(0) is False
        timer.add(task(5, "five", recorder))
        assert timer.advance_clock(4) is False
        assert timer.advance_clock(1) is True
        cancelled = task(5, "cancelled", recorder)
        timer.add(cancelled)
        cancelled.cancel()
        assert timer.advance_clock(10) is False
        assert [name for name, _ in runs(recorder)] == ["at-once", "five"]


def test_r8_negative_timeout_is_value_error(impl: ModuleType) -> None:
    """R8/R35: advance_clock(-1) raises ValueError naming timeout_ms and leaves the clock."""
    clock = ManualClock(0)
    with make_timer(impl, clock) as timer:
        with pytest.raises(ValueError, match="timeout_ms"):
            timer.advance_clock(-1)
        assert clock.now_ms() == 0


# -- wakeup on a clock reading below zero (R7) -------------------------------------------------


class JumpingClock:
    """A virtual clock that honours ``next_due``: ``wait`` jumps to the earlier of the
    timeout and the next due time (as a ``VirtualTimeLoop`` does), and does not move at
    all when the due time is already reached. Readings may be below zero (R1)."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        return self.now

    def wait(self, condition: threading.Condition, timeout_ms: int, next_due: NextDue) -> int:
        due = next_due()
        if due is not None and due <= self.now:
            return self.now
        deadline = self.now + timeout_ms
        self.now = deadline if due is None else min(deadline, due)
        return self.now


def _task(impl: ModuleType, ran: list[str], name: str, delay_ms: int) -> Any:
    class Named(impl.TimerTask):  # type: ignore[misc,name-defined]
        def run(self) -> None:
            ran.append(name)

    return Named(delay_ms)


def test_r7_wakeup_ends_the_wait_on_a_clock_reading_below_zero(impl: ModuleType) -> None:
    """``wakeup()`` ends the wait at once, at the current reading, also on a clock that
    reads below zero (R7, R1): the due time a woken wait reports is below every reading,
    not merely below zero."""
    clock = JumpingClock(-10_000)
    timer = impl.SystemTimer("below-zero", clock=clock, executor=InlineExecutor())
    ran: list[str] = []
    timer.add(_task(impl, ran, "late", 5_000))
    timer.wakeup()
    assert timer.advance_clock(60_000) is False
    assert clock.now == -10_000, "the woken wait moved the clock"
    assert timer.current_time == -10_000
    assert ran == []
    assert timer.advance_clock(60_000) is True, "unwoken, the wait jumps to the due task"
    assert (clock.now, ran) == (-5_000, ["late"])
