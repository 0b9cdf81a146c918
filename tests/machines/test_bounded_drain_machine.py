"""R73 as a state machine: bounded drain pieces interleaved with adds, cancels, re-adds,
clock moves and plain drains, checked against a model of the reference semantics.

The model is a dict of the scheduled tasks' due times plus the current time: what R2,
R3, R9-R12 and R44 say the schedule is. A bounded piece may hand over any due-ordered
prefix of what is due (the split is each implementation's own), so after every piece the
machine checks the rules rather than one expected list: every task handed over was
scheduled and due (R4), in non-decreasing due order since the first drain (R6, across
pieces and drains: a task added later is due later), at most ``max_entries`` entries of
work (hand-overs plus the wheel's cascades) and all of them when it stops early, a task
due by the current time left only while ``drain_pending`` (R5 when not), and size,
next_due_time and current time equal to the model's. ``_check()`` runs after every step
on the wheel. The same machine runs on both implementations.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory import optimized as optimized_package
from kpurgatory import reference as reference_package

LABELS = [f"t{index}" for index in range(16)]

DELAYS = st.one_of(
    st.integers(-5, 25),
    st.sampled_from([399, 400, 401, 7_999, 8_000, 8_001, 160_000]),
    st.integers(0, 9_000),
)
"""Delays on every level of a tick-1, size-20 wheel, around its level boundaries."""

MOVES = st.one_of(st.integers(0, 25), st.sampled_from([380, 400, 8_000]), st.integers(0, 9_000))

MACHINE_SETTINGS = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class BoundedDrainMachine(RuleBasedStateMachine):
    """One timer of ``impl`` on a ManualClock, driven by bounded and plain drains."""

    impl: ModuleType = reference_package

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(0)
        self.timer: Any = self.impl.SystemTimer(
            "machine", clock=self.clock, executor=InlineExecutor()
        )
        self.ran: list[str] = []
        machine = self

        class Recording(self.impl.TimerTask):  # type: ignore[misc, name-defined]
            def __init__(self, label: str) -> None:
                super().__init__(0)
                self.label = label

            def run(self) -> None:
                machine.ran.append(self.label)

        self.task_type: Any = Recording
        self.tasks: dict[str, Any] = {}
        self.scheduled: dict[str, int] = {}
        self.current = 0
        self.last_drained: int | None = None

    # -- the model -------------------------------------------------------------------

    def _drained(self, ran: list[str]) -> None:
        """Check what a drain handed over against the model, then take it out."""
        for label in ran:
            assert label in self.scheduled, f"{label} ran but was not scheduled (R9, R11)"
            due = self.scheduled.pop(label)
            assert due <= self.current, f"{label} due {due} ran at {self.current} (R4)"
            if self.last_drained is not None:
                assert due >= self.last_drained, f"{label} due {due} after {self.last_drained}"
            self.last_drained = due

    def _cascades(self) -> int:
        stats = getattr(self.timer, "stats", None)
        return 0 if stats is None else int(stats["cascades"])

    # -- rules -----------------------------------------------------------------------

    @rule(label=st.sampled_from(LABELS), delay=DELAYS)
    def add(self, label: str, delay: int) -> None:
        """A new task or a re-add (R10), judged against the current time (R3)."""
        task = self.tasks.get(label)
        if task is None:
            task = self.tasks[label] = self.task_type(label)
        task._delay_ms = delay  # the next scheduling's delay (the fixture's own task)
        due = self.clock.now_ms() + delay
        self.scheduled.pop(label, None)
        before = len(self.ran)
        self.timer.add(task)
        if due <= self.current:
            assert self.ran[before:] == [label], "a task due at once runs inside add (R3)"
        else:
            assert self.ran[before:] == []
            self.scheduled[label] = due

    @rule(
        first=st.integers(0, len(LABELS) - 1),
        count=st.integers(2, 12),
        delay=st.sampled_from([7, 30, 450, 8_100]),
    )
    def many_at_once(self, first: int, count: int, delay: int) -> None:
        """Several tasks into one bucket (one due time, or one higher-level slot), so a
        piece has to stop inside it."""
        for index in range(count):
            self.add(LABELS[(first + index) % len(LABELS)], delay + index % 3)

    @rule(label=st.sampled_from(LABELS))
    def cancel(self, label: str) -> None:
        task = self.tasks.get(label)
        if task is not None:
            task.cancel()
            self.scheduled.pop(label, None)

    @rule(ms=MOVES)
    def clock_moves(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(limit=st.one_of(st.integers(1, 3), st.integers(1, 12)))
    def piece(self, limit: int) -> None:
        """One bounded drain (R73)."""
        before, cascades = len(self.ran), self._cascades()
        self.timer.advance_clock(0, limit)
        self.current = max(self.current, self.clock.now_ms())
        ran = self.ran[before:]
        self._drained(ran)
        spent = len(ran) + self._cascades() - cascades
        assert spent <= limit, f"{spent} entries of work in a piece of {limit}"
        if self.timer.drain_pending:
            assert spent == limit, "a piece left work pending before spending its bound"

    @rule()
    def plain_drain(self) -> None:
        """An unbounded advance_clock takes everything left (R5)."""
        before = len(self.ran)
        self.timer.advance_clock(0)
        self.current = max(self.current, self.clock.now_ms())
        self._drained(self.ran[before:])
        assert not self.timer.drain_pending

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        timer = self.timer
        check = getattr(timer, "_check", None)
        if check is not None:
            check()
        assert timer.current_time == self.current
        assert timer.size == len(self.scheduled)
        assert timer.next_due_time == min(self.scheduled.values(), default=None)
        due_now = any(due <= self.current for due in self.scheduled.values())
        if due_now:
            assert timer.drain_pending, "a task due by the current time left, not pending"
        elif isinstance(timer, reference_package.SystemTimer):
            assert not timer.drain_pending


class ReferenceBoundedDrain(BoundedDrainMachine):
    impl = reference_package


class OptimizedBoundedDrain(BoundedDrainMachine):
    impl = optimized_package


def run_machine(machine: type[BoundedDrainMachine], budget: settings = MACHINE_SETTINGS) -> None:
    """Run ``machine`` under ``budget`` (the mutant tests pass a derandomized one)."""
    machine.TestCase.settings = budget
    machine.TestCase().runTest()


def test_r73_bounded_drain_machine_reference() -> None:
    """R73 on the reference: pieces interleaved with adds, cancels and clock moves."""
    run_machine(ReferenceBoundedDrain)


def test_r73_bounded_drain_machine_optimized() -> None:
    """R73 on the wheel, ``_check()`` after every step."""
    run_machine(OptimizedBoundedDrain)
