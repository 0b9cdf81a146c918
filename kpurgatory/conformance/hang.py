"""Why a port that stopped answering hangs: the callback it was in and the rule it breaks.

A port that deadlocks never answers; the adapter client stops it after its per-answer
timeout (``AdapterProcess``). That alone says nothing a porter can act on, so the kit
replays the run so far on the reference, which never hangs there, and reads the calls
back into the library that the hanging step made from user code (``Driver.calls_in``):
a ``check_and_complete`` from an operation's ``try_complete`` that tries the same
operation again, the timer running an operation due at once inside its own submission,
a ``shutdown`` from an ``on_complete``. ``hang_diagnosis`` names the first such call
and the rule it depends on: R63 when the call takes an operation lock the library
already holds (a lock that is not re-entrant deadlocks there), R64 for a shutdown or
close, R66 for ``cancel_for_key`` from a ``try_complete``, R74 for a nested drain, R69
for any other call back in. Without a lock taken again, a drain, shutdown or close is
named before the step's other calls: it waits for the timer's or purgatory's own lock.
A step that made no call back in gets no diagnosis (None): the hang is the port's alone,
and the plain timeout message stands.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from types import ModuleType

from kpurgatory import steps as language
from kpurgatory.conformance.driver import CallIn, Driver, StepError
from kpurgatory.conformance.steps import Step, step_to_json

__all__ = ["HANG_RULES", "describe_call_in", "hang_diagnosis", "rule_of"]

HANG_RULES: dict[str, str] = {
    "R63": "an operation lock that is not re-entrant deadlocks there (R63)",
    "R64": "shutdown and close from a callback must return (R64)",
    "R66": "cancel_for_key from a try_complete must return (R66)",
    "R69": "a callback may make this call (R69)",
    "R74": "a task or callback may drain a timer, nested in the drain or add that runs it "
    "(R69, R74)",
}
"""What each rule a hang is traced to asks of the port, as the diagnosis words it."""


NESTED_DRAINS = (language.Advance, language.PurgatoryAdvance)
"""Calls back in that drain: they take the lock a timer holds while it adds or drains."""

BLOCKING_CALLS = (*NESTED_DRAINS, language.Shutdown, language.Close)
"""Calls back in that wait for a lock of the whole timer or purgatory (a drain, a
shutdown or close): named before the others of a step when none re-enters a held
operation lock, since a port that runs user code under such a lock hangs there."""


def rule_of(call: CallIn) -> str:
    """The rule a port that hangs on ``call`` breaks first (module docstring)."""
    if call.reenters is not None:
        return "R63"
    if isinstance(call.step, language.Shutdown | language.Close):
        return "R64"
    if isinstance(call.step, language.CancelForKey) and call.callback == "try_complete":
        return "R66"
    if isinstance(call.step, NESTED_DRAINS):
        return "R74"
    return "R69"


def describe_call_in(call: CallIn) -> str:
    """One call back in, in words: where it ran, what it called, which lock it takes again
    (it follows "the port hangs in")."""
    step = call.step
    if call.callback == "run" and isinstance(step, language.Watch) and step.operation == call.owner:
        return (
            f"the run of operation {call.owner!r}, which the timer hands over at once inside "
            f"its own submission: the run takes the operation's lock, which the submission holds"
        )
    kind = "task" if call.callback == "run" else "operation"
    where = f"the {call.callback} of {kind} {call.owner!r}, which calls {_call_text(step)}"
    if call.reenters is None:
        held = ", ".join(repr(label) for label in call.locked)
        return where + (f" (the library holds the lock of {held})" if held else "")
    if isinstance(step, language.Cancel):
        verb = "abandons"
    elif isinstance(step, language.CancelForKey):
        verb = "cancels the timer entry of"
    else:
        verb = "tries"
    return (
        f"{where}: that {verb} operation {call.reenters!r} and takes its lock, which the "
        f"library already holds"
    )


def hang_diagnosis(steps: Sequence[Step], reference: ModuleType | None = None) -> str | None:
    """Why a port hangs in the last of ``steps`` (a run from its ``init``), or None.

    Replays ``steps`` on ``reference`` (``kpurgatory.reference`` by default) and
    describes the first call back in of the last step that takes a held operation lock
    again, else its first call back in at all, with the rule (``rule_of``). None if that
    step made no call back in, or the steps are not a run the driver accepts."""
    start = max((i for i, step in enumerate(steps) if isinstance(step, language.Init)), default=-1)
    if start < 0:
        return None
    driver = Driver(reference or importlib.import_module("kpurgatory.reference"))
    try:
        for step in steps[start:]:
            driver.execute(step)
    except StepError:
        return None
    finally:
        driver.close()
    calls = driver.calls_in
    if not calls:
        return None
    call = next(
        (c for c in calls if c.reenters is not None),
        next((c for c in calls if isinstance(c.step, BLOCKING_CALLS)), calls[0]),
    )
    return f"the port hangs in {describe_call_in(call)}: {HANG_RULES[rule_of(call)]}"


def _call_text(step: Step) -> str:
    """A nested step as the call it makes, e.g. ``check_and_complete("k")``."""
    data = step_to_json(step)
    kind = data.pop("step")
    args = ", ".join(json.dumps(value) for value in data.values() if value not in ([], None))
    return f"{kind}({args})"
