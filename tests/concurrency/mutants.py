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
from kpurgatory.protocol import COMPLETED, FINISHED
from kpurgatory.reference import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
)
from kpurgatory.reference import timer as reference_timer
from kpurgatory.spec.arithmetic import due_time, expiration_ms, is_due
from tests.concurrency.scenarios import Impl, implementation
from tests.mutants.catalog import Mutant

__all__ = [
    "BUG_PATCHES",
    "GAP_PATCHES",
    "LOCK_PATCHES",
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
    """Mutant: the state is read, then written (no compare-and-set): the flag lock is
    taken only for the write."""

    def force_complete(self) -> bool:
        if self._state < FINISHED:
            with self._flags:
                self._state |= COMPLETED
            TimerTask.cancel(self)
            self.on_complete()
            return True
        return False


class RunWithoutCasOperation(DelayedOperation):
    """Mutant: expiry checks and sets the flag under the lock instead of compare-and-set."""

    def run(self) -> None:
        with self._lock:
            if self._state < FINISHED:
                with self._flags:
                    self._state |= COMPLETED
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
                    self._unwatch_key(key, operation)
                elif operation.safe_try_complete():
                    completed += 1
                    self._unwatch_key(key, operation)
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


# -- lock removals and issue 11's bugs, as source patches on both packages -----------------

_R = "kpurgatory.reference"
_O = "kpurgatory.optimized"
_P = "kpurgatory.protocol"

LOCK_PATCHES: tuple[Mutant, ...] = (
    Mutant(
        "opt-unwatch-lookup-unlocked",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory._unwatch_key",
        "with shard.lock:",
        "if True:",
        "(d) unlinking an operation looks its key's watcher list up without the shard lock: "
        "a read only (a lockset of writes alone misses it; the unlink itself stays locked).",
    ),
    Mutant(
        "ref-purge-without-lock",
        f"{_R}.purgatory",
        "DelayedOperationPurgatory._purge_pass",
        "with self._lock:",
        "if True:",
        "(a) the purge walks and rewrites the watcher map after releasing the purgatory lock.",
    ),
    Mutant(
        "opt-purge-without-shard-lock",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory._unlink_ids",
        "with shard.lock:",
        "if True:",
        "(a) the purge unlinks its candidates from a shard's watcher lists without the shard lock.",
    ),
    Mutant(
        "opt-purge-scan-without-shard-lock",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory._purge_scan",
        "with shard.lock:  # no ``continue`` inside a ``with``: mypyc rejects it",
        "if True:",
        "(a) the full scan (after the purge candidates overflowed) walks each shard's "
        "watcher lists without the shard lock.",
    ),
    Mutant(
        "ref-run-without-op-lock",
        f"{_R}.operation",
        "DelayedOperation.run",
        "with self._lock:",
        "if True:",
        "(b) expiry completes without the operation lock: on_complete and on_expiration may "
        "overlap another thread's try_complete (R17).",
    ),
    Mutant(
        "opt-run-without-op-lock",
        f"{_O}.operation",
        "DelayedOperation.run",
        "with self._lock:",
        "if True:",
        "(b) expiry completes without the operation lock (R17).",
    ),
    Mutant(
        "ref-cancel-without-timer-lock",
        f"{_R}.timer",
        "TimerTask.cancel",
        "with _STATE_LOCK:",
        "if True:",
        "(c) cancel unlinks the entry without the timer lock (wrong on free-threaded Python).",
    ),
    Mutant(
        "opt-cancel-without-timer-lock",
        f"{_O}.timer",
        "TimerTask.cancel",
        "lock = holder.lock",
        'lock = type("NoLock", (), {"acquire": lambda s: True, "release": lambda s: None})()',
        "(c) cancel unlinks the entry from its bucket without the timer lock.",
    ),
)
"""Planted lock removals: each passed the whole suite before the lockset checks."""

BUG_PATCHES: tuple[Mutant, ...] = (
    Mutant(
        "opt-cancel-for-key-outside-op-lock",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory.cancel_for_key",
        "            with operation._lock:\n                operation._unschedule()\n"
        "                operation._untimed = True",
        "            operation._unschedule()\n            operation._untimed = True",
        "Bug 1: cancel_for_key cancels without the operation lock, so it can run between a "
        "submission's watch and its timer add: the returned operation still expires (R29).",
    ),
    Mutant(
        "opt-no-rollback",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory._rolled_back",
        "if operation._state < FINISHED and operation._owner is self:",
        "if False:",
        "Bug 2: a submission that raises (the timer closed by a concurrent shutdown) is not "
        "rolled back: watched, counted and claimed (R38).",
    ),
    Mutant(
        "opt-close-waits-for-executor",
        f"{_O}.timer",
        "SystemTimer.close",
        "self._executor.shutdown(wait=False)",
        "self._executor.shutdown(wait=True)",
        "Bug 3: close waits for its executor, whose expiry waits for a lock the closing "
        "thread holds (R39).",
    ),
    Mutant(
        "opt-second-shutdown-returns-early",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory.shutdown",
        "            while not self._shutdown_done:\n"
        "                self._shutdown_finished.wait()\n",
        "",
        "Bug 4: a second shutdown caller returns before the first has closed the timer (R39).",
    ),
    Mutant(
        "opt-blocking-ignores-pending",
        f"{_O}.operation",
        "DelayedOperation._safe_try_complete_for",
        "if not self._try_complete_pending:",
        "if True:",
        "Bug 5: the blocking path does not retry for a maybe_try_complete that knocked while "
        "it held the lock: the completion is lost until the timeout (R41).",
    ),
    Mutant(
        "clock-whole-timeout-wait",
        "kpurgatory.clock",
        "MonotonicClock.wait",
        "condition.wait(min((wake_at - now) / 1000.0, threading.TIMEOUT_MAX))",
        "condition.wait((wake_at - now) / 1000.0)",
        "Bug 6: the whole timeout goes to Condition.wait: OverflowError past TIMEOUT_MAX (R42).",
    ),
    Mutant(
        "opt-candidate-after-timer-cancel",
        f"{_O}.operation",
        "DelayedOperation.force_complete",
        "            owner._note_completed(self)\n        TimerTask.cancel(self)",
        "            TimerTask.cancel(self)\n            owner._note_completed(self)\n"
        "        else:\n            TimerTask.cancel(self)",
        "A winning force_complete records its purge candidate after the timer cancel: a "
        "purge in between misses it and resets the estimate to a size without it, so no "
        "later purge unlinks it from its other keys (R30; found by the slow tier).",
    ),
    Mutant(
        "opt-let-go-takes-twice",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory._purge_candidates",
        "        if op_id in taken:  # recorded again after this pass took it: grouped already\n"
        "            continue\n",
        "",
        "A purge or let-go pass that pops an operation recorded again meanwhile groups its "
        "id twice under each key and unlinks it twice: KeyError out of the force_complete "
        "that started R61's let-go, and finished operations stay watched (R16, R61).",
    ),
    Mutant(
        "let-go-misses-last-watch",
        _P,
        "Purgatory._watch",
        "        self._let_go_if_idle()",
        "        pass",
        "A submission whose operation was finished (by a lock-free force_complete) while it "
        "was watching it does not let go again: the finisher's let-go ran before the last "
        "watch, and the finished operation stays watched with nothing unfinished (R61). "
        "(Was opt- and ref-let-go-misses-last-watch, one per copy of the submission.)",
    ),
    Mutant(
        "opt-submission-ignores-knock",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory._submit",
        "if not completed and operation._try_complete_pending:  # a knock found the lock held",
        "if False:",
        "The submission does not look at the pending flag after releasing the lock: a "
        "knock that found it held is never answered (R41, KAFKA-8334's shape).",
    ),
    Mutant(
        "opt-cancel-for-key-ignores-knock",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory.cancel_for_key",
        "if operation._try_complete_pending and operation._state < FINISHED:",
        "if False:",
        "cancel_for_key drops a knock that found the operation's lock held by it (R55).",
    ),
    Mutant(
        "opt-expiry-after-cancel-for-key",
        f"{_O}.operation",
        "DelayedOperation.run",
        "        if not self._untimed:",
        "        if True:",
        "An expiry the drain handed over before cancel_for_key took the operation's lock "
        "completes it afterwards: an operation cancel_for_key returned expires (R29; found "
        "by the history checker).",
    ),
    Mutant(
        "ref-expiry-after-cancel-for-key",
        f"{_R}.operation",
        "DelayedOperation.run",
        "        if not self._untimed:",
        "        if True:",
        "The reference's expiry completes an operation cancel_for_key returned (R29).",
    ),
    Mutant(
        "opt-run-ignores-knock",
        f"{_O}.operation",
        "DelayedOperation.run",
        "    if self._try_complete_pending and self._state < FINISHED:",
        "    if False:",
        "A run that finds its operation taken out by cancel_for_key returns without "
        "looking at the pending flag: a knock that met its lock is lost (R41).",
    ),
    Mutant(
        "opt-cancel-is-plain-cancel",
        f"{_O}.operation",
        "DelayedOperation.cancel",
        "owner._abandon_submitted(self)",
        "TimerTask.cancel(self)",
        "Bug 7: cancel() on a submitted operation only unschedules it: it stays watched "
        "forever and a later check completes it (R40).",
    ),
)
"""Issue 11's bugs, re-planted in the fixed code (the optimized package, and the clock)."""

GAP_PATCHES: tuple[Mutant, ...] = (
    Mutant(
        "ref-drain-unlocked",
        f"{_R}.timer",
        "SystemTimer._hand_over_drained",
        "        with _STATE_LOCK:\n            if self._closed:",
        "        if True:\n            if self._closed:",
        "The reference drain checks and clears a task's entry without the lock: a re-add "
        "between the check and the clear is lost (survived the sampled mutation run).",
    ),
    Mutant(
        "ref-watched-unlocked",
        f"{_R}.purgatory",
        "DelayedOperationPurgatory.watched",
        "    with self._lock:\n        return sum(len(ops)",
        "    if True:\n        return sum(len(ops)",
        "watched sums the watcher lists without the lock (survived the sampled run).",
    ),
    Mutant(
        "opt-num-completed-unlocked",
        f"{_O}.purgatory",
        "DelayedOperationPurgatory.check_and_complete",
        "        with self._counters_lock:\n            self._num_completed += completed",
        "        if True:\n            self._num_completed += completed",
        "num_completed incremented without its lock: concurrent winners can be lost "
        "(survived the sampled run).",
    ),
    Mutant(
        "unfinished-unlocked",
        _P,
        "Purgatory._left_watching",
        "    with self._counters_lock:\n        if not operation._counted:",
        "    if True:\n        if not operation._counted:",
        "R61's unfinished count taken down without the counters lock: concurrent finishes "
        "lose updates with the GIL off (an outside mutation run's survivor; the lockset "
        "table did not list the field). (Was ref- and opt-unfinished-unlocked.)",
    ),
    Mutant(
        "idle-reset-unrecorded",
        _P,
        "Purgatory._idle",
        "    self._estimate_resets += 1",
        "    self._estimate_resets += 0",
        "R61's idle let-go resets the estimate (R30) without recording the reset: a "
        "rollback whose operation a lock-free force_complete finished (the last "
        "unfinished one) during the unwinding then takes it out of the reset estimate "
        "too, which goes to -1 (a sampled mutation run's survivor).",
    ),
    Mutant(
        "unfinished-count-unlocked",
        _P,
        "Purgatory._watch",
        "    with self._counters_lock:  # before its keys are set: a finish sees it\n"
        "            self._unfinished += 1",
        "    if True:  # before its keys are set: a finish sees it\n"
        "            self._unfinished += 1",
        "R61's unfinished count taken up, and the operation's counted flag set, without "
        "the counters lock: a submission racing a finish loses an update with the GIL off "
        "(an outside run's lock-removal survivor; make mutation's RemoveLock makes it).",
    ),
)
"""Lock removals the sampled mutation run (issue 11) found surviving the suite."""
