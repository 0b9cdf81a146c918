"""Port bugs: mistakes a porter plausibly makes, planted in a Python port (timer and purgatory).

The "port" is ``kpurgatory.optimized`` (a hierarchical wheel with a bucket delay queue and
a sharded purgatory: the structure of Kafka's classes a port copies), and each bug is a
small edit of one of its functions, applied by patching the function's source
(``tests.mutants.catalog``'s mechanism: the edit must occur exactly once, or
``MutantError`` says the catalogue is out of date). ``tests/conformance/ports/adapter.py
--bug NAME`` serves the bugged port through the adapter protocol, so the conformance kit
meets it exactly as it meets a port in another language.

Some bugs are shared with the equivalence machines' mutants (``tests/mutants``), named
here by the mutant's name; the others are new and list their edits. Two of those mutants
are left out: ``add-window-off-by-one`` and ``overflow-starts-late`` break only an
internal invariant of the wheel (the slot they misplace a task in is always empty and
gets the right expiration), so no observation can tell them apart: 3,000 generated
runs of each agree with the reference. What the catalogue
proves, and with which seeds: ``tests/conformance/ports/test_catalogue.py``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from tests.history.mutants import HISTORY_MUTANTS
from tests.mutants.catalog import MUTANTS, Mutant
from tests.mutants.patching import (
    BUCKET,
    OPERATION,
    PURGATORY,
    TIMER,
    WHEEL,
    applied_together,
)

__all__ = ["CONCURRENT_PORT_BUGS", "PORT_BUGS", "TIMER_AREAS", "PortBug", "port_bug", "planted"]


@dataclass(frozen=True)
class PortBug:
    """One port bug: the area it is in and the source edits (as mutants) that plant it."""

    name: str
    area: str
    description: str
    edits: tuple[Mutant, ...]


def _shared(name: str, area: str) -> PortBug:
    mutant = next(m for m in MUTANTS if m.name == name)
    return PortBug(name, area, mutant.description, (mutant,))


def _edit(name: str, module: str, target: str, old: str, new: str) -> Mutant:
    """A mutant from fragments written with the file's indentation (a method's body at
    eight spaces); the mutant mechanism sees the dedented source (four)."""
    return Mutant(name, module, target, _dedent(old), _dedent(new), "")


def _dedent(fragment: str) -> str:
    return fragment.removeprefix("    ").replace("\n    ", "\n")


def _new(name: str, area: str, description: str, *edits: tuple[str, str, str, str]) -> PortBug:
    return PortBug(name, area, description, tuple(_edit(name, *edit) for edit in edits))


PORT_BUGS: tuple[PortBug, ...] = (
    # ---- wheel placement and overflow ------------------------------------------------
    _shared("expiry-test-off-by-one", "wheel placement"),
    _shared("bucket-expires-at-slot-end", "wheel placement"),
    _shared("wrong-overflow-tick", "overflow"),
    _shared("bucket-not-reoffered", "overflow"),
    _shared("expiration-always-changed", "wheel placement"),
    _new(
        "level-from-clock-reading",
        "wheel placement",
        "add picks the wheel level against the clock reading instead of the wheel's current "
        "time (which stays behind until the next advance_clock, R2): after the clock moved "
        "without a drain, a task lands in a slot whose bucket of the previous round is still "
        "queued, and moves that bucket's expiration, so tasks run late (a published port's "
        "placement, R4, R5).",
        (
            TIMER,
            "SystemTimer.add",
            "                self._wheel.add(checked)",
            "                self._wheel.add(checked, self._deadline_base())",
        ),
        (
            WHEEL,
            "TimingWheel.add",
            "    def add(self, entry: TimerTaskEntry) -> bool:\n",
            "    def add(self, entry: TimerTaskEntry, reading: int | None = None) -> bool:\n",
        ),
        (
            WHEEL,
            "TimingWheel.add",
            "        while not fits_level(due, wheel.current_time, wheel.interval):\n",
            "        while not fits_level(\n"
            "            due, wheel.current_time if reading is None else reading, wheel.interval\n"
            "        ):\n",
        ),
    ),
    # ---- the drain: cascade order, current time, R11 -----------------------------------
    _shared("poll-off-by-one", "drain"),
    _shared("drain-skips-wheel-advance", "cascade"),
    _shared("no-r11-recheck", "R11 stale entries"),
    _shared("current-time-not-advanced", "current time"),
    _shared("wheel-advance-late", "current time"),
    _new(
        "current-time-after-hand-over",
        "current time",
        "The drain moves the current time to the drain reading after handing the tasks "
        "over instead of before: a task that adds another due by the reading sees a stale "
        "current time, so the new task is bucketed and runs a drain late (R2, R3).",
        (
            TIMER,
            "SystemTimer._drain",
            "        wheel.advance_clock(now)\n        self._current_time = wheel.current_time\n",
            "",
        ),
        (
            TIMER,
            "SystemTimer.advance_clock",
            "        return drain is not None and self._hand_over_collected(drain)\n",
            "        try:\n"
            "            return drain is not None and self._hand_over_collected(drain)\n"
            "        finally:\n"
            "            with lock:\n"
            "                self._wheel.advance_clock(now)\n"
            "                self._current_time = self._wheel.current_time\n",
        ),
    ),
    _new(
        "advance-result-counts-buckets",
        "drain",
        "advance_clock returns True when it dequeued a bucket, even if every entry in it "
        "was cascaded or cancelled (Kafka's result, R8).",
        (
            TIMER,
            "SystemTimer.advance_clock",
            "        return drain is not None and self._hand_over_collected(drain)\n",
            "        return drain is not None and (self._hand_over_collected(drain) or True)\n",
        ),
    ),
    _new(
        "cascade-stranded-in-flushed-bucket",
        "cascade",
        "The flush re-adds a task that is not yet due into the bucket being flushed instead "
        "of a finer level, and the bucket's expiration is reset afterwards, so it is never "
        "queued again: the task stays counted and never runs (a published port's cascade, "
        "R5, R12).",
        (
            TIMER,
            "Drain.flush",
            "        return bucket.flush(self.take, left)\n",
            "        stranded: list[TimerTaskEntry] = []\n"
            "        bucket.flush(\n"
            "            lambda entry: stranded.append(entry)\n"
            "            if entry._entry_due >= wheel.current_time + wheel.tick_ms\n"
            "            else self.take(entry),\n"
            "            left,\n"
            "        )\n"
            "        for entry in stranded:\n"
            "            bucket.add(entry)\n"
            "        bucket.expiration = None\n"
            "        return True\n",
        ),
    ),
    _new(
        "flush-runs-first-task-only",
        "drain",
        "The bucket flush hands over only the first task of a bucket and drops the rest "
        "(a published port's bug: removing from the list while iterating over it ends the "
        "loop): every other task due in that bucket never runs (R4, R5).",
        (
            BUCKET,
            "TimerTaskList.flush",
            "            f(head)\n            head = root._entry_next\n",
            "            f(head)\n"
            "            while root._entry_next is not root:  # the rest is dropped\n"
            "                self.remove(root._entry_next)\n"
            "            head = root\n",
        ),
    ),
    # ---- counts, cancel, re-add, close, next_due_time --------------------------------
    _shared("cancel-skips-unlink", "cancel"),
    _shared("bucket-add-forgets-counter", "size"),
    _shared("bucket-remove-forgets-counter", "re-add"),
    _new(
        "readd-keeps-old-entry",
        "re-add",
        "Re-adding a task neither unlinks its old scheduling nor detaches it when linking "
        "it again: it stays in its old bucket as well, so it runs twice and size stays up "
        "(R10, R12).",
        (
            TIMER,
            "SystemTimer.add",
            "                if old.lock is lock:\n                    old.remove(checked)",
            "                if old.lock is lock:\n                    pass",
        ),
        (
            BUCKET,
            "TimerTaskList.add",
            "        if current is not None:\n            current.remove(entry)\n",
            "",
        ),
    ),
    _new(
        "cancel-keeps-bucketed-task",
        "cancel",
        "cancel() of a task linked in a bucket returns without unlinking it (a published "
        "port's Stop that reports failure while the task stays scheduled): the task still "
        "runs and stays counted in size (R9, R12).",
        (
            TIMER,
            "TimerTask.cancel",
            "            if holder is None:\n                return\n",
            "            if holder is None or type(holder) is TimerTaskList:\n"
            "                return\n",
        ),
    ),
    _shared("next-due-is-bucket-expiration", "next_due_time"),
    _new(
        "close-forgets-tasks",
        "close",
        "close() drops the scheduled tasks from the count: a closed timer reports size 0 "
        "(they are still scheduled, only never run: R12, R14).",
        (
            TIMER,
            "SystemTimer.close",
            "            self._closed = True\n",
            "            self._closed = True\n            self._counter.value = 0\n",
        ),
    ),
    _new(
        "closed-advance-skips-argument-check",
        "error precedence",
        "advance_clock on a closed timer returns False before checking its argument: a "
        "negative timeout is not a ValueError there (R8, R14).",
        (
            TIMER,
            "SystemTimer.advance_clock",
            "        timeout = (",
            "        if self._closed:\n            return False\n        timeout = (",
        ),
    ),
    # ---- the purgatory: purge, estimate, errors, abandon -----------------------------
    _shared("purge-not-strict", "purge threshold"),
    _shared("purge-skips-estimate-reset", "purge reset"),
    _shared("estimate-per-key", "estimate arithmetic"),
    _new(
        "estimate-counts-first-try",
        "estimate arithmetic",
        "The purge estimate is counted even for an operation that completes on its first "
        "try, before it is watched (R22, R30).",
        (
            PURGATORY,
            "DelayedOperationPurgatory._submit",
            "            completed = operation.try_complete()\n            if not completed:\n",
            "            completed = operation.try_complete()\n"
            "            if completed:\n"
            "                with self._counters_lock:\n"
            "                    self._estimated_total_operations += 1\n"
            "            if not completed:\n",
        ),
    ),
    _new(
        "abandon-uncounts-estimate",
        "abandon",
        "abandon takes the operation out of the purge estimate (it must stay: the estimate "
        "only drops at a purge, R30, R40).",
        (
            PURGATORY,
            "DelayedOperationPurgatory._abandon_submitted",
            "                self._unwatch_key(key, operation)\n",
            "                self._unwatch_key(key, operation)\n"
            "            self._estimated_total_operations -= 1\n",
        ),
    ),
    _shared("abandon-keeps-watch", "abandon"),
    _new(
        "cancel-is-not-abandon",
        "abandon",
        "cancel() on a submitted operation only cancels its timer entry (Kafka's cancel): "
        "it stays in its watcher lists (R40).",
        (
            OPERATION,
            "DelayedOperation.cancel",
            "        owner._abandon_submitted(self)",
            "        TimerTask.cancel(self)",
        ),
    ),
    _new(
        "shutdown-checked-before-keys",
        "error precedence",
        "try_complete_else_watch checks for a shut-down purgatory before it checks the "
        "keys: an empty key list after shutdown is a RuntimeError, not a ValueError (R36, "
        "R32).",
        (
            PURGATORY,
            "DelayedOperationPurgatory.try_complete_else_watch",
            "        return self._submit(",
            "        if self._is_shut_down:\n"
            '            raise RuntimeError(f"purgatory {self._name!r} is shut down")\n'
            "        return self._submit(",
        ),
    ),
    _new(
        "resubmission-checked-before-shutdown",
        "error precedence",
        "try_complete_else_watch refuses a resubmission before it checks for shutdown: a "
        "resubmission after shutdown is a ValueError, not a RuntimeError (R32, R34).",
        (
            PURGATORY,
            "DelayedOperationPurgatory.try_complete_else_watch",
            "        return self._submit(",
            "        _watch_keys(watch_keys)\n"
            "        if operation._owner is not None:\n"
            '            raise ValueError(f"operation {operation!r} was already submitted")\n'
            "        return self._submit(",
        ),
    ),
    _new(
        "shut-down-advance-skips-argument-check",
        "error precedence",
        "The purgatory's advance_clock after shutdown raises RuntimeError before checking "
        "its argument: a negative timeout is not a ValueError there (R35, R32).",
        (
            PURGATORY,
            "DelayedOperationPurgatory.advance_clock",
            '        require_at_least("timeout_ms", timeout_ms, 0)\n'
            "        if self._is_shut_down:\n"
            '            raise RuntimeError(f"purgatory {self._name!r} is shut down")\n',
            "        if self._is_shut_down:\n"
            '            raise RuntimeError(f"purgatory {self._name!r} is shut down")\n'
            '        require_at_least("timeout_ms", timeout_ms, 0)\n',
        ),
    ),
    _shared("check-counts-completed", "check_and_complete"),
    _shared("cancel-for-key-keeps-timer", "cancel_for_key"),
    _new(
        "cancel-for-key-reversed",
        "cancel_for_key",
        "cancel_for_key returns the operations newest first instead of in watch order (R29).",
        (
            PURGATORY,
            "DelayedOperationPurgatory._take_key",
            "            operations = list(watchers.ops.values())\n",
            "            operations = list(watchers.ops.values())[::-1]\n",
        ),
    ),
    _shared("force-complete-keeps-timer", "force_complete"),
    _shared("unwatch-forgets-count", "watched"),
    _shared("nonempty-list-dropped", "watched_keys"),
    _shared("timer-enabled-ignored", "timer_enabled"),
    # ---- calls back in from callbacks (R63-R69) ----------------------------------------
    _new(
        "operation-lock-not-reentrant",
        "re-entrancy",
        "Each operation gets a plain, non-re-entrant lock (Go's sync.Mutex): the first "
        "operation due at once deadlocks in its own submission, and so does a try_complete "
        "that sweeps one of its own keys (R63).",
        (
            OPERATION,
            "DelayedOperation.__init__",
            "sync.new_lock() if lock is None else require_operation_lock(lock)",
            '__import__("threading").Lock() if lock is None else lock',
        ),
    ),
    _new(
        "drain-runs-on-after-close",
        "re-entrancy",
        "A drain hands the rest of its batch over after a task of the batch closed the "
        "timer (or shut the purgatory down) from its run, instead of leaving them unrun "
        "(R64, R14).",
        (
            TIMER,
            "SystemTimer._hand_over_collected",
            "            if self._closed:\n"
            "                break  # closed by a task of this drain: nothing more is handed "
            "over (R64)\n",
            "",
        ),
    ),
    _new(
        "executor-refusal-dropped",
        "re-entrancy",
        "A task the executor refuses while the timer is open is logged and dropped instead "
        "of being the drain's (or the add's) error: the call returns as if it had been "
        "handed over, and an operation due at once stays submitted (R65, R53).",
        (
            TIMER,
            "SystemTimer._hand_over",
            "            if self._closed and isinstance(exc, RuntimeError):\n",
            "            if isinstance(exc, RuntimeError):\n",
        ),
    ),
    _new(
        "cancel-for-key-in-submission-timed",
        "re-entrancy",
        "An operation that cancel_for_key returned from its own try_complete, during its "
        "submission, is still added to the timer by that submission and expires later (R66).",
        (
            PURGATORY,
            "DelayedOperationPurgatory._time",
            "        if self._timer_enabled and not operation._untimed:\n",
            "        if self._timer_enabled:\n",
        ),
    ),
)
"""The catalogue, grouped by area; names are unique."""


TIMER_AREAS = frozenset(
    {
        "wheel placement",
        "overflow",
        "drain",
        "cascade",
        "R11 stale entries",
        "current time",
        "size",
        "re-add",
        "cancel",
        "next_due_time",
    }
)
"""The catalogue areas a timer-only port has (close needs a shutdown: a purgatory step)."""


def _race(name: str) -> PortBug:
    """A race of the history checker's mutants that is planted in the optimized package."""
    mutant = next(m for m in HISTORY_MUTANTS if m.name == name)
    if not mutant.module.startswith("kpurgatory.optimized"):
        raise ValueError(f"{name}: the port is kpurgatory.optimized, not {mutant.module}")
    return PortBug(name, "concurrency", mutant.description, (mutant,))


CONCURRENT_PORT_BUGS: tuple[PortBug, ...] = (
    _new(
        "double-completion",
        "concurrency",
        "force_complete reads the completed flag without the flag's lock (no "
        "compare-and-set) and sets it only after cancelling the timer entry and leaving "
        "the watch count, just before on_complete: two racing callers both win and "
        "on_complete runs twice (R16).",
        (
            OPERATION,
            "DelayedOperation.force_complete",
            "        with self._flags:  # compare-and-set: not finished -> completed (R68)\n"
            "            won = self._state < FINISHED\n"
            "            if won:\n"
            "                self._state |= COMPLETED\n",
            "        won = self._state < FINISHED  # read here, set at the end\n",
        ),
        (
            OPERATION,
            "DelayedOperation.force_complete",
            "            self._on_complete_told()\n            return True\n",
            "            self._state |= COMPLETED\n"
            "            self._on_complete_told()\n"
            "            return True\n",
        ),
    ),
    _race("lost-cancel"),
    _race("sweep-try-lock"),
    _race("sweep-without-lock"),
    _race("ignored-knock"),
    _race("kafka-6653-lost-completion"),
)
"""Races a port plausibly ships: the committed vectors and the stateful search (one
thread) pass each of them, and the threads mode catches each
(``tests/conformance/ports/test_threads.py`` checks both). All but the first are the history
checker's mutants of the optimized package (``tests/history/mutants.py``), served
here through the adapter protocol instead of recorded in process."""


def port_bug(name: str) -> PortBug:
    """The bug with this name (sequential or concurrent); ``KeyError`` naming the known
    ones otherwise."""
    for bug in (*PORT_BUGS, *CONCURRENT_PORT_BUGS):
        if bug.name == name:
            return bug
    known = [bug.name for bug in (*PORT_BUGS, *CONCURRENT_PORT_BUGS)]
    raise KeyError(f"unknown port bug {name!r}; known: {known}")


def planted(bug: PortBug) -> AbstractContextManager[None]:
    """Apply every edit of ``bug`` for the ``with`` block (edits of one function are
    combined into one replacement, so a function may carry several)."""
    return applied_together(bug.edits)
