"""The result of replaying one vector through an adapter, and the report of a replay.

``VectorResult`` says what happened to one vector (passed, failed at a step, or not
consumed); ``format_report`` turns a replay's results into the text ``kpurgatory
conformance`` prints: a line per vector, the details of each failure, the known
differences accepted, and what the replay did not cover.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpurgatory.conformance.adapter_process import STEP_KINDS
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.steps import NESTED_FIELDS, TIMER_STEP_KINDS
from kpurgatory.spec.known_differences import KnownDifference

__all__ = ["BEFORE_TAIL", "VectorResult", "absent_line", "earlier_steps", "format_report"]


@dataclass
class VectorResult:
    """What happened to one vector: ``status`` is ``passed``, ``failed`` or ``not consumed``.

    ``failed``: the adapter answered every step up to ``step_index`` (0-based; reports
    print step numbers from 1) and that answer disagrees with the reference
    (``message``, ``expected`` and ``actual`` say how). ``not consumed``: the adapter
    stopped answering at ``step_index`` (exit, timeout, ``{"error": ...}``, malformed
    answer), the vector itself could not be read, or it was not sent (``--timer-only``
    and the vector uses purgatory steps). ``accepted`` maps each known difference the
    comparison accepted (``--allow``) to the step numbers where it did.
    """

    name: str
    path: Path
    status: str
    steps: int
    answered: int  # steps answered with an observation (right or wrong)
    step_index: int | None = None
    message: str = ""
    step: dict[str, Any] | None = None
    expected: dict[str, Any] | None = None
    actual: dict[str, Any] | None = None
    stderr: str = ""
    kinds_answered: set[str] = field(default_factory=set)
    description: str = ""
    rules: tuple[str, ...] = ()
    before: list[dict[str, Any]] = field(default_factory=list)
    accepted: dict[str, list[int]] = field(default_factory=dict)
    sent: bool = True
    absent: set[str] = field(default_factory=set)  # state fields answered null
    skipped: int = 0  # read-only steps left out: the port declares them absent


BEFORE_TAIL = 15
"""How many of the steps just before a failing one a report prints (plus the ``init``
and every step whose task or operation performs steps from a callback, whose effects
show much later)."""


def earlier_steps(before: Sequence[dict[str, Any]]) -> list[str]:
    """Report lines for the steps before a failing one, numbered from 1.

    All of them if there are few; otherwise the ``init``, every ``add`` with ``on_run``
    steps and every ``watch`` with callback steps, and the last ``BEFORE_TAIL``, with the
    gaps marked.
    """
    keep = {
        index
        for index, step in enumerate(before)
        if index == 0
        or index >= len(before) - BEFORE_TAIL
        or any(step.get(name) for name in NESTED_FIELDS)
    }
    lines: list[str] = []
    previous = -1
    for index in sorted(keep):
        if index > previous + 1:
            lines.append(f"      ... steps {previous + 2}-{index} (see the vector file)")
        lines.append(f"      {index + 1:>4}  {json.dumps(before[index])}")
        previous = index
    return lines


def format_report(
    results: Sequence[VectorResult],
    command: str,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    capabilities: Capabilities | None = None,
) -> str:
    """The text report of a vector replay: one line per vector, details for each failure,
    the known differences accepted, then the completeness section (vectors not consumed,
    step kinds never answered). Step numbers start at 1, like the ``N of M`` they sit in."""
    lines = [f"conformance: {len(results)} vectors through adapter {command!r}"]
    if allow:
        lines.append("accepting known differences: " + ", ".join(d.id for d in allow))
    if timer_only:
        lines.append("timer steps only (--timer-only): vectors with purgatory steps are not sent")
    caps = Capabilities() if capabilities is None else capabilities
    if caps.describe():
        lines.append(f"port capabilities: {caps.describe()}; vectors that need more are not sent")
    for result in results:
        lines.extend(_result_lines(result, command))
    lines.extend(_summary_lines(results, allow, timer_only, caps))
    return "\n".join(lines)


def _result_lines(result: VectorResult, command: str) -> list[str]:
    """One vector's lines: PASS, or the failure with its context and how to replay it."""
    accepted = "".join(
        f"; accepted {ident} at step{'s' if len(at) > 1 else ''} {_numbers(at)}"
        for ident, at in sorted(result.accepted.items())
    )
    left_out = f"{result.skipped} next_due_time steps (declared absent)" if result.skipped else ""
    if result.status == "passed":
        note = f"; left out {left_out}" if left_out else ""
        return [f"PASS {result.name} ({result.steps} steps{accepted}{note})"]
    label = "FAIL" if result.status == "failed" else "NOT CONSUMED"
    if result.step_index is None:
        return [f"{label} {result.name}: {result.message}"]
    lines = []
    lines.append(
        f"{label} {result.name}: step {result.step_index + 1} of {result.steps}"
        + (f" ({result.step['step']})" if result.step else "")
        + f": {result.message}"
    )
    if result.description or result.rules:
        lines.append(f"    vector:   {result.description} (rules: {', '.join(result.rules)})")
    if accepted:
        lines.append(f"    accepted: {accepted.removeprefix('; accepted ')}")
    if left_out:
        lines.append(f"    left out: {left_out}")
    if result.before:
        lines.append(f"    before:   steps 1-{len(result.before)}:")
        lines.extend(earlier_steps(result.before))
    if result.step is not None:
        lines.append(f"    step:     {json.dumps(result.step)}")
    if result.expected is not None:
        lines.append(f"    expected: {json.dumps(result.expected)}")
    if result.actual is not None:
        lines.append(f"    actual:   {json.dumps(result.actual)}")
    if result.stderr:
        tail = result.stderr.rstrip().splitlines()[-5:]
        lines.extend(f"    stderr: {line}" for line in tail)
    lines.append(
        f"    replay:   kpurgatory conformance --adapter {shlex.quote(command)} "
        f"--vectors {shlex.quote(str(result.path))}"
    )
    return lines


def _summary_lines(
    results: Sequence[VectorResult],
    allow: Sequence[KnownDifference],
    timer_only: bool,
    caps: Capabilities,
) -> list[str]:
    """The summary, the known differences accepted and the completeness section."""
    lines: list[str] = []
    passed = sum(result.status == "passed" for result in results)
    failed = sum(result.status == "failed" for result in results)
    unconsumed = [result for result in results if result.status == "not consumed"]
    lines.append(
        f"summary: {passed} passed, {failed} failed, {len(unconsumed)} not consumed "
        f"(of {len(results)})"
    )
    if allow:
        lines.append("known differences accepted:")
        for difference in allow:
            where = [
                f"{result.name} ({_numbers(result.accepted[difference.id])})"
                for result in results
                if difference.id in result.accepted
            ]
            lines.append(
                f"  {difference.id} ({difference.rule}, {difference.summary}): "
                + ("; ".join(where) if where else "never needed")
            )
    lines.append("completeness:")
    if unconsumed:
        lines.append(
            "  vectors not consumed: "
            + ", ".join(
                f"{r.name} (answered {r.answered}/{r.steps}{'' if r.sent else ', not sent'})"
                for r in unconsumed
            )
        )
    else:
        lines.append("  every vector was consumed to its end or to its first divergence")
    answered = set().union(*(result.kinds_answered for result in results)) if results else set()
    kinds = [kind for kind in STEP_KINDS if not timer_only or kind in TIMER_STEP_KINDS]
    missing = [kind for kind in kinds if kind not in answered and caps.has(kind)]
    lines.append("  step kinds never answered: " + (", ".join(missing) if missing else "none"))
    if caps.describe():
        lines.append(f"  not checked: {caps.describe()}")
    absent = set().union(*(result.absent for result in results)) if results else set()
    if absent:
        lines.append("  " + absent_line(absent))
    return lines


def absent_line(absent: Iterable[str]) -> str:
    """The report line naming the state fields an adapter declared absent."""
    names = sorted(name.removeprefix("state.") for name in absent)
    return f"state fields declared absent (answered null, not compared): {', '.join(names)}"


def _numbers(at: Sequence[int], limit: int = 8) -> str:
    """``1, 4, 9`` (step numbers), cut after ``limit`` with a count of the rest."""
    text = ", ".join(str(number) for number in at[:limit])
    return text if len(at) <= limit else f"{text}, ... ({len(at)} steps)"
