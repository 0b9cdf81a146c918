"""Timer rules R1-R14 and R37 through the public API, on a ManualClock with InlineExecutor.

Every test takes the ``impl`` fixture, so the same checks run on the reference and on
every other implementation package present. Expected due times are computed here with
floor division (an oracle independent of ``kpurgatory.spec.arithmetic``), never copied
from the implementation.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future
from types import ModuleType
from typing import Any, ParamSpec, TypeVar

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.spec.events import TaskRan
from tests.support import Recorder, floor_to, task_class

P = ParamSpec("P")
R = TypeVar("R")

JOIN_TIMEOUT_S = 5.0
"""Upper bound for joining a helper thread; a healthy run needs milliseconds."""


def make_timer(
    impl: ModuleType,
    clock: ManualClock,
    tick_ms: int = 1,
    start_ms: int | None = None,
    *,
    executor: Executor | None = None,
    name: str = "t",
) -> Any:
    """A timer of ``impl`` on ``clock`` that runs tasks inline unless told otherwise."""
    return impl.SystemTimer(
        name,
        tick_ms,
        20,
        start_ms,
        clock=clock,
        executor=InlineExecutor() if executor is None else executor,
    )


def runs(recorder: Recorder) -> list[tuple[str, int]]:
    """(task name, clock reading) of every run recorded so far, in run order."""
    return [(e.task, e.at_ms) for e in recorder.events if isinstance(e, TaskRan)]


def run_in_thread(fn: Callable[[], object]) -> bool:
    """Run ``fn`` on a helper thread; True iff it finished within ``JOIN_TIMEOUT_S``.

    Used to prove that no lock is held by the calling thread: if one were, the helper
    would block on it and not finish.
    """
    worker = threading.Thread(target=fn, daemon=True)
    worker.start()
    worker.join(JOIN_TIMEOUT_S)
    return not worker.is_alive()


class ManualExecutor(Executor):
    """An executor that only queues hand-overs; ``run_all`` runs them later.

    Lets a test act between a task's hand-over and its run (R9), and shows whether a
    timer shut a caller's executor down (R14).
    """

    def __init__(self) -> None:
        self.queue: list[Callable[[], None]] = []
        self.shut_down = False

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Queue ``fn(*args, **kwargs)``; its future completes when ``run_all`` runs it."""
        future: Future[R] = Future()

        def call() -> None:
            future.set_result(fn(*args, **kwargs))

        self.queue.append(call)
        return future

    def run_all(self) -> int:
        """Run every queued call in submission order; return how many ran."""
        pending, self.queue = self.queue, []
        for call in pending:
            call()
        return len(pending)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Record that the timer (or someone) shut this executor down."""
        self.shut_down = True


def callback_task_class(impl: ModuleType) -> type[Any]:
    """A recording task of ``impl`` (``task_class``) that then calls ``action``."""

    class CallbackTask(task_class(impl)):  # type: ignore[misc]
        def __init__(
            self, delay_ms: int, name: str, recorder: Recorder, action: Callable[[], None]
        ) -> None:
            super().__init__(delay_ms, name, recorder)
            self.action = action

        def run(self) -> None:
            super().run()
            self.action()

        def __repr__(self) -> str:
            return f"CallbackTask({self.name!r})"

    return CallbackTask


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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
    task = task_class(impl)
    with make_timer(impl, clock, start_ms=100) as timer:
        assert timer.advance_clock(10) is False  # now 10 < current 100
        timer.add(task(50, "due60", recorder))  # due 60 <= 100: at once
        assert runs(recorder) == [("due60", 10)]
        timer.add(task(91, "due101", recorder))  # due 101 > 100: scheduled
        assert timer.size == 1


def test_r2_advance_clock_sets_current_time_to_drain_reading(impl: ModuleType) -> None:
    """R2: after advance_clock drains at 25 (tick 10) the current time is 20."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
    with make_timer(impl, clock) as timer:
        timer.add(task_class(impl)(5, "x", recorder))
        clock.advance(100)
        assert runs(recorder) == [] and timer.size == 1
        assert timer.advance_clock(0) is True
        assert runs(recorder) == [("x", 100)]


def test_r4_r5_one_big_advance_runs_exactly_the_due_tasks(impl: ModuleType) -> None:
    """R4/R5: after advance_clock(t) every task due <= now ran; none due later did."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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


# ---- R9: cancel -------------------------------------------------------------------------


def test_r9_cancel_is_idempotent_and_drops_size_at_once(impl: ModuleType) -> None:
    """R9/R12: cancel removes the task from size at once; cancelling again changes nothing."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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


# ---- R13: task exceptions ---------------------------------------------------------------


def boom_class(impl: ModuleType) -> type[Any]:
    """A ``TimerTask`` of ``impl`` whose run raises, with a distinctive repr."""

    class Boom(impl.TimerTask):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, tag: str) -> None:
            super().__init__(delay_ms)
            self.tag = tag

        def run(self) -> None:
            raise RuntimeError(f"boom from {self.tag}")

        def __repr__(self) -> str:
            return f"<Boom task {self.tag}>"

    return Boom


def test_r13_exception_is_logged_with_task_and_next_task_runs(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """R13: a raising task is logged (kpurgatory logger, task repr); later tasks still run."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
    caplog.set_level(logging.ERROR, logger="kpurgatory")
    with make_timer(impl, clock) as timer:
        timer.add(boom_class(impl)(3, "drained-7f3a"))
        timer.add(task_class(impl)(4, "after", recorder))
        assert timer.advance_clock(5) is True
        assert runs(recorder) == [("after", 5)]
        timer.add(boom_class(impl)(0, "at-once-91c2"))  # add does not raise
        timer.add(task_class(impl)(1, "later", recorder))
        assert timer.advance_clock(1) is True
        assert runs(recorder)[-1] == ("later", 6)
    messages = [(r.getMessage(), r) for r in caplog.records if r.name.startswith("kpurgatory")]
    for tag in ("drained-7f3a", "at-once-91c2"):
        hits = [r for message, r in messages if f"<Boom task {tag}>" in message]
        assert len(hits) == 1, tag
        assert hits[0].levelno >= logging.ERROR


# ---- R14: close -------------------------------------------------------------------------


def test_r14_close_is_idempotent_and_stops_the_timer(impl: ModuleType) -> None:
    """R14: after close tasks never run, advance_clock returns False at once, add raises."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
    timer = make_timer(impl, clock)
    timer.add(task_class(impl)(5, "pending", recorder))
    timer.close()
    timer.close()
    assert timer.advance_clock(10) is False
    assert clock.now_ms() == 0  # returned at once: no time let pass
    assert runs(recorder) == []
    with pytest.raises(RuntimeError):
        timer.add(task_class(impl)(5, "late", recorder))
    assert timer.advance_clock(0) is False
    assert runs(recorder) == []


def test_r14_caller_executor_is_left_running(impl: ModuleType) -> None:
    """R14: close never shuts down an executor the caller supplied."""
    executor = ManualExecutor()
    inline = InlineExecutor()
    make_timer(impl, ManualClock(0), executor=executor).close()
    make_timer(impl, ManualClock(0), executor=inline).close()
    assert executor.shut_down is False
    assert inline.submit(lambda: 42).result() == 42


def test_r14_context_manager_closes_on_exit(impl: ModuleType) -> None:
    """R14: leaving the with block closes the timer."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
    with make_timer(impl, clock) as timer:
        timer.add(task_class(impl)(5, "x", recorder))
    with pytest.raises(RuntimeError):
        timer.add(task_class(impl)(5, "y", recorder))
    assert timer.advance_clock(10) is False and runs(recorder) == []


def test_r14_r39_owned_executor_finishes_handed_over_work_close_does_not_wait(
    impl: ModuleType,
) -> None:
    """R14/R15/R39: the owned worker still runs what was handed over, but close returns
    without waiting for it; await_termination waits, and the worker is gone afterwards.

    ManualClock with the default executor: the task runs on ``executor-<name>``.
    """
    name = f"owned-{impl.__name__.rsplit('.', 1)[-1]}-r14"
    release = threading.Event()
    finished = threading.Event()
    thread_names: list[str] = []

    def slow() -> None:
        thread_names.append(threading.current_thread().name)
        release.wait(JOIN_TIMEOUT_S)
        finished.set()

    timer = impl.SystemTimer(name, clock=ManualClock(0))
    assert timer.await_termination(0) is False  # not closed yet
    timer.add(callback_task_class(impl)(0, "slow", Recorder(ManualClock(0)), slow))
    timer.close()  # returns although the handed-over task is still running
    assert not finished.is_set()
    assert timer.await_termination(0.01) is False
    release.set()
    assert timer.await_termination(JOIN_TIMEOUT_S) is True
    assert finished.is_set()
    assert thread_names == [f"executor-{name}"]
    assert all(t.name != f"executor-{name}" for t in threading.enumerate())


# ---- R37: thread safety, no timer lock held during hand-over ---------------------------


def test_r37_hand_over_holds_no_timer_lock(impl: ModuleType) -> None:
    """R37: while a task runs inline, another thread can add, cancel and read size freely."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
    task = task_class(impl)
    outcomes: list[bool] = []
    with make_timer(impl, clock) as timer:
        extra = task(50, "extra", recorder)

        def from_other_thread() -> None:
            def touch() -> None:
                timer.add(extra)
                _ = timer.size
                extra.cancel()
                timer.add(extra)

            outcomes.append(run_in_thread(touch))

        timer.add(callback_task_class(impl)(5, "drained", recorder, from_other_thread))
        timer.add(callback_task_class(impl)(0, "at-once", recorder, from_other_thread))
        timer.advance_clock(5)
        assert outcomes == [True, True]
        assert timer.size == 1


def test_r37_concurrent_adds_and_cancels_keep_size_exact(impl: ModuleType) -> None:
    """R37/R12: four threads adding and cancelling at once leave exactly the kept tasks."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
    task = task_class(impl)
    per_thread = 300
    with make_timer(impl, clock, tick_ms=2) as timer:
        batches = [
            [task(2 + (i * 7 + k) % 400, f"w{k}-{i}", recorder) for i in range(per_thread)]
            for k in range(4)
        ]
        start = threading.Barrier(4)

        def work(batch: list[Any]) -> None:
            start.wait(JOIN_TIMEOUT_S)
            for i, t in enumerate(batch):
                timer.add(t)
                if i % 2:
                    t.cancel()

        workers = [threading.Thread(target=work, args=(b,), daemon=True) for b in batches]
        for w in workers:
            w.start()
        for w in workers:
            w.join(JOIN_TIMEOUT_S)
        assert not any(w.is_alive() for w in workers)
        kept = 4 * (per_thread // 2)
        assert timer.size == kept
        assert timer.advance_clock(1000) is True
        names = [name for name, _ in runs(recorder)]
        assert len(names) == len(set(names)) == kept
        assert timer.size == 0


# ---- R15: defaults that a manual clock can show ----------------------------------------


def test_r15_default_tick_is_one_millisecond(impl: ModuleType) -> None:
    """R15/R1: without tick_ms a task runs at exactly its expiration, not a tick earlier."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
    with impl.SystemTimer("defaults", clock=clock, executor=InlineExecutor()) as timer:
        timer.add(task_class(impl)(7, "seven", recorder))
        assert timer.advance_clock(6) is False
        assert timer.advance_clock(1) is True
        assert runs(recorder) == [("seven", 7)]


# ---- R44: next due time -----------------------------------------------------------------


def test_r44_next_due_time_is_the_least_scheduled_due_time(impl: ModuleType) -> None:
    """R44: None when empty; the least due time of the scheduled tasks; follows cancel/move."""
    clock = ManualClock(0)
    recorder = Recorder(clock)
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
    clock = ManualClock(0)
    recorder = Recorder(clock)
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


# -- wakeup on a clock reading below zero (R7) -------------------------------------------------


class JumpingClock:
    """A virtual clock that honours ``next_due``: ``wait`` jumps to the earlier of the
    timeout and the next due time (as a ``VirtualTimeLoop`` does), and does not move at
    all when the due time is already reached. Readings may be below zero (R1)."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        return self.now

    def wait(
        self,
        condition: threading.Condition,
        timeout_ms: int,
        next_due: Callable[[], int | None],
    ) -> int:
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
