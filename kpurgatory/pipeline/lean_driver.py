"""The replay's step interpreter: the conformance driver's observations, as plain tuples.

``LeanDriver`` executes the step kinds the workloads generate (``WORKLOAD_KINDS``) on
an implementation exactly as ``kpurgatory.conformance.driver.Driver`` does, and returns
each step's observation as a ``Compact`` tuple instead of an ``Observation`` object:
``(result, raised, events, tries, state)``; each event is ``(kind, label, at_ms, via,
unit, due_ms)`` (kind: completed, expired or task_ran), ``tries`` the sorted
``(label, count)`` pairs, ``state`` None or the tuple of ``State``'s fields. The mapping
is one to one (``to_observation`` rebuilds the kit's object), so two compact
observations are equal exactly when the kit's are; the replay compares tuples and asks
the kit's ``compare_observations`` only when they differ (hand-overs with the same due
time may come in another order, R6). tests/pipeline/test_lean_driver.py checks it
against the kit's driver, observation by observation, on every scenario and preset.
Why a second interpreter: building the kit's frozen objects, closures and counters for
every step cost more than the two implementations' own work (docs/pipeline.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from kpurgatory.clock import ManualClock
from kpurgatory.conformance.driver import (
    IMPLEMENTATION_ERRORS,
    PUBLIC_API,
    Observation,
    RecordedEvent,
    State,
    StepError,
)
from kpurgatory.conformance.steps import (
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    PurgatoryAdvance,
    SetReady,
    Step,
    Watch,
)
from kpurgatory.executors import InlineExecutor
from kpurgatory.spec.arithmetic import due_time, expiration_ms
from kpurgatory.spec.events import Event, OperationCompleted, OperationExpired, TaskRan

__all__ = ["WORKLOAD_KINDS", "Compact", "LeanDriver", "supports", "to_observation"]

Compact = tuple[Any, str | None, tuple[tuple[Any, ...], ...], tuple[tuple[str, int], ...], Any]
"""``(result, raised, events, tries, state)``; see the module docstring."""

WORKLOAD_KINDS: frozenset[type] = frozenset(
    {
        Init,
        Watch,
        SetReady,
        CheckAndComplete,
        ForceComplete,
        CancelForKey,
        ClockAdvance,
        PurgatoryAdvance,
    }
)
"""The step classes ``LeanDriver`` runs (those ``kpurgatory.workloads`` generates)."""


def supports(steps: Sequence[Step]) -> bool:
    """Whether every step of ``steps`` is of a kind ``LeanDriver`` runs."""
    kinds = WORKLOAD_KINDS
    return all(type(step) in kinds for step in steps)


@functools.cache
def _operation_class(impl: ModuleType) -> type[Any]:
    """The recording operation class for ``impl`` (the kit's ``ConformanceOperation``)."""

    class LeanOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        """A labelled operation whose condition is the flag ``ready``."""

        def __init__(
            self,
            delay_ms: int,
            label: str,
            driver: LeanDriver,
            ready: bool,
            ready_on_try: int | None,
            keys: tuple[Any, ...],
        ) -> None:
            super().__init__(delay_ms)
            self.label = label
            self.driver = driver
            self.ready = ready
            self.ready_on_try = ready_on_try
            self.keys = keys
            self.tries = 0

        def try_complete(self) -> bool:
            self.tries += 1
            step_tries = self.driver.step_tries
            step_tries[self.label] = step_tries.get(self.label, 0) + 1
            if self.ready_on_try is not None and self.tries == self.ready_on_try:
                self.ready = True
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            driver = self.driver
            driver.record("completed", self.label, driver.via[-1])

        def on_expiration(self) -> None:
            self.driver.record("expired", self.label, None)

        def run(self) -> None:
            self.driver.expiry_run(self, super().run)

        def __repr__(self) -> str:
            return f"LeanOperation({self.label!r}, delay_ms={self.delay_ms})"

    return LeanOperation


class LeanDriver:
    """Executes workload steps on ``impl``; ``execute`` returns a ``Compact`` observation.

    ``state_every`` as in the kit's ``Driver``: the state is read after the first step
    and every ``state_every``-th one after it. ``StepError`` where the kit's driver
    raises it, and for a step kind outside ``WORKLOAD_KINDS``.
    """

    def __init__(self, impl: ModuleType, *, state_every: int = 1) -> None:
        if isinstance(state_every, bool) or not isinstance(state_every, int):
            raise TypeError(f"state_every must be an int, not {type(state_every).__name__}")
        if state_every < 1:
            raise ValueError(f"state_every must be >= 1, got {state_every}")
        for name in PUBLIC_API:
            if not hasattr(impl, name):
                raise TypeError(f"impl must export {name}; {impl.__name__} does not")
        self.impl = impl
        self._op_cls = _operation_class(impl)
        self._state_every = state_every
        self._steps_done = 0
        self.clock: ManualClock | None = None
        self.timers: dict[str, Any] = {}
        self.purgatory: Any = None
        self._tick = 1
        self.operations: dict[str, Any] = {}
        self._due: dict[str, int] = {}
        self.events: list[tuple[Any, ...]] = []
        self.step_tries: dict[str, int] = {}
        self.via: list[str] = ["force_complete"]
        self._unit: str | None = None
        self._unit_due: int | None = None
        self._calls: dict[type, Callable[[Any], Any]] = {
            Watch: self._watch,
            SetReady: self._set_ready,
            CheckAndComplete: self._check_and_complete,
            ForceComplete: self._force_complete,
            CancelForKey: self._cancel_for_key,
            ClockAdvance: self._clock_advance,
            PurgatoryAdvance: self._purgatory_advance,
        }

    # -- executing ------------------------------------------------------------------------

    def execute(self, step: Step) -> Compact:
        """Execute ``step``; its observation as a ``Compact`` tuple."""
        events: list[tuple[Any, ...]] = []
        tries: dict[str, int] = {}
        self.events, self.step_tries = events, tries
        raised: str | None = None
        result: Any = None
        call = self._calls.get(type(step))
        if call is not None:
            if self.purgatory is None:
                raise StepError("the first step of a run must be init")
            try:
                result = call(step)
            except StepError:  # a fault of the steps, not of the implementation
                raise
            except IMPLEMENTATION_ERRORS as exc:
                raised = type(exc).__name__
        elif isinstance(step, Init):
            if self.purgatory is not None:
                raise StepError("init: a run has exactly one init step, at the start")
            self._create(step)
        else:
            raise StepError(f"{step.STEP}: not run by the pipeline's lean driver")
        self._steps_done += 1
        every = self._state_every
        state = self.state() if every == 1 or self._steps_done % every == 1 else None
        return (
            result,
            raised,
            tuple(events),
            tuple(sorted(tries.items())) if tries else (),
            state,
        )

    def state(self) -> tuple[Any, ...]:
        """The observable state now, as the tuple of ``State``'s fields."""
        purgatory = self.purgatory
        if purgatory is None or self.clock is None:
            raise StepError("the first step of a run must be init")
        return (
            self.clock.now_ms(),
            tuple((label, timer.size) for label, timer in self.timers.items()),
            purgatory.watched,
            purgatory.num_delayed,
            purgatory.watched_keys,
            purgatory.num_purged,
            purgatory.estimated_total_operations,
        )

    def close(self) -> None:
        """Shut the purgatory down and close every timer (idempotent)."""
        if self.purgatory is not None:
            self.purgatory.shutdown()
            for timer in self.timers.values():
                timer.close()

    # -- the calls ------------------------------------------------------------------------

    def _create(self, init: Init) -> None:
        self.clock = clock = ManualClock(init.clock_ms)
        self.timers = {
            label: self.impl.SystemTimer(
                label,
                init.tick_ms,
                init.wheel_size,
                init.start_ms,
                clock=clock,
                executor=InlineExecutor(),
            )
            for label in init.timers
        }
        first = self.timers[init.timers[0]]
        self._tick = first.tick_ms
        self.purgatory = self.impl.DelayedOperationPurgatory(
            "conformance",
            timer=first,
            purge_interval=init.purge_interval,
            reaper_enabled=False,
            timer_enabled=init.timer_enabled,
        )

    def _operation(self, label: str) -> Any:
        try:
            return self.operations[label]
        except KeyError:
            raise StepError(f"unknown operation label {label!r}") from None

    def _watch(self, step: Watch) -> bool:
        label = step.operation
        op = self.operations.get(label)
        if op is None:
            op = self._op_cls(step.delay_ms, label, self, step.ready, step.ready_on_try, step.keys)
            self.operations[label] = op
        elif (op.delay_ms, op.keys) != (step.delay_ms, step.keys):
            raise StepError(f"watch: a repeated watch of {label!r} must repeat its fields")
        assert self.clock is not None
        due_times = self._due
        previous = due_times.get(label)
        due_times[label] = due_time(expiration_ms(self.clock.now_ms(), op.delay_ms), self._tick)
        via = self.via
        via.append("try_complete_else_watch")
        try:
            return bool(self.purgatory.try_complete_else_watch(op, list(step.keys)))
        except BaseException:  # the schedule in force keeps its due time (the kit's rule)
            if previous is None:
                del due_times[label]
            else:
                due_times[label] = previous
            raise
        finally:
            via.pop()

    def _set_ready(self, step: SetReady) -> None:
        self._operation(step.operation).ready = step.ready

    def _check_and_complete(self, step: CheckAndComplete) -> int:
        via = self.via
        via.append("check_and_complete")
        try:
            return int(self.purgatory.check_and_complete(step.key))
        finally:
            via.pop()

    def _force_complete(self, step: ForceComplete) -> bool:
        op = self._operation(step.operation)
        via = self.via
        via.append("force_complete")
        try:
            return bool(op.force_complete())
        finally:
            via.pop()

    def _cancel_for_key(self, step: CancelForKey) -> list[str]:
        return [op.label for op in self.purgatory.cancel_for_key(step.key)]

    def _clock_advance(self, step: ClockAdvance) -> Any:
        assert self.clock is not None
        return self.clock.advance(step.ms)

    def _purgatory_advance(self, step: PurgatoryAdvance) -> None:
        self.purgatory.advance_clock(step.ms)

    # -- callbacks from the operations ----------------------------------------------------

    def record(self, kind: str, label: str, via: str | None) -> None:
        """Record an event of ``label`` at the clock's reading, within the current unit."""
        assert self.clock is not None
        self.events.append((kind, label, self.clock.now_ms(), via, self._unit, self._unit_due))

    def expiry_run(self, op: Any, run: Callable[[], None]) -> None:
        """``op``'s timer hand-over: a unit labelled ``op`` with its due time."""
        entered = self._unit is None
        if entered:
            self._unit = op.label
            self._unit_due = self._due.get(op.label)
        self.via.append("expiry")
        try:
            run()
        finally:
            self.via.pop()
            if entered:
                self._unit = self._unit_due = None


def to_observation(compact: Compact) -> Observation:
    """The kit's ``Observation`` of a ``Compact`` one (for messages and the R6 comparison)."""
    result, raised, events, tries, state = compact
    recorded = []
    for kind, label, at_ms, via, unit, due in events:
        event: Event
        if kind == "completed":
            event = OperationCompleted(label, at_ms, via)
        elif kind == "expired":
            event = OperationExpired(label, at_ms)
        else:
            event = TaskRan(label, at_ms)
        recorded.append(RecordedEvent(event, unit, due))
    return Observation(
        result=result,
        raised=raised,
        events=tuple(recorded),
        tries=tries,
        state=None if state is None else State(*state),
    )
