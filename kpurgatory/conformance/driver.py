"""The step interpreter: runs steps on an implementation and observes what each one did.

``Driver(impl)`` executes the step language (``kpurgatory.conformance.steps``) on any
module that exports the public API (``SystemTimer``, ``TimerTask``,
``DelayedOperation``, ``DelayedOperationPurgatory``: ``kpurgatory.reference``,
``kpurgatory.optimized``, or a test mutant). After each step it returns an
``Observation`` (``kpurgatory.conformance.observation``: the call's result or exception,
the events it caused with their hand-over units, the tries of each operation, the state
afterwards).

``execute_compact`` returns it as the plain tuples the driver records (``Compact``):
bulk replays compare those and build objects only for a pair that differs. The one
definition of "two runs agree", ``compare_observations``, is importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory import steps as language
from kpurgatory.clock import ManualClock
from kpurgatory.conformance.compare import (
    canonical_events,
    compare_observations,
    first_divergence,
    state_difference,
)
from kpurgatory.conformance.observation import (
    Compact,
    CompactEvent,
    Observation,
    RecordedEvent,
    State,
    to_observation,
)
from kpurgatory.conformance.recording import recording_classes
from kpurgatory.conformance.sequence import sequence_error
from kpurgatory.executors import InlineExecutor
from kpurgatory.spec.arithmetic import due_time, expiration_ms
from kpurgatory.spec.events import CompletionVia
from kpurgatory.steps import Step

__all__ = [
    "IMPLEMENTATION_ERRORS",
    "PUBLIC_API",
    "CallIn",
    "Compact",
    "Driver",
    "DriverSide",
    "Observation",
    "RecordedEvent",
    "State",
    "StepError",
    "canonical_events",
    "compare_observations",
    "first_divergence",
    "observed_error",
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


def observed_error(exc: BaseException) -> str | None:
    """The name an observation records for ``exc`` (``raised``), or None if it is not an
    implementation's error (a crash, an interrupt: the caller re-raises it).

    One of ``IMPLEMENTATION_ERRORS`` is recorded by its class name. A call that met
    several errors raises them together (R53: a ``BaseExceptionGroup``, in the order
    raised), recorded as its first one: a port that raises only its first error, or a
    group of them, gives the same observation."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, IMPLEMENTATION_ERRORS):
        return type(exc).__name__
    return None


class StepError(ValueError):
    """A step the driver cannot execute (no ``init`` first, unknown label, ...).

    This is a fault of the step list, not of the implementation, so it is raised and
    never recorded in an observation.
    """


@dataclass(frozen=True, slots=True)
class CallIn:
    """One call back into the library from user code, as the driver performed it.

    ``callback`` is where it ran (``run`` of a task, or an operation's ``try_complete``,
    ``on_complete``, ``on_expiration``; ``run`` of an operation is the timer expiring it),
    ``owner`` the task or operation label, ``step`` the nested step (for an operation the
    timer ran inside its own submission, that ``watch``), ``locked`` the operations whose
    lock the library held then, and ``reenters`` the one among them the call takes again
    (R63), if any. A port that hangs is told which one (``kpurgatory.conformance.hang``).
    """

    callback: str
    owner: str
    step: Step
    locked: tuple[str, ...]
    reenters: str | None


@dataclass(slots=True)
class _World:
    """What ``Init`` created."""

    clock: ManualClock
    timers: dict[str, Any]
    purgatory: Any
    executors: dict[str, InlineExecutor]


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
        self._task_cls, self._op_cls = recording_classes(impl)
        self._world: _World | None = None
        self._clock: ManualClock | None = None  # the world's, read on every event
        self._tick = 1
        self.tasks: dict[str, Any] = {}
        self.operations: dict[str, Any] = {}
        self._due: dict[str, int] = {}
        self._events: list[CompactEvent] = []
        self._step_tries: dict[str, int] = {}
        self._via: list[CompletionVia] = ["force_complete"]
        self._unit: str | None = None  # the hand-over running at the top level of a step
        self._unit_due: int | None = None
        self._nested_error: StepError | None = None
        self._held: list[str] = []  # operations whose lock the library holds, outermost first
        self.calls_in: list[CallIn] = []  # the last step's calls back in, in order
        self._calls: dict[type, Callable[[Any, Any], Any]] = {
            language.Add: self._add,
            language.Cancel: self._cancel,
            language.Advance: self._advance,
            language.ClockAdvance: self._clock_advance,
            language.Watch: self._watch,
            language.SetReady: self._set_ready,
            language.CheckAndComplete: self._check_and_complete,
            language.ForceComplete: self._force_complete,
            language.CancelForKey: self._cancel_for_key,
            language.PurgatoryAdvance: self._purgatory_advance,
            language.NextDueTime: self._next_due_time,
            language.Shutdown: self._shutdown,
            language.Close: self._close,
            language.ExecutorShutdown: self._executor_shutdown,
        }

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
        return to_observation(self.execute_compact(step))

    def execute_compact(self, step: Step) -> Compact:
        """``execute``, with the observation in its ``Compact`` form (no objects built)."""
        events: list[CompactEvent] = []
        tries: dict[str, int] = {}
        self._events, self._step_tries = events, tries
        self.calls_in = []
        raised: str | None = None
        result: Any = None
        world = self._world
        if world is None or type(step) is language.Init:
            self._start(step)
        else:
            call = self._calls.get(type(step))  # the step classes are final
            if call is None:
                raise StepError(f"{step.STEP}: not allowed after init")
            try:
                result = call(world, step)
            except StepError:  # a fault of the steps, not of the implementation
                raise
            except BaseException as exc:
                raised = observed_error(exc)
                if raised is None:
                    raise
            if self._nested_error is not None:
                error, self._nested_error = self._nested_error, None
                raise error
        self._steps_done += 1
        every = self._state_every
        return (
            result,
            raised,
            tuple(events),
            tuple(sorted(tries.items())) if tries else (),
            self.state_compact() if every == 1 or self._steps_done % every == 1 else None,
        )

    def due_ms(self, label: str) -> int | None:
        """The due time of ``label``'s latest schedule (add or watch), or None if it has none
        (it may have run or been cancelled since)."""
        return self._due.get(label)

    def state(self) -> State:
        """The observable state now."""
        return State(*self.state_compact())

    def state_compact(self) -> tuple[Any, ...]:
        """``state`` as the tuple of ``State``'s fields."""
        world = self._require_world()
        purgatory = world.purgatory
        return (
            world.clock.now_ms(),
            tuple((label, timer.size) for label, timer in world.timers.items()),
            purgatory.watched,
            purgatory.num_delayed,
            purgatory.watched_keys,
            purgatory.num_purged,
            purgatory.estimated_total_operations,
        )

    def close(self) -> None:
        """Shut the purgatory down and close every timer (idempotent)."""
        if self._world is not None:
            self._world.purgatory.shutdown()
            for timer in self._world.timers.values():
                timer.close()

    # -- building the world ----------------------------------------------------------

    def _require_world(self) -> _World:
        if self._world is None:
            raise StepError("the first step of a run must be init")
        return self._world

    def _start(self, step: Step) -> None:
        """Create the world for the run's ``init`` step (``StepError`` for any other)."""
        if self._world is not None:
            raise StepError("init: a run has exactly one init step, at the start")
        if not isinstance(step, language.Init):
            raise StepError("the first step of a run must be init")
        init = step
        self._clock = clock = ManualClock(init.clock_ms)
        executors = {label: InlineExecutor() for label in init.timers}
        timers = {
            label: self.impl.SystemTimer(
                label,
                init.tick_ms,
                init.wheel_size,
                init.start_ms,
                clock=clock,
                executor=executors[label],
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
        self._world = _World(clock, timers, purgatory, executors)
        self._tick = timers[init.timers[0]].tick_ms  # the purgatory's timer's, for watches

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

    # -- the calls, by step class: each checks that its step fits the run (StepError), then
    # performs it and returns the call's result

    def _add(self, world: _World, step: language.Add) -> None:
        timer = self._timer(world, step.timer)
        if step.task in self.operations:
            raise StepError(f"add: {step.task!r} is an operation; only tasks are added")
        task = self.tasks.get(step.task)
        if task is None:
            task = self._task_cls(step.delay_ms, step.task, self, step.on_run)
            self.tasks[step.task] = task
        elif task.delay_ms != step.delay_ms or task.on_run != step.on_run:
            raise StepError(f"add: re-add of {step.task!r} must repeat its delay and on_run")
        due = due_time(expiration_ms(world.clock.now_ms(), step.delay_ms), timer.tick_ms)
        previous = self._schedule(step.task, due)
        try:
            timer.add(task)
        except BaseException:
            self._unschedule(step.task, previous)
            raise

    def _cancel(self, world: _World, step: language.Cancel) -> Any:
        target = self.tasks.get(step.task, self.operations.get(step.task))
        if target is None:
            raise StepError(f"cancel: unknown task or operation label {step.task!r}")
        return target.cancel()

    def _advance(self, world: _World, step: language.Advance) -> bool:
        return bool(self._timer(world, step.timer).advance_clock(step.ms))

    def _clock_advance(self, world: _World, step: language.ClockAdvance) -> Any:
        return world.clock.advance(step.ms)

    def _watch(self, world: _World, step: language.Watch) -> bool:
        label = step.operation
        if label in self.tasks:
            raise StepError(f"watch: {label!r} is a task label")
        op = self.operations.get(label)
        if op is None:
            op = self._op_cls(step, self)
            self.operations[label] = op
        elif op.watch_step != step:
            raise StepError(
                f"watch: a repeated watch of {label!r} must repeat every field of "
                f"its first watch (delay_ms, keys, ready, ready_on_try): it submits the same "
                f"operation again and changes nothing about it"
            )
        due = due_time(expiration_ms(world.clock.now_ms(), op.delay_ms), self._tick)
        previous = self._schedule(label, due)
        via = self._via
        via.append("try_complete_else_watch")
        self._held.append(label)  # the submission holds the operation's lock (R22)
        try:
            return bool(world.purgatory.try_complete_else_watch(op, list(step.keys)))
        except BaseException:
            self._unschedule(label, previous)
            raise
        finally:
            self._held.pop()
            via.pop()

    def _set_ready(self, world: _World, step: language.SetReady) -> None:
        self._operation(step.operation).ready = step.ready

    def _check_and_complete(self, world: _World, step: language.CheckAndComplete) -> int:
        via = self._via
        via.append("check_and_complete")
        try:
            return int(world.purgatory.check_and_complete(step.key))
        finally:
            via.pop()

    def _force_complete(self, world: _World, step: language.ForceComplete) -> bool:
        op = self._operation(step.operation)
        via = self._via
        via.append("force_complete")
        try:
            return bool(op.force_complete())
        finally:
            via.pop()

    def _cancel_for_key(self, world: _World, step: language.CancelForKey) -> list[str]:
        return [op.label for op in world.purgatory.cancel_for_key(step.key)]

    def _purgatory_advance(self, world: _World, step: language.PurgatoryAdvance) -> None:
        world.purgatory.advance_clock(step.ms)

    def _next_due_time(self, world: _World, step: language.NextDueTime) -> Any:
        return self._timer(world, step.timer).next_due_time

    def _shutdown(self, world: _World, step: language.Shutdown) -> None:
        world.purgatory.shutdown()

    def _close(self, world: _World, step: language.Close) -> None:
        self._timer(world, step.timer).close()

    def _executor_shutdown(self, world: _World, step: language.ExecutorShutdown) -> None:
        self._timer(world, step.timer)  # StepError for an unknown label
        world.executors[step.timer].shutdown()

    def _schedule(self, label: str, due: int) -> int | None:
        """Set ``label``'s unit due time to ``due`` before its add or watch is called (a task
        due at once is handed over inside the call, R3, and its events need the due time);
        returns the previous one, for ``_unschedule`` if the call raises."""
        previous = self._due.get(label)
        self._due[label] = due
        return previous

    def _unschedule(self, label: str, previous: int | None) -> None:
        """Restore the due time a raising add or watch replaced: a later hand-over of a
        schedule still in force is labelled with its own."""
        if previous is None:
            del self._due[label]
        else:
            self._due[label] = previous

    # -- callbacks from the recording tasks and operations ---------------------------

    def _record(self, kind: str, label: str, via: str | None) -> None:
        """Record an event of ``label`` at the clock's reading, within the current unit."""
        assert self._clock is not None
        self._events.append((kind, label, self._clock.now_ms(), via, self._unit, self._unit_due))

    def _enter_unit(self, label: str) -> bool:
        if self._unit is not None:
            return False
        self._unit, self._unit_due = label, self._due.get(label)
        return True

    def _task_ran(self, task: Any) -> None:
        entered = self._enter_unit(task.label)
        try:
            self._record("task_ran", task.label, None)
            self._perform("run", f"task {task.label!r}", task.label, task.on_run)
        finally:
            if entered:
                self._unit = self._unit_due = None

    def _callback(self, callback: str, op: Any, steps: tuple[Step, ...], *, held: bool) -> None:
        """Perform an operation's callback steps (``Watch.on_try`` and the others);
        ``held``: the library holds the operation's lock while the callback runs."""
        if held:
            self._held.append(op.label)
        try:
            self._perform(callback, f"operation {op.label!r}", op.label, steps)
        finally:
            if held:
                self._held.pop()

    def _perform(self, callback: str, who: str, owner: str, steps: tuple[Step, ...]) -> None:
        """Perform ``steps`` from user code: a task's run or an operation's callback.

        The callback is one call of user code: a step that raises ends it, like a Python
        function that raised; the later steps do not happen, and the exception is not
        observed (docs/vectors.md, "Callbacks").
        """
        world = self._require_world()
        for inner in steps:
            locked = tuple(dict.fromkeys(self._held))
            self.calls_in.append(CallIn(callback, owner, inner, locked, self._reentered(inner)))
            call = self._calls.get(type(inner))
            try:
                if call is None:
                    raise StepError(f"{inner.STEP}: not allowed after init")
                call(world, inner)
            except StepError as exc:
                # Not the implementation's fault: the sequence is invalid. Recorded and
                # raised by ``execute`` once the call returns (the implementation, the
                # callback's caller, would treat it as the callback's failure).
                if self._nested_error is None:
                    where = "run" if callback == "run" else callback
                    self._nested_error = StepError(f"{inner.STEP} in the {where} of {who}: {exc}")
                break
            except BaseException as exc:
                if observed_error(exc) is None:
                    raise
                break

    def _reentered(self, step: Step) -> str | None:
        """The operation whose lock the library holds now that ``step`` takes again: a
        ``cancel`` (abandon) of it, or a ``check_and_complete`` (a try) or
        ``cancel_for_key`` (its timer entry is cancelled under its lock) of a key it is
        pending on."""
        held = self._held
        if not held:
            return None
        if isinstance(step, language.Cancel) and step.task in held:
            return step.task
        if isinstance(step, language.CheckAndComplete | language.CancelForKey):
            for label in reversed(held):
                op = self.operations.get(label)
                if op is None or op.is_completed or getattr(op, "is_abandoned", False):
                    continue
                if step.key in op.keys:
                    return label
        return None

    def _expiry_run(self, op: Any, run: Callable[[], None]) -> None:
        entered = self._enter_unit(op.label)
        label = op.label
        if label in self._held:  # due at once: the timer runs it inside its own submission
            locked = tuple(dict.fromkeys(self._held))
            self.calls_in.append(CallIn("run", label, op.watch_step, locked, label))
        self._via.append("expiry")
        self._held.append(label)  # the run holds the operation's lock (R17)
        try:
            run()
        finally:
            self._held.pop()
            self._via.pop()
            if entered:
                self._unit = self._unit_due = None


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
        if isinstance(step, language.Init):
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


def run_steps(
    impl: ModuleType, steps: Iterable[Step], *, state_every: int = 1
) -> list[Observation]:
    """Execute ``steps`` (starting with ``init``) on ``impl``; one observation per step."""
    driver = Driver(impl, state_every=state_every)
    try:
        return [driver.execute(step) for step in steps]
    finally:
        driver.close()
