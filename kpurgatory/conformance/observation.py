"""What the driver observes of one step, as objects and as plain tuples.

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

``Observation`` (result, raised, events, tries, state) is the kit's unit of comparison and
its JSON form (docs/vectors.md); ``RecordedEvent`` and ``State`` are its parts. The
driver records each step in the ``Compact`` form, plain tuples that compare equal
exactly when the objects do, and builds the objects only when they are wanted
(``to_observation``): bulk replays compare the tuples and build nothing while they agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kpurgatory.spec.events import Event, OperationCompleted, OperationExpired, TaskRan, to_json

__all__ = [
    "Compact",
    "CompactEvent",
    "Observation",
    "RecordedEvent",
    "State",
    "compact",
    "to_observation",
]

CompactEvent = tuple[str, str, int, str | None, str | None, int | None]
"""``(kind, label, at_ms, via, unit, due_ms)``: kind ``completed``, ``expired`` or
``task_ran``; ``via`` only for a completion."""

Compact = tuple[Any, str | None, tuple[CompactEvent, ...], tuple[tuple[str, int], ...], Any]
"""``(result, raised, events, tries, state)``: ``tries`` the sorted ``(label, count)``
pairs, ``state`` None or the tuple of ``State``'s fields."""


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

    def as_tuple(self) -> tuple[Any, ...]:
        """The fields in order (the ``state`` of a ``Compact`` observation)."""
        return (
            self.clock_ms,
            self.timer_sizes,
            self.watched,
            self.num_delayed,
            self.watched_keys,
            self.num_purged,
            self.estimated_total_operations,
        )

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


def to_observation(observed: Compact) -> Observation:
    """The ``Observation`` of a ``Compact`` one (``compact``'s inverse)."""
    result, raised, events, tries, state = observed
    recorded = []
    for kind, label, at_ms, via, unit, due in events:
        event: Event
        if kind == "completed":
            event = OperationCompleted(label, at_ms, via)  # type: ignore[arg-type]
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


def compact(observation: Observation) -> Compact:
    """The ``Compact`` form of ``observation`` (``to_observation``'s inverse)."""
    events: list[CompactEvent] = []
    for recorded in observation.events:
        event = recorded.event
        if isinstance(event, OperationCompleted):
            head: tuple[str, str, int, str | None] = (
                "completed",
                event.operation,
                event.at_ms,
                event.via,
            )
        elif isinstance(event, OperationExpired):
            head = ("expired", event.operation, event.at_ms, None)
        else:
            head = ("task_ran", event.task, event.at_ms, None)
        events.append((*head, recorded.unit, recorded.due_ms))
    state = observation.state
    return (
        observation.result,
        observation.raised,
        tuple(events),
        observation.tries,
        None if state is None else state.as_tuple(),
    )
