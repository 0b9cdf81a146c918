"""A Hypothesis state machine: each implementation's timer against a brute-force model.

The model is deliberately dumb and lives here, independent of any implementation: a
plain list of ``(due, task name)`` pairs, the model's clock reading, and its current
time. Each step is applied to both; afterwards the timer's ``size`` must equal the
length of the list, and the tasks the step ran must be exactly the ones the model
predicts: the same multiset for each due time, handed over in non-decreasing due order
(R1-R12). One machine class per implementation: a subclass names another package.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.spec.events import TaskRan
from tests.support import Recorder, floor_to, implementation_names, load, task_class

TICKS = st.one_of(
    st.sampled_from([1, 2, 5, 10]),
    st.sampled_from([1, 2, 5, 10]),
    st.sampled_from([1, 2, 5, 10]),
    st.integers(11, 1000),
)
"""Tick sizes: mostly the usual ones, occasionally a larger, odd one."""

HUGE = 10**12
"""Magnitude of the occasional huge delay or advance."""


class TimerVersusModel(RuleBasedStateMachine):
    """Drives the ``SystemTimer`` of the implementation package ``impl_name`` and the list
    model side by side."""

    impl_name: ClassVar[str] = "reference"

    tasks = Bundle("tasks")

    def __init__(self) -> None:
        super().__init__()
        self.impl = load(self.impl_name)
        self.timer: Any = None
        self.clock = ManualClock(0)
        self.recorder = Recorder(self.clock)
        self.by_name: dict[str, Any] = {}
        self.tick = 1
        self.span = 20
        # the model
        self.scheduled: list[tuple[int, str]] = []
        self.now = 0
        self.current = 0

    # -- setup ---------------------------------------------------------------------

    @initialize(tick=TICKS, wheel_size=st.integers(2, 20), data=st.data())
    def setup(self, tick: int, wheel_size: int, data: st.DataObject) -> None:
        """R2: a timer with a random tick, wheel and start time (maybe off the clock)."""
        span = tick * wheel_size
        clock_start = data.draw(st.integers(-10_000, 10**7), label="clock_start")
        if data.draw(st.booleans(), label="align clock to the tick"):
            clock_start = floor_to(clock_start, tick)
        start_offset = data.draw(
            st.one_of(st.none(), st.integers(-3 * span, 3 * span), st.integers(1, 10 * span)),
            label="start_offset",
        )
        start_ms = None if start_offset is None else clock_start + start_offset
        self.clock = ManualClock(clock_start)
        self.recorder = Recorder(self.clock)
        self.timer = self.impl.SystemTimer(
            "model",
            tick,
            wheel_size,
            start_ms,
            clock=self.clock,
            executor=InlineExecutor(),
        )
        self.tick, self.span = tick, span
        self.now = clock_start
        self.current = floor_to(clock_start if start_ms is None else start_ms, tick)

    def teardown(self) -> None:
        """Close the timer (R14)."""
        if self.timer is not None:
            self.timer.close()

    # -- model helpers -------------------------------------------------------------

    def unschedule(self, name: str) -> None:
        self.scheduled = [(due, n) for due, n in self.scheduled if n != name]

    def model_add(self, name: str) -> list[tuple[int, str]]:
        """R1/R3/R10: what add does; returns the (due, name) handed over at once."""
        self.unschedule(name)
        due = floor_to(self.now + self.by_name[name].delay_ms, self.tick)
        if due <= self.current:
            return [(due, name)]
        self.scheduled.append((due, name))
        return []

    def ran_since(self, mark: int) -> list[str]:
        return [e.task for e in self.recorder.events[mark:] if isinstance(e, TaskRan)]

    def check_step(self, mark: int, expected: list[tuple[int, str]]) -> None:
        """R4-R6: the step ran exactly ``expected``, per due time, in due order."""
        ran = self.ran_since(mark)
        due_of = dict((name, due) for due, name in expected)
        assert Counter(ran) == Counter(name for _, name in expected), (ran, expected)
        dues = [due_of[name] for name in ran]
        assert dues == sorted(dues), ran
        assert self.timer.size == len(self.scheduled)

    # -- rules ---------------------------------------------------------------------

    def add_fresh(self, delay: int) -> str:
        """Add a new task with ``delay`` to timer and model; check the step (R3)."""
        name = f"t{len(self.by_name)}"
        self.by_name[name] = task_class(self.impl)(delay, name, self.recorder)
        mark = len(self.recorder.events)
        self.timer.add(self.by_name[name])
        at_once = self.model_add(name)
        event("add: due at once" if at_once else "add: scheduled")
        self.check_step(mark, at_once)
        return name

    @rule(target=tasks, data=st.data())
    def add_new(self, data: st.DataObject) -> str:
        """R1/R3: add a task with a delay from negative to ~10 spans, near the current
        time's boundary, or huge."""
        mode = data.draw(
            st.sampled_from(["span", "span", "tick", "near current", "huge"]), label="mode"
        )
        if mode == "span":
            delay = data.draw(st.integers(-2 * self.span, 10 * self.span), label="delay")
        elif mode == "tick":
            delay = data.draw(st.integers(-2 * self.tick, 2 * self.tick), label="delay")
        elif mode == "near current":  # due lands on or around the current time (R3)
            offset = data.draw(st.integers(-2 * self.tick, 2 * self.tick), label="offset")
            delay = self.current - self.now + offset
        else:
            delay = data.draw(st.integers(-HUGE, HUGE), label="delay")
        return self.add_fresh(delay)

    @rule(target=tasks, data=st.data())
    def add_batch(self, data: st.DataObject) -> MultipleResults[str]:
        """R6: several fresh tasks due within a few ticks, so due times often tie."""
        delays = data.draw(
            st.lists(st.integers(-self.tick, 3 * self.tick), min_size=2, max_size=6),
            label="delays",
        )
        return multiple(*(self.add_fresh(delay) for delay in delays))

    @rule(name=tasks)
    def re_add(self, name: str) -> None:
        """R10: add an existing task again (scheduled, cancelled or already run)."""
        mark = len(self.recorder.events)
        self.timer.add(self.by_name[name])
        self.check_step(mark, self.model_add(name))

    @rule(name=tasks)
    def cancel(self, name: str) -> None:
        """R9: cancel, whether or not the task is scheduled."""
        mark = len(self.recorder.events)
        self.by_name[name].cancel()
        self.unschedule(name)
        self.check_step(mark, [])

    @rule(data=st.data())
    def advance_clock(self, data: st.DataObject) -> None:
        """R2/R4-R8: advance_clock by 0, 1, whole ticks, to just around the next due
        time, or by random and large amounts."""
        mode = data.draw(
            st.sampled_from(["tiny", "ticks", "next due", "next due", "span", "far", "huge"]),
            label="mode",
        )
        if mode == "tiny":
            amount = data.draw(st.sampled_from([0, 1]), label="amount")
        elif mode == "ticks":
            amount = self.tick * data.draw(st.integers(1, 3), label="ticks")
        elif mode == "next due":  # land one before, on, or one after a due time (R4, R5)
            target = min((due for due, _ in self.scheduled), default=self.now)
            nudge = data.draw(st.integers(-1, 1), label="nudge")
            amount = max(0, target - self.now + nudge)
        elif mode == "span":
            amount = data.draw(st.integers(0, 3 * self.span), label="amount")
        elif mode == "far":
            amount = data.draw(st.integers(0, 20 * self.span), label="amount")
        else:
            amount = data.draw(st.integers(0, HUGE), label="amount")
        mark = len(self.recorder.events)
        result = self.timer.advance_clock(amount)
        self.now += amount
        drained = sorted(p for p in self.scheduled if p[0] <= self.now)
        self.scheduled = [p for p in self.scheduled if p[0] > self.now]
        self.current = max(self.current, floor_to(self.now, self.tick))
        assert self.clock.now_ms() == self.now  # R7
        assert result is bool(drained)  # R8
        event(f"advance_clock drained {min(len(drained), 3)}{'+' if len(drained) > 2 else ''}")
        self.check_step(mark, drained)

    @rule(data=st.data())
    def clock_advance(self, data: st.DataObject) -> None:
        """R2/R3/R4: move the clock directly; the timer's current time stays behind."""
        amount = data.draw(
            st.one_of(st.integers(0, 2 * self.tick), st.integers(0, 3 * self.span)),
            label="amount",
        )
        mark = len(self.recorder.events)
        self.clock.advance(amount)
        self.now += amount
        self.check_step(mark, [])

    @invariant()
    def size_matches_model(self) -> None:
        """R12: size is the number of scheduled tasks."""
        if self.timer is not None:
            assert self.timer.size == len(self.scheduled)


class OptimizedTimerVersusModel(TimerVersusModel):
    impl_name = "optimized"


MACHINES = {machine.impl_name: machine for machine in (TimerVersusModel, OptimizedTimerVersusModel)}


@pytest.mark.parametrize("impl_name", implementation_names())
def test_timer_matches_brute_force_model(impl_name: str) -> None:
    """R1-R12: random adds, re-adds, cancels and clock moves agree with the list model."""
    run_state_machine_as_test(MACHINES[impl_name], settings=settings())
