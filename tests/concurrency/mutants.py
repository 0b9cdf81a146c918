"""Known-wrong variants of the reference, each a bug Kafka shipped or nearly shipped.

The controlled-schedule tests must catch every one of them (tests/concurrency/
test_mutants.py asserts it), which shows they can fail. Each mutant subclasses a
reference class and overrides one method with the broken version, keeping every
other line of the real code.

* ``PlainTryLockOperation``: Kafka 1.0's ``maybeTryComplete`` (try-lock once, give up
  if busy), the lost completion of KAFKA-6653.
* ``NonAtomicCompletedOperation``: ``force_complete`` checks the completed flag and
  sets it in two steps, so two callers can both win.
* ``RunWithoutCasOperation``: expiry sets the flag without compare-and-set (trusting
  its lock), so it races a ``force_complete`` that does not hold the lock.
* ``WatchAfterCheckPurgatory``: ``try_complete_else_watch`` makes its final
  ``try_complete`` before watching the keys (the order the 2.7 rewrite had to keep
  right), so an event between the check and the watch is missed.
* ``LockedCheckPurgatory``: ``check_and_complete`` calls ``try_complete`` under the
  purgatory lock (KAFKA-3994's deadlock).
* ``SilentAddTimer``: ``add`` does not notify the timer's condition, so a waiting
  ``advance_clock`` is never woken for an earlier task (a lost wake-up).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kpurgatory._checks import watch_key_list
from kpurgatory.reference import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
)
from kpurgatory.reference import timer as reference_timer
from kpurgatory.spec.arithmetic import due_time, expiration_ms, is_due
from tests.concurrency.scenarios import Impl, implementation

__all__ = [
    "MUTANTS",
    "LockedCheckPurgatory",
    "NonAtomicCompletedOperation",
    "PlainTryLockOperation",
    "RunWithoutCasOperation",
    "SilentAddTimer",
    "WatchAfterCheckPurgatory",
    "mutant",
]


class PlainTryLockOperation(DelayedOperation):
    """Mutant: Kafka 1.0.x ``maybeTryComplete`` with no pending flag (KAFKA-6653)."""

    def maybe_try_complete(self) -> bool:
        if self._lock.acquire(blocking=False):
            try:
                return self.try_complete()
            finally:
                self._lock.release()
        return False


class NonAtomicCompletedOperation(DelayedOperation):
    """Mutant: the completed flag is read, then written (no compare-and-set)."""

    def force_complete(self) -> bool:
        if not self._completed.get():
            self._completed.set(True)
            TimerTask.cancel(self)
            self.on_complete()
            return True
        return False


class RunWithoutCasOperation(DelayedOperation):
    """Mutant: expiry checks and sets the flag under the lock instead of compare-and-set."""

    def run(self) -> None:
        with self._lock:
            if not self._completed.get():
                self._completed.set(True)
                TimerTask.cancel(self)
                self.on_complete()
                self.on_expiration()


class WatchAfterCheckPurgatory(DelayedOperationPurgatory[Any]):
    """Mutant: both tries first, then watch (an event in between is never checked)."""

    def try_complete_else_watch(self, operation: Any, watch_keys: Iterable[Hashable]) -> bool:
        keys = watch_key_list(watch_keys)
        if not operation._claim_submission(self):
            raise ValueError("already submitted")
        if operation.safe_try_complete() or operation.safe_try_complete():
            return True
        for key in keys:
            if operation.is_completed:
                break
            with self._lock:
                self._watchers.setdefault(key, []).append(operation)
        with self._lock:
            self._estimated_total_operations += 1
        if not operation.is_completed:
            self._timer.add(operation)
            if operation.is_completed:
                TimerTask.cancel(operation)
        return False


class LockedCheckPurgatory(DelayedOperationPurgatory[Any]):
    """Mutant: ``check_and_complete`` holds the purgatory lock around ``try_complete``.

    Kafka 0.10.0-0.10.1 iterated a watcher list under its lock and called
    ``tryComplete`` there (KAFKA-3994): purgatory lock, then operation lock, the
    reverse of ``try_complete_else_watch``'s order, so the two can deadlock.
    """

    def check_and_complete(self, key: Hashable) -> int:
        completed = 0
        with self._lock:
            for operation in list(self._watchers.get(key, ())):
                if operation.is_completed:
                    self._unwatch(key, operation)
                elif operation.safe_try_complete():
                    completed += 1
                    self._unwatch(key, operation)
        return completed


class SilentAddTimer(SystemTimer):
    """Mutant: ``add`` schedules the task without notifying the timer's condition, so an
    ``advance_clock`` already waiting never hears of it (a lost wake-up)."""

    def add(self, task: TimerTask) -> None:
        with reference_timer._STATE_LOCK:
            due = due_time(expiration_ms(self._clock.now_ms(), task.delay_ms), self._tick_ms)
            old = task._entry
            if old is not None:
                old.timer._pending.pop(old, None)
                task._entry = None
            if not is_due(due, self._current_time):
                entry = reference_timer._Entry(self, task, due)
                task._entry = entry
                self._pending[entry] = None
                return
        self._hand_over(task)


MUTANTS: dict[str, dict[str, type[Any]]] = {
    "plain_try_lock": {"operation": PlainTryLockOperation},
    "non_atomic_completed": {"operation": NonAtomicCompletedOperation},
    "run_without_cas": {"operation": RunWithoutCasOperation},
    "watch_after_check": {"purgatory": WatchAfterCheckPurgatory},
    "locked_check": {"purgatory": LockedCheckPurgatory},
    "silent_add": {"timer": SilentAddTimer},
}
"""Mutant name -> the reference classes it replaces."""


def mutant(name: str) -> Impl:
    """The reference implementation with mutant ``name``'s classes swapped in."""
    base = implementation("reference")
    replaced = MUTANTS[name]
    return Impl(
        f"reference+{name}",
        replaced.get("operation", base.operation),
        replaced.get("purgatory", base.purgatory),
        replaced.get("timer", base.timer),
        base.task,
    )
