"""Seeded mutants: deliberate one-line bugs in ``kpurgatory.optimized``, applied by patching.

Each ``Mutant`` names a function or method of the optimized package, an exact fragment of
its source, and the fragment's replacement. ``applied(mutant)``
(``tests.mutants.patching``, re-exported here) plants it for a ``with`` block.

``tests/mutants/test_mutants_caught.py`` asserts that the equivalence machines fail on
every mutant and pass on the unmutated code. A mutant the machines miss means the
machines are too weak; strengthen them rather than dropping the mutant.
"""

from __future__ import annotations

from tests.mutants.patching import (
    BUCKET,
    OPERATION,
    PURGATORY,
    QUEUE,
    TIMER,
    WHEEL,
    MachineName,
    Mutant,
    MutantError,
    applied,
    mutated_source,
)

__all__ = ["MUTANTS", "MachineName", "Mutant", "MutantError", "applied", "mutated_source"]


_TIMER_FIRST: tuple[MachineName, ...] = ("timer", "purgatory")
_PURGATORY_ONLY: tuple[MachineName, ...] = ("purgatory",)

MUTANTS: tuple[Mutant, ...] = (
    # ---- timer: the list ---------------------------------------------------
    Mutant(
        "expiry-test-off-by-one",
        WHEEL,
        "expired_at_level",
        "return due < current_time + tick_ms",
        "return due <= current_time + tick_ms",
        "Kafka's 'already expired' test with <= : a task due one tick after the current "
        "time is handed over at once (R3), and a drain collects it a tick early (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "poll-off-by-one",
        QUEUE,
        "DelayQueue.poll",
        "if heap and heap[0][0] <= now:",
        "if heap and heap[0][0] < now:",
        "The delay queue releases a bucket only strictly after its expiration: tasks due "
        "exactly at the drain reading are late (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-not-reoffered",
        WHEEL,
        "TimingWheel.add",
        "wheel.queue.offer(bucket)",
        "pass",
        "A bucket whose expiration changed is not offered to the delay queue: its tasks "
        "never run (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "flush-keeps-expiration",
        BUCKET,
        "TimerTaskList.flush",
        "self.expiration = NO_EXPIRATION",
        "pass",
        "The flush of a bucket does not reset the bucket's expiration. Invisible from "
        "outside in this design (the drain advances the wheel to a bucket's expiration "
        "before flushing it, so that slot never gets the same expiration again); caught by "
        "_check(), which the machines run after every step.",
        _TIMER_FIRST,
    ),
    Mutant(
        "wrong-overflow-tick",
        WHEEL,
        "TimingWheel.add_overflow_wheel",
        "self.interval,",
        "self.interval * self.wheel_size,",
        "The overflow wheel's tick is wheel_size times too coarse: its 'already expired' "
        "test fires early for tasks more than one level up.",
        _TIMER_FIRST,
    ),
    Mutant(
        "cancel-skips-unlink",
        TIMER,
        "TimerTask.cancel",
        "holder.remove(self)",
        "pass",
        "cancel leaves the task linked in its bucket: it still runs, and size stays up (R9, R12).",
        _TIMER_FIRST,
    ),
    # ---- timer: more ---------------------------------------------------------------
    Mutant(
        "no-r11-recheck",
        TIMER,
        "SystemTimer._hand_over_collected",
        "if entry._entry_list is not drain:",
        "if False:",
        "The drain hands over a task cancelled or re-added after it left the schedule but "
        "before its turn (R11).",
        _TIMER_FIRST,
    ),
    Mutant(
        "current-time-not-advanced",
        TIMER,
        "SystemTimer._drain",
        "wheel.advance_clock(now)\n    self._current_time",
        "self._current_time",
        "The wheel's current time is not moved to the drain reading at the end of the "
        "drain, only to dequeued bucket expirations (Kafka's stale current time, R2).",
        _TIMER_FIRST,
    ),
    Mutant(
        "overflow-starts-late",
        WHEEL,
        "TimingWheel.add_overflow_wheel",
        "self.current_time,",
        "self.current_time + self.tick_ms,",
        "The overflow wheel starts one lower tick ahead of the wheel below it.",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-expires-at-slot-end",
        WHEEL,
        "bucket_expiration",
        "return vid * tick_ms",
        "return (vid + 1) * tick_ms",
        "A bucket's expiration is the end of its slot instead of the start: its tasks run "
        "a tick late (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "readd-keeps-old-entry",
        TIMER,
        "SystemTimer.add",
        "if old.lock is lock:\n                old.remove(checked)",
        "if old.lock is lock:\n                pass",
        "Re-adding a task skips the unlink of its old scheduling. A re-add that schedules "
        "it again still moves it (linking detaches it first), but one due at once leaves "
        "it linked in the old bucket (R10): size stays up and it runs a second time.",
        _TIMER_FIRST,
    ),
    # ---- timer: the bucket and wheel operations, each defined once ------------------
    Mutant(
        "drain-skips-wheel-advance",
        TIMER,
        "Drain.flush",
        "wheel.advance_clock(expiration)",
        "pass",
        "The drain flushes a bucket without first moving the wheel to its expiration: "
        "its entries cascade back into the same level (caught by the drain's own check).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-remove-keeps-links",
        BUCKET,
        "TimerTaskList.remove",
        "nxt._entry_prev = prev",
        "pass",
        "Unlinking an entry (cancel, re-add, flush) leaves the next entry's back link on "
        "the removed one: the bucket is corrupt (caught by _check()).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-add-forgets-counter",
        BUCKET,
        "TimerTaskList.add",
        "self.counter.value += 1",
        "pass",
        "Linking an entry does not count it: size too low (R12).",
        _TIMER_FIRST,
    ),
    Mutant(
        "expiration-always-changed",
        BUCKET,
        "TimerTaskList.set_expiration",
        "if current is not None and current == expiration_ms:",
        "if False:",
        "Every add re-offers its bucket: a bucket is queued twice (caught by the delay "
        "queue's _check()).",
        _TIMER_FIRST,
    ),
    Mutant(
        "wheel-advance-late",
        WHEEL,
        "advanced_time",
        "if time_ms >= current_time + tick_ms:",
        "if time_ms > current_time + tick_ms:",
        "A level moves one tick late: the current time lags the drain reading (R2), so an "
        "add after it judges 'due at once' against a stale time (R3).",
        _TIMER_FIRST,
    ),
    Mutant(
        "fits-window-off-by-one",
        WHEEL,
        "fits_level",
        "return due < current_time + interval",
        "return due <= current_time + interval",
        "A task due exactly at a level's window end stays on that level, in the slot of "
        "the level's current tick: it runs a whole round early (R5).",
        _TIMER_FIRST,
    ),
    Mutant(
        "bucket-remove-forgets-counter",
        BUCKET,
        "TimerTaskList.remove",
        "self.counter.value -= 1",
        "pass",
        "Unlinking an entry from a bucket (a cancel, a re-add, a flush) leaves the shared "
        "counter up: size too high (R9, R10, R12).",
        _TIMER_FIRST,
    ),
    # ---- operation and purgatory: the list -----------------------------------
    Mutant(
        "list-dropped-while-mapped",
        PURGATORY,
        "DelayedOperationPurgatory._unlink",
        "if not watchers.ops and shard.watchers.get(watchers.key) is watchers:",
        "if not watchers.ops and watchers.key in shard.watchers:",
        "An emptied watcher list drops whatever list is mapped for its key now, even a "
        "newer one (Kafka's removeKeyIfEmpty without its identity check, R26).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "nonempty-list-dropped",
        PURGATORY,
        "DelayedOperationPurgatory._unlink",
        "if not watchers.ops and shard.watchers.get(watchers.key) is watchers:",
        "if shard.watchers.get(watchers.key) is watchers:",
        "A watcher list is dropped from the map while operations are still on it (R26, R27).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "purge-skips-estimate-reset",
        PURGATORY,
        "DelayedOperationPurgatory._purge_if_due",
        "self._estimated_total_operations = delayed",
        "pass",
        "The purge does not reset the estimate to num_delayed first, so it purges on every "
        "later step (R30).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "check-counts-completed",
        PURGATORY,
        "DelayedOperationPurgatory.check_and_complete",
        "self._unlink(handle, operation)\n            elif",
        "self._unlink(handle, operation); completed += 1\n            elif",
        "check_and_complete counts operations that were already completed (R25).",
        _PURGATORY_ONLY,
    ),
    # ---- operation and purgatory: more ---------------------------------------------
    Mutant(
        "purge-not-strict",
        PURGATORY,
        "DelayedOperationPurgatory._purge_if_due",
        "- delayed <= self._purge_interval:",
        "- delayed < self._purge_interval:",
        "The purge rule with >= instead of the strict > (R30).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "estimate-per-key",
        PURGATORY,
        "DelayedOperationPurgatory._watch_key",
        "shard.count += 1",
        "shard.count += 1; self._estimated_total_operations += 1",
        "The purge estimate grows once per watch key as well as once per operation (R22).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "cancel-for-key-keeps-timer",
        PURGATORY,
        "DelayedOperationPurgatory.cancel_for_key",
        "operation._unschedule()",
        "pass",
        "cancel_for_key does not cancel the operations' timer entries: they still expire (R29).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "force-complete-keeps-timer",
        OPERATION,
        "DelayedOperation.force_complete",
        "TimerTask.cancel(self)",
        "pass",
        "force_complete does not cancel the timer entry: num_delayed stays up until the "
        "entry's due time (R16, R28).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "safe-try-ignores-completed",
        OPERATION,
        "DelayedOperation._safe_try_complete_for",
        "if self._state >= FINISHED or (",
        "if False or (",
        "safe_try_complete calls try_complete on an operation already completed (R18).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "unwatch-forgets-count",
        PURGATORY,
        "DelayedOperationPurgatory._unlink",
        "shard.count -= 1",
        "pass",
        "Unlinking an operation leaves the shard's watched count up (R27).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "negative-hash-shard",
        PURGATORY,
        "DelayedOperationPurgatory._watch_key",
        "shard = self._shards[abs(hash(key)) % self._num_shards]",
        "shard = self._shards[hash(key) % self._num_shards]",
        "Watching files a key with a negative hash in another shard than lookups use, so "
        "check_and_complete and cancel_for_key miss it (R25).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "abandon-keeps-watch",
        PURGATORY,
        "DelayedOperationPurgatory._abandon_submitted",
        "self._unwatch_key(key, operation)",
        "pass",
        "abandon leaves the operation in its watcher lists: every abandoned wait leaks (R40).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "rollback-keeps-watch",
        PURGATORY,
        "DelayedOperationPurgatory._undo",
        "self._unwatch_key(undo.pop(), operation)",
        "undo.pop()",
        "A submission that raises leaves its watches behind (R38).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "timer-enabled-ignored",
        PURGATORY,
        "DelayedOperationPurgatory._time",
        "if self._timer_enabled and not operation._untimed:",
        "if not operation._untimed:",
        "timer_enabled=False still adds operations to the timer (R33).",
        _PURGATORY_ONLY,
    ),
    Mutant(
        "next-due-is-bucket-expiration",
        QUEUE,
        "DelayQueue.earliest_due",
        "due = heap[index][2].min_due()",
        "due = expiration",
        "next_due_time reports the least bucket expiration (Kafka's delay-queue head): too "
        "early for a higher-level bucket, and a bucket emptied by cancels still counts (R44).",
        _TIMER_FIRST,
    ),
)
"""Every seeded mutant; names are unique and stable (tests are parametrized by them)."""
