"""The step interpreter: runs steps on an implementation and observes what each one did.

``Driver(impl)`` executes the step language (``kpurgatory.conformance.steps``) on any
module that exports the public API (``SystemTimer``, ``TimerTask``,
``DelayedOperation``, ``DelayedOperationPurgatory``: ``kpurgatory.reference``,
``kpurgatory.optimized``, or a test mutant). After each step it returns an
``Observation``:

- ``result``: the call's return value as JSON (bool, int, list of labels, or null);
- ``raised``: the class name of the exception the call raised (``ValueError``,
  ``TypeError`` or ``RuntimeError``), or null;
- ``events``: what the call caused, in order, as ``kpurgatory.spec.events`` events
  (``TaskRan``, ``OperationCompleted`` with its ``via``, ``OperationExpired``) stamped
  with the virtual time, each annotated with the *unit* it belongs to (the label of the
  task or operation whose timer hand-over caused it, or null for a direct effect of the
  call) and that unit's due time;
- ``tries``: how many ``try_complete`` calls each operation received during the step;
- ``state``: the observable state afterwards (clock reading, size of every timer,
  ``watched``, ``num_delayed``, ``watched_keys``, ``num_purged``,
  ``estimated_total_operations``).

``compare_observations`` is the one definition of "two runs agree", reused by the
vector replayer, the Spark pipeline and the subprocess adapter for ports: everything is
compared exactly except that hand-overs with the same due time in one step (R6: their
order is unspecified) are compared as a multiset of units.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.clock import ManualClock
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    Cancel,
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    NextDueTime,
    PurgatoryAdvance,
    SetReady,
    Shutdown,
    Step,
    Watch,
)
from kpurgatory.executors import InlineExecutor
from kpurgatory.spec.arithmetic import due_time, expiration_ms
from kpurgatory.spec.events import (
    CompletionVia,
    Event,
    OperationCompleted,
    OperationExpired,
    TaskRan,
    to_json,
)

__all__ = [
    "IMPLEMENTATION_ERRORS",
    "PUBLIC_API",
    "Driver",
    "DriverSide",
    "Observation",
    "RecordedEvent",
    "State",
    "StepError",
    "canonical_events",
    "compare_observations",
    "first_divergence",
    "run_steps",
    "sequence_error",
    "state_difference",
]

IMPLEMENTATION_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, RuntimeError)
"""Exceptions an implementation may raise from a step; the driver records their class name."""

PUBLIC_API: tuple[str, ...] = (
    "SystemTimer",
    "TimerTask",
    "DelayedOperation",
    "DelayedOperationPurgatory",
)
"""The names an implementation module must export to be driven."""


class StepError(ValueError):
    """A step the driver cannot execute (no ``init`` first, unknown label, ...).

    This is a fault of the step list, not of the implementation, so it is raised and
    never recorded in an observation.
    """


@dataclass(frozen=True)
class RecordedEvent:
    """One event plus the hand-over unit that caused it (``None`` for a direct effect)."""

    event: Event
    unit: str | None = None
    due_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The event's JSON (``kpurgatory.spec.events.to_json``) plus ``unit`` and ``due_ms``."""
        out = to_json(self.event)
        out["unit"] = self.unit
        out["due_ms"] = self.due_ms
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> RecordedEvent:
        """Parse ``to_json``'s output; ``ValueError`` naming the field on a bad kind."""
        kind = data.get("kind")
        event: Event
        if kind == "task_ran":
            event = TaskRan(str(data["task"]), int(data["at_ms"]))
        elif kind == "completed":
            event = OperationCompleted(str(data["operation"]), int(data["at_ms"]), data["via"])
        elif kind == "expired":
            event = OperationExpired(str(data["operation"]), int(data["at_ms"]))
        else:
            raise ValueError(f"event.kind: unknown event kind {kind!r}")
        due = data.get("due_ms")
        return RecordedEvent(event, data.get("unit"), None if due is None else int(due))


@dataclass(frozen=True)
class State:
    """The observable state after a step (R12, R26-R28, R30)."""

    clock_ms: int
    timer_sizes: tuple[tuple[str, int], ...]
    watched: int
    num_delayed: int
    watched_keys: int
    num_purged: int
    estimated_total_operations: int

    def to_json(self) -> dict[str, Any]:
        """JSON: ``timer_sizes`` becomes an object label -> size."""
        return {
            "clock_ms": self.clock_ms,
            "timer_sizes": dict(self.timer_sizes),
            "watched": self.watched,
            "num_delayed": self.num_delayed,
            "watched_keys": self.watched_keys,
            "num_purged": self.num_purged,
            "estimated_total_operations": self.estimated_total_operations,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> State:
        """Parse ``to_json``'s output."""
        return State(
            clock_ms=int(data["clock_ms"]),
            timer_sizes=tuple((str(k), int(v)) for k, v in data["timer_sizes"].items()),
            watched=int(data["watched"]),
            num_delayed=int(data["num_delayed"]),
            watched_keys=int(data["watched_keys"]),
            num_purged=int(data["num_purged"]),
            estimated_total_operations=int(data["estimated_total_operations"]),
        )


@dataclass(frozen=True)
class Observation:
    """What one step did: result or exception, events, try counts, state afterwards."""

    result: Any
    raised: str | None
    events: tuple[RecordedEvent, ...]
    tries: tuple[tuple[str, int], ...]
    state: State | None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``tries`` becomes an object label -> count, sorted by label)."""
        return {
            "result": self.result,
            "raised": self.raised,
            "events": [event.to_json() for event in self.events],
            "tries": dict(self.tries),
            "state": None if self.state is None else self.state.to_json(),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Observation:
        """Parse ``to_json``'s output."""
        return Observation(
            result=data["result"],
            raised=data["raised"],
            events=tuple(RecordedEvent.from_json(e) for e in data["events"]),
            tries=tuple(sorted((str(k), int(v)) for k, v in data["tries"].items())),
            state=None if data["state"] is None else State.from_json(data["state"]),
        )


# ---- recording tasks and operations, built once per implementation -----------------------


@functools.cache
def _classes(impl: ModuleType) -> tuple[type[Any], type[Any]]:
    """The recording task and operation classes for implementation ``impl``."""

    class ConformanceTask(impl.TimerTask):  # type: ignore[misc,name-defined]
        """A labelled task: records ``TaskRan`` and performs its ``on_run`` steps."""

        def __init__(
            self, delay_ms: int, label: str, driver: Driver, on_run: tuple[Step, ...]
        ) -> None:
            super().__init__(delay_ms)
            self.label = label
            self.driver = driver
            self.on_run = on_run

        def run(self) -> None:
            self.driver._task_ran(self)

        def __repr__(self) -> str:
            return f"ConformanceTask({self.label!r}, delay_ms={self.delay_ms})"

    class ConformanceOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        """A labelled operation whose condition is the flag ``ready`` (see ``Watch``)."""

        def __init__(self, watch: Watch, driver: Driver) -> None:
            super().__init__(watch.delay_ms)
            self.watch_step = watch  # a repeated watch must equal it (docs/vectors.md)
            self.label = watch.operation
            self.driver = driver
            self.ready = watch.ready
            self.ready_on_try = watch.ready_on_try
            self.keys = watch.keys
            self.tries = 0

        def try_complete(self) -> bool:
            self.tries += 1
            self.driver._step_tries[self.label] += 1
            if self.ready_on_try is not None and self.tries == self.ready_on_try:
                self.ready = True
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            self.driver._completed(self.label)

        def on_expiration(self) -> None:
            self.driver._expired(self.label)

        def run(self) -> None:
            self.driver._expiry_run(self, super().run)

        def __repr__(self) -> str:
            return f"ConformanceOperation({self.label!r}, delay_ms={self.delay_ms})"

    return ConformanceTask, ConformanceOperation


@dataclass
class _World:
    """What ``Init`` created."""

    init: Init
    clock: ManualClock
    timers: dict[str, Any]
    purgatory: Any


@dataclass
class _Unit:
    """The hand-over currently running at the top level of a step."""

    label: str
    due_ms: int | None


class Driver:
    """Executes steps on one implementation and observes each (see the module docstring).

    ``impl`` is a module exporting the public API. The driver is single-threaded and
    deterministic: a ManualClock and InlineExecutors, no reaper. ``execute`` runs one
    step. ``state_every = n`` reads the state after every n-th step only (``state`` is
    ``None`` in the others): reading ``watched`` can cost O(keys) or O(shards), and the
    bulk replays of the pipeline trade that for speed; vectors always use 1. The world
    (``clock``, ``timers``, ``purgatory``, ``tasks``, ``operations``) is readable for
    callers that gather extra counters.
    """

    def __init__(self, impl: ModuleType, *, state_every: int = 1) -> None:
        if isinstance(state_every, bool) or not isinstance(state_every, int):
            raise TypeError(f"state_every must be an int, not {type(state_every).__name__}")
        if state_every < 1:
            raise ValueError(f"state_every must be >= 1, got {state_every}")
        self._state_every = state_every
        self._steps_done = 0
        for name in PUBLIC_API:
            if not hasattr(impl, name):
                raise TypeError(f"impl must export {name}; {impl.__name__} does not")
        self.impl = impl
        self._task_cls, self._op_cls = _classes(impl)
        self._world: _World | None = None
        self.tasks: dict[str, Any] = {}
        self.operations: dict[str, Any] = {}
        self._due: dict[str, int] = {}
        self._events: list[RecordedEvent] = []
        self._step_tries: Counter[str] = Counter()
        self._via: list[CompletionVia] = ["force_complete"]
        self._unit: _Unit | None = None
        self._nested_error: StepError | None = None

    # -- public ----------------------------------------------------------------------

    @property
    def clock(self) -> ManualClock:
        """The run's clock (``StepError`` before ``init``)."""
        return self._require_world().clock

    @property
    def timers(self) -> dict[str, Any]:
        """The run's timers by label."""
        return self._require_world().timers

    @property
    def purgatory(self) -> Any:
        """The run's purgatory."""
        return self._require_world().purgatory

    def execute(self, step: Step) -> Observation:
        """Execute ``step`` and return its observation.

        ``StepError`` if the step does not fit the run (a second ``init``, a step
        before ``init``, an unknown timer or label, a re-add with another delay).
        """
        self._events = []
        self._step_tries = Counter()
        raised: str | None = None
        result: Any = None
        if isinstance(step, Init):
            if self._world is not None:
                raise StepError("init: a run has exactly one init step, at the start")
            self._world = self._create(step)
        else:
            world = self._require_world()
            call = self._prepare(world, step)
            try:
                result = call()
            except IMPLEMENTATION_ERRORS as exc:
                raised = type(exc).__name__
            if self._nested_error is not None:
                error, self._nested_error = self._nested_error, None
                raise error
        self._steps_done += 1
        observe = self._state_every == 1 or self._steps_done % self._state_every == 1
        return Observation(
            result=result,
            raised=raised,
            events=tuple(self._events),
            tries=tuple(sorted(self._step_tries.items())) if self._step_tries else (),
            state=self.state() if observe else None,
        )

    def due_ms(self, label: str) -> int | None:
        """The due time of ``label``'s latest schedule (add or watch), or None if it has none
        (it may have run or been cancelled since)."""
        return self._due.get(label)

    def state(self) -> State:
        """The observable state now."""
        world = self._require_world()
        purgatory = world.purgatory
        return State(
            clock_ms=world.clock.now_ms(),
            timer_sizes=tuple((label, timer.size) for label, timer in world.timers.items()),
            watched=purgatory.watched,
            num_delayed=purgatory.num_delayed,
            watched_keys=purgatory.watched_keys,
            num_purged=purgatory.num_purged,
            estimated_total_operations=purgatory.estimated_total_operations,
        )

    def close(self) -> None:
        """Shut the purgatory down and close every timer (idempotent)."""
        if self._world is not None:
            self._world.purgatory.shutdown()
            for timer in self._world.timers.values():
                timer.close()

    # -- building the world and the calls --------------------------------------------

    def _require_world(self) -> _World:
        if self._world is None:
            raise StepError("the first step of a run must be init")
        return self._world

    def _create(self, init: Init) -> _World:
        clock = ManualClock(init.clock_ms)
        timers = {
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
        purgatory = self.impl.DelayedOperationPurgatory(
            "conformance",
            timer=timers[init.timers[0]],
            purge_interval=init.purge_interval,
            reaper_enabled=False,
            timer_enabled=init.timer_enabled,
        )
        return _World(init, clock, timers, purgatory)

    def _timer(self, world: _World, label: str) -> Any:
        try:
            return world.timers[label]
        except KeyError:
            raise StepError(
                f"unknown timer label {label!r}; init declared {list(world.timers)}"
            ) from None

    def _operation(self, label: str) -> Any:
        try:
            return self.operations[label]
        except KeyError:
            raise StepError(f"unknown operation label {label!r}") from None

    def _prepare(self, world: _World, step: Step) -> Any:
        """Validate ``step`` against the run and return a zero-argument call performing it."""
        if isinstance(step, Add):
            timer = self._timer(world, step.timer)
            if step.task in self.operations:
                raise StepError(f"add: {step.task!r} is an operation; only tasks are added")
            task = self.tasks.get(step.task)
            if task is None:
                task = self._task_cls(step.delay_ms, step.task, self, step.on_run)
                self.tasks[step.task] = task
            elif task.delay_ms != step.delay_ms or task.on_run != step.on_run:
                raise StepError(f"add: re-add of {step.task!r} must repeat its delay and on_run")

            def add() -> None:
                now = world.clock.now_ms()
                due = due_time(expiration_ms(now, step.delay_ms), timer.tick_ms)
                self._scheduling(step.task, due, lambda: timer.add(task))

            return add
        if isinstance(step, Cancel):
            target = self.tasks.get(step.task, self.operations.get(step.task))
            if target is None:
                raise StepError(f"cancel: unknown task or operation label {step.task!r}")
            return lambda: target.cancel()
        if isinstance(step, Advance):
            timer = self._timer(world, step.timer)
            return lambda: bool(timer.advance_clock(step.ms))
        if isinstance(step, ClockAdvance):
            return lambda: world.clock.advance(step.ms)
        if isinstance(step, Watch):
            return self._prepare_watch(world, step)
        if isinstance(step, SetReady):
            op = self._operation(step.operation)

            def set_ready() -> None:
                op.ready = step.ready

            return set_ready
        if isinstance(step, CheckAndComplete):
            return lambda: self._with_via(
                "check_and_complete", lambda: int(world.purgatory.check_and_complete(step.key))
            )
        if isinstance(step, ForceComplete):
            op = self._operation(step.operation)
            return lambda: self._with_via("force_complete", lambda: bool(op.force_complete()))
        if isinstance(step, CancelForKey):
            return lambda: [o.label for o in world.purgatory.cancel_for_key(step.key)]
        if isinstance(step, PurgatoryAdvance):

            def purgatory_advance() -> None:
                world.purgatory.advance_clock(step.ms)

            return purgatory_advance
        if isinstance(step, NextDueTime):
            next_due_timer = self._timer(world, step.timer)
            return lambda: next_due_timer.next_due_time
        if isinstance(step, Shutdown):

            def shutdown() -> None:
                world.purgatory.shutdown()

            return shutdown
        raise StepError(f"{step.STEP}: not allowed after init")

    def _prepare_watch(self, world: _World, step: Watch) -> Any:
        if step.operation in self.tasks:
            raise StepError(f"watch: {step.operation!r} is a task label")
        op = self.operations.get(step.operation)
        if op is None:
            op = self._op_cls(step, self)
            self.operations[step.operation] = op
        elif op.watch_step != step:
            raise StepError(
                f"watch: a repeated watch of {step.operation!r} must repeat every field of "
                f"its first watch (delay_ms, keys, ready, ready_on_try): it submits the same "
                f"operation again and changes nothing about it"
            )
        tick = world.timers[world.init.timers[0]].tick_ms

        def watch() -> bool:
            now = world.clock.now_ms()
            due = due_time(expiration_ms(now, op.delay_ms), tick)
            return bool(
                self._scheduling(
                    step.operation,
                    due,
                    lambda: self._with_via(
                        "try_complete_else_watch",
                        lambda: world.purgatory.try_complete_else_watch(op, list(step.keys)),
                    ),
                )
            )

        return watch

    def _scheduling(self, label: str, due: int, call: Callable[[], Any]) -> Any:
        """Run ``call`` (an add or a watch) with ``label``'s unit due time set to ``due``.

        The due time is recorded before the call, because a task due at once is handed
        over inside it (R3) and its events need the unit's due time; if the call raises
        (a closed timer, a refused submission), the previous due time is restored, so a
        later hand-over of a schedule that is still in force is labelled with its own.
        """
        previous = self._due.get(label)
        self._due[label] = due
        try:
            return call()
        except BaseException:
            if previous is None:
                del self._due[label]
            else:
                self._due[label] = previous
            raise

    def _with_via(self, via: CompletionVia, call: Any) -> Any:
        self._via.append(via)
        try:
            return call()
        finally:
            self._via.pop()

    # -- callbacks from the recording tasks and operations ---------------------------

    def _enter_unit(self, label: str) -> bool:
        if self._unit is not None:
            return False
        self._unit = _Unit(label, self._due.get(label))
        return True

    def _record(self, event: Event) -> None:
        unit = self._unit
        if unit is None:
            self._events.append(RecordedEvent(event))
        else:
            self._events.append(RecordedEvent(event, unit.label, unit.due_ms))

    def _task_ran(self, task: Any) -> None:
        entered = self._enter_unit(task.label)
        try:
            self._record(TaskRan(task.label, self.clock.now_ms()))
            world = self._require_world()
            for inner in task.on_run:
                try:
                    call = self._prepare(world, inner)
                except StepError as exc:
                    # Not the implementation's fault: the sequence is invalid. Recorded
                    # and raised by ``execute`` once the call returns (the task's own
                    # caller, the implementation, would treat it as a task's failure).
                    if self._nested_error is None:
                        self._nested_error = StepError(
                            f"{inner.STEP} in the run of task {task.label!r}: {exc}"
                        )
                    break
                try:
                    call()
                except IMPLEMENTATION_ERRORS:
                    # The run is one call of user code: a step that raised ends it, like a
                    # Python function that raised; the later steps do not happen. The
                    # exception is not observed (docs/vectors.md, "on_run").
                    break
        finally:
            if entered:
                self._unit = None

    def _expiry_run(self, op: Any, run: Any) -> None:
        entered = self._enter_unit(op.label)
        self._via.append("expiry")
        try:
            run()
        finally:
            self._via.pop()
            if entered:
                self._unit = None

    def _completed(self, label: str) -> None:
        self._record(OperationCompleted(label, self.clock.now_ms(), self._via[-1]))

    def _expired(self, label: str) -> None:
        self._record(OperationExpired(label, self.clock.now_ms()))


class DriverSide:
    """An implementation run in process, one ``Driver`` per run: each ``Init`` starts a new one.

    ``impl`` is the implementation module, or a factory called at each ``Init`` (for
    implementations that keep state between runs). This is the in-process side of the
    stateful comparison and the Python adapter's session. ``StepError`` for a step
    before the first ``Init`` and wherever ``Driver.execute`` raises it.
    """

    def __init__(self, impl: ModuleType | Callable[[], ModuleType]) -> None:
        self.impl = impl
        self._driver: Driver | None = None

    @property
    def driver(self) -> Driver | None:
        """The current run's driver (None before the first ``Init``): its world is readable."""
        return self._driver

    def execute(self, step: Step) -> Observation:
        """Run ``step``; an ``Init`` closes the current run and starts a new driver."""
        if isinstance(step, Init):
            self.close()
            self._driver = Driver(self.impl if isinstance(self.impl, ModuleType) else self.impl())
        if self._driver is None:
            raise StepError("the first step of a run must be init")
        return self._driver.execute(step)

    def close(self) -> None:
        """Close the current run's timers and purgatory."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None


def sequence_error(steps: Sequence[Step]) -> tuple[int, str] | None:
    """The first step (0-based index) that does not fit the sequence, and why; else None.

    Checked without running anything, as ``Driver`` would refuse it or a task's run
    would meet it: the first step is an ``init`` (a later ``init`` starts a new run);
    every timer label is declared by the run's ``init``; every label a step refers to
    (``cancel``, ``set_ready``, ``force_complete``, and the same inside a task's
    ``on_run``) was defined earlier in the run by an ``add`` or a ``watch`` (a task's
    ``on_run`` may name the task itself); a label is a task or an operation, not both;
    a re-add repeats the task's delay and ``on_run``; a repeated watch repeats the watch.
    """
    tasks: dict[str, Add] = {}
    operations: dict[str, Watch] = {}
    timers: tuple[str, ...] = ()

    def check(step: Step, nested: bool) -> str | None:
        if isinstance(step, Init):
            return "init inside a task's on_run" if nested else None
        if isinstance(step, Add | Advance | NextDueTime) and step.timer not in timers:
            return f"unknown timer label {step.timer!r}; init declared {list(timers)}"
        if isinstance(step, Add):
            if step.task in operations:
                return f"{step.task!r} is an operation; only tasks are added"
            first = tasks.setdefault(step.task, step)
            if (first.delay_ms, first.on_run) != (step.delay_ms, step.on_run):
                return f"a re-add of {step.task!r} must repeat its delay and on_run"
            for inner in step.on_run:
                problem = check(inner, True)
                if problem is not None:
                    return f"{inner.STEP} in the on_run of {step.task!r}: {problem}"
        elif isinstance(step, Cancel):
            if step.task not in tasks and step.task not in operations:
                return f"unknown task or operation label {step.task!r} (not added or watched)"
        elif isinstance(step, Watch):
            if step.operation in tasks:
                return f"{step.operation!r} is a task label"
            if operations.setdefault(step.operation, step) != step:
                return f"a repeated watch of {step.operation!r} must repeat its first watch"
        elif isinstance(step, SetReady | ForceComplete) and step.operation not in operations:
            return f"unknown operation label {step.operation!r} (not watched before)"
        return None

    for index, step in enumerate(steps):
        if isinstance(step, Init):
            tasks, operations, timers = {}, {}, step.timers
            continue
        if index == 0:
            return 0, "the first step of a run must be init"
        problem = check(step, False)
        if problem is not None:
            return index, f"{step.STEP}: {problem}"
    return None


def run_steps(
    impl: ModuleType, steps: Iterable[Step], *, state_every: int = 1
) -> list[Observation]:
    """Execute ``steps`` (starting with ``init``) on ``impl``; one observation per step."""
    driver = Driver(impl, state_every=state_every)
    try:
        return [driver.execute(step) for step in steps]
    finally:
        driver.close()


# ---- comparison ---------------------------------------------------------------------------


def _event_key(event: RecordedEvent) -> str:
    return json.dumps(event.to_json(), sort_keys=True)


def canonical_events(events: Sequence[RecordedEvent]) -> list[tuple[Any, ...]]:
    """The order-insensitive form of a step's events that R6 allows.

    Consecutive events of the same unit form one unit (a tuple of events, in order);
    consecutive units with the same due time form a group compared as a multiset
    (sorted). Direct events (no unit) stay where they are. Two event lists are
    equivalent iff their canonical forms are equal.
    """
    units: list[tuple[str | None, int | None, tuple[str, ...]]] = []
    for event in events:
        key = _event_key(event)
        if event.unit is not None and units and units[-1][0] == event.unit:
            label, due, items = units[-1]
            units[-1] = (label, due, (*items, key))
        else:
            units.append((event.unit, event.due_ms, (key,)))
    out: list[tuple[Any, ...]] = []
    group: list[tuple[str, ...]] = []
    group_due: int | None = None
    for label, due, items in units:
        if label is None:
            if group:
                out.append(("group", group_due, tuple(sorted(group))))
                group = []
            out.append(("event", items[0]))
            continue
        if group and due != group_due:
            out.append(("group", group_due, tuple(sorted(group))))
            group = []
        group_due = due
        group.append(items)
    if group:
        out.append(("group", group_due, tuple(sorted(group))))
    return out


def compare_observations(expected: Observation, actual: Observation) -> str | None:
    """``None`` if the observations agree, else a one-paragraph description of the difference.

    Agreement: same ``raised``, same ``result``, equivalent events (``canonical_events``:
    exact order except hand-overs with the same due time, which form a multiset, R6),
    same ``tries`` and same ``state``, field by field as JSON values (objects compare as
    objects, in any key order; skipped when either side did not read the state, see
    ``Driver``'s ``state_every``). Every difference gets a message naming its field.
    """
    if expected == actual:
        return None
    if expected.raised != actual.raised:
        return f"raised: expected {expected.raised}, got {actual.raised}"
    if expected.result != actual.result:
        return f"result: expected {expected.result!r}, got {actual.result!r}"
    if expected.events != actual.events and canonical_events(expected.events) != canonical_events(
        actual.events
    ):
        exp = [event.to_json() for event in expected.events]
        act = [event.to_json() for event in actual.events]
        return f"events differ:\n  expected {_short(exp)}\n  actual   {_short(act)}"
    if expected.tries != actual.tries:
        return f"tries: expected {dict(expected.tries)}, got {dict(actual.tries)}"
    if expected.state is not None and actual.state is not None:
        difference = state_difference(expected.state, actual.state)
        if difference:
            return "state: " + difference
    return None


def state_difference(expected: State, actual: State) -> str:
    """The fields where two states differ: ``name: expected x, got y``, joined by ``; ``
    (empty if they agree). Fields are compared as JSON values, so ``timer_sizes`` is an
    object whatever order its labels come in (a Go encoder sorts them)."""
    exp, act = expected.to_json(), actual.to_json()
    return "; ".join(
        f"{name}: expected {exp[name]}, got {act[name]}" for name in exp if exp[name] != act[name]
    )


def _short(items: list[dict[str, Any]], limit: int = 12) -> str:
    text = json.dumps(items[:limit])
    return text if len(items) <= limit else f"{text[:-1]}, ... ({len(items)} events)]"


def first_divergence(
    steps: Sequence[Step],
    expected: Sequence[Observation],
    actual: Sequence[Observation],
) -> tuple[int, str] | None:
    """The first step index where ``actual`` disagrees with ``expected``, and why; else None.

    The index is 0-based; the message numbers steps from 1, like every report of the kit.
    """
    if len(expected) != len(actual):
        return min(len(expected), len(actual)), "the runs have different lengths"
    for index, (exp, act) in enumerate(zip(expected, actual, strict=True)):
        message = compare_observations(exp, act)
        if message is not None:
            return index, f"step {index + 1} {steps[index].STEP}: {message}"
    return None
