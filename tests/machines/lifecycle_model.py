"""A sequential model of the purgatory's observable lifecycle, written from docs/spec.md alone.

It imports nothing from kpurgatory: no timer, no purgatory, not even the spec's arithmetic
(``test_lifecycle_model.py`` checks that with ``ast``). So a bug that the reference and
the optimized implementations share, in code they repeat (submission rollback, sweeps,
abandon), shows as a difference from this model, which the equivalence machines cannot
see. Each public call is one method here, written as the rules state it; user code (an
operation's callbacks) is simulated by ``Op.faults``, a script of what its n-th call does:
raise, knock, or call the library back (a ``Call``, R69), nested up to ``MAX_DEPTH``.

State is spec-level only: per operation, whether it is submitted, its keys, its due time
while it is in the timer, its outcome and its callback counts; per purgatory, the watcher
lists, the purge estimate and whether it is shut down; per timer, the clock reading and
the current time (R1-R3). A call that fails raises ``CallError`` with the labels of what the
implementation must raise, in order (R53).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field

KNOCK = "knock"
"""A fault-script action: the callback knocks (``maybe_try_complete`` from elsewhere, R20)."""

EXCEPTION = "Exception"
"""The label of an ordinary ``Exception`` raised by user code; other labels name
``BaseException`` classes (``KeyboardInterrupt``, ``SystemExit``, ``CancelledError``)."""

CANCEL = "cancel"
"""A fault-script action for try_complete: the operation cancels itself (R40, R56)."""

SHUTDOWN = "shutdown"
"""A fault-script action for try_complete: it shuts the purgatory down (R32, R38)."""

CALLBACKS = ("try_complete", "on_complete", "on_expiration")

CLOSE_REFUSE = "close, then refuse"
"""An executor fault: its ``submit`` shuts the purgatory down, then raises ``RuntimeError``
as a shut-down thread pool does (R65: the one refusal that is not the call's error)."""

MAX_DEPTH = 2
"""How deep callbacks call back in: a callback running at this depth makes no call."""

CALL_NAMES = (
    "check_and_complete",
    "cancel_for_key",
    "abandon",
    "cancel",
    "force_complete",
    "submit",
    "advance_clock",
    "shutdown",
)
"""The public calls a callback may make (R69's table: any public call)."""


@dataclass(frozen=True)
class Call:
    """A fault-script action: the callback makes the public call ``name`` (R69). ``target``
    names the operation: 0 is the operation whose callback runs, k > 0 the (k - 1)-th
    operation made, modulo their number. The callback catches whatever the call raises
    (so that user code going on after a refused call is exercised too)."""

    name: str
    target: int = 0
    key: str = "a"
    keys: tuple[str, ...] = ("a",)
    amount: int = 0


Action = str | Call


class OrderLeftOpenError(Exception):
    """The model cannot say what happens: a drain handed over operations with the same due
    time, whose order R6 leaves open, and the order matters (their callbacks called back
    in, or one shut the purgatory down). The machine discards such a run."""


class CallError(Exception):
    """A model call failed: ``errors`` are the labels of what the call raises, in the order
    raised (one: raised as is; several: a group, R53). ``ordered`` is False when the
    spec leaves their order open (hand-overs with the same due time, R6)."""

    def __init__(self, errors: list[str], ordered: bool = True) -> None:
        super().__init__(errors)
        self.errors = errors
        self.ordered = ordered


@dataclass
class Op:
    """One operation as the spec sees it."""

    name: str
    delay_ms: int
    faults: dict[tuple[str, int], Action] = field(default_factory=dict)
    ready: bool = False
    submitted: bool = False
    keys: tuple[str, ...] = ()
    due: int | None = None
    finished: bool = False
    """The completed flag of R16 (also set by abandon, R40): nothing may complete it."""
    outcome: str | None = None
    """None while pending, else "completed", "expired" or "abandoned"."""
    pending_flag: bool = False
    unfinished: bool = False
    """Counted among the purgatory's unfinished operations (R61)."""
    untimed: bool = False
    """``cancel_for_key`` returned it: its submission adds no timer entry (R66)."""
    calls: Counter[str] = field(default_factory=Counter)
    due_at: int = 0
    """The due time it had when a drain took it out (R6: same-due order is open)."""

    @property
    def is_completed(self) -> bool:
        return self.finished and self.outcome != "abandoned"

    @property
    def is_abandoned(self) -> bool:
        return self.outcome == "abandoned"


class LifecycleModel:
    """One purgatory with its own timer on a manual clock.

    The executor runs a hand-over inline, or, with ``deferred``, on one worker thread
    once the machine's call has returned (FIFO; its errors are logged there, R13).
    With ``reentrant_knock`` the operation locks are re-entrant for a knocker on the
    holder's thread (a ``threading.RLock``): a knock is a nested ``maybe_try_complete``."""

    def __init__(
        self,
        tick_ms: int,
        purge_interval: int,
        timer_enabled: bool,
        *,
        deferred: bool = False,
        reentrant_knock: bool = False,
    ) -> None:
        self.deferred = deferred
        self.reentrant_knock = reentrant_knock
        self.depth = 0
        self.calls_enabled = True
        self.log: list[tuple[str, str, tuple[object, ...]]] = []
        """Each nested call: (where, the call, its outcome), in the order made."""
        self.handed: list[Op] = []
        """Deferred hand-overs not yet run."""
        self.collected: set[str] = set()
        """Operations a drain took out of the schedule and has not handed over yet."""
        self.clock_fails: str | None = None
        """The next clock read raises this (armed for one machine call)."""
        self.executor_fails: dict[str, str] = {}
        """The executor's submit of this operation's expiry raises (or CLOSE_REFUSE)."""
        self.tick_ms = tick_ms
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        self.now = 0
        self.current = 0
        self.watchers: dict[str, list[Op]] = {}
        self.estimate = 0
        self.estimate_resets = 0  # purges and let-gos that set the estimate (R30)
        self.num_purged = 0
        self.unfinished = 0
        self.shut_down = False
        self.ops: dict[str, Op] = {}

    # -- what can be observed ----------------------------------------------------------

    @property
    def watched(self) -> int:
        """R27: (key, operation) pairs, completed ones included."""
        return sum(len(ops) for ops in self.watchers.values())

    @property
    def watched_keys(self) -> int:
        """R26: keys with a (non-empty) watcher list."""
        return len(self.watchers)

    @property
    def num_delayed(self) -> int:
        """R28/R12: operations scheduled in the timer."""
        return sum(1 for op in self.ops.values() if op.due is not None)

    def new_op(self, name: str, delay_ms: int, faults: dict[tuple[str, int], Action]) -> Op:
        op = self.ops[name] = Op(name, delay_ms, dict(faults))
        return op

    # -- user code -----------------------------------------------------------------------

    def _user(self, op: Op, callback: str) -> None:
        """The next call of ``op``'s ``callback``: counted, then it acts as scripted."""
        op.calls[callback] += 1
        count = op.calls[callback]
        action = op.faults.get((callback, count))
        if isinstance(action, Call):
            self._call_back(op, f"{op.name}.{callback}#{count}", action)
        else:
            self._act(op, action)

    def _call_back(self, op: Op, where: str, call: Call) -> None:
        """R69: the callback makes ``call`` as a nested call and catches what it raises;
        at ``MAX_DEPTH`` (or while a lock fault is armed) it makes none."""
        if not self.calls_enabled or self.depth >= MAX_DEPTH:
            return
        self.depth += 1
        try:
            outcome: tuple[object, ...] = ("ok", self._perform(op, call))
        except CallError as failed:
            outcome = ("raised", tuple(sorted(failed.errors)))
        finally:
            self.depth -= 1
        self.log.append((where, repr(call), outcome))

    def target(self, op: Op, index: int) -> Op:
        """The operation a ``Call`` names (see ``Call.target``)."""
        if index == 0:
            return op
        names = list(self.ops)
        return self.ops[names[(index - 1) % len(names)]]

    def _perform(self, op: Op, call: Call) -> object:
        """The public call itself, as the rules say it works from anywhere (R69)."""
        target = self.target(op, call.target)
        if call.name == "check_and_complete":
            return self.check_and_complete(call.key)
        if call.name == "cancel_for_key":
            return self.cancel_for_key(call.key)
        if call.name == "abandon":
            return self.abandon(target)
        if call.name == "cancel":
            self.abandon(target, via_cancel=True)
            return None
        if call.name == "force_complete":
            return self.force_complete(target)
        if call.name == "submit":
            return self.submit(target, list(call.keys))
        if call.name == "advance_clock":
            self.advance_clock(call.amount)
            return None
        assert call.name == "shutdown", call
        self.shutdown()
        return None

    def _order_matters(self, group: list[Op]) -> None:
        """Operations with the same due time were handed over (R6: in an order left
        open) and their order can show: callbacks called back in, the purgatory was shut
        down, or (deferred) they run later where theirs may. Unless none of them has a
        callback that calls back in or acts, the model gives up on this run."""
        if self.deferred and not self.calls_enabled:
            return
        if self.deferred and not any(
            isinstance(action, Call) and callback != "try_complete"
            for op in group
            for (callback, _), action in op.faults.items()
        ):
            return
        raise OrderLeftOpenError([op.name for op in group])

    def _act(self, op: Op, action: str | None) -> None:
        """What scripted user code does: nothing, knock, cancel, shut down, or raise."""
        if action == KNOCK:
            self._knock(op)
        elif action == CANCEL:
            self.abandon(op, via_cancel=True)
        elif action == SHUTDOWN:
            self.shutdown()
        elif action is not None:
            raise CallError([action])

    def _knock(self, op: Op) -> None:
        """R20 with the lock held elsewhere: the knocker sets the pending flag and leaves
        the attempt to the holder (the first knocker retries once and finds it held). A
        re-entrant lock lets a knocker on the holder's thread in: a nested attempt."""
        if self.reentrant_knock:
            self.maybe_try_complete(op)
        else:
            op.pending_flag = True

    def _try_complete(self, op: Op) -> bool:
        """The user's condition check: completes iff ready (``force_complete``)."""
        self._user(op, "try_complete")
        return op.ready and self.force_complete(op)

    # -- operations (R16-R20) ----------------------------------------------------------------

    def force_complete(self, op: Op, outcome: str = "completed") -> bool:
        """R16: the one winner sets the flag, leaves the timer, then runs on_complete
        (which may raise: the operation stays completed)."""
        if op.finished:
            return False
        op.finished, op.outcome = True, outcome
        self._untime(op)
        self._let_go(op)
        self._user(op, "on_complete")
        return True

    def _expire(self, op: Op) -> None:
        """R17: the timer's callback; on_expiration only if expiry won."""
        if self.force_complete(op, "expired"):
            self._user(op, "on_expiration")

    def safe_try_complete(self, op: Op, *, submitted_only: bool = True) -> bool:
        """R18 with R41: clear the pending flag, try; retry while a knock came meanwhile.
        The purgatory's paths also skip an operation no longer submitted here (R38)."""
        while True:
            if op.finished or (submitted_only and not op.submitted):
                return False
            op.pending_flag = False
            if self._try_complete(op):
                return True
            if not op.pending_flag:
                return False

    def safe_try_complete_or_else(self, op: Op, action: str | None) -> bool:
        """R19 with R41: try; else run ``f`` (which may knock or raise) and try again; a
        knock that came meanwhile gets its attempt after the lock is released."""
        op.pending_flag = False
        if self._try_complete(op):
            return True
        self._act(op, action)  # f
        if self._try_complete(op):
            return True
        return op.pending_flag and self.safe_try_complete(op, submitted_only=False)

    def maybe_try_complete(self, op: Op) -> bool:
        """R20 with the lock free: take it, try, go round again if someone knocked."""
        while True:
            op.pending_flag = False
            done = self._try_complete(op)
            if op.finished or not op.pending_flag:
                return done

    # -- timer (R1-R13) --------------------------------------------------------------------

    def _untime(self, op: Op) -> None:
        """Cancel the operation's timer entry (R9); a drain that took it out and has not
        reached it yet skips it (R11)."""
        op.due = None
        self.collected.discard(op.name)

    def _round_down(self, ms: int) -> int:
        return ms - ms % self.tick_ms  # Python's % floors: R1 for negative readings too

    def _submit_task(self, op: Op) -> None:
        """The executor's ``submit`` of ``op``'s expiry: it may raise (R54, R65: the call's
        error), or close the timer and then refuse (R65: the task stays unrun, quietly)."""
        kind = self.executor_fails.pop(op.name, None)
        if kind == CLOSE_REFUSE:
            self.shutdown()
            return
        if kind is not None:
            raise CallError([kind])
        self._hand_over(op)

    def _hand_over(self, op: Op) -> None:
        """R13/R52: run the expiry; an Exception is logged and swallowed, anything else
        goes on to the caller. A deferred executor runs it after the machine's call."""
        if self.deferred:
            self.handed.append(op)
            return
        try:
            self._expire(op)
        except CallError as failed:
            kept = [label for label in failed.errors if label != EXCEPTION]
            if kept:
                raise CallError(kept) from None

    def run_handed(self) -> None:
        """The deferred executor's worker runs what was handed over, in order; what a
        task raises stays there (logged, R13). Tasks handed over by these run too."""
        while self.handed:
            op = self.handed.pop(0)
            with contextlib.suppress(CallError):
                self._expire(op)

    def _timer_add(self, op: Op) -> None:
        """R1/R3: schedule at round_down(now + delay), or hand over within the add."""
        if self.shut_down:
            raise CallError(["RuntimeError"])  # R38, R64: closed by a shutdown meanwhile
        kind, self.clock_fails = self.clock_fails, None
        if kind is not None:
            raise CallError([kind])
        due = self._round_down(self.now + op.delay_ms)
        if due > self.current:
            op.due = due
            return
        self._submit_task(op)

    # -- purgatory (R22-R41, R52-R56) ------------------------------------------------------

    def _unwatch(self, key: str, op: Op) -> None:
        ops = self.watchers.get(key)
        if ops is not None and op in ops:
            ops.remove(op)
            if not ops:
                del self.watchers[key]

    def _roll_back(self, op: Op, watched: list[str], counted: int | None) -> None:
        """R38/R54: unwatch, lower the estimate (R30: unless a reset came since it was
        raised at reset number ``counted``), no timer entry, release the claim."""
        for key in watched:
            self._unwatch(key, op)
        if counted is not None and counted == self.estimate_resets:
            self.estimate -= 1
        self._untime(op)
        op.submitted, op.keys, op.untimed = False, (), False
        self._let_go(op)

    def _let_go(self, op: Op) -> None:
        """R61: an operation counted as unfinished finished or was rolled back; when none
        is left, every finished operation is unlinked at once, as a purge does (R30)."""
        if not op.unfinished:
            return
        op.unfinished = False
        self.unfinished -= 1
        if not self.unfinished:
            self.estimate = self.num_delayed
            self.estimate_resets += 1
            self._unlink_finished()

    def submit(self, op: Op, keys: list[str], *, lock_fails: str | None = None) -> bool:
        """``try_complete_else_watch``: R22 under the lock, R38/R54 rollback, R41 retry;
        R64: a shutdown meanwhile refuses it unless its operation finished."""
        if self.shut_down:
            raise CallError(["RuntimeError"])  # R32
        if op.submitted:
            raise CallError(["ValueError"])  # R34
        if lock_fails is not None:
            raise CallError([lock_fails])  # R54: before anything changed
        op.submitted = True
        watched: list[str] = []
        counted: int | None = None
        try:
            op.pending_flag = False
            if self._try_complete(op):
                return True
            if not op.finished:  # R61: it reached the watching step unfinished
                op.unfinished = True
                self.unfinished += 1
            op.keys = tuple(dict.fromkeys(keys))  # R24: distinct, first-occurrence order
            for key in op.keys:
                if op.finished:
                    break  # KAFKA-18027
                self.watchers.setdefault(key, []).append(op)
                watched.append(key)
            self.estimate += 1
            counted = self.estimate_resets
            if self._try_complete(op):
                return True
            if self.shut_down and not op.finished:
                raise CallError(["RuntimeError"])  # R64: shut down by its own callback
            if self.timer_enabled and not op.finished and not op.untimed:  # R66
                self._timer_add(op)
                if self.shut_down and not op.finished:
                    raise CallError(["RuntimeError"])  # R64: shut down inside the add
        except CallError:
            if not op.finished:
                self._roll_back(op, watched, counted)
            raise
        if not op.pending_flag:
            return False
        try:  # R41: the attempt a knocker left; part of the submission (R54)
            if self.safe_try_complete(op):
                return True
            if self.shut_down and not op.finished:
                raise CallError(["RuntimeError"])  # R64
            return False
        except CallError:
            if not op.finished and op.submitted:
                self._roll_back(op, watched, counted)
            raise

    def check_and_complete(self, key: str, *, lock_fails: dict[str, str] | None = None) -> int:
        """R25/R26 with R53: try every operation on ``key`` in watch order, then raise."""
        lock_fails = lock_fails or {}
        completed = 0
        errors: list[str] = []
        for op in list(self.watchers.get(key, ())):
            try:
                if op.finished:
                    self._unwatch(key, op)
                    continue
                if op.name in lock_fails:
                    raise CallError([lock_fails[op.name]])
                if self.safe_try_complete(op):
                    completed += 1
                    self._unwatch(key, op)
            except CallError as failed:
                errors += failed.errors
                if op.finished:  # its on_complete raised: unlinked like any completed one
                    self._unwatch(key, op)
        if errors:
            raise CallError(errors)
        return completed

    def cancel_for_key(self, key: str, *, knocked: frozenset[str] = frozenset()) -> list[str]:
        """R29 with R55: drop the list, cancel each timer entry under the operation's lock;
        a knock that came while that lock was held is honoured afterwards (R53 sweep)."""
        ops = self.watchers.pop(key, [])
        errors: list[str] = []
        for op in ops:
            if op.name in knocked:
                self._knock(op)
            self._untime(op)
            op.untimed = True  # R66: a submission under way adds no entry
            try:
                if op.pending_flag and not op.finished and op.submitted:
                    self.safe_try_complete(op)
            except CallError as failed:
                errors += failed.errors
        if errors:
            raise CallError(errors)
        return [op.name for op in ops]

    def abandon(self, op: Op, *, via_cancel: bool = False, lock_fails: str | None = None) -> bool:
        """R40 (``purgatory.abandon``) and R56 (``op.cancel()``)."""
        if not op.submitted:
            if via_cancel:
                self._untime(op)  # the plain task cancel (R9): never raises
                return False
            raise CallError(["ValueError"])
        if lock_fails is not None:
            raise CallError([lock_fails])
        if op.finished:
            return False
        op.finished, op.outcome = True, "abandoned"
        self._untime(op)
        for key in op.keys:
            self._unwatch(key, op)
        self._let_go(op)
        return True

    def advance_clock(self, timeout_ms: int, *, wait_fails: str | None = None) -> None:
        """R7/R2/R4-R6 then R30: let time pass, hand over what is due (R53: every task,
        then raise), move the current time, purge if due. A task that shuts the purgatory
        down ends the hand-overs (R64); one cancelled before its turn is skipped (R11)."""
        if self.shut_down:
            raise CallError(["RuntimeError"])
        if wait_fails is not None:
            raise CallError([wait_fails])  # R54: the clock did not move
        self.now += timeout_ms
        due = sorted(
            (op for op in self.ops.values() if op.due is not None and op.due <= self.now),
            key=lambda op: op.due or 0,
        )
        for op in due:
            op.due_at, op.due = op.due or 0, None
            self.collected.add(op.name)
        self.current = max(self.current, self._round_down(self.now))
        errors: list[str] = []
        groups: dict[int, list[Op]] = {}
        for op in due:
            groups.setdefault(op.due_at, []).append(op)
        for group in groups.values():
            before = (len(self.log), self.shut_down, len(self.handed))
            for op in group:
                if self.shut_down:
                    break  # R64: closed by a task of this drain
                if op.name not in self.collected:
                    continue  # R11: cancelled before its turn
                self.collected.discard(op.name)
                try:
                    self._submit_task(op)
                except CallError as failed:
                    errors += failed.errors
            changed = (len(self.log), self.shut_down, len(self.handed)) != before
            visible = self.deferred or len(self.log) != before[0] or self.shut_down
            if len(group) > 1 and changed and visible:
                self._order_matters(group)
        if errors:
            raise CallError(errors, ordered=False)  # same-due order is open (R6)
        self._purge_if_due()

    def _purge_if_due(self) -> None:
        """R30: if estimate - num_delayed > purge_interval, reset it and unlink the finished."""
        delayed = self.num_delayed
        if self.estimate - delayed <= self.purge_interval:
            return
        self.estimate = delayed
        self.estimate_resets += 1
        self._unlink_finished()

    def _unlink_finished(self) -> None:
        """Unlink every finished operation, dropping emptied lists; count them (R30, R61)."""
        for key in list(self.watchers):
            pending = [op for op in self.watchers[key] if not op.finished]
            self.num_purged += len(self.watchers[key]) - len(pending)
            if pending:
                self.watchers[key] = pending
            else:
                del self.watchers[key]

    def shutdown(self) -> None:
        """R32: idempotent; nothing completes or expires; later submissions and advances fail."""
        self.shut_down = True
