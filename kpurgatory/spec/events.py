"""The event model: what an observer records while driving a timer or purgatory.

Stateful machines, replays and conformance vectors all describe a run the same way:
a list of *steps* (calls made on the implementation) and, after each step, the
*events* it caused (tasks run, operations completed or expired) plus the observable
state. Names are plain strings so the records serialize to JSON for other languages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["CompletionVia", "Event", "OperationCompleted", "OperationExpired", "TaskRan", "to_json"]

CompletionVia = Literal[
    "try_complete_else_watch",  # completed by one of that call's try_complete attempts
    "check_and_complete",  # completed by a check_and_complete on one of its keys
    "force_complete",  # completed by a direct force_complete from outside the purgatory
    "expiry",  # completed by the timer (run): on_expiration followed
]


# The event classes share one shape deliberately: each is a frozen record of one event.
@dataclass(frozen=True)
class TaskRan:
    """A timer task's ``run`` was called, at virtual time ``at_ms``."""

    task: str
    at_ms: int
    kind: Literal["task_ran"] = "task_ran"


@dataclass(frozen=True)
class OperationCompleted:
    """An operation's ``on_complete`` ran, at virtual time ``at_ms``, by way of ``via``."""

    operation: str
    at_ms: int
    via: CompletionVia
    kind: Literal["completed"] = "completed"


@dataclass(frozen=True)
class OperationExpired:
    """An operation's ``on_expiration`` ran (after its ``on_complete``), at ``at_ms``."""

    operation: str
    at_ms: int
    kind: Literal["expired"] = "expired"


Event = TaskRan | OperationCompleted | OperationExpired


def to_json(event: Event) -> dict[str, object]:
    """The event as a JSON-ready dict (its ``kind`` field says which event it is)."""
    return asdict(event)
