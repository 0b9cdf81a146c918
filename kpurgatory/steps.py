"""The step language: a run of a timer and a purgatory as a list of plain, JSON-ready calls.

A run starts with one ``Init`` step, which creates a ``ManualClock``, the named timers
(all ticking ``tick_ms`` with ``wheel_size`` buckets) and one purgatory on the first
timer, with an ``InlineExecutor`` and the reaper off, so the run is deterministic.
Every later step is one call (or one clock move) named by labels: tasks and operations
are created by the step that first names them and referred to by label afterwards.

Steps are frozen dataclasses; ``step_to_json`` / ``step_from_json`` convert them to and
from dicts whose ``"step"`` field names the kind (the JSON Schema is
conformance/schema/vector.schema.json, ``$defs/step``; the prose docs/vectors.md). Ports in other
languages read the same JSON, so every field is an int, bool, str or list of those.

Arguments are passed to the implementation as given: a negative ``ms``, an empty
``keys`` list or a negative delay is legal in the language, so vectors can check the
errors R35 and R36 prescribe (the observation records the exception's class).

Why labels and not objects: a vector must be replayable in any language, and labels
make the events ("task t3 ran at 40 ms") comparable across implementations.

Why here, at the top of the package: the language sits below both of its users, the
conformance kit (``kpurgatory.conformance``: interpreter, vectors, adapters) and the
workload generator (``kpurgatory.workloads``), which the kit builds vectors from; it
imports neither. ``kpurgatory.conformance.steps`` re-exports it under its older name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeAlias, get_args

__all__ = [
    "NESTED_FIELDS",
    "NESTED_STEPS",
    "TIMER_STEP_KINDS",
    "Add",
    "Advance",
    "CALLBACKS",
    "Cancel",
    "CancelForKey",
    "CheckAndComplete",
    "ClockAdvance",
    "Close",
    "ExecutorShutdown",
    "ForceComplete",
    "Init",
    "Key",
    "NextDueTime",
    "PurgatoryAdvance",
    "SetReady",
    "Shutdown",
    "Step",
    "Watch",
    "nested_steps",
    "step_from_json",
    "step_to_json",
    "steps_from_json",
    "steps_to_json",
]

Key: TypeAlias = str | int
"""A watch key: a string or an integer (they never compare equal to each other)."""


# The step classes share one shape deliberately: each is a frozen record of one call.
@dataclass(frozen=True)
class Init:
    """Create the world: a ManualClock at ``clock_ms``, timers, and one purgatory.

    Every timer in ``timers`` is ``SystemTimer(label, tick_ms, wheel_size, start_ms)``
    on the shared clock with an ``InlineExecutor``. The purgatory uses ``timers[0]``,
    ``purge_interval`` and ``timer_enabled``, with ``reaper_enabled=False``. Exactly
    one ``Init`` starts every run. Result: ``null``.
    """

    tick_ms: int = 1
    wheel_size: int = 20
    start_ms: int = 0
    clock_ms: int = 0
    purge_interval: int = 1000
    timer_enabled: bool = True
    timers: tuple[str, ...] = ("main",)
    STEP: ClassVar[str] = "init"


@dataclass(frozen=True)
class Add:
    """``timer.add(task)`` for the task labelled ``task`` (R1, R3, R10).

    The first ``Add`` naming a label creates a recording ``TimerTask(delay_ms)``; a
    later one re-adds the same task object (R10), and ``delay_ms`` must repeat the
    delay it was created with. ``on_run`` lists steps the task performs, in order,
    every time it runs (only the kinds in ``NESTED_STEPS``): this is how a run
    exercises R11 (a task cancelling a later one) and R6 (adds during a hand-over).
    Result: ``null``.
    """

    task: str
    delay_ms: int
    timer: str = "main"
    on_run: tuple[Step, ...] = ()
    STEP: ClassVar[str] = "add"


@dataclass(frozen=True)
class Cancel:
    """``cancel()`` on the task or operation labelled ``task`` (R9). Result: ``null``."""

    task: str
    STEP: ClassVar[str] = "cancel"


@dataclass(frozen=True)
class Advance:
    """``timer.advance_clock(ms)`` on the timer labelled ``timer`` (R4-R8).

    On an open timer and the ManualClock this moves the clock by exactly ``ms`` and
    drains; a closed timer (the purgatory's, after ``Shutdown``) returns False at once
    without moving the clock (R14); a negative ``ms`` raises ``ValueError`` (R8).
    Result: the returned bool.
    """

    ms: int
    timer: str = "main"
    STEP: ClassVar[str] = "advance"


@dataclass(frozen=True)
class ClockAdvance:
    """``clock.advance(ms)``: move the clock only; no timer drains (R2, R3). Result: ``null``."""

    ms: int
    STEP: ClassVar[str] = "clock_advance"


@dataclass(frozen=True)
class Watch:
    """``purgatory.try_complete_else_watch(op, keys)`` (R22-R24, R34).

    The first ``Watch`` naming ``operation`` creates a flag operation with ``delay_ms``
    whose ``try_complete`` completes it iff it is ready: ``ready`` says whether it is
    ready from the start, and ``ready_on_try = n`` makes it ready from its n-th
    ``try_complete`` call on (2 = "becomes ready on the second try"). A later ``Watch``
    of the same label submits the same object again (R34: ``ValueError``); its other
    fields must then repeat the first ones. Result: the returned bool.

    ``on_try``, ``on_complete`` and ``on_expiration`` are steps the operation performs
    from those callbacks (only the kinds in ``NESTED_STEPS``): how a run calls back in
    from user code (R63-R69). ``on_try`` runs on every try, after the try is counted and
    before the flag is read, except in a try nested inside the operation's own
    ``on_try`` (which bounds the recursion R69 leaves to the user).
    """

    operation: str
    delay_ms: int
    keys: tuple[Key, ...]
    ready: bool = False
    ready_on_try: int | None = None
    on_try: tuple[Step, ...] = ()
    on_complete: tuple[Step, ...] = ()
    on_expiration: tuple[Step, ...] = ()
    STEP: ClassVar[str] = "watch"


@dataclass(frozen=True)
class SetReady:
    """Make the operation's condition true (or false again); calls nothing. Result: ``null``."""

    operation: str
    ready: bool = True
    STEP: ClassVar[str] = "set_ready"


@dataclass(frozen=True)
class CheckAndComplete:
    """``purgatory.check_and_complete(key)`` (R25, R26). Result: the returned count."""

    key: Key
    STEP: ClassVar[str] = "check_and_complete"


@dataclass(frozen=True)
class ForceComplete:
    """``operation.force_complete()`` from outside the purgatory (R16). Result: the bool."""

    operation: str
    STEP: ClassVar[str] = "force_complete"


@dataclass(frozen=True)
class CancelForKey:
    """``purgatory.cancel_for_key(key)`` (R29). Result: the labels returned, in order."""

    key: Key
    STEP: ClassVar[str] = "cancel_for_key"


@dataclass(frozen=True)
class PurgatoryAdvance:
    """``purgatory.advance_clock(ms)``: timer step then purge check (R30). Result: ``null``."""

    ms: int
    STEP: ClassVar[str] = "purgatory_advance"


@dataclass(frozen=True)
class NextDueTime:
    """Read ``timer.next_due_time`` (R44). Result: the int, or ``null`` if nothing is scheduled."""

    timer: str = "main"
    STEP: ClassVar[str] = "next_due_time"


@dataclass(frozen=True)
class Close:
    """``timer.close()`` on the timer labelled ``timer`` (R14; from a task's run, R64).

    Result: ``null``.
    """

    timer: str = "main"
    STEP: ClassVar[str] = "close"


@dataclass(frozen=True)
class ExecutorShutdown:
    """Shut down the executor the run gave the timer labelled ``timer`` (R65).

    The timer stays open; from then on the executor refuses every task (its ``submit``
    raises ``RuntimeError``, as a shut-down thread pool does), so a drain or an add that
    hands a task over meets a refusal. Result: ``null``.
    """

    timer: str = "main"
    STEP: ClassVar[str] = "executor_shutdown"


@dataclass(frozen=True)
class Shutdown:
    """``purgatory.shutdown()`` (R32); later purgatory calls raise. Result: ``null``."""

    STEP: ClassVar[str] = "shutdown"


Step: TypeAlias = (
    Init
    | Add
    | Cancel
    | Advance
    | ClockAdvance
    | Watch
    | SetReady
    | CheckAndComplete
    | ForceComplete
    | CancelForKey
    | PurgatoryAdvance
    | Shutdown
    | NextDueTime
    | Close
    | ExecutorShutdown
)
"""Any step of the language."""

_KINDS: dict[str, type[Any]] = {cls.STEP: cls for cls in get_args(Step)}

NESTED_STEPS: frozenset[str] = frozenset(
    {
        "add",
        "cancel",
        "set_ready",
        "check_and_complete",
        "force_complete",
        "cancel_for_key",
        "watch",
        "advance",
        "purgatory_advance",
        "shutdown",
        "close",
    }
)
"""Step kinds user code may perform when the library calls it (a task's ``run``:
``Add.on_run``; an operation's callbacks: ``Watch.on_try``, ``on_complete``,
``on_expiration``): every public call R69 allows from a callback. ``advance`` and
``purgatory_advance`` there are nested drains; ``clock_advance`` and ``init`` are not
calls of the library, and ``next_due_time`` reads only."""

CALLBACKS: tuple[str, ...] = ("on_try", "on_complete", "on_expiration")
"""The fields of a ``Watch`` that carry nested steps, in the order the callbacks run."""

NESTED_FIELDS: frozenset[str] = frozenset({"on_run", *CALLBACKS})
"""Every field that carries nested steps (a task's and an operation's)."""

TIMER_STEP_KINDS: frozenset[str] = frozenset(
    {
        "init",
        "add",
        "cancel",
        "advance",
        "clock_advance",
        "next_due_time",
        "close",
        "executor_shutdown",
    }
)
"""The step kinds a port of the timer alone can answer (``kpurgatory conformance --timer-only``)."""


def nested_steps(step: Step) -> list[tuple[str, Step]]:
    """The steps ``step`` carries for callbacks (a task's ``on_run``, an operation's
    ``on_try``, ``on_complete``, ``on_expiration``), each with its field, in that order;
    not recursive."""
    if isinstance(step, Add):
        return [("on_run", inner) for inner in step.on_run]
    if isinstance(step, Watch):
        return [(name, inner) for name in CALLBACKS for inner in getattr(step, name)]
    return []


def step_to_json(step: Step) -> dict[str, Any]:
    """The step as a JSON-ready dict: ``{"step": kind, <every field>}`` (lists for tuples).

    A watch's callback fields (``CALLBACKS``) are written only when they carry steps, so
    a watch that calls nothing back reads as it always did (an adapter that predates them
    never meets them)."""
    out: dict[str, Any] = {"step": step.STEP}
    for f in fields(step):
        value = getattr(step, f.name)
        if f.name in CALLBACKS and not value:
            continue
        if f.name in NESTED_FIELDS:
            out[f.name] = [step_to_json(inner) for inner in value]
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def steps_to_json(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """``step_to_json`` over a list."""
    return [step_to_json(step) for step in steps]


def step_from_json(data: Mapping[str, Any]) -> Step:
    """Parse one step dict; missing optional fields take their defaults.

    ``ValueError`` for an unknown kind, an unknown field, a missing required field,
    or a nested step kind not in ``NESTED_STEPS``; ``TypeError`` for a field of the
    wrong JSON type. Every message names the field.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"a step must be a JSON object, got {_json(data)}")
    kind = data.get("step")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None or not isinstance(kind, str):
        raise ValueError(
            f"step: unknown step kind {_json(kind)}; expected one of {_json(sorted(_KINDS))}"
        )
    known = {f.name: f for f in fields(cls)}
    unknown = set(data) - set(known) - {"step"}
    if unknown:
        raise ValueError(f"{kind}: unknown field(s) {_json(sorted(unknown))}")
    required = [
        name
        for name, f in known.items()
        if f.default is MISSING and f.default_factory is MISSING and name not in data
    ]
    if required:
        raise ValueError(f"{kind}: missing required field(s) {_json(required)}")
    kwargs: dict[str, Any] = {}
    for name in known:
        if name in data:
            kwargs[name] = _field_value(kind, name, data[name])
    step: Step = cls(**kwargs)
    _check(step)
    return step


def steps_from_json(data: Sequence[Mapping[str, Any]]) -> list[Step]:
    """``step_from_json`` over a list."""
    return [step_from_json(item) for item in data]


_INT_FIELDS = {"tick_ms", "wheel_size", "start_ms", "clock_ms", "purge_interval", "delay_ms", "ms"}
_STR_FIELDS = {"task", "timer", "operation"}
_BOOL_FIELDS = {"timer_enabled", "ready"}


def _json(value: object) -> str:
    """``value`` as JSON (clipped): messages about a step show what its file or line had."""
    text = json.dumps(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_key(value: object) -> bool:
    return isinstance(value, str) or _is_int(value)


def _field_value(kind: str, name: str, value: Any) -> Any:
    where = f"{kind}.{name}"
    if name in _INT_FIELDS:
        if not _is_int(value):
            raise TypeError(f"{where} must be an integer, got {_json(value)}")
        return value
    if name in _STR_FIELDS:
        if not isinstance(value, str):
            raise TypeError(f"{where} must be a string, got {_json(value)}")
        return value
    if name in _BOOL_FIELDS:
        if not isinstance(value, bool):
            raise TypeError(f"{where} must be a boolean, got {_json(value)}")
        return value
    if name == "ready_on_try":
        if value is not None and not _is_int(value):
            raise TypeError(f"{where} must be an integer or null, got {_json(value)}")
        return value
    if name == "key":
        if not _is_key(value):
            raise TypeError(f"{where} must be a string or an integer, got {_json(value)}")
        return value
    if name in ("keys", "timers") or name in NESTED_FIELDS:
        if not isinstance(value, list | tuple):
            raise TypeError(f"{where} must be an array, got {_json(value)}")
        if name == "keys":
            for item in value:
                if not _is_key(item):
                    raise TypeError(f"{where} items must be strings or integers, got {_json(item)}")
            return tuple(value)
        if name == "timers":
            for item in value:
                if not isinstance(item, str):
                    raise TypeError(f"{where} items must be strings, got {_json(item)}")
            return tuple(value)
        nested = tuple(step_from_json(item) for item in value)
        for inner in nested:
            if inner.STEP not in NESTED_STEPS:
                who = "a task" if name == "on_run" else f"an operation's {name}"
                raise ValueError(
                    f"{where}: {who} may not perform {_json(inner.STEP)}; "
                    f"allowed: {_json(sorted(NESTED_STEPS))}"
                )
        return nested
    raise ValueError(f"{where}: unhandled field")  # pragma: no cover - every field is listed


def _check(step: Step) -> None:
    """Value checks the types cannot express (ranges, non-empty lists)."""
    kind = step.STEP
    if isinstance(step, Init):
        if step.tick_ms < 1:
            raise ValueError(f"{kind}.tick_ms must be >= 1, got {step.tick_ms}")
        if step.wheel_size < 2:
            raise ValueError(f"{kind}.wheel_size must be >= 2, got {step.wheel_size}")
        if step.purge_interval < 0:
            raise ValueError(f"{kind}.purge_interval must be >= 0, got {step.purge_interval}")
        if not step.timers or len(set(step.timers)) != len(step.timers):
            raise ValueError(f"{kind}.timers must be a non-empty list of distinct labels")
    elif isinstance(step, Watch) and step.ready_on_try is not None and step.ready_on_try < 1:
        raise ValueError(f"{kind}.ready_on_try must be >= 1 or null, got {step.ready_on_try}")
