"""Stateful conformance: Hypothesis generates step sequences; the reference judges every step.

``run_stateful(other)`` drives the state machine of ``kpurgatory.conformance.machine``,
whose rules are the steps of the step language (``kpurgatory.conformance.steps``). Each
generated step runs on the in-process reference (through ``Driver``) and on ``other``,
a ``Side``: another implementation in process (``DriverSide``) or a port behind its
adapter (``AdapterSide``). The two observations are compared with
``compare_observations`` after every step. On a difference Hypothesis shrinks the
sequence, and the result is a ``StatefulFailure`` holding the **shrunk** steps, ready to
print as JSON lines that ``kpurgatory conformance --replay`` (or the porter's own test)
runs again. The machine and the step-by-step check live in their own modules
(``machine``, ``search_machines``, ``side_by_side``); their names are importable from here too.

Needs Hypothesis (the ``conformance`` extra: ``pip install 'kpurgatory[conformance]'``);
``kpurgatory conformance`` imports this module only for ``--stateful`` and ``--replay``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from types import ModuleType

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.driver import DriverSide, sequence_error
from kpurgatory.conformance.machine import KEY_POOL, LIMIT, HangFound
from kpurgatory.conformance.search_machines import make_machine
from kpurgatory.conformance.side_by_side import (
    AdapterSide,
    Side,
    StatefulFailure,
    StatefulStats,
    check_sequence,
    failure_kind,
)
from kpurgatory.conformance.steps import step_to_json
from kpurgatory.spec.known_differences import KnownDifference

__all__ = [
    "KEY_POOL",
    "LIMIT",
    "AdapterSide",
    "DriverSide",
    "Side",
    "StatefulFailure",
    "StatefulStats",
    "check_sequence",
    "failure_kind",
    "format_failure",
    "make_machine",
    "minimize",
    "run_stateful",
]


def run_stateful(
    other: Side,
    *,
    reference: ModuleType,
    max_examples: int = 100,
    step_count: int = 50,
    seed: int | None = None,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    shrink: bool = True,
    capabilities: Capabilities | None = None,
) -> tuple[StatefulFailure | None, StatefulStats]:
    """Search for a sequence on which ``other`` disagrees with ``reference``.

    Returns the shrunk failure (or None) and what the search covered. ``seed`` makes
    the search reproducible; ``allow`` and ``timer_only`` as in ``make_machine``.
    ``shrink=False`` returns the first failing sequence as found (same search, same
    verdict, no time spent shrinking: for measuring what a search catches). A port that
    hangs (no answer within the adapter's timeout) is never shrunk. Errors
    that are not disagreements (a bug in the machine, an interrupt) propagate.
    """
    for name, value in (("max_examples", max_examples), ("step_count", step_count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    failures: list[StatefulFailure] = []
    stats = StatefulStats()
    machine = make_machine(
        other,
        reference,
        failures.append,
        stats,
        allow=allow,
        timer_only=timer_only,
        capabilities=capabilities,
    )
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    quiet = settings(deadline=None, database=None, derandomize=False, verbosity=Verbosity.quiet)
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
    config = settings(
        quiet,
        max_examples=max_examples,
        stateful_step_count=step_count,
        report_multiple_bugs=False,
        phases=phases + ([Phase.shrink] if shrink else []),
        suppress_health_check=list(HealthCheck),
    )
    try:
        run_state_machine_as_test(machine, settings=config)
    except HangFound:  # not shrunk: every try of a port that hangs costs the timeout
        return failures[-1], stats
    except (AssertionError, Flaky):
        # Flaky: a port that answers one sequence two ways (its process restarted after
        # a failure, a race of its own) breaks Hypothesis's replay; the failures already
        # found stand, and the smallest of the first kind is shrunk below instead.
        if not failures:
            raise
        if not shrink:
            return failures[0], stats
        # Hypothesis replays its shrunk example last; then drop what it could not.
        shrunk = failures[-1] if sequence_error(failures[-1].steps) is None else failures[0]
        if shrunk.kind != failures[0].kind:
            shrunk = min(
                (found for found in failures if found.kind == failures[0].kind),
                key=lambda found: len(found.steps),
            )
        return minimize(
            shrunk,
            other,
            reference,
            allow=allow,
            timer_only=timer_only,
            capabilities=capabilities,
        ), stats
    return None, stats


def minimize(
    failure: StatefulFailure,
    other: Side,
    reference: ModuleType,
    budget: int = 200,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    capabilities: Capabilities | None = None,
) -> StatefulFailure:
    """Delete steps from ``failure`` while the sequence still diverges (delta debugging).

    Hypothesis shrinks the choices that generated a run; deleting a step can change
    how later choices are read, so some removable steps survive its shrinking. This
    pass tries removing each step but ``init``, last to first, keeps any removal after
    which the sequence (truncated at its first divergence) still diverges, and repeats
    until nothing more goes or ``budget`` candidate runs were spent. A candidate that is
    not a valid sequence (``sequence_error``: a label used before it is defined, in a
    task's ``on_run`` too) is never run, and a removal is kept only if the candidate
    still fails the same way (``failure_kind``): the failure reported is the one found.
    """
    best = failure
    kind = failure.kind
    spent = 0
    improved = True
    while improved and spent < budget:
        improved = False
        index = len(best.steps) - 2
        while index >= 1 and spent < budget:
            candidate = best.steps[:index] + best.steps[index + 1 :]
            if sequence_error(candidate) is not None:
                index -= 1
                continue
            spent += 1
            try:
                found = check_sequence(
                    candidate,
                    other,
                    reference,
                    allow=allow,
                    timer_only=timer_only,
                    capabilities=capabilities,
                )
            except ValueError:  # StepError: the candidate is not a valid run
                found = None
            if found is not None and found.kind == kind and len(found.steps) < len(best.steps):
                best, improved = found, True
                index = min(index, len(best.steps) - 1)
            index -= 1
    return best


def format_failure(failure: StatefulFailure, command: str, *, shrunk: bool = True) -> str:
    """The report of a failure: where, expected versus actual, then the steps as JSON lines.

    ``shrunk`` says whether the steps came from Hypothesis's shrinking (``--stateful``)
    or were given (``--replay``); only the wording changes.
    """
    step = failure.steps[-1]
    what, sequence = ("stateful", "shrunk failing sequence") if shrunk else ("replay", "sequence")
    if shrunk and failure.hung:
        sequence = "failing sequence (not shrunk: every try of a port that hangs costs the timeout)"
    lines = [
        f"FAIL {what}: step {failure.step_number} ({step.STEP}) of the {sequence} "
        f"below: {failure.message}",
        f"    step:     {json.dumps(step_to_json(step))}",
    ]
    if failure.expected is not None:
        lines.append(f"    expected: {json.dumps(failure.expected)}")
    lines.append(
        f"    actual:   {json.dumps(failure.actual) if failure.actual is not None else '(none)'}"
    )
    lines.append(
        f"{sequence} ({len(failure.steps)} steps, JSON lines; save them to a file and "
        f"run: kpurgatory conformance --adapter {shlex.quote(command)} --replay FILE):"
    )
    lines.append("--- begin steps ---")
    lines.extend(failure.json_lines())
    lines.append("--- end steps ---")
    return "\n".join(lines)
