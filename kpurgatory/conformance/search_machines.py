"""The machines a stateful search picks from, and ``make_machine``, which binds one to a search.

``TimerOnlyMachine`` draws only timer steps, plus shapes published timer ports get wrong;
the ``NonNegativeTimes`` variants start no run at a negative time (for searches that
allow Kafka's truncating division). ``make_machine`` picks the class for a search's
settings and binds the search (``MachineRun``) to a subclass of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.machine import (
    CLOCK_READINGS,
    NEGATIVE_TIME_DIFFERENCE,
    START_OFFSETS,
    ConformanceMachine,
    MachineRun,
    available,
    start_rule,
)
from kpurgatory.conformance.side_by_side import Side, StatefulFailure, StatefulStats
from kpurgatory.conformance.steps import Add, Advance, ClockAdvance
from kpurgatory.spec.known_differences import KnownDifference

__all__ = [
    "NonNegativeTimesMachine",
    "NonNegativeTimesTimerOnlyMachine",
    "TimerOnlyMachine",
    "make_machine",
]


class TimerOnlyMachine(ConformanceMachine):
    """The machine for a timer-only port: the same timer rules (tasks sharing a due time
    among them) plus shapes that published timer ports get wrong and uniform draws meet
    too rarely: an add right after the clock moved without a drain (the wheel's current
    time is behind the clock, R2), and an add due at once right after an advance by whole
    ticks (R2, R3)."""

    @precondition(available("add", "clock_advance"))
    @rule(data=st.data())
    def add_after_the_clock_moved(self, data: st.DataObject) -> None:
        self.do(ClockAdvance(abs(self.moves(data))))
        label = f"t{len(self.tasks)}"
        delay = self.delay(data)
        self.tasks[label] = (delay, ())
        self.do(Add(label, delay, data.draw(st.sampled_from(self.timers))))

    @precondition(available("add", "advance"))
    @rule(data=st.data())
    def add_due_now_after_an_advance(self, data: st.DataObject) -> None:
        """An advance by whole ticks (often with nothing due: the idle path), then a
        task due at or just around the new current time (R2, R3)."""
        timer = data.draw(st.sampled_from(self.timers))
        self.do(Advance(self.tick * data.draw(st.integers(0, 2)), timer))
        label = f"t{len(self.tasks)}"
        delay = data.draw(st.sampled_from([0, 0, -1, 1, self.tick - 1, self.tick]))
        self.tasks[label] = (delay, ())
        self.do(Add(label, delay, timer))


class NonNegativeTimesMachine(ConformanceMachine):
    """``ConformanceMachine`` whose runs start at no negative clock reading or start time
    (the machine when Kafka's truncating division is allowed; see ``make_machine``)."""

    init = start_rule(
        [reading for reading in CLOCK_READINGS if reading >= 0],
        [offset for offset in START_OFFSETS if offset >= 0],
    )(ConformanceMachine.start)


class NonNegativeTimesTimerOnlyMachine(NonNegativeTimesMachine, TimerOnlyMachine):
    """``TimerOnlyMachine`` whose runs start at no negative time."""


def make_machine(
    other: Side,
    reference: ModuleType,
    on_failure: Callable[[StatefulFailure], None],
    stats: StatefulStats,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    capabilities: Capabilities | None = None,
) -> type[ConformanceMachine]:
    """The machine class of one search: reference (in process) versus ``other``, compared
    at every step; a subclass of one of the classes above bound to a ``MachineRun``.

    ``timer_only`` generates only timer steps (``TIMER_STEP_KINDS``: a port of the timer
    alone); ``allow`` is passed to the comparison (``Judge``). When it allows Kafka's
    truncating division, no run starts at a negative clock reading or start time: upstream
    Kafka then indexes its wheel with a negative slot (``ArrayIndexOutOfBoundsException``,
    a crash that no difference excuses), so such runs could only fail an honest Kafka port.
    """
    no_negative_times = any(d.id == NEGATIVE_TIME_DIFFERENCE for d in allow)
    base: type[ConformanceMachine] = {
        (False, False): ConformanceMachine,
        (True, False): TimerOnlyMachine,
        (False, True): NonNegativeTimesMachine,
        (True, True): NonNegativeTimesTimerOnlyMachine,
    }[(timer_only, no_negative_times)]
    run = MachineRun(
        other,
        reference,
        on_failure,
        stats,
        allow,
        timer_only,
        Capabilities() if capabilities is None else capabilities,
    )
    # A subclass per search: the run is its own, and hypothesis.seed marks the class.
    return type(base.__name__, (base,), {"run": run, "__module__": __name__})
