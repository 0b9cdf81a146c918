"""The lifecycle machine: one implementation against ``lifecycle_model``, with user code that fails.

``LifecycleMachine`` is a Hypothesis ``RuleBasedStateMachine`` that drives one
implementation package (``impl_name``: reference, optimized, a compiled build) on a
manual clock and an inline executor, and applies every call to
``tests.machines.lifecycle_model`` as well. After every step it compares results, raised
exception types (one error as is, several as an exception group, R53), each operation's
state and callback counts, and the purgatory's counters; the teardown drains, ends every
operation and checks that the counters return to zero.

Fault injection is the machine's extra dimension (the user code is
``tests.machines.user_code``, its scripts ``tests.machines.fault_scripts``). Each
operation carries a script chosen by Hypothesis: its ``try_complete`` may raise on its
n-th call (an ``Exception``, or a ``BaseException``: ``KeyboardInterrupt``,
``SystemExit``, ``CancelledError``) or knock (``maybe_try_complete`` while its lock is
held, as another thread would), and its ``on_complete`` or ``on_expiration`` may raise.
For user code whose call count the spec does not fix, the fault is armed for one public
call and the model says whether it fires: the operation's lock (``acquire`` raises, or a
knock arrives while it is held), the clock (``now_ms``, ``wait``), the executor's
``submit`` for a given task, and a key whose ``__hash__`` raises on its first read.

Re-entrant actions (R63-R69): a callback's script may also make a public call (a
``lifecycle_model.Call``: ``check_and_complete``, ``cancel_for_key``, ``abandon``,
``cancel``, ``force_complete``, ``try_complete_else_watch``, ``advance_clock``,
``shutdown``, on its own operation or another), nested up to ``MAX_DEPTH``; it catches
what the call raises, and the machine compares every nested call's outcome with the
model's. The executor's ``submit`` may close the purgatory and then refuse (R65).

Variants are subclasses (``lifecycle_machine`` finds one): the executor
(``executor_kind``) is ``"inline"`` (``InlineExecutor``), ``"loop"`` (the aio layer's
``LoopExecutor``, also inline) or ``"thread"`` (a real worker thread that runs what was
handed over once each machine call has returned, in order: expiries on another thread
under real locks, deterministically); the locks are ``"scripted"`` (a counting lock for
one thread: a held lock refuses a non-blocking acquire, which is how a knock from
"another thread" is staged, and its ``acquire`` can be made to raise) or ``"rlock"``
(``threading.RLock``: a knock on the holder's thread is a nested attempt). Real-thread
interleavings are tests/concurrency's business.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from hypothesis import currently_in_test_context, event, reject
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from tests.machines.fault_scripts import (
    DELAYS,
    EXECUTOR_KINDS,
    FAULT_ACTIONS,
    FAULT_SCRIPTS,
    MAYBE_KIND,
    OPEN_SPEC_VIOLATIONS,
    SUBMIT_SITES,
)
from tests.machines.lifecycle_model import (
    CANCEL,
    CLOSE_REFUSE,
    EXCEPTION,
    KNOCK,
    MAX_DEPTH,
    Action,
    CallError,
    LifecycleModel,
    OrderLeftOpenError,
)
from tests.machines.user_code import (
    EXECUTORS,
    KEYS,
    KINDS,
    Context,
    FaultClock,
    PoisonKey,
    assert_free,
    check_raised,
    fail_first_read,
    fault_operation_class,
    raise_injected,
)

__all__ = [
    "LifecycleMachine",
    "lifecycle_machine",
]

R = TypeVar("R")

QUICK_SITES = tuple(site for site in SUBMIT_SITES if site not in OPEN_SPEC_VIOLATIONS)
"""Where Hypothesis's runs inject a submission's fault: the open violations' sites left out."""

OPS = Bundle("ops")


def _submit_rule(sites: tuple[str | None, ...]) -> Callable[[Callable[..., None]], Any]:
    """The ``submit`` rule's strategies, with the fault sites a machine can stage."""
    return rule(
        name=OPS,
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        site=st.sampled_from(sites),
        kind=st.sampled_from(KINDS),
        refusal=st.sampled_from([None, None, "RuntimeError", CLOSE_REFUSE]),
    )


class LifecycleMachine(RuleBasedStateMachine):
    """The lifecycle-versus-model machine: the reference, an inline executor, scripted
    locks (see the module); subclasses choose another implementation or variant."""

    impl_name: ClassVar[str] = "reference"
    executor_kind: ClassVar[str] = "inline"
    scripted: ClassVar[bool] = True
    """A ``ScriptedLock`` per operation (else ``threading.RLock``)."""

    ops = OPS

    def __init__(self, *, leave_out_open: bool = True) -> None:
        super().__init__()
        self.impl = importlib.import_module(f"kpurgatory.{self.impl_name}")
        self.leave_out_open = leave_out_open
        self.model = LifecycleModel(1, 0, True)
        self.clock = FaultClock()
        self.context = Context()
        self.executor = EXECUTORS[self.executor_kind](self.context)
        self.purgatory: Any = None
        self.real: dict[str, Any] = self.context.ops
        self.ending = False
        self.discarded = False

    @initialize(
        tick=st.sampled_from([1, 2, 5]),
        wheel_size=st.sampled_from([2, 4, 20]),
        purge_interval=st.sampled_from([0, 1, 3, 1000]),
        timer_enabled=st.sampled_from([True, True, True, False]),
    )
    def setup(self, tick: int, wheel_size: int, purge_interval: int, timer_enabled: bool) -> None:
        timer = self.impl.SystemTimer(
            "lifecycle", tick, wheel_size, 0, clock=self.clock, executor=self.executor
        )
        self.purgatory = self.context.purgatory = self.impl.DelayedOperationPurgatory(
            "lifecycle",
            timer,
            purge_interval=purge_interval,
            reaper_enabled=False,
            timer_enabled=timer_enabled,
        )
        self.model = LifecycleModel(
            tick,
            purge_interval,
            timer_enabled,
            deferred=self.executor_kind == "thread",
            reentrant_knock=not self.scripted,
        )

    # -- stepping both -----------------------------------------------------------------

    def both(self, what: str, model_call: Callable[[], R], real_call: Callable[[], R]) -> None:
        """Run the call on the model and the implementation; compare result or error."""
        expected: CallError | None = None
        model_result: object = None
        try:
            model_result = model_call()
        except CallError as failed:
            expected = failed
        except OrderLeftOpenError:
            self.disarm()
            self.discarded = True  # the teardown checks nothing more
            if not currently_in_test_context() or self.ending:
                raise
            reject()  # the implementation may have picked another order (R6)
        actual: BaseException | None = None
        real_result: object = None
        try:
            real_result = real_call()
        except BaseException as exc:  # injected KeyboardInterrupt/SystemExit included
            actual = exc
        finally:
            self.disarm()
        try:
            self.model.run_handed()  # the thread executor's hand-overs, in the model
        except OrderLeftOpenError:
            self.discarded = True  # as above: the order of a due group is open (R6)
            self.executor.settle()
            if not currently_in_test_context() or self.ending:
                raise
            reject()
        self.executor.settle()
        outcome = "raised " + ",".join(expected.errors) if expected else "ok"
        if currently_in_test_context():  # also replayed by hand in regression tests
            event(f"{what.split('(')[0]}: {outcome}")
            if self.model.log:
                event(f"nested calls (max depth {MAX_DEPTH})")
        check_raised(actual, expected, what)
        if expected is None:
            assert real_result == model_result, (what, real_result, model_result)
        real_log, model_log = self.context.log, self.model.log
        assert real_log == model_log, f"{what}: nested calls {real_log}, model {model_log}"
        real_log.clear()
        model_log.clear()

    def leave_out(self, violation: str) -> bool:
        """Whether this machine leaves an open spec violation's trigger out (Hypothesis's
        runs do; a replay by hand may say ``leave_out_open=False``)."""
        return self.leave_out_open and violation in OPEN_SPEC_VIOLATIONS

    def disarm(self) -> None:
        """Scoped faults last one public call; nested calls are back on."""
        self.clock.fail_read = self.clock.fail_wait = None
        self.executor.faults.fail_for.clear()
        self.model.clock_fails = None
        self.model.executor_fails.clear()
        for op in self.real.values():
            if op.scripted_lock is not None:
                op.scripted_lock.fail_next = None
                op.scripted_lock.knock_next = None
        self.allow_calls(not self.ending)

    def allow_calls(self, enabled: bool) -> None:
        """Let callbacks call back in, or not: not while a lock fault is armed (the
        model consumes those at the outer call's own acquire)."""
        self.context.calls_enabled = self.model.calls_enabled = enabled

    def arm_lock(self, name: str, kind: str | None) -> None:
        """The operation's next blocking acquire raises ``kind`` (self.scripted locks)."""
        lock = self.real[name].scripted_lock
        if kind is not None and lock is not None:
            self.allow_calls(False)
            lock.fail_next = kind

    # -- rules ---------------------------------------------------------------------

    @rule(target=ops, delay=DELAYS, faults=FAULT_SCRIPTS)
    def new_operation(self, delay: int, faults: dict[tuple[str, int], Action]) -> str:
        """A new operation with its fault script, not submitted yet."""
        return self.create(delay, faults)

    def create(self, delay: int, faults: dict[tuple[str, int], Action]) -> str:
        name = f"op{len(self.real)}"
        lock = None if self.scripted else threading.RLock()
        operation_class = fault_operation_class(self.impl)
        self.real[name] = operation_class(name, delay, dict(faults), self.context, lock)
        self.model.new_op(name, delay, faults)
        return name

    @rule(
        target=ops,
        delay=DELAYS,
        faults=FAULT_SCRIPTS,
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
    )
    def submit_new(self, delay: int, faults: dict[tuple[str, int], Action], keys: list[str]) -> str:
        """A new operation, submitted at once (most operations live this way)."""
        name = self.create(delay, faults)
        self.submit(name, keys, None, EXCEPTION)
        return name

    @rule(
        target=ops,
        scripts=st.lists(st.tuples(DELAYS, FAULT_SCRIPTS), min_size=2, max_size=4),
        key=st.sampled_from(KEYS),
    )
    def submit_batch(
        self, scripts: list[tuple[int, dict[tuple[str, int], Action]]], key: str
    ) -> MultipleResults[str]:
        """Several operations on one key, so that sweeps meet more than one (R53)."""
        names = [self.create(delay, faults) for delay, faults in scripts]
        for name in names:
            self.submit(name, [key], None, EXCEPTION)
        return multiple(*names)

    @rule(
        target=ops,
        first=st.integers(1, 12),
        gaps=st.lists(st.integers(5, 12), min_size=1, max_size=2),
        scripts=st.lists(FAULT_SCRIPTS, min_size=3, max_size=3),
    )
    def submit_staggered(
        self, first: int, gaps: list[int], scripts: list[dict[tuple[str, int], Action]]
    ) -> MultipleResults[str]:
        """Operations timed at different due times (gaps of a tick or more) on
        different keys, so that one drain hands over several in a known order, and
        what the first one's callbacks do can meet the others (R64, R6)."""
        delays = [first]
        for gap in gaps:
            delays.append(delays[-1] + gap)
        names = [self.create(delay, faults) for delay, faults in zip(delays, scripts, strict=False)]
        for name, key in zip(names, KEYS, strict=False):
            self.submit(name, [key], None, EXCEPTION)
        return multiple(*names)

    @_submit_rule(QUICK_SITES)
    def submit(
        self,
        name: str,
        keys: list[str],
        site: str | None,
        kind: str,
        refusal: str | None = None,
    ) -> None:
        """R22-R24, R32, R34, R38, R41, R52, R54, R65: try_complete_else_watch. At the
        executor site the executor may also refuse (``refusal``)."""
        op, model_op = self.real[name], self.model.ops[name]
        next_try = model_op.faults.get(("try_complete", model_op.calls["try_complete"] + 1))
        early = model_op.finished or next_try == CANCEL
        if early and not model_op.submitted and self.leave_out("finished before watching"):
            return
        real_keys: list[Any] = list(keys)
        if site == "key":
            real_keys.insert(len(keys) // 2, PoisonKey(kind))
            self.both(
                f"submit({name}) with a key whose hash raises",
                lambda: fail_first_read(kind),
                lambda: self.purgatory.try_complete_else_watch(op, real_keys),
            )
            return
        if site == "lock":
            self.arm_lock(name, kind)
        elif site == "clock":
            self.clock.fail_read = self.model.clock_fails = kind
        elif site == "executor":
            kind = refusal or kind
            self.executor.faults.fail_for[id(op)] = kind
            self.model.executor_fails[name] = kind
        self.both(
            f"submit({name}, {keys}) with {site} fault {kind}",
            lambda: self.model.submit(model_op, keys, lock_fails=kind if site == "lock" else None),
            lambda: self.purgatory.try_complete_else_watch(op, real_keys),
        )

    @rule(name=ops)
    def make_ready(self, name: str) -> None:
        """The operation's condition now holds (seen at its next try_complete)."""
        self.real[name].ready = self.model.ops[name].ready = True

    @rule(
        key=st.sampled_from(KEYS),
        which=st.sampled_from([None, None, "first", "every"]),
        kind=st.sampled_from(KINDS),
    )
    def check_and_complete(self, key: str, which: str | None, kind: str) -> None:
        """R25, R26, R53: every operation on the key is tried, errors come after. The
        lock of the first pending operation on the key, or of every one, may fail."""
        pending = [op.name for op in self.model.watchers.get(key, ()) if not op.finished]
        failing = {name: kind for name in pending[: 1 if which == "first" else None]}
        if which is None or not self.scripted:
            failing = {}
        for name in failing:
            self.arm_lock(name, kind)
        self.both(
            f"check_and_complete({key!r}) with the locks of {failing} failing",
            lambda: self.model.check_and_complete(key, lock_fails=failing),
            lambda: self.purgatory.check_and_complete(key),
        )

    @rule(
        kind=st.sampled_from(KINDS),
        call=st.sampled_from(["check_and_complete", "cancel_for_key"]),
    )
    def poison_key_call(self, kind: str, call: str) -> None:
        """R54: a key whose hash raises on its first read fails the call with no trace."""
        method = getattr(self.purgatory, call)
        self.both(
            f"{call}(poison key)", lambda: fail_first_read(kind), lambda: method(PoisonKey(kind))
        )

    @rule(key=st.sampled_from(KEYS), knocked=st.lists(ops, max_size=2, unique=True))
    def cancel_for_key(self, key: str, knocked: list[str]) -> None:
        """R29, R55: a knock that met cancel_for_key's hold on the lock is honoured."""
        if not self.scripted:
            knocked = []
        for name in knocked:
            op = self.real[name]
            op.scripted_lock.knock_next = op.maybe_try_complete
            self.allow_calls(False)
        self.both(
            f"cancel_for_key({key!r}) knocked by {knocked}",
            lambda: self.model.cancel_for_key(key, knocked=frozenset(knocked)),
            lambda: [op.name for op in self.purgatory.cancel_for_key(key)],
        )

    @rule(name=ops, via_cancel=st.booleans(), lock_kind=MAYBE_KIND)
    def abandon(self, name: str, via_cancel: bool, lock_kind: str | None) -> None:
        """R40, R56: abandon or cancel(); a lock that fails (armed only on a submitted
        operation, where the spec says it is taken) leaves no trace (R54)."""
        op, model_op = self.real[name], self.model.ops[name]
        if not model_op.submitted or not self.scripted:
            lock_kind = None
        self.arm_lock(name, lock_kind)
        real: Callable[[], object] = op.cancel if via_cancel else lambda: self.purgatory.abandon(op)

        def model() -> object:
            result = self.model.abandon(model_op, via_cancel=via_cancel, lock_fails=lock_kind)
            return None if via_cancel else result  # cancel() returns None

        self.both(
            f"{'cancel' if via_cancel else 'abandon'}({name}) with lock fault {lock_kind}",
            model,
            real,
        )

    @rule(name=ops)
    def force_complete(self, name: str) -> None:
        """R16 from outside the purgatory."""
        self.both(
            f"force_complete({name})",
            lambda: self.model.force_complete(self.model.ops[name]),
            self.real[name].force_complete,
        )

    @rule(name=ops)
    def safe_try_complete(self, name: str) -> None:
        """R18/R41 on the operation itself."""
        self.both(
            f"safe_try_complete({name})",
            lambda: self.model.safe_try_complete(self.model.ops[name], submitted_only=False),
            self.real[name].safe_try_complete,
        )

    @rule(name=ops, action=st.one_of(st.none(), FAULT_ACTIONS))
    def safe_try_complete_or_else(self, name: str, action: str | None) -> None:
        """R19/R41: ``f`` may knock or raise."""
        op = self.real[name]

        def f() -> None:
            if action == KNOCK:
                op.maybe_try_complete()
            elif action is not None:
                raise_injected(action, "safe_try_complete_or_else's f")

        self.both(
            f"safe_try_complete_or_else({name}) with f doing {action}",
            lambda: self.model.safe_try_complete_or_else(self.model.ops[name], action),
            lambda: op.safe_try_complete_or_else(f),
        )

    @rule(name=ops)
    def maybe_try_complete(self, name: str) -> None:
        """R20 with the lock free."""
        self.both(
            f"maybe_try_complete({name})",
            lambda: self.model.maybe_try_complete(self.model.ops[name]),
            self.real[name].maybe_try_complete,
        )

    @precondition(lambda self: any(op.due is not None for op in self.model.ops.values()))
    @rule(
        data=st.data(),
        mode=st.sampled_from(["to due", "past all", "past all"]),
        executor_all=st.sampled_from([None, None, "RuntimeError", "close the first"]),
    )
    def drain_due(self, data: st.DataObject, mode: str, executor_all: str | None) -> None:
        """A drain that hands something over (if anything is timed), the executor
        perhaps refusing (R65) or closing the purgatory at the first one (R64)."""
        self.advance_clock(data, mode, None, {}, executor_all)

    @rule(
        data=st.data(),
        mode=st.sampled_from(["zero", "tick", "to due", "to due", "random", "past all"]),
        wait_kind=st.one_of(st.none(), st.none(), st.none(), st.sampled_from(KINDS)),
        executor_faults=st.dictionaries(ops, st.sampled_from(EXECUTOR_KINDS), max_size=2),
        executor_all=st.one_of(
            st.none(),
            st.none(),
            st.sampled_from(KINDS),
            st.sampled_from(["RuntimeError", "close the first"]),
        ),
    )
    def advance_clock(
        self,
        data: st.DataObject,
        mode: str,
        wait_kind: str | None,
        executor_faults: dict[str, str],
        executor_all: str | None,
    ) -> None:
        """R2-R8, R13, R30, R52-R54: drain, hand every due task over, then raise, then
        purge. The executor's submit may raise for chosen tasks, or for every one due."""
        dues = [op.due for op in self.model.ops.values() if op.due is not None]
        if mode == "zero":
            amount = 0
        elif mode == "tick":
            amount = self.model.tick_ms
        elif mode == "to due":
            target = min(dues, default=self.model.now) - self.model.now
            amount = max(0, target + data.draw(st.integers(-1, 1), label="nudge"))
        elif mode == "past all":
            amount = max(0, max(dues, default=self.model.now) - self.model.now)
        else:
            amount = data.draw(st.integers(0, 60), label="amount")
        due_now = sorted(
            (op.due, op.name)
            for op in self.model.ops.values()
            if op.due is not None and op.due <= self.model.now + amount
        )
        if executor_all == "close the first":
            # R64/R65: the first hand-over closes the purgatory and is refused; it is
            # alone at its due time, so that R6's open order cannot matter.
            dues = [due for due, _ in due_now]
            if dues and dues.count(dues[0]) == 1:
                executor_faults = {due_now[0][1]: CLOSE_REFUSE}
        elif executor_all is not None:
            executor_faults = {name: executor_all for _, name in due_now}
        self.clock.fail_wait = wait_kind
        for name, kind in executor_faults.items():
            self.executor.faults.fail_for[id(self.real[name])] = kind
        self.model.executor_fails.update(executor_faults)
        self.both(
            f"advance_clock({amount}) wait fault {wait_kind} executor faults {executor_faults}",
            lambda: self.model.advance_clock(amount, wait_fails=wait_kind),
            lambda: self.purgatory.advance_clock(amount),
        )

    @rule(amount=st.integers(0, 12))
    def clock_moves(self, amount: int) -> None:
        """R3: the clock moves without a drain (a real clock always has, a little)."""
        self.clock.advance(amount)
        self.model.now += amount

    @precondition(lambda self: not self.model.shut_down)
    @rule(coin=st.integers(0, 15))
    def shutdown(self, coin: int) -> None:
        """R32: later submissions and advances raise RuntimeError; nothing completes.
        (One draw in 16: a purgatory shut down early has little left to show.)"""
        if coin:
            return
        self.both("shutdown()", self.model.shutdown, self.purgatory.shutdown)

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def same_state(self) -> None:
        """Every operation and counter as the model says; each ends at most once."""
        if self.purgatory is None:
            return
        for name, op in self.real.items():
            model_op = self.model.ops[name]
            assert op.calls["on_complete"] <= 1, f"{name}: on_complete ran twice"
            assert op.calls["on_expiration"] <= op.calls["on_complete"], name
            assert not (op.is_abandoned and op.calls["on_complete"]), name
            seen = (op.is_completed, op.is_abandoned, dict(op.calls))
            expected = (model_op.is_completed, model_op.is_abandoned, dict(model_op.calls))
            assert seen == expected, f"{name}: {seen} but the model says {expected}"
            if op.scripted_lock is not None:
                assert not op.scripted_lock.depth, f"{name}: lock left held"
        counters = ("watched", "watched_keys", "num_delayed", "num_purged")
        real = {c: getattr(self.purgatory, c) for c in counters}
        real["estimate"] = self.purgatory.estimated_total_operations
        expected_counters = {c: getattr(self.model, c) for c in counters}
        expected_counters["estimate"] = self.model.estimate
        assert real == expected_counters, f"{real} but the model says {expected_counters}"
        check = getattr(self.purgatory, "_check", None)
        if check is not None:
            check()

    def teardown(self) -> None:
        """Drain far enough, end what is left, and find every counter back at zero."""
        if self.purgatory is None:
            return
        try:
            if not self.discarded:
                self.drain_and_end()
        finally:
            if self.executor_kind == "thread":
                self.executor.shutdown()

    def drain_and_end(self) -> None:
        self.disarm()  # the operations keep their scripts: the final drain is a sweep too
        self.ending = True  # but make no more calls: what they start would not end
        self.allow_calls(False)
        if not self.model.shut_down:
            dues = [op.due for op in self.model.ops.values() if op.due is not None]
            if dues:
                amount = max(0, max(dues) - self.model.now + self.model.tick_ms)
                self.both(
                    "final advance_clock",
                    lambda: self.model.advance_clock(amount),
                    lambda: self.purgatory.advance_clock(amount),
                )
        self.same_state()
        for name, op in self.real.items():
            model_op = self.model.ops[name]
            if model_op.submitted and not model_op.finished:
                assert model_op.due is None or self.model.shut_down
                self.both(
                    f"final abandon({name})",
                    functools.partial(self.model.abandon, model_op),
                    functools.partial(self.purgatory.abandon, op),
                )
        for key in KEYS:
            self.both(
                f"final check_and_complete({key!r})",
                functools.partial(self.model.check_and_complete, key),
                functools.partial(self.purgatory.check_and_complete, key),
            )
        self.same_state()
        assert (
            self.purgatory.watched,
            self.purgatory.watched_keys,
            self.purgatory.num_delayed,
        ) == (0, 0, 0)
        for op in self.real.values():
            assert op.is_completed or op.is_abandoned or not self.model.ops[op.name].submitted
        self.both("final shutdown()", self.model.shutdown, self.purgatory.shutdown)
        if not self.scripted:
            assert_free([op.lock for op in self.real.values()])


class OptimizedLifecycleMachine(LifecycleMachine):
    impl_name = "optimized"


class LoopLifecycleMachine(LifecycleMachine):
    """On the aio layer's ``LoopExecutor``."""

    executor_kind = "loop"


class OptimizedLoopLifecycleMachine(LoopLifecycleMachine):
    impl_name = "optimized"


class RLockLifecycleMachine(LifecycleMachine):
    """With ``threading.RLock`` operation locks: a knock on the holder's thread is a
    nested attempt, and a lock's ``acquire`` cannot be made to raise."""

    scripted = False

    @_submit_rule(tuple(site for site in QUICK_SITES if site != "lock"))
    def submit(
        self, name: str, keys: list[str], site: str | None, kind: str, refusal: str | None = None
    ) -> None:
        """As ``LifecycleMachine.submit``, with no fault at the lock."""
        super().submit(name, keys, site, kind, refusal)


class OptimizedRLockLifecycleMachine(RLockLifecycleMachine):
    impl_name = "optimized"


class ThreadLifecycleMachine(RLockLifecycleMachine):
    """With expiries on a real worker thread (a thread executor needs real locks)."""

    executor_kind = "thread"


class OptimizedThreadLifecycleMachine(ThreadLifecycleMachine):
    impl_name = "optimized"


LIFECYCLE_MACHINES: dict[tuple[str, str, str], type[LifecycleMachine]] = {
    (machine.impl_name, machine.executor_kind, "scripted" if machine.scripted else "rlock"): machine
    for machine in (
        LifecycleMachine,
        OptimizedLifecycleMachine,
        LoopLifecycleMachine,
        OptimizedLoopLifecycleMachine,
        RLockLifecycleMachine,
        OptimizedRLockLifecycleMachine,
        ThreadLifecycleMachine,
        OptimizedThreadLifecycleMachine,
    )
}


def lifecycle_machine(
    impl_name: str, executor: str = "inline", locks: str = "scripted"
) -> type[LifecycleMachine]:
    """The machine for the implementation ``impl_name`` on ``executor`` (``"inline"``,
    ``"loop"`` or ``"thread"``) with ``locks`` (``"scripted"`` or ``"rlock"``)."""
    if executor == "thread" and locks != "rlock":
        raise ValueError("a thread executor needs real locks: locks='rlock'")
    return LIFECYCLE_MACHINES[impl_name, executor, locks]
