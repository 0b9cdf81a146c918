"""Comparing a run step by step while accepting named known differences (``--allow``).

``Judge`` wraps ``compare_observations`` for one run at a time. With no allowed
differences it is exactly that comparison. With some, an allowance is behaviour, not a
mask: the judge keeps the *candidates* the port may be, each the reference with a set of
the allowed differences switched on (``kafka_model``), and a step agrees iff the port's
answer equals what at least one live candidate answers. It starts with the reference
alone (the expected observations it is given); when no live candidate explains a step it
adds allowed differences to the candidates that were live (one, then two, then all of
them), replays the run so far on each such model and keeps those that agree with every
answer the port gave. So a difference excuses exactly what it causes, in this run, and
nothing else: a port that loses, duplicates or reorders a task still fails, with or
without ``--allow``; and Kafka's own consequences (an operation that lingers in its list
and is returned by ``cancel_for_key``) are accepted because the model does the same.

The judge reports, for a step that differs from the reference, the differences of the
smallest live candidate (``accepted``), so a report can list each accepted difference
separately. An ``init`` starts a new run. ``expected`` is the observation the last
judged step was compared with (the reference's, or a live candidate's once the port has
shown a difference), for reports.

``timer_only`` (``--timer-only``) also ignores the purgatory's state fields, so a port
of the timer alone may leave them out. ``capabilities`` (``kpurgatory.conformance.
capabilities``): a port without ``size`` is not compared on ``state.timer_sizes``; a
port that runs tasks asynchronously is compared on each step's events as a multiset.

How fields are ignored (``timer_only``, fields an adapter declared absent): the actual
observation's field is replaced by the expected one, then the two are compared as
usual; the expected observation is never changed.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence

from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.driver import (
    DriverSide,
    Observation,
    RecordedEvent,
    compare_observations,
)
from kpurgatory.conformance.kafka_model import kafka_model
from kpurgatory.conformance.steps import Init, Step
from kpurgatory.spec.known_differences import CONDITIONS, KnownDifference

__all__ = ["PURGATORY_STATE_FIELDS", "Judge", "mask", "report_json"]

PURGATORY_STATE_FIELDS: frozenset[str] = frozenset(
    {
        "state.watched",
        "state.num_delayed",
        "state.watched_keys",
        "state.num_purged",
        "state.estimated_total_operations",
    }
)
"""The state fields a timer-only port cannot answer (``--timer-only`` ignores them)."""

MAX_COMBINED = 2
"""How many differences the judge adds at once to a candidate before trying all of them."""


def report_json(
    observation: Observation,
    *,
    timer_only: bool = False,
    absent: Iterable[str] = (),
) -> dict[str, object]:
    """``observation`` as a report prints it: its JSON, without the purgatory's state
    fields under ``--timer-only`` (a timer port does not answer them), and with each
    field of ``absent`` (``state.<name>``, declared absent by the port) shown as the null
    it answered. A parsed answer reads both as 0, and zeros beside the expected values
    would read as a difference the kit never compared."""
    data = observation.to_json()
    state = data.get("state")
    if isinstance(state, dict):
        for name in absent:
            if name.removeprefix("state.") in state:
                state[name.removeprefix("state.")] = None
        if timer_only:
            data["state"] = {
                name: value
                for name, value in state.items()
                if f"state.{name}" not in PURGATORY_STATE_FIELDS
            }
    return data


def mask(expected: Observation, actual: Observation, fields: Iterable[str]) -> Observation:
    """``actual`` with each of ``fields`` copied from ``expected`` (so they compare equal)."""
    changes: dict[str, object] = {}
    state_changes: dict[str, object] = {}
    for name in fields:
        if name == "state":
            changes["state"] = expected.state
        elif name.startswith("state."):
            if expected.state is not None:
                state_changes[name.removeprefix("state.")] = getattr(
                    expected.state, name.removeprefix("state.")
                )
        else:
            changes[name] = getattr(expected, name)
    if state_changes and "state" not in changes and actual.state is not None:
        changes["state"] = dataclasses.replace(actual.state, **state_changes)  # type: ignore[arg-type]
    return dataclasses.replace(actual, **changes)  # type: ignore[arg-type]


class Judge:
    """Compares each step of a run, accepting the allowed known differences (module docstring).

    ``judge(step, expected, actual)`` returns ``(message, accepted)``: ``message`` is
    None when the observations agree (possibly thanks to the differences in
    ``accepted``, a tuple of ids), else a description of the difference.
    """

    def __init__(
        self,
        allow: Sequence[KnownDifference] = (),
        *,
        timer_only: bool = False,
        capabilities: Capabilities | None = None,
    ) -> None:
        for difference in allow:
            if not isinstance(difference, KnownDifference):
                raise TypeError(f"allow must hold KnownDifference, not {type(difference).__name__}")
            if difference.when not in CONDITIONS:
                raise ValueError(f"{difference.id}: unknown condition {difference.when!r}")
        self.allow = tuple(allow)
        self.timer_only = timer_only
        self.capabilities = Capabilities() if capabilities is None else capabilities
        self.shown: set[str] = set()
        self.expected: Observation | None = None
        self._ids = tuple(difference.id for difference in self.allow)
        self._steps: list[Step] = []
        self._answers: list[tuple[Observation, frozenset[str]]] = []
        # live candidates: differences switched on -> its run (None: the reference, whose
        # observations are the ``expected`` the caller passes)
        self._live: dict[frozenset[str], DriverSide | None] = {frozenset(): None}
        self._tried: set[frozenset[str]] = {frozenset()}

    def judge(
        self,
        step: Step,
        expected: Observation,
        actual: Observation,
        *,
        absent: frozenset[str] = frozenset(),
    ) -> tuple[str | None, tuple[str, ...]]:
        """Compare one step's observations; see the class docstring.

        ``absent``: state fields the port declared absent in this answer (null for a field
        its API does not expose, e.g. ``state.num_purged``); they are not compared.
        """
        if isinstance(step, Init):
            self._reset()
        self.expected = expected
        message = self._compare(expected, actual, absent)
        if not self.allow:
            return message, ()
        self._steps.append(step)
        self._answers.append((actual, absent))
        live = self._live
        survivors: dict[frozenset[str], DriverSide | None] = {}
        closest: Observation | None = None
        for on, side in live.items():
            observed = expected if side is None else _execute(side, step)
            if observed is not None and self._compare(observed, actual, absent) is None:
                survivors[on] = side
                continue
            if side is not None:
                side.close()
                if closest is None and observed is not None:
                    closest = observed
        if not survivors:
            survivors = self._branch(list(live))
        self._live = survivors
        if not survivors:
            if frozenset() in live or closest is None:
                return (message or "no answer") + _not_explained(self.allow), ()
            self.expected = closest
            near = min((on for on in live if on), key=lambda on: (len(on), sorted(on)))
            described = self._compare(closest, actual, absent) or "differs"
            return (
                f"{described} (expected as upstream Kafka behaves with "
                f"{', '.join(sorted(near))}; no other allowed difference explains it)",
                (),
            )
        if message is None or frozenset() in survivors:
            return None, ()
        chosen = min(survivors, key=lambda on: (len(on), sorted(on)))
        self.shown |= chosen
        return None, tuple(ident for ident in self._ids if ident in chosen)

    def close(self) -> None:
        """Close the candidates' runs (a new ``init`` does it too)."""
        for side in self._live.values():
            if side is not None:
                side.close()
        self._live = {frozenset(): None}

    # -- internals ----------------------------------------------------------------------

    def _reset(self) -> None:
        self.close()
        self.shown = set()
        self._steps = []
        self._answers = []
        self._tried = {frozenset()}

    def _compare(
        self, expected: Observation, actual: Observation, absent: frozenset[str]
    ) -> str | None:
        if self.timer_only:
            actual = mask(expected, actual, PURGATORY_STATE_FIELDS)
        if absent:
            actual = mask(expected, actual, absent)
        if not self.capabilities.has("size"):
            actual = mask(expected, actual, ("state.timer_sizes",))
        if self.capabilities.async_run and _same_multiset(expected.events, actual.events):
            actual = dataclasses.replace(actual, events=expected.events)
        return compare_observations(expected, actual)

    def _branch(self, dead: list[frozenset[str]]) -> dict[frozenset[str], DriverSide | None]:
        """Candidates with more allowed differences on than a ``dead`` one that agree with
        every answer of the run so far (one difference more, then two, then all)."""
        levels: list[set[frozenset[str]]] = []
        for extra in range(1, MAX_COMBINED + 1):
            levels.append(
                {
                    on | frozenset(more)
                    for on in dead
                    for more in itertools.combinations(
                        [ident for ident in self._ids if ident not in on], extra
                    )
                }
            )
        levels.append({frozenset(self._ids)})
        for level in levels:
            found: dict[frozenset[str], DriverSide | None] = {}
            for on in sorted(level - self._tried, key=sorted):
                self._tried.add(on)
                side = self._replay(on)
                if side is not None:
                    found[on] = side
            if found:
                return found
        return {}

    def _replay(self, on: frozenset[str]) -> DriverSide | None:
        """The model with ``on`` run over the steps so far, or None if it disagrees."""
        side = DriverSide(kafka_model(on))
        for step, (actual, absent) in zip(self._steps, self._answers, strict=True):
            observed = _execute(side, step)
            if observed is None or self._compare(observed, actual, absent) is not None:
                side.close()
                return None
        return side


def _same_multiset(expected: Sequence[RecordedEvent], actual: Sequence[RecordedEvent]) -> bool:
    """Whether two event lists hold the same events, in any order (``async_run``)."""
    return Counter(map(repr, expected)) == Counter(map(repr, actual))


def _execute(side: DriverSide, step: Step) -> Observation | None:
    """``side``'s observation of ``step``; None if the model cannot run it at all."""
    try:
        return side.execute(step)
    except Exception:  # a model that fails (a StepError, its own crash) explains nothing
        return None


def _not_explained(allow: Sequence[KnownDifference]) -> str:
    return f" (not explained by the allowed differences {', '.join(d.id for d in allow)})"
