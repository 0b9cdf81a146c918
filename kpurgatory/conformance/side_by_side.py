"""Running a sequence on the reference and on another side, step by step.

A ``Side`` is one implementation under comparison: another implementation in process
(``DriverSide``) or a port behind its adapter (``AdapterSide``). ``compare_step`` judges
one step's answers with the kit's ``Judge``; ``check_sequence`` runs a whole sequence
and returns the first ``StatefulFailure``. The stateful search (``run_stateful``) and
``kpurgatory conformance --replay`` are built on these.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from kpurgatory.conformance.adapter_process import AdapterError, AdapterProcess
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.differences import Judge, report_json
from kpurgatory.conformance.driver import DriverSide, Observation
from kpurgatory.conformance.hang import hang_diagnosis
from kpurgatory.conformance.steps import Init, Step, step_to_json
from kpurgatory.spec.known_differences import KnownDifference

__all__ = [
    "AdapterSide",
    "Side",
    "StatefulFailure",
    "StatefulStats",
    "check_sequence",
    "compare_step",
    "failure_kind",
]


class Side(Protocol):
    """One implementation under comparison: executes a step, returns its observation.

    An ``Init`` step starts a new run. ``AdapterError`` means the side did not answer.
    """

    def execute(self, step: Step) -> Observation: ...

    def close(self) -> None: ...


class AdapterSide:
    """A port behind its adapter process; the process is started (again) at each ``Init``
    if it is not running, so one crash does not end the whole search."""

    def __init__(self, adapter: AdapterProcess) -> None:
        self.adapter = adapter

    def execute(self, step: Step) -> Observation:
        """Send ``step`` to the adapter and return its answer."""
        if isinstance(step, Init) and not self.adapter.running:
            self.adapter.start()
        return self.adapter.send(step)

    @property
    def last_absent(self) -> frozenset[str]:
        """The state fields the last answer declared absent (answered null)."""
        return self.adapter.last_absent

    def close(self) -> None:
        """Nothing to do: the adapter's owner closes it."""


@dataclass
class StatefulFailure:
    """A sequence on which ``other`` disagrees with the reference at its last step."""

    steps: list[Step]
    message: str
    expected: dict[str, Any] | None
    actual: dict[str, Any] | None
    hung: bool = False  # the other side stopped answering (stopped after the timeout)

    @property
    def step_index(self) -> int:
        """Index of the step that diverged (the last one; 0-based, reports print + 1)."""
        return len(self.steps) - 1

    @property
    def step_number(self) -> int:
        """The diverging step's number as reports print it (from 1, like every report)."""
        return len(self.steps)

    @property
    def kind(self) -> tuple[str, str]:
        """What failed: ``failure_kind`` of this failure."""
        return failure_kind(self.steps[-1], self.message)

    def json_lines(self) -> list[str]:
        """The steps as JSON lines, the adapter protocol's input format."""
        return [json.dumps(step_to_json(step)) for step in self.steps]


def failure_kind(step: Step, message: str) -> tuple[str, str]:
    """The kind of a divergence: the step kind and what differed (``raised``, ``result``,
    ``events``, ``tries``, the state fields, or ``no answer``). Shrinking keeps it, so the
    failure reported is the one the search found, not another one met on the way."""
    head = message.split(":", 1)[0].split(" (", 1)[0]
    if head == "state":
        fields = sorted(
            part.split(":", 1)[0].strip()
            for part in message.removeprefix("state:").split(" (", 1)[0].split(";")
        )
        head = "state " + ",".join(fields)
    return step.STEP, head


@dataclass
class StatefulStats:
    """How much the search did."""

    runs: int = 0
    steps: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    nested: dict[str, int] = field(default_factory=dict)  # steps callbacks carry, by kind
    accepted: dict[str, int] = field(default_factory=dict)  # known difference id -> steps


def compare_step(
    steps: list[Step],
    expected: Observation,
    other: Side,
    step: Step,
    judge: Judge,
    accepted: dict[str, int],
) -> StatefulFailure | None:
    """Run ``step`` on ``other`` and judge its answer against the reference's ``expected``;
    the failure (``steps`` so far) if they disagree or ``other`` gave no answer, else None.
    ``accepted`` counts the steps each known difference was accepted on."""
    try:
        actual = other.execute(step)
    except AdapterError as exc:
        diagnosis = hang_diagnosis(steps) if exc.timed_out else None
        return StatefulFailure(
            list(steps),
            f"no answer: {exc}" + (f": {diagnosis}" if diagnosis else ""),
            report_json(expected, timer_only=judge.timer_only),
            None,
            hung=exc.timed_out,
        )
    absent: frozenset[str] = getattr(other, "last_absent", frozenset())
    message, used = judge.judge(step, expected, actual, absent=absent)
    for ident in used:
        accepted[ident] = accepted.get(ident, 0) + 1
    if message is None:
        return None
    shown = judge.expected if judge.expected is not None else expected
    return StatefulFailure(
        list(steps),
        message,
        report_json(shown, timer_only=judge.timer_only),
        report_json(actual, timer_only=judge.timer_only, absent=absent),
    )


def check_sequence(
    steps: Sequence[Step],
    other: Side,
    reference: ModuleType,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    accepted: dict[str, int] | None = None,
    capabilities: Capabilities | None = None,
) -> StatefulFailure | None:
    """Run ``steps`` on the reference and on ``other``; the first divergence, or None.

    The returned failure's ``steps`` end at the diverging step. ``allow`` and
    ``timer_only`` shape the comparison (``Judge``); ``accepted`` (if given) counts the
    steps each known difference was accepted on. This is what ``kpurgatory conformance
    --replay FILE`` runs.
    """
    ref = DriverSide(reference)
    judge = Judge(allow, timer_only=timer_only, capabilities=capabilities)
    counts: dict[str, int] = {} if accepted is None else accepted
    done: list[Step] = []
    try:
        for step in steps:
            done.append(step)
            failure = compare_step(done, ref.execute(step), other, step, judge, counts)
            if failure is not None:
                return failure
    finally:
        ref.close()
        other.close()
        judge.close()
    return None
