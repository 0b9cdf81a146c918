"""Timer rules R9-R12, R15 and R44 through the public API: cancel, re-add, tasks cancelled
or moved before their turn, size, defaults and the next due time.

As in ``test_timer_rules.py``: on every implementation (``impl``), due times from a
floor-division oracle; helpers in ``tests.timer_support``.
"""

from __future__ import annotations

import random
from collections import Counter
from types import ModuleType
from typing import Any

from kpurgatory import InlineExecutor, ManualClock
from tests.support import Recorder, floor_to, recorded_clock, task_class
from tests.timer_support import ManualExecutor, callback_task_class, make_timer, runs

# ---- R9: cancel -------------------------------------------------------------------------


def test_r9_cancel_is_idempotent_and_drops_size_at_once(impl: ModuleType) -> None:
    """R9/R12: cancel removes the task from size at once; cancelling again changes nothing."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock) as timer:
        a, b = task(5, "a", recorder), task(6, "b", recorder)
        timer.add(a)
        timer.add(b)
        assert timer.size == 2
        a.cancel()
        assert timer.size == 1
        a.cancel()
        assert timer.size == 1
        assert timer.advance_clock(10) is True
        assert runs(recorder) == [("b", 6 + 4)]


def test_r9_cancel_of_unscheduled_task_is_a_no_op(impl: ModuleType) -> None:
    """R9: cancel on a task never added, or one that already ran, does nothing."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock) as timer:
        never = task(5, "never", recorder)
        never.cancel()
        other = task(5, "other", recorder)
        timer.add(other)
        ran = task(1, "ran", recorder)
        timer.add(ran)
        timer.advance_clock(1)
        ran.cancel()
        assert timer.size == 1
        timer.advance_clock(4)
        assert [name for name, _ in runs(recorder)] == ["ran", "other"]


def test_r9_cancel_does_not_stop_a_run_already_handed_over(impl: ModuleType) -> None:
    """R9: once handed to the executor the run happens, even if cancel comes first."""
    clock, recorder = recorded_clock()
    executor = ManualExecutor()
    with make_timer(impl, clock, executor=executor) as timer:
        drained = task_class(impl)(3, "drained", recorder)
        at_once = task_class(impl)(0, "at-once", recorder)
        timer.add(drained)
        timer.add(at_once)
        assert timer.advance_clock(5) is True
        drained.cancel()
        at_once.cancel()
        assert timer.size == 0
        assert executor.run_all() == 2
        assert Counter(name for name, _ in runs(recorder)) == Counter(["drained", "at-once"])


# ---- R10: re-add -----------------------------------------------------------------------


def test_r10_re_add_in_same_timer_replaces_schedule(impl: ModuleType) -> None:
    """R10/R12: re-adding recomputes expiration from the new reading; size stays 1; one run."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        task = task_class(impl)(10, "x", recorder)
        timer.add(task)
        clock.advance(5)
        timer.add(task)  # now expires at 15
        assert timer.size == 1
        assert timer.advance_clock(5) is False  # 10: the old schedule is gone
        assert timer.advance_clock(5) is True
        assert runs(recorder) == [("x", 15)]
        assert timer.size == 0


def test_r10_re_add_moves_task_between_timers(impl: ModuleType) -> None:
    """R10/R12: adding a task scheduled in timer A to timer B drops A's size; only B runs it."""
    clock_a, clock_b = ManualClock(0), ManualClock(1000)
    recorder = Recorder(clock_b)
    with make_timer(impl, clock_a, name="a") as a, make_timer(impl, clock_b, name="b") as b:
        task = task_class(impl)(10, "mover", recorder)
        a.add(task)
        assert (a.size, b.size) == (1, 0)
        b.add(task)
        assert (a.size, b.size) == (0, 1)
        assert a.advance_clock(100) is False
        assert b.advance_clock(9) is False
        assert b.advance_clock(1) is True
        assert runs(recorder) == [("mover", 1010)]
        assert (a.size, b.size) == (0, 0)


def test_r10_move_into_timer_where_it_is_due_at_once(impl: ModuleType) -> None:
    """R10/R3: moving a task to a timer whose current time is past its due runs it at once."""
    clock_a, clock_b = ManualClock(0), ManualClock(0)
    recorder = Recorder(clock_a)
    with (
        make_timer(impl, clock_a, name="a") as a,
        make_timer(impl, clock_b, start_ms=500, name="b") as b,
    ):
        task = task_class(impl)(10, "mover", recorder)
        a.add(task)
        b.add(task)  # due 10 <= current 500: handed over inside add
        assert (a.size, b.size) == (0, 0)
        assert runs(recorder) == [("mover", 0)]
        assert a.advance_clock(20) is False
        assert runs(recorder) == [("mover", 0)]


def test_r10_re_add_of_cancelled_task_schedules_it_again(impl: ModuleType) -> None:
    """R10: a cancelled task added again is scheduled and runs."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        task = task_class(impl)(5, "x", recorder)
        timer.add(task)
        task.cancel()
        timer.add(task)
        assert timer.size == 1
        assert timer.advance_clock(5) is True
        assert runs(recorder) == [("x", 5)]


def test_r10_re_add_of_task_that_already_ran_runs_it_again(impl: ModuleType) -> None:
    """R10: a task that already ran may be added again and runs a second time."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        task = task_class(impl)(5, "x", recorder)
        timer.add(task)
        timer.advance_clock(5)
        timer.add(task)
        assert timer.size == 1
        timer.advance_clock(5)
        assert runs(recorder) == [("x", 5), ("x", 10)]
        timer.add(task_class(impl)(0, "y", recorder))
        assert timer.size == 0


# ---- R11: cancelled or re-added before its turn ----------------------------------------


def test_r11_task_cancelled_by_earlier_task_in_same_drain_is_skipped(impl: ModuleType) -> None:
    """R11: an inline task cancels a later task drained by the same advance_clock; it never runs."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        victim = task_class(impl)(7, "victim", recorder)
        killer = callback_task_class(impl)(5, "killer", recorder, victim.cancel)
        timer.add(victim)
        timer.add(killer)
        assert timer.advance_clock(10) is True
        assert runs(recorder) == [("killer", 10)]
        assert timer.size == 0
        assert timer.advance_clock(100) is False


def test_r11_task_re_added_by_earlier_task_in_same_drain_waits(impl: ModuleType) -> None:
    """R11/R10: a later task re-added mid-drain is not handed over by this call; it runs later."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        victim = task_class(impl)(7, "victim", recorder)
        timer.add(victim)
        timer.add(callback_task_class(impl)(5, "re-adder", recorder, lambda: timer.add(victim)))
        assert timer.advance_clock(10) is True
        assert runs(recorder) == [("re-adder", 10)]
        assert timer.size == 1  # re-added at 10 with delay 7: due 17
        assert timer.advance_clock(6) is False
        assert timer.advance_clock(1) is True
        assert runs(recorder)[-1] == ("victim", 17)


def test_r11_task_moved_mid_drain_runs_once_in_its_new_timer(impl: ModuleType) -> None:
    """R11/R10: moved mid-drain to a timer where it is due at once, it runs there, only once."""
    clock, recorder = recorded_clock()
    with (
        make_timer(impl, clock, name="a") as a,
        make_timer(impl, ManualClock(0), start_ms=1000, name="b") as b,
    ):
        victim = task_class(impl)(7, "victim", recorder)
        a.add(victim)
        a.add(callback_task_class(impl)(5, "mover", recorder, lambda: b.add(victim)))
        assert a.advance_clock(10) is True
        assert runs(recorder) == [("mover", 10), ("victim", 10)]
        assert (a.size, b.size) == (0, 0)


def test_r11_task_collected_again_by_a_nested_drain_runs_once(impl: ModuleType) -> None:
    """R11: a later task of a drain is re-added and collected by a nested drain before its
    turn; the nested drain hands it over, the outer drain skips it, so it runs once."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        victim = task_class(impl)(7, "victim", recorder)

        def re_add_and_drain() -> None:
            timer.add(victim)  # due 10 + 7 = 17
            clock.advance(7)
            assert timer.advance_clock(0) is True  # the nested drain hands the victim over

        timer.add(victim)
        timer.add(callback_task_class(impl)(5, "nested", recorder, re_add_and_drain))
        assert timer.advance_clock(10) is True
        assert runs(recorder) == [("nested", 10), ("victim", 17)]
        assert timer.size == 0
        assert timer.advance_clock(100) is False
        assert runs(recorder) == [("nested", 10), ("victim", 17)]


# ---- R12: size --------------------------------------------------------------------------


def test_r12_size_counts_only_scheduled_tasks(impl: ModuleType) -> None:
    """R12: size grows with scheduled adds only and shrinks on drain, cancel and move."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, name="a") as a, make_timer(impl, clock, name="b") as b:
        assert a.size == 0
        a.add(task(0, "now", recorder))
        a.add(task(-3, "past", recorder))
        assert a.size == 0
        tasks = [task(d, f"d{d}", recorder) for d in (1, 2, 3, 4)]
        for t in tasks:
            a.add(t)
        assert a.size == 4
        tasks[0].cancel()
        assert a.size == 3
        b.add(tasks[1])
        assert (a.size, b.size) == (2, 1)
        a.advance_clock(3)  # drains d3; b is not advanced
        assert (a.size, b.size) == (1, 1)
        b.advance_clock(0)
        assert (a.size, b.size) == (1, 0)


# ---- R15: defaults that a manual clock can show ----------------------------------------


def test_r15_default_tick_is_one_millisecond(impl: ModuleType) -> None:
    """R15/R1: without tick_ms a task runs at exactly its expiration, not a tick earlier."""
    clock, recorder = recorded_clock()
    with impl.SystemTimer("defaults", clock=clock, executor=InlineExecutor()) as timer:
        timer.add(task_class(impl)(7, "seven", recorder))
        assert timer.advance_clock(6) is False
        assert timer.advance_clock(1) is True
        assert runs(recorder) == [("seven", 7)]


# ---- R44: next due time -----------------------------------------------------------------


def test_r44_next_due_time_is_the_least_scheduled_due_time(impl: ModuleType) -> None:
    """R44: None when empty; the least due time of the scheduled tasks; follows cancel/move."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, 5, name="a") as a, make_timer(impl, clock, 5, name="b") as b:
        assert a.next_due_time is None
        a.add(task(0, "now", recorder))  # handed over at once (R3): never scheduled
        assert a.next_due_time is None
        late, early, mid = (
            task(93, "late", recorder),
            task(12, "early", recorder),
            task(40, "m", recorder),
        )
        for t in (late, early, mid):
            a.add(t)
        assert a.next_due_time == floor_to(12, 5)
        early.cancel()
        assert a.next_due_time == floor_to(40, 5)
        b.add(mid)  # moved: leaves a, due in b from the reading now
        pair: tuple[int | None, int | None] = (a.next_due_time, b.next_due_time)
        assert pair == (floor_to(93, 5), floor_to(40, 5))
        late.cancel()
        assert a.next_due_time is None


def test_r44_advance_before_next_due_hands_nothing_at_or_after_drains_it(
    impl: ModuleType,
) -> None:
    """R44 with R4/R5: a drain before next_due_time hands nothing over; at it, that task."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    with make_timer(impl, clock, name="a") as timer:
        for delay in (7, 7, 30, 500):
            timer.add(task(delay, f"d{delay}", recorder))
        due = timer.next_due_time
        assert due == 7
        assert timer.advance_clock(due - clock.now_ms() - 1) is False
        assert timer.next_due_time == 7
        assert timer.advance_clock(1) is True
        assert sorted(name for name, _ in runs(recorder)) == ["d7", "d7"]
        assert timer.next_due_time == 30
        timer.advance_clock(470)  # reading 477: drains d30 only
        assert [name for name, _ in runs(recorder)][-1] == "d30"
        assert timer.next_due_time == 500
        timer.advance_clock(23)
        assert timer.next_due_time is None
        assert [name for name, _ in runs(recorder)][-1] == "d500"


def test_r44_matches_the_oracle_over_wheel_levels_and_cancels(impl: ModuleType) -> None:
    """R44 against min() over a model, with delays across overflow levels and cancels that
    empty whole buckets (the wheel must skip them and look past higher-level buckets)."""
    rng = random.Random(38)
    clock = ManualClock(11)
    recorder = Recorder(clock)
    task = task_class(impl)
    with make_timer(impl, clock, 3, name="a") as timer:
        model: dict[str, int] = {}
        tasks: dict[str, Any] = {}
        for step in range(400):
            roll = rng.random()
            if roll < 0.5:
                delay = rng.choice(
                    [rng.randrange(1, 60), rng.randrange(60, 1200), 10 ** rng.randrange(3, 7)]
                )
                name = f"t{step}"
                tasks[name] = task(delay, name, recorder)
                timer.add(tasks[name])
                model[name] = floor_to(clock.now_ms() + delay, 3)
            elif roll < 0.8 and model:
                name = rng.choice(sorted(model))
                tasks[name].cancel()
                del model[name]
            else:
                timer.advance_clock(rng.randrange(0, 400))
                now = clock.now_ms()
                model = {n: d for n, d in model.items() if d > now}
            assert timer.next_due_time == min(model.values(), default=None), step
            assert timer.size == len(model)
