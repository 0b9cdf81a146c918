"""The user code the lifecycle machine (``tests.machines.fault_machine``) runs, and its faults.

A clock whose ``now_ms`` or ``wait`` raises, executors whose ``submit`` raises or shuts
the purgatory down first (inline, on the aio loop, or a gated real thread), a scripted
operation lock that raises or is knocked on, a key whose ``__hash__`` raises, and an
operation whose callbacks follow a script (raise, knock, cancel, shut down, or call back
in: ``perform``). ``check_raised`` compares what a call raised with what the model says.
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

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.aio import LoopExecutor
from tests.machines.lifecycle_model import (
    CANCEL,
    CLOSE_REFUSE,
    EXCEPTION,
    KNOCK,
    MAX_DEPTH,
    SHUTDOWN,
    Action,
    Call,
    CallError,
)
from tests.support import LockStatement

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


def raise_injected(kind: str, where: str) -> None:
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
            raise_injected(kind, "the clock's now_ms")
        return super().now_ms()

    def wait(self, condition: Any, timeout_ms: int, next_due: Callable[[], int | None]) -> int:
        kind, self.fail_wait = self.fail_wait, None
        if kind is not None:
            raise_injected(kind, "the clock's wait")
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
                raise_injected(kind, "the executor's submit")


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


class ScriptedLock(LockStatement):
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
            raise_injected(kind, "the operation lock's acquire")
        self.depth += 1
        knock, self.knock_next = self.knock_next, None
        if knock is not None:
            knock()
        return True

    def release(self) -> None:
        assert self.depth > 0, "released a lock that is not held"
        self.depth -= 1


class PoisonKey:
    """A key whose first ``__hash__`` raises (R54: the call fails with no trace)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.hashed = False

    def __hash__(self) -> int:
        if not self.hashed:
            self.hashed = True
            raise_injected(self.kind, "a key's __hash__")
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
                raise_injected(action, f"{self.name}.{callback} call {count}")

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


EXECUTORS: dict[str, Callable[[Context], Any]] = {
    "inline": FaultExecutor,
    "loop": FaultLoopExecutor,
    "thread": GatedThreadExecutor,
}


def assert_free(locks: list[Any]) -> None:
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


def fail_first_read(kind: str) -> None:
    """What the model says of a call whose first read of a key raised: that error, no trace."""
    raise CallError([kind])
