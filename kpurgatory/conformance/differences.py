"""Comparing a run step by step while accepting named known differences (``--allow``).

``Judge`` wraps ``compare_observations`` for one run at a time. With no allowed
differences it is exactly that comparison. With some (``kpurgatory.spec.known_differences``),
a step that disagrees is accepted when the disagreement lies only in fields a difference
lets differ: on a step of a kind the difference ``shows_on``, in the circumstance its
``when`` names (the judge keeps the facts of the run it needs: a shutdown happened,
labels watched so far, ...), its ``fields``; on any step after it has shown in this run,
its ``later`` fields. The judge tries each applicable difference alone first (those
that already showed in the run, then those with a specific circumstance, then the
narrowest), then all of them together, and names the ones it needed, so a report can
list each accepted difference separately. An ``init`` starts a new run (no difference
has shown yet).

``timer_only`` (``--timer-only``) also ignores the purgatory's state fields, so a port
of the timer alone may answer them with anything (zeros).

How fields are ignored: the actual observation's field is replaced by the expected
one, then the two are compared as usual; the expected observation is never changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from kpurgatory.conformance.driver import Observation, compare_observations
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    Cancel,
    ClockAdvance,
    Init,
    PurgatoryAdvance,
    Shutdown,
    Step,
    Watch,
)
from kpurgatory.spec.known_differences import CONDITIONS, KnownDifference

__all__ = ["PURGATORY_STATE_FIELDS", "Judge", "mask"]

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
    ``accepted``, a tuple of ids), else the comparison's description of the remaining
    difference.
    """

    def __init__(self, allow: Sequence[KnownDifference] = (), *, timer_only: bool = False) -> None:
        for difference in allow:
            if not isinstance(difference, KnownDifference):
                raise TypeError(f"allow must hold KnownDifference, not {type(difference).__name__}")
            if difference.when not in CONDITIONS:
                raise ValueError(f"{difference.id}: unknown condition {difference.when!r}")
        self.allow = tuple(allow)
        self.timer_only = timer_only
        self.shown: set[str] = set()
        self._shut_down = False
        self._watched: set[str] = set()
        self._negative_time = False
        self._nested_add = False
        self._cancelled_in_runs: set[str] = set()

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
        facts = self._facts(step)
        if self.timer_only:
            actual = mask(expected, actual, PURGATORY_STATE_FIELDS)
        if absent:
            actual = mask(expected, actual, absent)
        message = compare_observations(expected, actual)
        if message is None or not self.allow:
            return message, ()
        applicable = [
            (difference, self._fields(difference, step.STEP, facts)) for difference in self.allow
        ]
        applicable = sorted(
            ((difference, fields) for difference, fields in applicable if fields),
            # a difference that already showed in this run first (its later effects),
            # then those with a specific circumstance, then the narrowest
            key=lambda pair: (
                pair[0].id not in self.shown,
                pair[0].when == "always",
                len(pair[1]),
            ),
        )
        for difference, fields in applicable:
            if compare_observations(expected, mask(expected, actual, fields)) is None:
                return None, self._record_shown(expected, actual, step.STEP, facts, difference)
        every = frozenset().union(*(fields for _, fields in applicable)) if applicable else None
        if (
            every is not None
            and compare_observations(expected, mask(expected, actual, every)) is None
        ):
            return None, self._record_shown(expected, actual, step.STEP, facts, None)
        return message + _not_explained(self.allow), ()

    def _record_shown(
        self,
        expected: Observation,
        actual: Observation,
        kind: str,
        facts: set[str],
        explaining: KnownDifference | None,
    ) -> tuple[str, ...]:
        """Mark as shown every allowed difference that may have shown on this step, and
        return the ids the step needed (``explaining`` first if one explained it alone).

        Two differences can show on one step (a resubmission after a shutdown, a
        duplicate key in a resubmission): each whose specific circumstance holds (not
        ``always``) and whose own fields differ here is recorded too, so the later
        effects of every one of them are accepted afterwards, not only those of the
        first that explained the step. A difference that can show anywhere (``always``)
        is recorded only when the step needed it: nothing says it showed otherwise.
        """
        needed = [] if explaining is None else [explaining.id]
        for difference in self.allow:
            if difference.id in needed:
                continue
            showing = (
                kind in difference.shows_on
                and difference.when in facts
                and (explaining is None or difference.when != "always")
                and _differs(expected, actual, difference.fields)
            )
            continuing = (
                explaining is None
                and difference.id in self.shown
                and _differs(expected, actual, difference.later)
            )
            if showing or continuing:
                needed.append(difference.id)
        self.shown.update(needed)
        return tuple(needed)

    def _facts(self, step: Step) -> set[str]:
        """Record what ``step`` tells about the run; return the conditions true for it."""
        if isinstance(step, Init):
            self.shown = set()
            self._shut_down = False
            self._watched = set()
            self._negative_time = step.clock_ms < 0 or step.start_ms < 0
            self._nested_add = False
            self._cancelled_in_runs = set()
        facts = {"always"}
        if self._shut_down:
            facts.add("after_shutdown")
        if self._negative_time:
            facts.add("negative_time")
        if isinstance(step, Advance | ClockAdvance | PurgatoryAdvance) and step.ms < 0:
            facts.add("negative_ms")
        if isinstance(step, Watch):
            if step.operation in self._watched:
                facts.add("repeated_watch")
            if len({repr(key) for key in step.keys}) < len(step.keys):
                facts.add("duplicate_key")
            self._watched.add(step.operation)
        if isinstance(step, Add) and any(isinstance(inner, Add) for inner in step.on_run):
            self._nested_add = True
        if self._nested_add:
            facts.add("nested_add")
        if isinstance(step, Add):
            self._cancelled_in_runs.update(
                inner.task for inner in step.on_run if isinstance(inner, Cancel)
            )
        if (isinstance(step, Cancel) and step.task in self._watched) or (
            isinstance(step, Add | Advance | PurgatoryAdvance)
            and self._cancelled_in_runs & self._watched
        ):
            facts.add("cancel_watched")
        if isinstance(step, Shutdown):
            self._shut_down = True
        return facts

    def _fields(self, difference: KnownDifference, kind: str, facts: set[str]) -> frozenset[str]:
        fields: frozenset[str] = frozenset()
        if kind in difference.shows_on and difference.when in facts:
            fields = difference.fields
        if difference.id in self.shown:
            fields |= difference.later
        return fields


def _differs(expected: Observation, actual: Observation, fields: Iterable[str]) -> bool:
    """Whether ``actual`` differs from ``expected`` in at least one of ``fields``."""
    return mask(expected, actual, fields) != actual


def _not_explained(allow: Sequence[KnownDifference]) -> str:
    return f" (not explained by the allowed differences {', '.join(d.id for d in allow)})"
