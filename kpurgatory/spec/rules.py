"""The rule index: every rule of docs/spec.md by id, area and title, and nothing more.

docs/spec.md is the one normative text: each rule is a heading ``### R<n> <title>``
under one of the page's ``## <section>`` headings, and its wording lives there only.
This module indexes those headings (``RULES``, in id order) so that code and tests can
name rules; tests/test_rule_coverage.py fails if the index and the headings disagree,
and also if a rule is cited by no test. Rule ids are stable: a rule that changes
meaning gets a new id.

To add a rule: write it in docs/spec.md as ``### R<n> <title>`` (the next free id)
under its section, add ``Rule("R<n>", "<area>", "<title>")`` at the end of ``RULES``
(the area is the key of that section in ``SECTIONS``; the title is the heading's text,
backticks included), and cite the id in at least one test.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "SECTIONS", "SPEC_VERSION", "Rule", "rule"]

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


@dataclass(frozen=True)
class Rule:
    """One rule's index entry: its id, its area (a key of ``SECTIONS``) and its title,
    the text of its docs/spec.md heading. The rule itself is that heading's section."""

    id: str
    area: str
    title: str

    @property
    def section(self) -> str:
        """The docs/spec.md section (``##`` heading) the rule is written under."""
        return SECTIONS[self.area]


RULES: tuple[Rule, ...] = (
    Rule("R1", "timer", "Expiration and due time"),
    Rule("R2", "timer", "Current time"),
    Rule("R3", "timer", "Due at once"),
    Rule("R4", "timer", "Never early"),
    Rule("R5", "timer", "Never late"),
    Rule("R6", "timer", "Hand-over order"),
    Rule("R7", "timer", "Letting time pass"),
    Rule("R8", "timer", "`advance_clock` result"),
    Rule("R9", "timer", "Cancel"),
    Rule("R10", "timer", "Re-add"),
    Rule("R11", "timer", "Cancelled before its turn"),
    Rule("R12", "timer", "Size"),
    Rule("R13", "timer", "Task exceptions"),
    Rule("R14", "timer", "Close"),
    Rule("R15", "timer", "Defaults"),
    Rule("R16", "operation", "`force_complete` exactly once"),
    Rule("R17", "operation", "Expiry"),
    Rule("R18", "operation", "`safe_try_complete`"),
    Rule("R19", "operation", "`safe_try_complete_or_else`"),
    Rule("R20", "operation", "`maybe_try_complete`"),
    Rule("R21", "operation", "Operation lock"),
    Rule("R22", "purgatory", "The `try_complete_else_watch` sequence"),
    Rule("R23", "purgatory", "`try_complete_else_watch` result"),
    Rule("R24", "purgatory", "Watch keys"),
    Rule("R25", "purgatory", "`check_and_complete`"),
    Rule("R26", "purgatory", "Empty watcher lists"),
    Rule("R27", "purgatory", "`watched`"),
    Rule("R28", "purgatory", "`num_delayed`"),
    Rule("R29", "purgatory", "`cancel_for_key`"),
    Rule("R30", "purgatory", "Purge"),
    Rule("R31", "purgatory", "Reaper"),
    Rule("R32", "purgatory", "Shutdown"),
    Rule("R33", "purgatory", "`timer_enabled`"),
    Rule("R34", "purgatory", "One submission per operation"),
    Rule("R35", "inputs", "Numeric and type arguments"),
    Rule("R36", "inputs", "Keys"),
    Rule("R37", "concurrency", "Thread safety"),
    Rule("R38", "purgatory", "A failed call leaves no trace"),
    Rule("R39", "concurrency", "Shutdown and close do not wait for running tasks"),
    Rule("R40", "purgatory", "Abandon"),
    Rule("R41", "concurrency", "Blocking paths honour the pending flag"),
    Rule("R42", "concurrency", "Unbounded timeouts"),
    Rule("R43", "inputs", "Subclasses of TimerTask and DelayedOperation"),
    Rule("R44", "timer", "Next due time"),
    Rule("R45", "aio", "Loop-driven timer"),
    Rule("R46", "aio", "Awaiting an operation"),
    Rule("R47", "aio", "Cancelling a wait abandons"),
    Rule("R48", "aio", "Callback errors"),
    Rule("R49", "aio", "Asyncio shutdown"),
    Rule("R50", "aio", "Loop thread"),
    Rule("R51", "aio", "Virtual time"),
    Rule("R52", "failures", "Callbacks that raise"),
    Rule("R53", "failures", "Sweeps finish, then raise"),
    Rule("R54", "failures", "No trace on every path"),
    Rule("R55", "failures", "`cancel_for_key` honours a knock"),
    Rule("R56", "failures", "`cancel` never fails on a valid operation"),
    Rule("R57", "aio", "Cancelled at any point"),
    Rule("R58", "aio", "Every waiter settles"),
    Rule("R59", "aio", "Checks hold where the state is used"),
    Rule("R60", "timer", "Never early on a real clock"),
    Rule("R61", "purgatory", "Finished operations are let go"),
    Rule("R62", "aio", "One rule for misuse"),
    Rule("R63", "lifecycle", "The operation lock is re-entrant"),
    Rule("R64", "lifecycle", "Shutdown from a callback"),
    Rule("R65", "lifecycle", "An executor that refuses a task"),
    Rule("R66", "lifecycle", "`cancel_for_key` during a submission"),
    Rule("R67", "lifecycle", "Keys that fail during a purge"),
    Rule("R68", "lifecycle", "Lifecycle"),
    Rule("R69", "lifecycle", "Calls from callbacks"),
    Rule("R70", "aio", "Bounded firings"),
    Rule("R71", "aio", "Bounded let-go on the loop"),
    Rule("R72", "aio", "Bounded drain on the loop"),
    Rule("R73", "timer", "Bounded drain"),
    Rule("R74", "lifecycle", "A nested drain before the rest of the batch"),
    Rule("R75", "lifecycle", "A sweep tries the list it took"),
)

_BY_ID = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with id ``rule_id`` (``KeyError`` if there is none)."""
    return _BY_ID[rule_id]
