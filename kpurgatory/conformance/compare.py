"""When two observations agree: the one comparison of the kit (vectors, ports, pipeline).

Everything is compared exactly except that hand-overs with the same due time in one
step (R6: their order is unspecified) are compared as a multiset of units, and states
field by field as JSON values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kpurgatory.conformance.observation import Observation, RecordedEvent, State
from kpurgatory.steps import Step

__all__ = ["canonical_events", "compare_observations", "first_divergence", "state_difference"]


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
    ``Driver``'s ``state_every``). Every difference gets a message naming its field and
    showing both values as JSON (a porter's adapter speaks JSON, not Python).
    """
    if expected == actual:
        return None
    if expected.raised != actual.raised:
        return f"raised: expected {_json(expected.raised)}, got {_json(actual.raised)}"
    if expected.result != actual.result:
        return f"result: expected {_json(expected.result)}, got {_json(actual.result)}" + (
            _NIL_SLICE_HINT if expected.result == [] and actual.result is None else ""
        )
    if expected.events != actual.events and canonical_events(expected.events) != canonical_events(
        actual.events
    ):
        exp = [event.to_json() for event in expected.events]
        act = [event.to_json() for event in actual.events]
        return f"events differ:\n  expected {_short(exp)}\n  actual   {_short(act)}"
    if expected.tries != actual.tries:
        return f"tries: expected {_json(dict(expected.tries))}, got {_json(dict(actual.tries))}"
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
        f"{name}: expected {_json(exp[name])}, got {_json(act[name])}"
        for name in exp
        if exp[name] != act[name]
    )


_NIL_SLICE_HINT = (
    " (an empty list is [], never null: a Go adapter that returns a nil slice sends null; "
    "send make([]string, 0) instead)"
)


def _json(value: object) -> str:
    """``value`` as JSON (null, true, [...]): what a porter's adapter sent or should send."""
    return json.dumps(value)


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
