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
whose ``__hash__`` raises on its first read.

Re-entrant actions (R63-R69): a callback's script may also make a public call (a
``lifecycle_model.Call``: ``check_and_complete``, ``cancel_for_key``, ``abandon``,
``cancel``, ``force_complete``, ``try_complete_else_watch``, ``advance_clock``,
``shutdown``, on its own operation or another), nested up to ``MAX_DEPTH``; it catches
what the call raises, and the machine compares every nested call's outcome with the
model's. The executor's ``submit`` may close the purgatory and then refuse (R65).

Variants (``make_lifecycle_machine``): ``executor`` is ``"inline"`` (``InlineExecutor``),
``"loop"`` (the aio layer's ``LoopExecutor``, also inline) or ``"thread"`` (a real worker
thread that runs what was handed over once each machine call has returned, in order:
expiries on another thread under real locks, deterministically); ``locks`` is
``"scripted"`` (a counting lock for one thread: a held lock refuses a non-blocking
acquire, which is how a knock from "another thread" is staged, and its ``acquire`` can
be made to raise) or ``"rlock"`` (``threading.RLock``: a knock on the holder's thread
is a nested attempt). Real-thread interleavings are tests/concurrency's business.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future
from types import ModuleType
from typing import Any, TypeVar

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

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.aio import LoopExecutor
from tests.machines.lifecycle_model import (
    CALLBACKS,
    CANCEL,
    CLOSE_REFUSE,
    EXCEPTION,
    KNOCK,
    MAX_DEPTH,
    SHUTDOWN,
    Action,
    Call,
    CallError,
    LifecycleModel,
    OrderLeftOpenError,
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


class Context:
    """What the machine's user code shares: the purgatory and operations a callback may
    call (R69), how deep the calls are nested, and the log of their outcomes."""

    def __init__(self) -> None:
        self.purgatory: Any = None
        self.ops: dict[str, Any] = {}
        self.depth = 0
        self.calls_enabled = True
        self.log: list[tuple[str, str, tuple[object, ...]]] = []


class SubmitFaults:
    """An executor's ``submit`` that raises when handed a chosen task, or first shuts the
    purgatory down and then refuses, as a thread pool shut down meanwhile does (R65)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.fail_for: dict[int, str] = {}

    def check(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        for arg in (fn, *args):
            kind = self.fail_for.pop(id(getattr(arg, "__self__", arg)), None)
            if kind == CLOSE_REFUSE:
                self.context.purgatory.shutdown()
                raise RuntimeError("cannot schedule new futures after shutdown")
            if kind == "RuntimeError":
                raise RuntimeError("can't start new thread (injected)")
            if kind is not None:
                _raise(kind, "the executor's submit")


class _FaultsInSubmit(Executor):
    """``SubmitFaults`` before an inline executor's ``submit`` (a hand-over runs inside
    ``submit``, on the caller's thread): mixed into the executors below."""

    def __init__(self, context: Context) -> None:
        super().__init__()
        self.faults = SubmitFaults(context)

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        self.faults.check(fn, args)
        return super().submit(fn, *args, **kwargs)

    def settle(self) -> None:
        """Nothing waits: every hand-over ran inside ``submit``."""


class FaultExecutor(_FaultsInSubmit, InlineExecutor):
    """An ``InlineExecutor`` with ``SubmitFaults``."""


class FaultLoopExecutor(_FaultsInSubmit, LoopExecutor):
    """The aio layer's ``LoopExecutor`` (as on the loop) with ``SubmitFaults``."""


class GatedThreadExecutor(Executor):
    """A real thread executor whose one worker runs the tasks handed over, in order, only
    while ``settle`` lets it (between machine calls): expiries run on another thread,
    under the operations' real locks, and the run stays deterministic. With
    ``SubmitFaults``; what a task raises stays in its future (R13)."""

    def __init__(self, context: Context) -> None:
        self.faults = SubmitFaults(context)
        self._tasks: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]] | None]
        self._tasks = queue.Queue()
        self._gate = threading.Event()
        self._worker = threading.Thread(target=self._work, name="machine-expiry", daemon=True)
        self._worker.start()

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        self.faults.check(fn, args)
        future: Future[R] = Future()
        self._tasks.put((functools.partial(fn, **kwargs), args, future))
        return future

    def _work(self) -> None:
        while True:
            item = self._tasks.get()
            try:
                if item is None:
                    return
                self._gate.wait()
                fn, args, future = item
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # KeyboardInterrupt in a worker included
                    future.set_exception(exc)
            finally:
                self._tasks.task_done()

    def settle(self) -> None:
        """Let the worker run every task handed over (and those they hand over)."""
        self._gate.set()
        self._tasks.join()
        self._gate.clear()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._tasks.put(None)
        self._gate.set()
        if wait:
            self._worker.join()


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


def _labels(exc: BaseException) -> tuple[str, ...]:
    """The model's labels of what a nested call raised (a group: its members, sorted)."""
    if isinstance(exc, BaseExceptionGroup):
        return tuple(sorted(_label(member) for member in exc.exceptions))
    return (_label(exc),)


def perform(context: Context, op: Any, call: Call) -> object:
    """A callback's public call (R69), its result as the model writes it."""
    purgatory = context.purgatory
    if call.target == 0:
        target = op
    else:
        names = list(context.ops)
        target = context.ops[names[(call.target - 1) % len(names)]]
    if call.name == "check_and_complete":
        return purgatory.check_and_complete(call.key)
    if call.name == "cancel_for_key":
        return [cancelled.name for cancelled in purgatory.cancel_for_key(call.key)]
    if call.name == "abandon":
        return purgatory.abandon(target)
    if call.name == "cancel":
        return target.cancel()
    if call.name == "force_complete":
        return target.force_complete()
    if call.name == "submit":
        return purgatory.try_complete_else_watch(target, list(call.keys))
    if call.name == "advance_clock":
        return purgatory.advance_clock(call.amount)
    assert call.name == "shutdown", call
    return purgatory.shutdown()


@functools.cache
def fault_operation_class(impl: ModuleType) -> type[Any]:
    """A ``DelayedOperation`` of ``impl`` that completes iff ``ready`` and follows its script."""

    class FaultOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(
            self,
            name: str,
            delay_ms: int,
            faults: dict[tuple[str, int], Action],
            context: Context,
            lock: Any = None,
        ) -> None:
            self.scripted_lock: ScriptedLock | None = ScriptedLock() if lock is None else None
            super().__init__(delay_ms, self.scripted_lock if lock is None else lock)
            self.name = name
            self.faults = faults
            self.ready = False
            self.calls: Counter[str] = Counter()
            self.context = context  # what a SHUTDOWN action or a Call works on

        def _call_back(self, where: str, call: Call) -> None:
            context = self.context
            if not context.calls_enabled or context.depth >= MAX_DEPTH:
                return
            context.depth += 1
            try:
                outcome: tuple[object, ...] = ("ok", perform(context, self, call))
            except Runaway:
                raise
            except BaseException as exc:  # user code catching what its call raised
                outcome = ("raised", _labels(exc))
            finally:
                context.depth -= 1
            context.log.append((where, repr(call), outcome))

        def _user(self, callback: str) -> None:
            self.calls[callback] += 1
            count = self.calls[callback]
            if count > RUNAWAY_CALLS:
                raise Runaway(f"{self.name}.{callback} called {count} times")
            action = self.faults.get((callback, count))
            if isinstance(action, Call):
                self._call_back(f"{self.name}.{callback}#{count}", action)
            elif action == KNOCK:
                self.maybe_try_complete()
            elif action == CANCEL:
                self.cancel()
            elif action == SHUTDOWN:
                self.context.purgatory.shutdown()
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
    classes = {**ERRORS, **_REFUSALS}
    all_plain = all(issubclass(classes[label], Exception) for label in expected.errors)
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


TARGETS = st.integers(0, 4)
"""0: the operation whose callback runs; k: the (k - 1)-th operation made, modulo."""

_KEY_CALLS = st.builds(
    Call, st.sampled_from(["check_and_complete", "cancel_for_key"]), key=st.sampled_from(KEYS)
)
_OP_CALLS = st.builds(
    Call, st.sampled_from(["abandon", "cancel", "force_complete"]), target=TARGETS
)
_SUBMIT_CALLS = st.builds(
    Call,
    st.just("submit"),
    target=TARGETS,
    keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2).map(tuple),
)
_CLOCK_CALLS = st.builds(Call, st.just("advance_clock"), amount=st.integers(0, 15))
CALLS = st.one_of(_KEY_CALLS, _OP_CALLS, _SUBMIT_CALLS, _CLOCK_CALLS)
"""What a callback calls back in with (R69), shutdown aside."""

ENDING_CALLS = st.one_of(*(CALLS,) * 8, st.just(Call("shutdown")))
"""What on_complete or on_expiration calls back in with; one in nine shuts the purgatory
down (a try's shutdown is TRY_ACTIONS' ``SHUTDOWN``): a shut-down purgatory refuses
most later steps, so shutdowns are kept rare."""

_SCRIPT_ENTRY = st.one_of(
    st.tuples(st.tuples(st.just("try_complete"), st.integers(1, 4)), TRY_ACTIONS),
    st.tuples(st.tuples(st.sampled_from(CALLBACKS[1:]), st.just(1)), st.sampled_from(KINDS)),
)

_CALL_ENTRY = st.one_of(
    st.tuples(st.tuples(st.just("try_complete"), st.integers(1, 3)), CALLS),
    st.tuples(st.tuples(st.sampled_from(CALLBACKS[1:]), st.just(1)), ENDING_CALLS),
)


def _one_call(callback: str, count: int, call: Call) -> dict[tuple[str, int], Action]:
    return {(callback, count): call}


_KNOWN_SHAPES = st.builds(_one_call, st.just("try_complete"), st.just(2), _KEY_CALLS)
"""The shape of a re-entrancy bug found by review, weighted up: a sweep of one of its
keys from the submission's second try (R66). (Shutdown from an expiry, R64, is staged
by the executor's "close the first" of ``drain_due``: a script that shuts down from
every expiry ends most runs early.)"""

FAULT_SCRIPTS = st.one_of(
    st.just({}),
    st.builds(_knock_then_raise, st.integers(1, 2), st.integers(1, 2), st.sampled_from(KINDS)),
    st.lists(_SCRIPT_ENTRY, max_size=3).map(dict),
    st.lists(_SCRIPT_ENTRY, min_size=1, max_size=3).map(dict),
    st.lists(_CALL_ENTRY, min_size=1, max_size=3).map(dict),
    st.lists(st.one_of(_SCRIPT_ENTRY, _CALL_ENTRY), min_size=2, max_size=3).map(dict),
    _KNOWN_SHAPES,
)
"""Per operation: which call of which callback raises (try_complete may also knock,
cancel its operation or shut the purgatory down) or calls back in (a ``Call``)."""

EXECUTOR_KINDS = (*KINDS, "RuntimeError", CLOSE_REFUSE)
"""What the executor's submit does for a chosen task: raise (``RuntimeError`` as a pool
that cannot start a thread does, R65), or close the purgatory and refuse."""

SUBMIT_SITES: tuple[str | None, ...] = (None, None, None, None, "lock", "clock", "executor", "key")
"""Where a submission's scoped fault is injected (None: nowhere), read when a machine is made."""

OPEN_SPEC_VIOLATIONS: tuple[str, ...] = ()
"""What the quick machines leave out while a spec violation it found is open (each
replayed by a test in test_lifecycle_model.py). None is open now. Fixed, their replays
now ordinary tests: ``"lock"`` (an operation lock whose ``acquire`` raised kept the
submission's claim, R54), ``"finished before watching"`` (an operation finished before
its submission's watching step stayed counted as unfinished, R61), and a submission
shut down by its own callback (timers off, its R41 retry) or inside its own timer add
(an executor that shuts down, then refuses), which returned normally (R64)."""

DELAYS = st.one_of(st.integers(-3, 12), st.integers(-3, 40))
"""Operation delays: mostly near, so that several fall due in one drain."""

MAYBE_KIND = st.one_of(st.none(), st.none(), st.sampled_from(KINDS))


EXECUTORS: dict[str, Callable[[Context], Any]] = {
    "inline": FaultExecutor,
    "loop": FaultLoopExecutor,
    "thread": GatedThreadExecutor,
}


def make_lifecycle_machine(
    impl: ModuleType,
    *,
    leave_out_open: bool = False,
    executor: str = "inline",
    locks: str = "scripted",
) -> type[RuleBasedStateMachine]:
    """The lifecycle-versus-model machine for the implementation package ``impl``; with
    ``leave_out_open`` it does not trigger the ``OPEN_SPEC_VIOLATIONS``. ``executor``
    and ``locks``: see the module."""
    if executor == "thread" and locks != "rlock":
        raise ValueError("a thread executor needs real locks: locks='rlock'")
    left_out = OPEN_SPEC_VIOLATIONS if leave_out_open else ()
    scripted = locks == "scripted"
    sites = tuple(
        site for site in SUBMIT_SITES if site not in left_out and (scripted or site != "lock")
    )
    operation_class = fault_operation_class(impl)
    make_executor = EXECUTORS[executor]

    class LifecycleVersusModel(RuleBasedStateMachine):
        ops = Bundle("ops")

        def __init__(self) -> None:
            super().__init__()
            self.model = LifecycleModel(1, 0, True)
            self.clock = FaultClock()
            self.context = Context()
            self.executor = make_executor(self.context)
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
        def setup(
            self, tick: int, wheel_size: int, purge_interval: int, timer_enabled: bool
        ) -> None:
            timer = impl.SystemTimer(
                "lifecycle", tick, wheel_size, 0, clock=self.clock, executor=self.executor
            )
            self.purgatory = self.context.purgatory = impl.DelayedOperationPurgatory(
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
                deferred=executor == "thread",
                reentrant_knock=not scripted,
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
            """Whether this machine leaves an open spec violation's trigger out."""
            return violation in left_out

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
            """The operation's next blocking acquire raises ``kind`` (scripted locks)."""
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
            lock = None if scripted else threading.RLock()
            self.real[name] = operation_class(name, delay, dict(faults), self.context, lock)
            self.model.new_op(name, delay, faults)
            return name

        @rule(
            target=ops,
            delay=DELAYS,
            faults=FAULT_SCRIPTS,
            keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        )
        def submit_new(
            self, delay: int, faults: dict[tuple[str, int], Action], keys: list[str]
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
            names = [
                self.create(delay, faults) for delay, faults in zip(delays, scripts, strict=False)
            ]
            for name, key in zip(names, KEYS, strict=False):
                self.submit(name, [key], None, EXCEPTION)
            return multiple(*names)

        @rule(
            name=ops,
            keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
            site=st.sampled_from(sites),
            kind=st.sampled_from(KINDS),
            refusal=st.sampled_from([None, None, "RuntimeError", CLOSE_REFUSE]),
        )
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
                    lambda: _fail(kind),
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
                lambda: self.model.submit(
                    model_op, keys, lock_fails=kind if site == "lock" else None
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
            if which is None or not scripted:
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
            self.both(f"{call}(poison key)", lambda: _fail(kind), lambda: method(PoisonKey(kind)))

        @rule(key=st.sampled_from(KEYS), knocked=st.lists(ops, max_size=2, unique=True))
        def cancel_for_key(self, key: str, knocked: list[str]) -> None:
            """R29, R55: a knock that met cancel_for_key's hold on the lock is honoured."""
            if not scripted:
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
            if not model_op.submitted or not scripted:
                lock_kind = None
            self.arm_lock(name, lock_kind)
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
                if executor == "thread":
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
            if not scripted:
                _assert_free([op.lock for op in self.real.values()])

    LifecycleVersusModel.__name__ = LifecycleVersusModel.__qualname__ = (
        f"LifecycleVersusModel_{impl.__name__.rsplit('.', 1)[-1]}"
    )
    return LifecycleVersusModel


def _assert_free(locks: list[Any]) -> None:
    """Every lock can be taken by another thread: none was left held."""
    held: list[int] = []

    def probe() -> None:
        for index, lock in enumerate(locks):
            if lock.acquire(blocking=False):
                lock.release()
            else:
                held.append(index)

    prober = threading.Thread(target=probe)
    prober.start()
    prober.join()
    assert not held, f"operation locks left held: {held}"


def _fail(kind: str) -> None:
    """What the model says of a call whose first read of a key raised: that error, no trace."""
    raise CallError([kind])
