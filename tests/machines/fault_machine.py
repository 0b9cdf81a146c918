"""The lifecycle machine: one implementation against ``lifecycle_model``, with user code that fails.

``make_lifecycle_machine(impl)`` builds a Hypothesis ``RuleBasedStateMachine`` that drives
one implementation package (reference, optimized, a compiled build) on a manual clock and
an inline executor, and applies every call to ``tests.machines.lifecycle_model`` as well.
After every step it compares results, raised exception types (one error as is, several as
an exception group, R53), each operation's state and callback counts, and the purgatory's
counters; the teardown drains, ends every operation and checks that the counters return
to zero.

Fault injection is the machine's extra dimension. Each operation carries a script chosen
by Hypothesis: its ``try_complete`` may raise on its n-th call (an ``Exception``, or a
``BaseException``: ``KeyboardInterrupt``, ``SystemExit``, ``CancelledError``) or knock
(``maybe_try_complete`` while its lock is held, as another thread would), and its
``on_complete`` or ``on_expiration`` may raise. For user code whose call count the spec
does not fix, the fault is armed for one public call and the model says whether it
fires: the operation's lock (``acquire`` raises, or a knock arrives while it is held),
the clock (``now_ms``, ``wait``), the executor's ``submit`` for a given task, and a key
whose ``__hash__`` raises on its first read. Single-threaded by design: the operation
locks here only count (a held lock refuses a non-blocking acquire, which is how a
knock from "another thread" is staged); races are tests/concurrency's business.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from types import ModuleType
from typing import Any, TypeVar

from hypothesis import currently_in_test_context, event
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

from kpurgatory import InlineExecutor, ManualClock
from tests.machines.lifecycle_model import (
    CALLBACKS,
    CANCEL,
    EXCEPTION,
    KNOCK,
    SHUTDOWN,
    CallError,
    LifecycleModel,
)

__all__ = [
    "OPEN_SPEC_VIOLATIONS",
    "ERRORS",
    "KEYS",
    "InjectedError",
    "Runaway",
    "make_lifecycle_machine",
]

R = TypeVar("R")


class InjectedError(Exception):
    """An ordinary failure of user code."""


class Runaway(BaseException):
    """``try_complete`` was called absurdly often: a blocking path is spinning."""


ERRORS: dict[str, type[BaseException]] = {
    EXCEPTION: InjectedError,
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
    "CancelledError": asyncio.CancelledError,
}
"""What injected user code raises, by the model's label."""

_REFUSALS: dict[str, type[BaseException]] = {
    "RuntimeError": RuntimeError,
    "ValueError": ValueError,
}
"""The library's own refusals the model predicts (R32, R34, R40)."""

KINDS = tuple(ERRORS)
KEYS = ("a", "b", "c")
RUNAWAY_CALLS = 60
"""More ``try_complete`` calls than any run of the machine makes on one operation."""


def _raise(kind: str, where: str) -> None:
    raise ERRORS[kind](f"injected {kind} from {where}")


class FaultClock(ManualClock):
    """A ``ManualClock`` whose next ``now_ms`` or ``wait`` can be made to raise."""

    def __init__(self) -> None:
        super().__init__(0)
        self.fail_read: str | None = None
        self.fail_wait: str | None = None

    def now_ms(self) -> int:
        kind, self.fail_read = self.fail_read, None
        if kind is not None:
            _raise(kind, "the clock's now_ms")
        return super().now_ms()

    def wait(self, condition: Any, timeout_ms: int, next_due: Callable[[], int | None]) -> int:
        kind, self.fail_wait = self.fail_wait, None
        if kind is not None:
            _raise(kind, "the clock's wait")
        return super().wait(condition, timeout_ms, next_due)


class FaultExecutor(InlineExecutor):
    """An ``InlineExecutor`` whose ``submit`` raises when handed a chosen task."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_for: dict[int, str] = {}

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        for arg in (fn, *args):
            kind = self.fail_for.pop(id(getattr(arg, "__self__", arg)), None)
            if kind is not None:
                _raise(kind, "the executor's submit")
        return super().submit(fn, *args, **kwargs)


class ScriptedLock:
    """An operation lock for one thread: counts its depth; a held lock refuses a
    non-blocking acquire (so a knock behaves as one from another thread, R20). Its next
    blocking ``acquire`` can raise, or knock once it holds the lock."""

    def __init__(self) -> None:
        self.depth = 0
        self.fail_next: str | None = None
        self.knock_next: Callable[[], object] | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking:
            if self.depth:
                return False
            self.depth += 1
            return True
        kind, self.fail_next = self.fail_next, None
        if kind is not None:
            _raise(kind, "the operation lock's acquire")
        self.depth += 1
        knock, self.knock_next = self.knock_next, None
        if knock is not None:
            knock()
        return True

    def release(self) -> None:
        assert self.depth > 0, "released a lock that is not held"
        self.depth -= 1

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class PoisonKey:
    """A key whose first ``__hash__`` raises (R54: the call fails with no trace)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.hashed = False

    def __hash__(self) -> int:
        if not self.hashed:
            self.hashed = True
            _raise(self.kind, "a key's __hash__")
        return id(self)


@functools.cache
def fault_operation_class(impl: ModuleType) -> type[Any]:
    """A ``DelayedOperation`` of ``impl`` that completes iff ``ready`` and follows its script."""

    class FaultOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, name: str, delay_ms: int, faults: dict[tuple[str, int], str]) -> None:
            self.scripted_lock = ScriptedLock()
            super().__init__(delay_ms, self.scripted_lock)
            self.name = name
            self.faults = faults
            self.ready = False
            self.calls: Counter[str] = Counter()
            self.purgatory: Any = None  # what a SHUTDOWN action shuts down

        def _user(self, callback: str) -> None:
            self.calls[callback] += 1
            count = self.calls[callback]
            if count > RUNAWAY_CALLS:
                raise Runaway(f"{self.name}.{callback} called {count} times")
            action = self.faults.get((callback, count))
            if action == KNOCK:
                self.maybe_try_complete()
            elif action == CANCEL:
                self.cancel()
            elif action == SHUTDOWN:
                self.purgatory.shutdown()
            elif action is not None:
                _raise(action, f"{self.name}.{callback} call {count}")

        def try_complete(self) -> bool:
            self._user("try_complete")
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            self._user("on_complete")

        def on_expiration(self) -> None:
            self._user("on_expiration")

        def __repr__(self) -> str:
            return f"FaultOperation({self.name!r})"

    return FaultOperation


def _label(exc: BaseException) -> str:
    for label, cls in {**ERRORS, **_REFUSALS}.items():
        if type(exc) is cls:
            return label
    return f"{type(exc).__name__}: {exc}"


def check_raised(actual: BaseException | None, expected: CallError | None, what: str) -> None:
    """``actual`` is what ``expected`` says: nothing, one error as is, or a group (R53)."""
    if expected is None:
        assert actual is None, f"{what} raised {actual!r}; the model expects no error"
        return
    assert actual is not None, f"{what} returned; the model expects {expected.errors}"
    if len(expected.errors) == 1:
        assert _label(actual) == expected.errors[0], (
            f"{what} raised {actual!r}; the model expects {expected.errors[0]}"
        )
        return
    assert isinstance(actual, BaseExceptionGroup), (
        f"{what} raised {actual!r}; the model expects a group of {expected.errors}"
    )
    got = [_label(exc) for exc in actual.exceptions]
    if expected.ordered:
        assert got == expected.errors, f"{what} raised {got}; the model expects {expected.errors}"
    else:
        assert Counter(got) == Counter(expected.errors), (what, got, expected.errors)
    all_plain = all(label == EXCEPTION for label in expected.errors)
    assert isinstance(actual, ExceptionGroup) == all_plain, f"{what}: group type {actual!r}"


FAULT_ACTIONS = st.sampled_from((KNOCK, *KINDS))
TRY_ACTIONS = st.one_of(
    st.sampled_from((KNOCK, *KINDS)),
    st.sampled_from((KNOCK, *KINDS)),
    st.sampled_from((KNOCK, *KINDS)),
    st.sampled_from((CANCEL, CANCEL, CANCEL, SHUTDOWN)),
)
"""What try_complete may do besides raise: knock, cancel its own operation, or shut the
purgatory down (the single-threaded forms of the submission races of tests/concurrency)."""


def _knock_then_raise(first: int, gap: int, kind: str) -> dict[tuple[str, int], str]:
    """A knock on one try_complete and a raise on a later one: the R41 retry that fails."""
    return {("try_complete", first): KNOCK, ("try_complete", first + gap): kind}


_SCRIPT_ENTRY = st.one_of(
    st.tuples(st.tuples(st.just("try_complete"), st.integers(1, 4)), TRY_ACTIONS),
    st.tuples(st.tuples(st.sampled_from(CALLBACKS[1:]), st.just(1)), st.sampled_from(KINDS)),
)

FAULT_SCRIPTS = st.one_of(
    st.just({}),
    st.builds(_knock_then_raise, st.integers(1, 2), st.integers(1, 2), st.sampled_from(KINDS)),
    st.lists(_SCRIPT_ENTRY, max_size=3).map(dict),
)
"""Per operation: which call of which callback raises (try_complete may also knock,
cancel its operation or shut the purgatory down)."""

SUBMIT_SITES: tuple[str | None, ...] = (None, None, None, None, "lock", "clock", "executor", "key")
"""Where a submission's scoped fault is injected (None: nowhere), read when a machine is made."""

OPEN_SPEC_VIOLATIONS: tuple[str, ...] = ()
"""What the quick machines leave out while a spec violation it found is open (each
replayed by a test in test_lifecycle_model.py). None is open now: the two this machine
found, ``"lock"`` (an operation lock whose ``acquire`` raised kept the submission's
claim, R54) and ``"finished before watching"`` (an operation finished before its
submission's watching step stayed counted as unfinished, R61), are fixed, and their
replays are ordinary tests."""

DELAYS = st.one_of(st.integers(-3, 12), st.integers(-3, 40))
"""Operation delays: mostly near, so that several fall due in one drain."""

MAYBE_KIND = st.one_of(st.none(), st.none(), st.sampled_from(KINDS))


def make_lifecycle_machine(
    impl: ModuleType, *, leave_out_open: bool = False
) -> type[RuleBasedStateMachine]:
    """The lifecycle-versus-model machine for the implementation package ``impl``; with
    ``leave_out_open`` it does not trigger the ``OPEN_SPEC_VIOLATIONS``."""
    left_out = OPEN_SPEC_VIOLATIONS if leave_out_open else ()
    sites = tuple(site for site in SUBMIT_SITES if site not in left_out)
    operation_class = fault_operation_class(impl)

    class LifecycleVersusModel(RuleBasedStateMachine):
        ops = Bundle("ops")

        def __init__(self) -> None:
            super().__init__()
            self.model = LifecycleModel(1, 0, True)
            self.clock = FaultClock()
            self.executor = FaultExecutor()
            self.purgatory: Any = None
            self.real: dict[str, Any] = {}

        @initialize(
            tick=st.sampled_from([1, 2, 5]),
            wheel_size=st.sampled_from([2, 4, 20]),
            purge_interval=st.sampled_from([0, 1, 3, 1000]),
            timer_enabled=st.sampled_from([True, True, True, False]),
        )
        def setup(
            self, tick: int, wheel_size: int, purge_interval: int, timer_enabled: bool
        ) -> None:
            timer = impl.SystemTimer(
                "lifecycle", tick, wheel_size, 0, clock=self.clock, executor=self.executor
            )
            self.purgatory = impl.DelayedOperationPurgatory(
                "lifecycle",
                timer,
                purge_interval=purge_interval,
                reaper_enabled=False,
                timer_enabled=timer_enabled,
            )
            self.model = LifecycleModel(tick, purge_interval, timer_enabled)

        # -- stepping both -----------------------------------------------------------------

        def both(self, what: str, model_call: Callable[[], R], real_call: Callable[[], R]) -> None:
            """Run the call on the model and the implementation; compare result or error."""
            expected: CallError | None = None
            model_result: object = None
            try:
                model_result = model_call()
            except CallError as failed:
                expected = failed
            actual: BaseException | None = None
            real_result: object = None
            try:
                real_result = real_call()
            except BaseException as exc:  # injected KeyboardInterrupt/SystemExit included
                actual = exc
            finally:
                self.disarm()
            outcome = "raised " + ",".join(expected.errors) if expected else "ok"
            if currently_in_test_context():  # also replayed by hand in regression tests
                event(f"{what.split('(')[0]}: {outcome}")
            check_raised(actual, expected, what)
            if expected is None:
                assert real_result == model_result, (what, real_result, model_result)

        def leave_out(self, violation: str) -> bool:
            """Whether this machine leaves an open spec violation's trigger out."""
            return violation in left_out

        def disarm(self) -> None:
            """Scoped faults last one public call."""
            self.clock.fail_read = self.clock.fail_wait = None
            self.executor.fail_for.clear()
            for op in self.real.values():
                op.scripted_lock.fail_next = None
                op.scripted_lock.knock_next = None

        # -- rules ---------------------------------------------------------------------

        @rule(target=ops, delay=DELAYS, faults=FAULT_SCRIPTS)
        def new_operation(self, delay: int, faults: dict[tuple[str, int], str]) -> str:
            """A new operation with its fault script, not submitted yet."""
            return self.create(delay, faults)

        def create(self, delay: int, faults: dict[tuple[str, int], str]) -> str:
            name = f"op{len(self.real)}"
            self.real[name] = operation_class(name, delay, dict(faults))
            self.real[name].purgatory = self.purgatory
            self.model.new_op(name, delay, faults)
            return name

        @rule(
            target=ops,
            delay=DELAYS,
            faults=FAULT_SCRIPTS,
            keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        )
        def submit_new(
            self, delay: int, faults: dict[tuple[str, int], str], keys: list[str]
        ) -> str:
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
            self, scripts: list[tuple[int, dict[tuple[str, int], str]]], key: str
        ) -> MultipleResults[str]:
            """Several operations on one key, so that sweeps meet more than one (R53)."""
            names = [self.create(delay, faults) for delay, faults in scripts]
            for name in names:
                self.submit(name, [key], None, EXCEPTION)
            return multiple(*names)

        @rule(
            name=ops,
            keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
            site=st.sampled_from(sites),
            kind=st.sampled_from(KINDS),
        )
        def submit(self, name: str, keys: list[str], site: str | None, kind: str) -> None:
            """R22-R24, R32, R34, R38, R41, R52, R54: try_complete_else_watch."""
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
                    lambda: _fail(kind),
                    lambda: self.purgatory.try_complete_else_watch(op, real_keys),
                )
                return
            if site == "lock":
                op.scripted_lock.fail_next = kind
            elif site == "clock":
                self.clock.fail_read = kind
            elif site == "executor":
                self.executor.fail_for[id(op)] = kind
            self.both(
                f"submit({name}, {keys}) with {site} fault {kind}",
                lambda: self.model.submit(
                    model_op,
                    keys,
                    lock_fails=kind if site == "lock" else None,
                    clock_fails=kind if site == "clock" else None,
                    executor_fails=kind if site == "executor" else None,
                ),
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
            if which is None:
                failing = {}
            for name in failing:
                self.real[name].scripted_lock.fail_next = kind
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
            self.both(f"{call}(poison key)", lambda: _fail(kind), lambda: method(PoisonKey(kind)))

        @rule(key=st.sampled_from(KEYS), knocked=st.lists(ops, max_size=2, unique=True))
        def cancel_for_key(self, key: str, knocked: list[str]) -> None:
            """R29, R55: a knock that met cancel_for_key's hold on the lock is honoured."""
            for name in knocked:
                op = self.real[name]
                op.scripted_lock.knock_next = op.maybe_try_complete
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
            if not model_op.submitted:
                lock_kind = None
            op.scripted_lock.fail_next = lock_kind
            real: Callable[[], object] = (
                op.cancel if via_cancel else lambda: self.purgatory.abandon(op)
            )

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
                    _raise(action, "safe_try_complete_or_else's f")

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

        @rule(
            data=st.data(),
            mode=st.sampled_from(["zero", "tick", "to due", "to due", "random", "past all"]),
            wait_kind=st.one_of(st.none(), st.none(), st.none(), st.sampled_from(KINDS)),
            executor_faults=st.dictionaries(ops, st.sampled_from(KINDS), max_size=2),
            executor_all=st.one_of(st.none(), st.none(), st.none(), st.sampled_from(KINDS)),
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
            if executor_all is not None:
                executor_faults = {
                    op.name: executor_all
                    for op in self.model.ops.values()
                    if op.due is not None and op.due <= self.model.now + amount
                }
            self.clock.fail_wait = wait_kind
            for name, kind in executor_faults.items():
                self.executor.fail_for[id(self.real[name])] = kind
            self.both(
                f"advance_clock({amount}) wait fault {wait_kind} executor faults {executor_faults}",
                lambda: self.model.advance_clock(
                    amount, wait_fails=wait_kind, executor_fails=executor_faults
                ),
                lambda: self.purgatory.advance_clock(amount),
            )

        @rule(amount=st.integers(0, 12))
        def clock_moves(self, amount: int) -> None:
            """R3: the clock moves without a drain (a real clock always has, a little)."""
            self.clock.advance(amount)
            self.model.now += amount

        @precondition(lambda self: not self.model.shut_down)
        @rule(coin=st.integers(0, 7))
        def shutdown(self, coin: int) -> None:
            """R32: later submissions and advances raise RuntimeError; nothing completes.
            (One draw in eight: a purgatory shut down early has little left to show.)"""
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
            self.disarm()  # the operations keep their scripts: the final drain is a sweep too
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

    LifecycleVersusModel.__name__ = LifecycleVersusModel.__qualname__ = (
        f"LifecycleVersusModel_{impl.__name__.rsplit('.', 1)[-1]}"
    )
    return LifecycleVersusModel


def _fail(kind: str) -> None:
    """What the model says of a call whose first read of a key raised: that error, no trace."""
    raise CallError([kind])
