"""Reading one answer line of a port's adapter: an observation, or a message a porter can act on.

An answer is a JSON object with ``result``, ``raised``, ``events``, ``tries`` and
``state`` (docs/vectors.md, "Observations"). ``parse_answer`` checks every field before
the kit compares anything, and a mistake is one ``AnswerError`` whose message names the
field (``events[1].at_ms``, ``state.timer_sizes``), shows the JSON the adapter sent there
and says what was expected; no message carries a Python value or exception name, since a
porter writes Go, Rust, Java or TypeScript.

The rules for null (docs/conformance.md, "Null"): Go encodes a nil slice and a nil map
as ``null``, so ``events: null`` reads as no events and ``tries: null`` as no tries. Any
other null is compared as the null it is: a list result (``cancel_for_key``) must be a
list, ``[]`` when empty, and its message says how a Go adapter sends one. ``null`` for
``watched_keys``, ``num_purged`` and ``estimated_total_operations`` declares the field
absent; ``timer_sizes`` may be null (or left out, or hold a null per timer) only when
the port declares it lacks ``size``.
"""

from __future__ import annotations

import json
from typing import Any

from kpurgatory.conformance.observation import Observation, RecordedEvent, State
from kpurgatory.spec.events import OperationCompleted, OperationExpired, TaskRan

__all__ = ["UNEXPOSED_STATE_NAMES", "AnswerError", "parse_answer", "shown"]

UNEXPOSED_STATE_NAMES = ("watched_keys", "num_purged", "estimated_total_operations")
"""State fields a port may declare absent by answering null (upstream Kafka does not
expose them); they then read as 0 and are not compared, and the report lists them."""

PURGATORY_STATE_NAMES = ("watched", "num_delayed", *UNEXPOSED_STATE_NAMES)
"""The purgatory's state fields: a timer-only answer may leave them out."""

_VIAS = ("try_complete_else_watch", "check_and_complete", "force_complete", "expiry")
_SHAPE = '{"result": ..., "raised": null, "events": [], "tries": {}, "state": {...}}'


class AnswerError(ValueError):
    """An answer line that is not an observation; the message is for the porter."""


def shown(value: object, limit: int = 200) -> str:
    """``value`` as the JSON it was (clipped), for messages."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _fail(field: str, got: object, expected: str) -> AnswerError:
    return AnswerError(f"{field}: expected {expected}, got {shown(got)}")


def _integer(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(field, value, "an integer")
    return value


def _string(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise _fail(field, value, "a string")
    return value


def _field(data: dict[str, Any], name: str, where: str, expected: str) -> Any:
    if name not in data:
        raise AnswerError(
            f"{where}{name}: missing; expected {expected} (the object has {shown(sorted(data))})"
        )
    return data[name]


def parse_answer(
    line: str, *, timer_only: bool = False, sizes_absent: bool = False
) -> tuple[Observation, frozenset[str]]:
    """The observation in one answer line and the state fields it declared absent (as
    ``state.<name>``). ``AnswerError`` naming the field for anything that is not an
    observation; an ``{"error": ...}`` answer is an ``AnswerError`` with the adapter's
    message. ``timer_only``: the purgatory's state fields may be left out (read as 0).
    ``sizes_absent``: the port declared no ``size``, so ``timer_sizes`` may be null."""
    text = line.strip()
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise AnswerError(f"answer is not JSON ({detail}): {text[:200]}") from None
    if isinstance(data, dict) and set(data) - {"capabilities"} == {"error"}:
        message = data["error"]
        raise AnswerError(
            "the adapter reported an error: "
            + (message if isinstance(message, str) else shown(message))
        )
    if not isinstance(data, dict):
        raise AnswerError(f"answer is not a JSON object: got {shown(data)}; expected {_SHAPE}")
    raised = _field(data, "raised", "", "null or the name of an exception")
    if raised is not None and not isinstance(raised, str):
        raise _fail("raised", raised, 'null or "ValueError", "TypeError" or "RuntimeError"')
    result = _field(
        data, "result", "", "the call's result: true, false, an integer, a list or null"
    )
    events = _field(data, "events", "", "a list of events ([] when none)")
    tries = _field(data, "tries", "", "an object of operation label to count ({} when none)")
    state_data = _field(data, "state", "", "the state object")
    state, absent = _state(state_data, timer_only=timer_only, sizes_absent=sizes_absent)
    return (
        Observation(result, raised, _events(events), _tries(tries), state),
        frozenset(absent),
    )


def _events(events: object) -> tuple[RecordedEvent, ...]:
    if events is None:  # a Go nil slice: no events
        return ()
    if not isinstance(events, list):
        raise _fail("events", events, "a list of events ([] when none)")
    return tuple(_event(event, f"events[{index}]") for index, event in enumerate(events))


def _event(data: object, where: str) -> RecordedEvent:
    if not isinstance(data, dict):
        raise _fail(where, data, "an event object")
    kind = _field(data, "kind", f"{where}.", '"task_ran", "completed" or "expired"')
    at_ms = _integer(_field(data, "at_ms", f"{where}.", "an integer"), f"{where}.at_ms")
    event: TaskRan | OperationCompleted | OperationExpired
    if kind == "task_ran":
        label = _string(_field(data, "task", f"{where}.", "the task's label"), f"{where}.task")
        event = TaskRan(label, at_ms)
    elif kind in ("completed", "expired"):
        label = _string(
            _field(data, "operation", f"{where}.", "the operation's label"), f"{where}.operation"
        )
        if kind == "expired":
            event = OperationExpired(label, at_ms)
        else:
            via = _field(data, "via", f"{where}.", "the kind of call that completed it")
            if via not in _VIAS:
                raise _fail(f"{where}.via", via, " or ".join(json.dumps(v) for v in _VIAS))
            event = OperationCompleted(label, at_ms, via)
    else:
        raise _fail(f"{where}.kind", kind, '"task_ran", "completed" or "expired"')
    unit = _field(data, "unit", f"{where}.", "the hand-over's label or null")
    if unit is not None:
        unit = _string(unit, f"{where}.unit")
    due = _field(data, "due_ms", f"{where}.", "the hand-over's due time or null")
    if due is not None:
        due = _integer(due, f"{where}.due_ms")
    return RecordedEvent(event, unit, due)


def _tries(tries: object) -> tuple[tuple[str, int], ...]:
    if tries is None:  # a Go nil map: no tries
        return ()
    if not isinstance(tries, dict):
        raise _fail("tries", tries, "an object of operation label to count ({} when none)")
    return tuple(sorted((label, _integer(n, f"tries.{label}")) for label, n in tries.items()))


def _state(data: object, *, timer_only: bool, sizes_absent: bool) -> tuple[State, set[str]]:
    if not isinstance(data, dict):
        raise _fail(
            "state", data, 'the state object, e.g. {"clock_ms": 0, "timer_sizes": {"main": 0}, ...}'
        )
    absent: set[str] = set()
    clock = _integer(_field(data, "clock_ms", "state.", "the clock reading"), "state.clock_ms")
    sizes = _timer_sizes(data, sizes_absent)
    counts: dict[str, int] = {}
    for name in PURGATORY_STATE_NAMES:
        if timer_only and name not in data:
            counts[name] = 0
            continue
        if name not in data:
            raise AnswerError(
                f"state.{name}: missing; expected an integer (a port of the timer alone "
                f"leaves the purgatory's fields out and runs the kit with --timer-only)"
            )
        value = data[name]
        if value is None and name in UNEXPOSED_STATE_NAMES:
            absent.add(f"state.{name}")
            counts[name] = 0
        elif value is None and timer_only:
            counts[name] = 0
        else:
            expected = (
                "an integer, or null to declare it absent"
                if name in UNEXPOSED_STATE_NAMES
                else "an integer"
            )
            if isinstance(value, bool) or not isinstance(value, int):
                raise _fail(f"state.{name}", value, expected)
            counts[name] = value
    return State(clock, sizes, **counts), absent


def _timer_sizes(data: dict[str, Any], sizes_absent: bool) -> tuple[tuple[str, int], ...]:
    sizes = data.get("timer_sizes")
    if sizes_absent and (sizes is None or isinstance(sizes, dict)):
        return ()  # not compared: the port has no size
    expected = 'an object of timer label to size, e.g. {"main": 0}'
    hint = '(a port without sizes declares it at init: "capabilities": {"without": ["size"]})'
    if "timer_sizes" not in data:
        raise AnswerError(f"state.timer_sizes: missing; expected {expected} {hint}")
    if not isinstance(sizes, dict):
        raise AnswerError(f"state.timer_sizes: expected {expected}, got {shown(sizes)} {hint}")
    return tuple(
        (label, _integer(size, f"state.timer_sizes.{label}")) for label, size in sizes.items()
    )
