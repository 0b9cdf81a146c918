"""Race bugs planted for the history checker: each one a bug Kafka shipped or a shape
of one, as a one-fragment source patch (``tests.mutants.catalog.Mutant``).

Every mutant here is a race: a program run with its threads one after another cannot
show it (tests/history/test_mutants.py checks that too), so a catch is the checker
seeing an interleaving the spec forbids on real threads. ``WEIGHTS`` biases the random
programs of a mutant's catch test toward the calls its race needs (a program still
draws every kind of call).
"""

from __future__ import annotations

from tests.mutants.catalog import Mutant
from tests.mutants.patching import OPERATION, PURGATORY

__all__ = ["HISTORY_MUTANTS", "WEIGHTS"]

_REF_OPERATION = "kpurgatory.reference.operation"
_SWEEP_ATTEMPT = "            elif operation._safe_try_complete_for(self):\n"

HISTORY_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "double-completion",
        _REF_OPERATION,
        "DelayedOperation.force_complete",
        "with self._flags:  # compare-and-set: not finished -> completed (R68)\n"
        "        won = self._state < FINISHED\n        if won:\n"
        "            self._state |= COMPLETED\n    if won:\n        self._unschedule()",
        "won = self._state < FINISHED\n    if won:\n        self._unschedule()\n"
        "        with self._flags:\n            self._state |= COMPLETED",
        "force_complete reads the state, cancels the timer entry, then sets it completed "
        "(no compare-and-set): two racing callers both win and on_complete runs "
        "twice (R16).",
    ),
    Mutant(
        "lost-cancel",
        PURGATORY,
        "DelayedOperationPurgatory.cancel_for_key",
        "            with operation._lock:\n                operation._unschedule()\n"
        "                operation._untimed = True",
        "            operation._unschedule()\n            operation._untimed = True",
        "cancel_for_key cancels the timer entry without the operation's lock: between a "
        "submission's watch and its timer add there is no entry yet, the add comes after, "
        "and the operation it returned expires later (R29).",
    ),
    Mutant(
        "sweep-try-lock",
        PURGATORY,
        "DelayedOperationPurgatory.check_and_complete",
        _SWEEP_ATTEMPT,
        "            elif operation.maybe_try_complete():\n",
        "check_and_complete tries each operation with maybe_try_complete (a try-lock that "
        "knocks) instead of taking the lock: a busy operation is left to its holder, so "
        "the sweep neither completes nor counts it (R25).",
    ),
    Mutant(
        "sweep-without-lock",
        PURGATORY,
        "DelayedOperationPurgatory.check_and_complete",
        _SWEEP_ATTEMPT,
        "            elif operation.try_complete():\n",
        "check_and_complete calls try_complete without the operation's lock: it overlaps "
        "another thread's try_complete or expiry of the same operation (R17, R25).",
    ),
    Mutant(
        "ignored-knock",
        OPERATION,
        "DelayedOperation._safe_try_complete_for",
        "if not self._try_complete_pending:",
        "if True:",
        "the blocking paths never look at the pending flag after releasing the lock: a "
        "maybe_try_complete that found the lock held loses its attempt (R41, KAFKA-8334).",
    ),
    Mutant(
        "kafka-6653-lost-completion",
        PURGATORY,
        "DelayedOperationPurgatory.check_and_complete",
        _SWEEP_ATTEMPT,
        "            elif operation._lock.acquire(blocking=False) and "
        "(operation.try_complete(), operation._lock.release())[0]:\n",
        "Kafka 1.0's sweep: check_and_complete tries each operation's lock once and skips "
        "it if busy, never retrying; the holder does not know an event came, so the "
        "completion waits for the timeout (KAFKA-6653, R25).",
    ),
)
"""The planted races, each caught by the history checker on real threads."""

WEIGHTS: dict[str, dict[str, int]] = {
    "double-completion": {"force": 12, "set_ready": 0, "check": 0, "cancel_for_key": 0},
    "lost-cancel": {"cancel_for_key": 4, "advance": 1, "set_ready": 1},
    "sweep-try-lock": {"check": 4, "set_ready": 3, "safe_try": 2, "maybe_try": 1},
    "sweep-without-lock": {"check": 4, "set_ready": 2, "safe_try": 2, "maybe_try": 2},
    "ignored-knock": {"maybe_try": 4, "set_ready": 3, "check": 2, "safe_try": 2},
    "kafka-6653-lost-completion": {"check": 4, "set_ready": 3, "safe_try": 2, "maybe_try": 1},
}
"""Per mutant, the call weights of its programs (the kinds not named weigh 1)."""
