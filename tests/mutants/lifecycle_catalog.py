"""Planted bugs of the user-code boundary, in both implementations at once (R41, R52-R55).

Each ``SharedBug`` is one bug that an independent review found in code the reference and
the optimized purgatory repeat, planted back as ``tests.mutants.catalog.Mutant`` patches
(one fragment replaced exactly once per function): one in the optimized package and,
where the reference had the same bug, one in the reference, or one in code both use.
Applied together, both implementations are wrong the same way, so the equivalence
machines (reference against optimized) cannot see it; the lifecycle machine of
``tests.machines.fault_machine`` compares each implementation with a model that shares
no code, and ``test_lifecycle_mutants_caught.py`` proves it catches every one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from tests.mutants.catalog import Mutant, applied

__all__ = ["OUTSIDE_THE_MACHINE", "SHARED_BUGS", "SharedBug", "all_applied"]


@dataclass(frozen=True)
class SharedBug:
    """One bug, planted in every place it lives (``patches``, applied together)."""

    name: str
    description: str
    patches: tuple[Mutant, ...]


def _patch(name: str, module: str, target: str, old: str, new: str) -> Mutant:
    return Mutant(name, f"kpurgatory.{module}", target, old, new, "", ("purgatory",))


@contextmanager
def all_applied(bug: SharedBug) -> Iterator[None]:
    """Apply every patch of ``bug`` for the ``with`` block; restore them all after."""
    with ExitStack() as stack:
        for patch in bug.patches:
            stack.enter_context(applied(patch))
        yield


SHARED_BUGS: tuple[SharedBug, ...] = (
    SharedBug(
        "retry-escapes-rollback",
        "The R41 retry after the submission's lock is released raises, and the submission "
        "is not rolled back: the call raises, yet the operation stays watched, timed and "
        "claimed (R38, R54).",
        (
            _patch(
                "retry-escapes-rollback",
                "protocol",
                "Purgatory._retry",
                "with operation._lock:\n            self._rolled_back(",
                "if False:\n            self._rolled_back(",
            ),
        ),
    ),
    SharedBug(
        "check-stops-at-first-error",
        "check_and_complete re-raises the first callback error at once: the operations "
        "after it on the key are never tried and miss the event (R53).",
        (
            _patch(
                "check-stops-at-first-error",
                "protocol",
                "Purgatory.check_and_complete",
                "errors.append(exc)",
                "raise",
            ),
        ),
    ),
    SharedBug(
        "drain-stops-at-first-error",
        "A drain re-raises the first hand-over error at once: the other tasks it took out "
        "of the schedule are never handed over, lost for good (R53).",
        (
            _patch(
                "drain-stops-at-first-error/reference",
                "reference.timer",
                "SystemTimer._hand_over_drained",
                "errors.append(exc)",
                "raise",
            ),
            _patch(
                "drain-stops-at-first-error/optimized",
                "optimized.timer",
                "SystemTimer._hand_over_collected",
                "errors.append(error)",
                "raise error",
            ),
        ),
    ),
    SharedBug(
        "inline-executor-keeps-base-exceptions",
        "The InlineExecutor (shared by both) keeps a KeyboardInterrupt, SystemExit or "
        "CancelledError raised by an expiry in its future, where nobody looks: the drain "
        "returns as if nothing happened (R13, R52).",
        (
            _patch(
                "inline-executor-keeps-base-exceptions",
                "executors",
                "InlineExecutor.submit",
                "future.set_exception(exc)\n        raise",
                "future.set_exception(exc)",
            ),
        ),
    ),
    SharedBug(
        "cancel-for-key-drops-knock",
        "cancel_for_key ignores a maybe_try_complete that found the operation's lock held "
        "by it: the knock is lost (R55).",
        (
            _patch(
                "cancel-for-key-drops-knock",
                "protocol",
                "Purgatory.cancel_for_key",
                "if operation._try_complete_pending and operation._state < FINISHED:",
                "if False:",
            ),
        ),
    ),
    SharedBug(
        "pending-flag-not-cleared",
        "The blocking path does not clear the pending flag before try_complete: after a "
        "knock nobody took, safe_try_complete on a not-ready operation spins (R41).",
        (
            _patch(
                "pending-flag-not-cleared/reference",
                "reference.operation",
                "DelayedOperation._safe_try_complete_for",
                "self._try_complete_pending.set(False)",
                "pass",
            ),
            _patch(
                "pending-flag-not-cleared/optimized",
                "optimized.operation",
                "DelayedOperation._safe_try_complete_for",
                "self._try_complete_pending = False",
                "pass",
            ),
        ),
    ),
    SharedBug(
        "or-else-skips-the-retry",
        "safe_try_complete_or_else returns True instead of making the attempt a knocker "
        "left to it (R19, R41).",
        (
            _patch(
                "or-else-skips-the-retry/reference",
                "reference.operation",
                "DelayedOperation.safe_try_complete_or_else",
                "return self.safe_try_complete()",
                "return True",
            ),
            _patch(
                "or-else-skips-the-retry/optimized",
                "optimized.operation",
                "DelayedOperation.safe_try_complete_or_else",
                "return self.safe_try_complete()",
                "return True",
            ),
        ),
    ),
    SharedBug(
        "drain-ignores-its-own-close",
        "A drain does not look at the timer again after each hand-over: when an expiry "
        "shuts the purgatory down, the other operations of the same drain still run "
        "on_complete and on_expiration (R64, R32).",
        (
            _patch(
                "drain-ignores-its-own-close/reference",
                "reference.timer",
                "SystemTimer._hand_over_drained",
                "break  # closed by a task of this drain: nothing more is handed over (R64)",
                "pass",
            ),
            _patch(
                "drain-ignores-its-own-close/optimized",
                "optimized.timer",
                "SystemTimer._hand_over_collected",
                "break  # closed by a task of this drain: nothing more is handed over (R64)",
                "pass",
            ),
        ),
    ),
    SharedBug(
        "executor-refusal-swallowed",
        "An executor whose submit raises RuntimeError while the timer is open (a pool that "
        "cannot start a thread) is taken for a shut-down one: the task is dropped quietly, "
        "a due submission returns False and stays watched, a drain returns (R65).",
        (
            _patch(
                "executor-refusal-swallowed/reference",
                "reference.timer",
                "SystemTimer._hand_over",
                "if self._closed and isinstance(exc, RuntimeError):",
                "if isinstance(exc, RuntimeError):",
            ),
            _patch(
                "executor-refusal-swallowed/optimized",
                "optimized.timer",
                "SystemTimer._hand_over",
                "if self._closed and isinstance(exc, RuntimeError):",
                "if isinstance(exc, RuntimeError):",
            ),
        ),
    ),
    SharedBug(
        "cancel-for-key-leaves-it-timed",
        "cancel_for_key from a try_complete of an operation being submitted returns it, "
        "and the submission then adds it to the timer, where it expires (R66).",
        (
            _patch(
                "cancel-for-key-leaves-it-timed",
                "protocol",
                "Purgatory.cancel_for_key",
                "operation._untimed = True  # its submission, if under way, adds none (R66)",
                "pass",
            ),
        ),
    ),
)
"""Issue items 2, 4 (drain), 5 and 7, the two pending-flag gaps, the inline executor
half of item 4 (it lives in code both implementations use, so once), and the
re-entrancy bugs the lifecycle machine's nested calls catch (R64-R66)."""

OUTSIDE_THE_MACHINE: tuple[SharedBug, ...] = (
    SharedBug(
        "purge-lets-a-key-error-escape",
        "A key whose hash or equality raises during the idle purge (R61) escapes the "
        "unrelated force_complete that purged, before its on_complete ran (R67). The "
        "machine's keys cannot raise later (its poisoned key raises at its first read), "
        "so a deterministic regression test catches this one.",
        (
            _patch(
                "purge-lets-a-key-error-escape/reference",
                "reference.purgatory",
                "DelayedOperationPurgatory._purge_watchers",
                "interrupt = key_failed_in_purge(logger, self._name, key, failed.error)"
                " or interrupt",
                "raise failed.error",
            ),
            _patch(
                "purge-lets-a-key-error-escape/optimized",
                "optimized.purgatory",
                "DelayedOperationPurgatory._key_failed",
                "return key_failed_in_purge(logger, self._name, key, exc)",
                "raise exc",
            ),
        ),
    ),
    SharedBug(
        "plain-lock-accepted",
        "An operation lock its holder cannot take again (threading.Lock, Semaphore) is "
        "accepted, and an operation due at once deadlocks in its own submission on an "
        "inline executor (R63). A construction-time rule: a test catches it.",
        (
            _patch(
                "plain-lock-accepted/reference",
                "reference.operation",
                "DelayedOperation.__init__",
                "require_operation_lock(lock)",
                "(lock if isinstance(lock, AbstractLock) else require_operation_lock(lock))",
            ),
            _patch(
                "plain-lock-accepted/optimized",
                "optimized.operation",
                "DelayedOperation.__init__",
                "require_operation_lock(lock)",
                "(lock if isinstance(lock, AbstractLock) else require_operation_lock(lock))",
            ),
        ),
    ),
)
"""Re-entrancy bugs (R63, R67) the machine cannot reach by design; each is caught by the
deterministic check named in test_lifecycle_mutants_caught.py."""
