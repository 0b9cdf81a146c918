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

__all__ = ["SHARED_BUGS", "SharedBug", "all_applied"]


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
                "retry-escapes-rollback/reference",
                "reference.purgatory",
                "DelayedOperationPurgatory._submit",
                "with self._undone_on_error(operation, undo):  # part of the submission (R54)",
                "if True:",
            ),
            _patch(
                "retry-escapes-rollback/optimized",
                "optimized.purgatory",
                "DelayedOperationPurgatory._submit",
                "if not operation._completed and operation._owner is self:",
                "if False:",
            ),
        ),
    ),
    SharedBug(
        "check-stops-at-first-error",
        "check_and_complete re-raises the first callback error at once: the operations "
        "after it on the key are never tried and miss the event (R53).",
        (
            _patch(
                "check-stops-at-first-error/reference",
                "reference.purgatory",
                "DelayedOperationPurgatory.check_and_complete",
                "errors.append(exc)",
                "raise",
            ),
            _patch(
                "check-stops-at-first-error/optimized",
                "optimized.purgatory",
                "DelayedOperationPurgatory.check_and_complete",
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
                "SystemTimer.advance_clock",
                "errors.append(exc)",
                "raise",
            ),
            _patch(
                "drain-stops-at-first-error/optimized",
                "optimized.timer",
                "SystemTimer.advance_clock",
                "errors.append(not_handed_over(exc, task))",
                "raise",
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
                "cancel-for-key-drops-knock/reference",
                "reference.purgatory",
                "DelayedOperationPurgatory.cancel_for_key",
                "if operation._knocked() and not operation._is_finished():",
                "if False:",
            ),
            _patch(
                "cancel-for-key-drops-knock/optimized",
                "optimized.purgatory",
                "DelayedOperationPurgatory.cancel_for_key",
                "if operation._try_complete_pending and not operation._completed:",
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
)
"""Issue items 2, 4 (drain), 5 and 7, the two pending-flag gaps, and the inline
executor half of item 4 (it lives in code both implementations use, so once)."""
