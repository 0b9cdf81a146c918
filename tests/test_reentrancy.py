"""Callbacks that call back into the library, on both implementations (R63-R66).

Each test pins one row of the re-entrancy table of docs/spec.md: user code the library
calls (``try_complete``, ``on_complete``, ``on_expiration``, an executor's ``submit``, a
key's ``__hash__``) makes a public call, ``shutdown`` included, and the enclosing call
must still keep every rule. Each failed on the code before these rules (the regression
it names in its docstring).
Keys that fail in housekeeping, the lifecycle and calls from callbacks (R67-R69)
are in ``test_reentrant_calls.py``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import ManualClock
from kpurgatory.executors import InlineExecutor
from tests.support import KnockStagingLock

Hook = Callable[[Any], object]


def hooked_operation(impl: ModuleType) -> type[Any]:
    """An operation whose callbacks run a hook (a callable of the operation) per call."""

    class Hooked(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.ready = False
            self.hooks: dict[str, list[Hook | None]] = {}
            self.calls: dict[str, int] = {}
            self.log: list[str] = []

        def _call(self, name: str) -> None:
            count = self.calls[name] = self.calls.get(name, 0) + 1
            self.log.append(name)
            hooks = self.hooks.get(name, [])
            hook = hooks[count - 1] if count <= len(hooks) else None
            if hook is not None:
                hook(self)

        def try_complete(self) -> bool:
            self._call("try_complete")
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            self._call("on_complete")

        def on_expiration(self) -> None:
            self._call("on_expiration")

    return Hooked


def inline_purgatory(impl: ModuleType, clock: ManualClock, **kwargs: Any) -> Any:
    timer = impl.SystemTimer("r", clock=clock, executor=kwargs.pop("executor", InlineExecutor()))
    return impl.DelayedOperationPurgatory("r", timer, reaper_enabled=False, **kwargs)


# -- R63: the operation lock is re-entrant ------------------------------------------------


@pytest.mark.parametrize(
    "lock", [threading.Lock(), threading.Semaphore(), threading.BoundedSemaphore()]
)
def test_r63_a_lock_that_cannot_be_taken_twice_is_refused(impl: ModuleType, lock: Any) -> None:
    """Regression: an operation with a plain ``threading.Lock`` and a delay of 0 deadlocked
    inside its own submission on an inline executor (the add hands the due task over at
    once and ``run`` takes the lock the submission holds)."""
    with pytest.raises(TypeError, match="lock must be re-entrant"):
        hooked_operation(impl)(0, lock)


def test_r63_a_due_operation_with_a_shared_rlock_expires_inside_its_submission(
    impl: ModuleType,
) -> None:
    """The case that deadlocked with a plain lock, on the lock the spec asks for."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(0, threading.RLock())
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert op.log == ["try_complete", "try_complete", "on_complete", "on_expiration"]
    assert op.is_completed and purgatory.watched == 0 and purgatory.num_delayed == 0


# -- R64: shutdown from inside a callback ---------------------------------------------------


def test_r64_shutdown_from_on_expiration_stops_the_rest_of_the_drain(impl: ModuleType) -> None:
    """Regression: ``shutdown()`` from an ``on_expiration`` returned, and the other
    operations of the same drain still ran ``on_complete`` and ``on_expiration``.
    Whichever expires first (equal due times: R6 leaves the order open) shuts down."""
    clock = ManualClock(0)
    purgatory = inline_purgatory(impl, clock)
    cls = hooked_operation(impl)
    ops = [cls(5), cls(5), cls(6)]
    for index, op in enumerate(ops):
        op.hooks["on_expiration"] = [lambda op: purgatory.shutdown()]
        purgatory.try_complete_else_watch(op, [f"k{index}"])
    clock.advance(10)
    purgatory.timer.advance_clock(0)
    assert sum("on_complete" in op.log for op in ops) == 1
    assert sum("on_expiration" in op.log for op in ops) == 1
    assert sum(not op.is_completed and not op.is_abandoned for op in ops) == 2


def test_r64_shutdown_from_try_complete_refuses_the_submission(impl: ModuleType) -> None:
    """A submission whose own ``try_complete`` shuts the purgatory down is refused as a
    call after shutdown: ``RuntimeError``, rolled back (R38), nothing left watched or
    timed."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(50)
    op.hooks["try_complete"] = [None, lambda op: purgatory.shutdown()]
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert not op.is_completed and not op.is_abandoned


@pytest.mark.parametrize("timer_enabled", [True, False])
def test_r64_shutdown_from_the_first_try_refuses_the_submission(
    impl: ModuleType, timer_enabled: bool
) -> None:
    """Also with no timer to refuse the add (R33): the submission checks the purgatory
    itself before its timer step, so an awaiting caller is never left with an operation
    watched in a purgatory that is gone."""
    purgatory = inline_purgatory(impl, ManualClock(0), timer_enabled=timer_enabled)
    op = hooked_operation(impl)(50)
    op.hooks["try_complete"] = [lambda op: purgatory.shutdown()]
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0


def test_r64_shutdown_from_the_knocked_retry_refuses_the_submission(impl: ModuleType) -> None:
    """The R41 retry is part of the submission (R54): a shutdown from its
    ``try_complete`` refuses the submission too, rolled back."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(50, KnockStagingLock())
    op.hooks["try_complete"] = [
        None,
        lambda op: op.maybe_try_complete(),  # a knock while the submission holds the lock
        lambda op: purgatory.shutdown(),  # the retry it left to the submission
    ]
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a"])
    assert op.calls["try_complete"] == 3
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert not op.is_completed and not op.is_abandoned


def test_r64_shutdown_from_the_hand_over_inside_the_add_refuses_the_submission(
    impl: ModuleType,
) -> None:
    """Found by the re-entrant lifecycle machine: the executor's ``submit`` of an
    operation due at once (inside the submission's timer add) shuts the purgatory down,
    then refuses as a shut-down executor does (R65: quiet, the timer is closed). The
    submission returned False with its operation watched and counted in a closed
    purgatory; it is refused and rolled back like any other step after shutdown."""

    class ShuttingExecutor(InlineExecutor):
        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            purgatory.shutdown()
            raise RuntimeError("cannot schedule new futures after shutdown")

    purgatory = inline_purgatory(impl, ManualClock(0), executor=ShuttingExecutor())
    op = hooked_operation(impl)(0)
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert not op.is_completed and "on_complete" not in op.log


# -- R65: an executor's refusal --------------------------------------------------------------


class RefusingExecutor(InlineExecutor):
    """An open executor whose ``submit`` raises ``RuntimeError`` (as CPython's thread pool
    does when no thread can be started)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = True

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.refuse:
            raise RuntimeError("can't start new thread")
        return super().submit(fn, *args, **kwargs)


def test_r65_a_refused_hand_over_of_a_due_submission_leaves_no_trace(impl: ModuleType) -> None:
    """Regression: the ``RuntimeError`` was logged as "executor is shut down" and
    swallowed, and the submission returned False with its operation watched for ever."""
    executor = RefusingExecutor()
    purgatory = inline_purgatory(impl, ManualClock(0), executor=executor)
    op = hooked_operation(impl)(0)
    with pytest.raises(RuntimeError, match="can't start new thread") as raised:
        purgatory.try_complete_else_watch(op, ["k"])
    assert any("was not handed over" in note for note in raised.value.__notes__)
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    executor.refuse = False
    assert purgatory.try_complete_else_watch(op, ["k"]) is False  # no trace: accepted again
    assert op.log[-2:] == ["on_complete", "on_expiration"]


def test_r65_a_refused_hand_over_in_a_drain_is_raised(impl: ModuleType) -> None:
    """Regression: a drain whose executor raised ``RuntimeError`` returned True and its
    operations never expired, with nothing but a misleading log line."""
    clock = ManualClock(0)
    executor = RefusingExecutor()
    executor.refuse = False
    purgatory = inline_purgatory(impl, clock, executor=executor)
    op = hooked_operation(impl)(5)
    purgatory.try_complete_else_watch(op, ["k"])
    executor.refuse = True
    clock.advance(5)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        purgatory.timer.advance_clock(0)
    assert "on_complete" not in op.log


def test_r65_a_refusal_from_an_executor_closed_meanwhile_is_quiet(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """The one refusal that is expected: the timer was closed while it handed over (here
    the executor closes it, then refuses, as a shut-down thread pool does). The task
    stays unrun, as every task of a closed timer (R14), and the drain does not raise."""
    clock = ManualClock(0)

    class ClosingExecutor(InlineExecutor):
        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            timer.close()
            raise RuntimeError("cannot schedule new futures after shutdown")

    timer = impl.SystemTimer("t", clock=clock, executor=ClosingExecutor())
    op = hooked_operation(impl)(5)
    timer.add(op)
    clock.advance(5)
    with caplog.at_level(logging.ERROR):
        timer.advance_clock(0)
    assert op.log == [] and timer.size == 0
    assert not caplog.records


# -- R66: cancel_for_key from inside a submission -----------------------------------------------


def test_r66_cancel_for_key_inside_the_submission_leaves_no_timer_entry(
    impl: ModuleType,
) -> None:
    """Regression: ``cancel_for_key(k)`` from the second ``try_complete`` of an operation
    being submitted on ``k`` returned it, and the submission then added it to the timer,
    where it expired: when ``cancel_for_key`` returns, none of its operations is timed."""
    clock = ManualClock(0)
    purgatory = inline_purgatory(impl, clock)
    op = hooked_operation(impl)(10)
    returned: list[Any] = []
    op.hooks["try_complete"] = [None, lambda op: returned.extend(purgatory.cancel_for_key("k"))]
    assert purgatory.try_complete_else_watch(op, ["k", "other"]) is False
    assert returned == [op]
    assert purgatory.num_delayed == 0
    clock.advance(20)
    purgatory.advance_clock(0)
    assert "on_complete" not in op.log
    assert purgatory.watched == 1  # still on its other key (R29)
    assert purgatory.check_and_complete("other") == 0
    op.ready = True
    assert purgatory.check_and_complete("other") == 1
