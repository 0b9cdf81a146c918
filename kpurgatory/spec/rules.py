"""The rule index: every rule of docs/spec.md by id, area and title, and who owes it.

docs/spec.md is the one normative text: each rule is a heading ``### R<n> <title>``
under one of the page's ``## <section>`` headings, and its wording lives there only.
This module indexes those headings (``RULES``, in id order) so that code and tests can
name rules; tests/test_rule_coverage.py fails if the index and the headings disagree,
and also if a rule is cited by no test. Rule ids are stable: a rule that changes
meaning gets a new id.

To add a rule: write it in docs/spec.md as ``### R<n> <title>`` (the next free id)
under its section, add ``Rule("R<n>", "<area>", "<title>")`` at the end of ``RULES``
(the area is the key of that section in ``SECTIONS``; the title is the heading's text,
backticks included) and who owes it (below), and cite the id in at least one test.

Who owes a rule is kept here once, for every porting document: ``EVERY_PORT`` (a port
to any language owes it, whether or not the conformance kit can observe it), a key of
``FEATURES`` (a port owes it if it offers that feature), or ``PYTHON_ONLY`` with the
reason (Python's API, types or asyncio: no port owes it). docs/porting.md's "What a
port owes" table is generated from these marks (``python -m tests.docs.owed_rules
--write``), and tests/docs/test_porting_docs.py checks the porting documents against
them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EVERY_PORT",
    "FEATURES",
    "PYTHON_ONLY",
    "RULES",
    "SECTIONS",
    "SPEC_VERSION",
    "Rule",
    "rule",
]

SPEC_VERSION = "1.0"
"""Version of these semantics; conformance vectors record it."""

SECTIONS: dict[str, str] = {
    "timer": "Timer",
    "operation": "Operations",
    "purgatory": "Purgatory",
    "inputs": "Inputs",
    "concurrency": "Concurrency",
    "aio": "asyncio (kpurgatory.aio)",
    "failures": "User code that fails",
    "lifecycle": "Lifecycle and re-entrancy",
}
"""Area key -> the ``##`` section of docs/spec.md that holds the area's rules."""


EVERY_PORT = "every port"
"""``Rule.owed_by`` of a rule that a port to any language owes."""

PYTHON_ONLY = "Python only"
"""``Rule.owed_by`` of a rule about the Python implementation alone (``Rule.why`` says
what in it is Python's): no port owes it."""

FEATURES: dict[str, str] = {
    "pending-flag": "a port that models Kafka 1.1 to 2.6's `maybe_try_complete` (its pending flag)",
    "event-loop": "a port that runs the purgatory on an event loop (porting guide, section 6)",
    "bounded-drain": "a port that offers a bounded `advance_clock` (`max_entries`)",
}
"""Feature -> the ports that owe the rules marked with it (``Rule.owed_by``)."""


@dataclass(frozen=True)
class Rule:
    """One rule's index entry: its id, its area (a key of ``SECTIONS``), its title, the
    text of its docs/spec.md heading, and who owes it. The rule itself is that heading's
    section."""

    id: str
    area: str
    title: str
    owed_by: str = ""
    """``EVERY_PORT``, a key of ``FEATURES`` or ``PYTHON_ONLY`` (tests fail on anything
    else, the empty default included: every rule is decided)."""
    why: str = ""
    """For a ``PYTHON_ONLY`` rule: what in it is Python's, and what a port keeps instead."""

    @property
    def section(self) -> str:
        """The docs/spec.md section (``##`` heading) the rule is written under."""
        return SECTIONS[self.area]


RULES: tuple[Rule, ...] = (
    Rule("R1", "timer", "Expiration and due time", EVERY_PORT),
    Rule("R2", "timer", "Current time", EVERY_PORT),
    Rule("R3", "timer", "Due at once", EVERY_PORT),
    Rule("R4", "timer", "Never early", EVERY_PORT),
    Rule("R5", "timer", "Never late", EVERY_PORT),
    Rule("R6", "timer", "Hand-over order", EVERY_PORT),
    Rule("R7", "timer", "Letting time pass", EVERY_PORT),
    Rule("R8", "timer", "`advance_clock` result", EVERY_PORT),
    Rule("R9", "timer", "Cancel", EVERY_PORT),
    Rule("R10", "timer", "Re-add", EVERY_PORT),
    Rule("R11", "timer", "Cancelled before its turn", EVERY_PORT),
    Rule("R12", "timer", "Size", EVERY_PORT),
    Rule("R13", "timer", "Task exceptions", EVERY_PORT),
    Rule("R14", "timer", "Close", EVERY_PORT),
    Rule(
        "R15",
        "timer",
        "Defaults",
        PYTHON_ONLY,
        "the Python constructor's defaults (a `MonotonicClock`, a worker thread named "
        "`executor-<name>`); a port's API chooses its own, and every conformance step "
        "passes `tick_ms` and `wheel_size`",
    ),
    Rule("R16", "operation", "`force_complete` exactly once", EVERY_PORT),
    Rule("R17", "operation", "Expiry", EVERY_PORT),
    Rule("R18", "operation", "`safe_try_complete`", EVERY_PORT),
    Rule("R19", "operation", "`safe_try_complete_or_else`", EVERY_PORT),
    Rule("R20", "operation", "`maybe_try_complete`", "pending-flag"),
    Rule("R21", "operation", "Operation lock", EVERY_PORT),
    Rule("R22", "purgatory", "The `try_complete_else_watch` sequence", EVERY_PORT),
    Rule("R23", "purgatory", "`try_complete_else_watch` result", EVERY_PORT),
    Rule("R24", "purgatory", "Watch keys", EVERY_PORT),
    Rule("R25", "purgatory", "`check_and_complete`", EVERY_PORT),
    Rule("R26", "purgatory", "Empty watcher lists", EVERY_PORT),
    Rule("R27", "purgatory", "`watched`", EVERY_PORT),
    Rule("R28", "purgatory", "`num_delayed`", EVERY_PORT),
    Rule("R29", "purgatory", "`cancel_for_key`", EVERY_PORT),
    Rule("R30", "purgatory", "Purge", EVERY_PORT),
    Rule("R31", "purgatory", "Reaper", EVERY_PORT),
    Rule("R32", "purgatory", "Shutdown", EVERY_PORT),
    Rule("R33", "purgatory", "`timer_enabled`", EVERY_PORT),
    Rule("R34", "purgatory", "One submission per operation", EVERY_PORT),
    Rule("R35", "inputs", "Numeric and type arguments", EVERY_PORT),
    Rule("R36", "inputs", "Keys", EVERY_PORT),
    Rule("R37", "concurrency", "Thread safety", EVERY_PORT),
    Rule("R38", "purgatory", "A failed call leaves no trace", EVERY_PORT),
    Rule("R39", "concurrency", "Shutdown and close do not wait for running tasks", EVERY_PORT),
    Rule("R40", "purgatory", "Abandon", EVERY_PORT),
    Rule("R41", "concurrency", "Blocking paths honour the pending flag", "pending-flag"),
    Rule("R42", "concurrency", "Unbounded timeouts", EVERY_PORT),
    Rule(
        "R43",
        "inputs",
        "Subclasses of TimerTask and DelayedOperation",
        PYTHON_ONLY,
        "Python's class-creation checks (a subclass that redefines `delay_ms`, abstract "
        "methods, the mypyc build); a port keeps the spirit: a task's delay is fixed when "
        "it is created",
    ),
    Rule("R44", "timer", "Next due time", EVERY_PORT),
    Rule("R45", "aio", "Loop-driven timer", "event-loop"),
    Rule("R46", "aio", "Awaiting an operation", "event-loop"),
    Rule("R47", "aio", "Cancelling a wait abandons", "event-loop"),
    Rule("R48", "aio", "Callback errors", "event-loop"),
    Rule("R49", "aio", "Asyncio shutdown", "event-loop"),
    Rule("R50", "aio", "Loop thread", "event-loop"),
    Rule("R51", "aio", "Virtual time", "event-loop"),
    Rule("R52", "failures", "Callbacks that raise", EVERY_PORT),
    Rule("R53", "failures", "Sweeps finish, then raise", EVERY_PORT),
    Rule("R54", "failures", "No trace on every path", EVERY_PORT),
    Rule("R55", "failures", "`cancel_for_key` honours a knock", "pending-flag"),
    Rule("R56", "failures", "`cancel` never fails on a valid operation", EVERY_PORT),
    Rule(
        "R57",
        "aio",
        "Cancelled at any point",
        PYTHON_ONLY,
        "the points where asyncio can cancel a task (`Task.cancel`, `shield`, "
        "`GeneratorExit`); a port on an event loop keeps R47 with its runtime's own "
        "cancellation",
    ),
    Rule("R58", "aio", "Every waiter settles", "event-loop"),
    Rule(
        "R59",
        "aio",
        "Checks hold where the state is used",
        PYTHON_ONLY,
        "asyncio's loop-and-thread checks of `AsyncPurgatory` (each call on its loop, in "
        "the thread running it)",
    ),
    Rule("R60", "timer", "Never early on a real clock", EVERY_PORT),
    Rule("R61", "purgatory", "Finished operations are let go", EVERY_PORT),
    Rule(
        "R62",
        "aio",
        "One rule for misuse",
        PYTHON_ONLY,
        "how `AsyncPurgatory` refuses a call (its Python exceptions, their order and messages)",
    ),
    Rule("R63", "lifecycle", "The operation lock is re-entrant", EVERY_PORT),
    Rule("R64", "lifecycle", "Shutdown from a callback", EVERY_PORT),
    Rule("R65", "lifecycle", "An executor that refuses a task", EVERY_PORT),
    Rule("R66", "lifecycle", "`cancel_for_key` during a submission", EVERY_PORT),
    Rule("R67", "lifecycle", "Keys that fail during a purge", EVERY_PORT),
    Rule("R68", "lifecycle", "Lifecycle", EVERY_PORT),
    Rule("R69", "lifecycle", "Calls from callbacks", EVERY_PORT),
    Rule("R70", "aio", "Bounded firings", "event-loop"),
    Rule("R71", "aio", "Bounded let-go on the loop", "event-loop"),
    Rule("R72", "aio", "Bounded drain on the loop", "event-loop"),
    Rule("R73", "timer", "Bounded drain", "bounded-drain"),
    Rule("R74", "lifecycle", "A nested drain before the rest of the batch", EVERY_PORT),
    Rule("R75", "lifecycle", "A sweep tries the list it took", EVERY_PORT),
)

_BY_ID = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with id ``rule_id`` (``KeyError`` if there is none)."""
    return _BY_ID[rule_id]
