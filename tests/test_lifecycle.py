"""Lifecycle races, on every implementation: one deterministic regression test per bug.

Each test reproduces a race an independent review found (submission vs
``cancel_for_key``, submission vs ``shutdown``, ``shutdown`` by a lock holder, two
``shutdown`` calls, ``maybe_try_complete`` vs a blocking path, an unbounded timeout on a
real clock, abandoning a watched operation) and pins the rule that now holds (R22, R29,
R38-R42). The interleaving is forced with events inside ``try_complete``, a timer whose
``close`` stalls, or a lock that reports a waiter; every wait is bounded, so a
regression fails instead of hanging. The reaper loop and the wait for termination are
in ``test_reaper_lifecycle.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock, MonotonicClock
from kpurgatory.spec.events import OperationCompleted, OperationExpired
from tests.support import Recorder, WaiterLock, operation_class, recorded_clock

WAIT_S = 5.0
"""Upper bound for any wait; a healthy run needs milliseconds."""

BLOCKED_S = 0.1
"""How long a thread that must stay blocked is given to (wrongly) finish."""


def manual_purgatory(impl: ModuleType, clock: ManualClock, **kwargs: Any) -> Any:
    timer = impl.SystemTimer("lifecycle", clock=clock, executor=InlineExecutor())
    return impl.DelayedOperationPurgatory("lifecycle", timer=timer, reaper_enabled=False, **kwargs)


def start(target: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """Run ``target`` on a daemon thread; exceptions are collected, not lost."""
    errors: list[BaseException] = []

    def body() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, errors


def hooked_operation(impl: ModuleType) -> type[Any]:
    """A ready-flag operation that runs ``on_try[n]`` at the end of its n-th ``try_complete``
    (1-based), after the condition was checked."""
    base = operation_class(impl)

    class HookedOperation(base):  # type: ignore[misc,valid-type]
        def __init__(self, delay_ms: int, recorder: Recorder, lock: Any = None) -> None:
            super().__init__(delay_ms, "op", recorder, lock)
            self.on_try: dict[int, Callable[[], None]] = {}

        def try_complete(self) -> bool:
            hook = self.on_try.get(self.try_calls + 1)
            result = bool(super().try_complete())
            if hook is not None:
                hook()
            return result

    return HookedOperation


# ---- bug 1: cancel_for_key racing try_complete_else_watch (R22, R29) --------------------


def test_r29_cancel_for_key_during_submission_leaves_no_timer_entry(impl: ModuleType) -> None:
    """R29/R22: cancel_for_key returns the op of a submission still under way, and the op
    never expires afterwards: the timer add happens under the op lock cancel_for_key takes."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    op = hooked_operation(impl)(100, recorder)
    in_second_try, go = threading.Event(), threading.Event()

    def slow_second_try() -> None:
        in_second_try.set()
        assert go.wait(WAIT_S)

    op.on_try[2] = slow_second_try
    submitter, submit_errors = start(lambda: purg.try_complete_else_watch(op, ["k"]))
    assert in_second_try.wait(WAIT_S)  # watched on "k", timer add not done yet
    cancelled: list[Any] = []
    canceller, cancel_errors = start(lambda: cancelled.extend(purg.cancel_for_key("k")))
    canceller.join(BLOCKED_S)  # the buggy version returns here, before the add
    go.set()
    submitter.join(WAIT_S)
    canceller.join(WAIT_S)
    assert not submitter.is_alive() and not canceller.is_alive()
    assert submit_errors == [] and cancel_errors == []
    assert cancelled == [op]
    assert purg.num_delayed == 0, "cancel_for_key returned the op, yet it is still timed"
    purg.advance_clock(1_000)
    assert recorder.events == [], "an op returned by cancel_for_key completed or expired"


# ---- bug 2: a submission racing shutdown (R38) -------------------------------------------


def test_r38_submission_failing_on_shutdown_leaves_no_trace(impl: ModuleType) -> None:
    """R38: shutdown during the call makes the timer add fail; the call raises and leaves
    no watch, no estimate, no claim, no timer entry; check_and_complete never completes it."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    op = hooked_operation(impl)(100, recorder)
    op.on_try[2] = purg.shutdown
    with pytest.raises(RuntimeError, match="shut down"):
        purg.try_complete_else_watch(op, ["a", "b"])
    state = (purg.watched, purg.watched_keys, purg.estimated_total_operations)
    assert state == (0, 0, 0)
    assert purg.num_delayed == 0 and not op.is_completed
    op.ready = True
    assert purg.check_and_complete("a") == 0 and recorder.events == []
    other = manual_purgatory(impl, ManualClock(0))  # the claim was released (R34)
    assert other.try_complete_else_watch(op, ["a"]) is True
    assert recorder.names(OperationCompleted) == ["op"]


def test_r38_rolled_back_operation_is_not_completed_by_a_concurrent_check(
    impl: ModuleType,
) -> None:
    """R38: a check_and_complete that saw the op watched before the rollback, and waits for
    its lock, does not complete it after the submission failed."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    lock = WaiterLock()
    op = hooked_operation(impl)(100, recorder, lock)
    counted: list[int] = []
    checker: list[threading.Thread] = []

    def second_try() -> None:
        thread, _ = start(lambda: counted.append(purg.check_and_complete("k")))
        checker.append(thread)
        assert lock.contended.wait(WAIT_S)  # it holds a snapshot with op, and waits for us
        purg.shutdown()  # the timer add that follows this (failed) second try fails
        op.ready = True  # the waiting check_and_complete would complete it if it could

    op.on_try[2] = second_try
    with pytest.raises(RuntimeError):
        purg.try_complete_else_watch(op, ["k"])
    op.ready = True
    checker[0].join(WAIT_S)
    assert counted == [0] and recorder.events == [] and not op.is_completed


def test_r38_try_complete_raising_leaves_no_trace(impl: ModuleType) -> None:
    """R38: an exception from try_complete (first or second call) is rolled back."""
    for failing_call in (1, 2):
        clock, recorder = recorded_clock()
        purg = manual_purgatory(impl, clock)
        op = hooked_operation(impl)(100, recorder)

        def boom() -> None:
            raise LookupError("condition check failed")

        op.on_try[failing_call] = boom
        with pytest.raises(LookupError):
            purg.try_complete_else_watch(op, ["a", "b"])
        assert (purg.watched, purg.estimated_total_operations, purg.num_delayed) == (0, 0, 0)
        del op.on_try[failing_call]
        assert purg.try_complete_else_watch(op, ["a"]) is False  # may be submitted again
        assert (purg.watched, purg.num_delayed) == (1, 1)


def test_r38_on_complete_raising_keeps_the_operation_completed(impl: ModuleType) -> None:
    """R38: the exception is an op that completed during the call: it stays completed."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    base = operation_class(impl)

    class Raising(base):  # type: ignore[misc,valid-type]
        def on_complete(self) -> None:
            raise LookupError("respond failed")

    op = Raising(100, "raising", recorder)
    op.ready = True
    with pytest.raises(LookupError):
        purg.try_complete_else_watch(op, ["a"])
    assert op.is_completed
    with pytest.raises(ValueError, match="already passed"):
        purg.try_complete_else_watch(op, ["a"])


# ---- bug 3: shutdown by a thread that holds a lock an operation uses (R39) ---------------


def shut_down_while_holding(
    purg: Any, shared: WaiterLock, expire: Callable[[], None], deadlock: str
) -> None:
    """R39: a thread takes ``shared``, calls ``expire`` (an expiry then waits for
    ``shared``) and, once the expiry waits, shuts ``purg`` down: the shutdown must return
    (else ``deadlock``) and the purgatory terminate."""
    done = threading.Event()

    def coordinator() -> None:
        with shared:
            expire()
            assert shared.contended.wait(WAIT_S)
            purg.shutdown()
            done.set()

    thread, errors = start(coordinator)
    thread.join(WAIT_S)
    assert done.is_set() and errors == [], deadlock
    assert purg.await_termination(WAIT_S)


def test_r39_shutdown_by_a_lock_holder_does_not_wait_for_the_executor(impl: ModuleType) -> None:
    """R39: the expiry runs on executor-<name> and waits for the shared lock the shutting
    thread holds; shutdown returns anyway, and the expiry completes after the release."""
    clock, recorder = recorded_clock()
    timer = impl.SystemTimer(f"locked-{impl.__name__}", clock=clock)  # owned worker thread
    purg = impl.DelayedOperationPurgatory("locked", timer=timer, reaper_enabled=False)
    shared = WaiterLock()
    op = operation_class(impl)(10, "grouped", recorder, shared)
    assert purg.try_complete_else_watch(op, ["group"]) is False

    def expire() -> None:
        purg.advance_clock(10)  # hands the expiry to the worker, which waits for shared

    shut_down_while_holding(purg, shared, expire, "shutdown deadlocked on its own lock")
    assert recorder.names(OperationExpired) == ["grouped"]


@pytest.mark.realtime
def test_r39_shutdown_by_a_lock_holder_with_an_inline_reaper(impl: ModuleType) -> None:
    """R39: InlineExecutor + reaper: the reaper itself runs the expiry and waits for the lock;
    shutdown by the holder returns, and await_termination sees the reaper exit afterwards."""
    _, recorder = recorded_clock()
    timer = impl.SystemTimer("inline-reaper", executor=InlineExecutor())
    purg = impl.DelayedOperationPurgatory("inline-reaper", timer=timer)
    shared = WaiterLock()
    op = operation_class(impl)(1, "grouped", recorder, shared)

    def submit() -> None:
        assert purg.try_complete_else_watch(op, ["group"]) is False  # the reaper expires it

    shut_down_while_holding(purg, shared, submit, "shutdown deadlocked on the reaper")
    assert op.is_completed


# ---- bug 4: concurrent shutdown calls (R39) -----------------------------------------------


def test_r39_concurrent_shutdown_returns_only_when_shut_down(impl: ModuleType) -> None:
    """R39: a second shutdown arriving while the first is closing the timer waits for it."""
    in_close, go = threading.Event(), threading.Event()

    class StallingTimer(impl.SystemTimer):  # type: ignore[misc,name-defined]
        def close(self) -> None:
            in_close.set()
            assert go.wait(WAIT_S)
            super().close()

    timer = StallingTimer("stall", clock=ManualClock(0), executor=InlineExecutor())
    purg = impl.DelayedOperationPurgatory("stall", timer=timer, reaper_enabled=False)
    first, first_errors = start(purg.shutdown)
    assert in_close.wait(WAIT_S)
    closed_when_second_returned: list[bool] = []

    def second_shutdown() -> None:
        purg.shutdown()
        closed_when_second_returned.append(timer.closed)

    second, second_errors = start(second_shutdown)
    second.join(BLOCKED_S)
    go.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert first_errors == [] and second_errors == []
    assert closed_when_second_returned == [True], "the second shutdown returned too early"


# ---- bug 5: maybe_try_complete vs a blocking path (R41) ----------------------------------


@pytest.mark.parametrize("path", ["check_and_complete", "safe_try_complete"])
def test_r41_blocking_path_honours_a_knock(impl: ModuleType, path: str) -> None:
    """R41: maybe_try_complete finds the lock held by a blocking path and leaves its attempt
    to the holder; the holder makes it after releasing, so the completion is not lost."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    op = hooked_operation(impl)(10_000, recorder)
    assert purg.try_complete_else_watch(op, ["k"]) is False
    knocks: list[bool] = []

    def knock_while_held() -> None:
        def event() -> None:  # the condition becomes true, then the event knocks
            op.ready = True
            knocks.append(op.maybe_try_complete())

        thread, errors = start(event)
        thread.join(WAIT_S)
        assert errors == [] and knocks == [False]  # lock busy: left to the holder

    op.on_try[3] = knock_while_held
    if path == "check_and_complete":
        purg.check_and_complete("k")
    else:
        op.safe_try_complete()
    assert op.is_completed, "the knock was lost until the timeout"
    assert op.try_calls == 4


# ---- bug 6: unbounded timeouts on a real clock (R42) --------------------------------------


@pytest.mark.realtime
@pytest.mark.parametrize("subject", ["timer", "purgatory"])
def test_r42_longest_timeout_waits_and_wakes(impl: ModuleType, subject: str) -> None:
    """R42: advance_clock(2**63 - 1) on a MonotonicClock waits (no OverflowError) and an
    earlier add still ends the wait."""
    timer = impl.SystemTimer("unbounded", clock=MonotonicClock(), executor=InlineExecutor())
    purg = impl.DelayedOperationPurgatory("unbounded", timer=timer, reaper_enabled=False)
    target = timer if subject == "timer" else purg
    thread, errors = start(lambda: target.advance_clock(2**63 - 1))
    thread.join(BLOCKED_S)
    assert errors == [], f"advance_clock raised {errors!r}"
    assert thread.is_alive(), "advance_clock returned without anything due"
    recorder = Recorder(ManualClock(0))
    purg.try_complete_else_watch(operation_class(impl)(1, "soon", recorder), ["k"])
    thread.join(WAIT_S)
    assert not thread.is_alive() and errors == []
    purg.shutdown()


# ---- bug 7: abandoning a watched operation (R40) ------------------------------------------


def test_r40_abandoned_waits_do_not_leak(impl: ModuleType) -> None:
    """R40: 1,000 operations abandoned with cancel() leave nothing watched or timed, and
    are never completed or expired later; the live one is unaffected."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    live = operation_class(impl)(500, "live", recorder)
    purg.try_complete_else_watch(live, ["k", "other"])
    abandoned = [operation_class(impl)(100, f"gone-{i}", recorder) for i in range(1_000)]
    for op in abandoned:
        assert purg.try_complete_else_watch(op, ["k", f"own-{op.name}"]) is False
    for op in abandoned:
        op.cancel()
    assert (purg.watched, purg.watched_keys, purg.num_delayed) == (2, 2, 1)
    assert all(op.is_abandoned and not op.is_completed for op in abandoned)
    for op in abandoned:
        op.ready = True
    assert purg.check_and_complete("k") == 0
    purg.advance_clock(1_000)
    assert [event for event in recorder.events if "gone" in repr(event)] == []
    assert recorder.names(OperationExpired) == ["live"] and purg.num_delayed == 0
    assert "abandoned" in impl.DelayedOperation.__repr__(abandoned[0])


def test_r40_abandon_results_and_errors(impl: ModuleType) -> None:
    """R40: True once for a pending op, then False; False after completion or expiry;
    ValueError for an op not submitted here; TypeError for a non-operation; cancel() on
    a never-submitted op is the plain timer cancel."""
    clock, recorder = recorded_clock()
    purg = manual_purgatory(impl, clock)
    other = manual_purgatory(impl, ManualClock(0))
    op_class = operation_class(impl)
    pending, completed, expired = (op_class(100, name, recorder) for name in "pce")
    for op in (pending, completed, expired):
        purg.try_complete_else_watch(op, ["k"])
    assert purg.abandon(pending) is True and purg.abandon(pending) is False
    completed.ready = True
    assert purg.check_and_complete("k") == 1 and purg.abandon(completed) is False
    purg.advance_clock(100)
    assert expired.is_completed and purg.abandon(expired) is False
    assert not expired.is_abandoned and completed.is_completed
    never = op_class(100, "never", recorder)
    with pytest.raises(ValueError, match="not submitted"):
        purg.abandon(never)
    other.try_complete_else_watch(never, ["k"])
    with pytest.raises(ValueError, match="not submitted"):
        purg.abandon(never)
    with pytest.raises(TypeError, match="operation"):
        purg.abandon(object())
    timer_only = op_class(100, "timer-only", recorder)
    purg.timer.add(timer_only)
    assert purg.num_delayed == 1
    timer_only.cancel()
    assert purg.num_delayed == 0 and not timer_only.is_abandoned
