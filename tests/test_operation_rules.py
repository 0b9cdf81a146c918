"""DelayedOperation rules R16-R21 through the public API.

Deterministic on a ManualClock with InlineExecutor, except the few checks that need a
second thread to hold or probe a lock; those use Events and bounded joins, so they
stop by themselves in well under a second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.spec.events import OperationCompleted, OperationExpired
from tests.support import KnockStagingLock, Recorder, TrackingLock, operation_class, recorded_clock

WAIT_S = 5.0
"""Upper bound for any wait on a helper thread; a healthy run needs milliseconds."""


def probe_class(impl: ModuleType) -> type[Any]:
    """A ``DelayedOperation`` of ``impl`` whose hooks are plain callables set per test.

    ``condition`` decides ``try_complete``; ``on_complete_hook`` and
    ``on_expiration_hook`` run inside the callbacks; ``log`` records the call order.
    """

    class Probe(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.log: list[str] = []
            self.condition: Callable[[], bool] = lambda: False
            self.on_complete_hook: Callable[[], None] = lambda: None
            self.on_expiration_hook: Callable[[], None] = lambda: None

        def try_complete(self) -> bool:
            self.log.append("try_complete")
            return bool(self.condition() and self.force_complete())

        def on_complete(self) -> None:
            self.log.append("on_complete")
            self.on_complete_hook()

        def on_expiration(self) -> None:
            self.log.append("on_expiration")
            self.on_expiration_hook()

        def __repr__(self) -> str:
            return "Probe()"

    return Probe


def make_timer(impl: ModuleType, clock: ManualClock) -> Any:
    """A tick-1 timer of ``impl`` on ``clock`` that runs tasks inline."""
    return impl.SystemTimer("ops", clock=clock, executor=InlineExecutor())


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a helper thread and return its result; fail if it does not finish."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    worker.start()
    worker.join(WAIT_S)
    assert not worker.is_alive(), "helper thread blocked"
    return result[0]


# ---- R16: force_complete exactly once --------------------------------------------------


def test_r16_force_complete_succeeds_exactly_once(impl: ModuleType) -> None:
    """R16: the first force_complete returns True and calls on_complete; later ones do nothing."""
    op = probe_class(impl)(100)
    assert op.is_completed is False
    assert op.force_complete() is True
    assert op.is_completed is True
    assert op.force_complete() is False
    assert op.force_complete() is False
    assert op.log == ["on_complete"]


def test_r16_concurrent_force_complete_has_one_winner(impl: ModuleType) -> None:
    """R16: of many threads racing force_complete, exactly one wins (compare-and-set)."""
    op = probe_class(impl)(100)
    racers = 8
    barrier = threading.Barrier(racers)
    results: list[bool] = []
    guard = threading.Lock()

    def race() -> None:
        barrier.wait(WAIT_S)
        won = op.force_complete()
        with guard:
            results.append(won)

    threads = [threading.Thread(target=race, daemon=True) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert sorted(results) == [False] * (racers - 1) + [True]
    assert op.log == ["on_complete"]


def test_r16_force_complete_cancels_timer_entry_before_on_complete(impl: ModuleType) -> None:
    """R16/R28: the timer entry is gone by the time on_complete runs; it never expires."""
    clock = ManualClock(0)
    with make_timer(impl, clock) as timer:
        op = probe_class(impl)(10)
        sizes_seen: list[int] = []
        op.on_complete_hook = lambda: sizes_seen.append(timer.size)
        timer.add(op)
        assert timer.size == 1
        assert op.force_complete() is True
        assert sizes_seen == [0]
        assert timer.size == 0
        assert timer.advance_clock(20) is False
        assert op.log == ["on_complete"]


def test_r16_on_complete_raising_leaves_completed_and_propagates(impl: ModuleType) -> None:
    """R16: if on_complete raises, the winner sees the exception and the op stays completed."""
    op = probe_class(impl)(10)

    def fail() -> None:
        raise LookupError("on_complete failed")

    op.on_complete_hook = fail
    with pytest.raises(LookupError, match="on_complete failed"):
        op.force_complete()
    assert op.is_completed is True
    assert op.force_complete() is False
    assert op.log == ["on_complete"]


# ---- R17: expiry -----------------------------------------------------------------------


def test_r17_expiry_calls_on_complete_then_on_expiration(impl: ModuleType) -> None:
    """R17: the timer's run completes the op, then calls on_expiration, at the due time."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        op = operation_class(impl)(10, "op", recorder)
        timer.add(op)
        assert timer.advance_clock(9) is False
        assert timer.advance_clock(1) is True
    assert recorder.events == [
        OperationCompleted("op", 10, "force_complete"),
        OperationExpired("op", 10),
    ]
    assert op.is_completed is True
    assert op.try_calls == 0


def test_r17_run_holds_the_lock_during_both_callbacks(impl: ModuleType) -> None:
    """R17: on_complete and on_expiration run with the operation's lock held."""
    lock = TrackingLock()
    op = probe_class(impl)(10, lock)
    held: list[tuple[str, bool]] = []
    op.on_complete_hook = lambda: held.append(("on_complete", lock.held_by_me()))
    op.on_expiration_hook = lambda: held.append(("on_expiration", lock.held_by_me()))
    op.run()
    assert held == [("on_complete", True), ("on_expiration", True)]
    assert not lock.held_by_me()


def test_r17_no_expiration_when_already_completed(impl: ModuleType) -> None:
    """R17: run after an early completion calls neither callback; on_expiration at most once."""
    early = probe_class(impl)(10)
    early.force_complete()
    early.run()
    assert early.log == ["on_complete"]
    expired = probe_class(impl)(10)
    expired.run()
    expired.run()
    assert expired.log == ["on_complete", "on_expiration"]


def test_r17_expiry_waits_for_a_try_complete_holding_the_lock(impl: ModuleType) -> None:
    """R17: on_complete of an expiry never overlaps a try_complete under the same lock."""
    op = probe_class(impl)(10)
    entered, release = threading.Event(), threading.Event()
    overlap: list[bool] = []
    in_try = threading.Event()

    def slow_condition() -> bool:
        in_try.set()
        entered.set()
        release.wait(WAIT_S)
        in_try.clear()
        return False

    op.condition = slow_condition
    op.on_complete_hook = lambda: overlap.append(in_try.is_set())
    holder = threading.Thread(target=op.safe_try_complete, daemon=True)
    holder.start()
    assert entered.wait(WAIT_S)
    expirer = threading.Thread(target=op.run, daemon=True)
    expirer.start()
    expirer.join(0.05)  # give it a chance to (wrongly) run on_complete now
    release.set()
    holder.join(WAIT_S)
    expirer.join(WAIT_S)
    assert not holder.is_alive() and not expirer.is_alive()
    assert overlap == [False]
    assert op.log == ["try_complete", "on_complete", "on_expiration"]


# ---- R18: safe_try_complete ------------------------------------------------------------


def test_r18_safe_try_complete_returns_try_complete_under_the_lock(impl: ModuleType) -> None:
    """R18: safe_try_complete runs try_complete with the lock held and returns its result."""
    lock = TrackingLock()
    op = probe_class(impl)(10, lock)
    held: list[bool] = []

    def condition() -> bool:
        held.append(lock.held_by_me())
        return len(held) == 2

    op.condition = condition
    assert op.safe_try_complete() is False
    assert op.safe_try_complete() is True
    assert held == [True, True]
    assert op.is_completed is True


def test_r18_safe_try_complete_skips_completed_operation(impl: ModuleType) -> None:
    """R18: once completed, safe_try_complete returns False without calling try_complete."""
    recorder = Recorder(ManualClock(0))
    op = operation_class(impl)(10, "op", recorder)
    op.ready = True
    op.force_complete()
    assert op.safe_try_complete() is False
    assert op.try_calls == 0


# ---- R19: safe_try_complete_or_else ----------------------------------------------------


def test_r19_or_else_skips_f_when_first_try_succeeds(impl: ModuleType) -> None:
    """R19: if the first try_complete is True, f is never called and the result is True."""
    recorder = Recorder(ManualClock(0))
    op = operation_class(impl)(10, "op", recorder)
    op.ready = True
    calls: list[str] = []
    assert op.safe_try_complete_or_else(lambda: calls.append("f")) is True
    assert calls == [] and op.try_calls == 1


def test_r19_or_else_calls_f_once_then_returns_second_try(impl: ModuleType) -> None:
    """R19: on failure f runs once (lock held) and the result is the second try_complete."""
    lock = TrackingLock()
    recorder = Recorder(ManualClock(0))
    op = operation_class(impl)(10, "op", recorder, lock)
    seen: list[tuple[int, bool]] = []

    def f() -> None:
        seen.append((op.try_calls, lock.held_by_me()))
        op.ready = True

    assert op.safe_try_complete_or_else(f) is True
    assert seen == [(1, True)]
    assert op.try_calls == 2 and op.is_completed

    stays = operation_class(impl)(10, "stays", recorder, lock)
    f_calls: list[int] = []
    assert stays.safe_try_complete_or_else(lambda: f_calls.append(stays.try_calls)) is False
    assert f_calls == [1] and stays.try_calls == 2 and not stays.is_completed


# ---- R20: maybe_try_complete -----------------------------------------------------------


def test_r20_maybe_try_complete_with_free_lock_runs_try_complete(impl: ModuleType) -> None:
    """R20: with the lock free it runs try_complete and returns its result."""
    recorder = Recorder(ManualClock(0))
    op = operation_class(impl)(10, "op", recorder)
    assert op.maybe_try_complete() is False
    assert op.try_calls == 1
    op.ready = True
    assert op.maybe_try_complete() is True
    assert op.is_completed and recorder.names(OperationCompleted) == ["op"]


def test_r20_busy_lock_returns_false_and_holder_retries(impl: ModuleType) -> None:
    """R20: a caller finding the lock held by another maybe_try_complete returns False at once,
    without calling try_complete; the holder sees the pending flag and tries again."""
    op = probe_class(impl)(10)
    entered, release = threading.Event(), threading.Event()
    callers: list[str] = []
    ready: list[bool] = []

    def condition() -> bool:
        callers.append(threading.current_thread().name)
        holds = bool(ready)  # the condition is read before the slow part, as in Kafka
        if len(callers) == 1:
            entered.set()
            release.wait(WAIT_S)
        return holds

    op.condition = condition
    holder_result: list[bool] = []
    holder = threading.Thread(
        target=lambda: holder_result.append(op.maybe_try_complete()), name="holder", daemon=True
    )
    holder.start()
    assert entered.wait(WAIT_S)
    assert in_thread(op.maybe_try_complete) is False  # does not block on the held lock
    assert callers == ["holder"]
    ready.append(True)  # the condition became true while the holder was busy
    release.set()
    holder.join(WAIT_S)
    assert not holder.is_alive()
    assert callers == ["holder", "holder"]  # the pending flag made the holder retry
    assert holder_result == [True] and op.is_completed


class RefusalCountingLock(KnockStagingLock):
    """Counts the non-blocking acquires refused while the lock is held; past 10 it
    raises, so a knocker that goes round and round fails instead of hanging."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = super().acquire(blocking, timeout)
        if not got:
            self.refused += 1
            if self.refused > 10:
                raise AssertionError("maybe_try_complete keeps knocking on a held lock")
        return got


def test_r20_only_the_first_knocker_retries_itself(impl: ModuleType) -> None:
    """R20: while the lock is held, the first ``maybe_try_complete`` finds the pending
    flag clear, sets it and goes round once more itself (a second refused acquire);
    a later one finds it set and leaves its attempt to the holder at once (one refused
    acquire). Neither calls ``try_complete`` nor waits."""
    recorder = Recorder(ManualClock(0))
    lock = RefusalCountingLock()
    op = operation_class(impl)(10, "op", recorder, lock)
    op.ready = True
    with lock:
        assert op.maybe_try_complete() is False
        assert lock.refused == 2
        assert op.maybe_try_complete() is False
        assert lock.refused == 3
    assert op.try_calls == 0 and not op.is_completed
    assert op.safe_try_complete() is True  # the holder's side: the knock is honoured


def test_r20_a_knock_on_a_submitted_operation_that_completed_is_not_honoured_again(
    impl: ModuleType,
) -> None:
    """R20, R68: a knock that arrives while ``maybe_try_complete``'s own ``try_complete``
    completes a submitted operation sends nobody round again: the call returns the True
    of its one ``try_complete`` (a finished operation, completed and submitted, is
    finished whatever its other bits), and the knocker returns at once."""
    recorder = Recorder(ManualClock(0))
    lock = RefusalCountingLock()
    timer = impl.SystemTimer("knock", clock=ManualClock(0), executor=InlineExecutor())
    purgatory = impl.DelayedOperationPurgatory("knock", timer=timer, reaper_enabled=False)
    knocks: list[bool] = []

    class KnockedWhileCompleting(operation_class(impl)):  # type: ignore[misc]
        def try_complete(self) -> bool:
            done = super().try_complete()
            if done:  # completed under the lock: a knock (the lock refuses it) now
                knocks.append(self.maybe_try_complete())
            return bool(done)

    op = KnockedWhileCompleting(10, "op", recorder, lock)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    op.ready = True
    assert op.maybe_try_complete() is True
    assert knocks == [False]
    assert op.try_calls == 3  # the submission's two, and this call's one
    assert lock.refused == 1  # the knock found it finished: no second refused acquire
    purgatory.shutdown()


def test_r20_lock_held_by_other_code_never_blocks(impl: ModuleType) -> None:
    """R20: a shared lock held by non-purgatory code: maybe_try_complete returns False, no wait."""
    shared = threading.RLock()
    recorder = Recorder(ManualClock(0))
    op = operation_class(impl)(10, "op", recorder, shared)
    op.ready = True
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with shared:
            held.set()
            release.wait(WAIT_S)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(WAIT_S)
    assert op.maybe_try_complete() is False
    assert op.try_calls == 0 and not op.is_completed
    release.set()
    holder.join(WAIT_S)
    assert op.maybe_try_complete() is True
    assert op.try_calls == 1


# ---- R21: operation lock ---------------------------------------------------------------


def test_r21_default_lock_is_reentrant_and_per_operation(impl: ModuleType) -> None:
    """R21: the default lock is re-entrant (a callback may re-enter) and not shared."""
    probe = probe_class(impl)
    op, other = probe(10), probe(10)
    nested: list[bool] = []
    op.on_complete_hook = lambda: nested.append(op.safe_try_complete())
    op.condition = lambda: True
    # on_complete re-enters safe_try_complete while the lock is held: must not deadlock
    assert in_thread(op.safe_try_complete) is True
    assert nested == [False]

    gate, release = threading.Event(), threading.Event()

    def hold_op_lock() -> bool:
        gate.set()
        release.wait(WAIT_S)
        return False

    holder_op = probe(10)
    holder_op.condition = hold_op_lock
    holder = threading.Thread(target=holder_op.safe_try_complete, daemon=True)
    holder.start()
    assert gate.wait(WAIT_S)
    other.condition = lambda: True
    assert in_thread(other.safe_try_complete) is True  # a different op's lock is free
    release.set()
    holder.join(WAIT_S)


def test_r21_supplied_lock_is_shared_by_operations(impl: ModuleType) -> None:
    """R21: operations built with the same lock exclude each other."""
    shared = threading.RLock()
    probe = probe_class(impl)
    first, second = probe(10, shared), probe(10, shared)
    second.condition = lambda: True
    seen: list[bool] = []

    def condition() -> bool:
        seen.append(in_thread(second.maybe_try_complete))
        return False

    first.condition = condition
    first.safe_try_complete()
    assert seen == [False]  # the shared lock was held by first's try_complete
    assert not second.is_completed
    assert second.maybe_try_complete() is True


def test_r21_lock_argument_must_be_a_lock(impl: ModuleType) -> None:
    """R21/R35: a lock without acquire/release is a TypeError naming lock."""
    with pytest.raises(TypeError, match="lock"):
        probe_class(impl)(10, object())
