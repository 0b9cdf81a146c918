"""Purgatory rules R26-R34 and R61 through the public API: bookkeeping, cancel_for_key,
purge, shutdown, timers off, a second submission, and finished operations let go (also
through the aio layer).

Deterministic: ManualClock, InlineExecutor, reaper off. Besides the pinned API the
tests read the purgatory's bookkeeping properties ``watched_keys``,
``estimated_total_operations`` and ``num_purged``, which make R26 and R30 observable.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, run
from kpurgatory.spec.events import OperationExpired
from tests.aio.support import recording_operation
from tests.purgatory_support import keep_busy, make_purgatory
from tests.support import Recorder, operation_class, task_class

# ---- R26 / R27 / R28 --------------------------------------------------------------------


def test_r26_empty_watcher_lists_are_dropped_and_recreated(
    impl: ModuleType, purg: Any, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R26: a list emptied by check_and_complete is dropped; the next watch creates it again."""
    keep_busy(purg, impl, recorder)
    op = ops(100, "one")
    purg.try_complete_else_watch(op, ["k", "j"])
    assert purg.watched_keys == 3
    op.ready = True
    assert purg.check_and_complete("k") == 1
    assert purg.watched_keys == 2  # "j" still holds the completed op (R27)
    assert purg.check_and_complete("j") == 0
    assert purg.watched_keys == 1
    purg.try_complete_else_watch(ops(100, "two"), ["k"])
    assert (purg.watched_keys, purg.watched) == (2, 2)


def test_r27_watched_counts_completed_but_linked(purg: Any, ops: Callable[..., Any]) -> None:
    """R27: watched counts (key, op) pairs, including completed ops not yet unlinked."""
    a, b = ops(100, "a"), ops(100, "b")
    purg.try_complete_else_watch(a, ["x", "y"])
    purg.try_complete_else_watch(b, ["y"])
    assert purg.watched == 3
    a.force_complete()
    assert purg.watched == 3
    assert purg.check_and_complete("x") == 0
    assert purg.watched == 2


def test_r28_num_delayed_drops_at_completion(
    impl: ModuleType, purg: Any, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R28: num_delayed is the timer size: it drops when an op completes, expires, or on
    check_and_complete, and counts other tasks in a shared timer."""
    a, b, c = ops(100, "a"), ops(100, "b"), ops(10, "c")
    for op in (a, b, c):
        purg.try_complete_else_watch(op, ["k"])
    assert purg.num_delayed == 3
    a.force_complete()
    assert purg.num_delayed == 2
    b.ready = True
    assert purg.check_and_complete("k") == 1
    assert purg.num_delayed == 1
    purg.advance_clock(10)
    assert c.is_completed and purg.num_delayed == 0
    shared_clock = ManualClock(0)
    timer = impl.SystemTimer("shared", clock=shared_clock, executor=InlineExecutor())
    with impl.DelayedOperationPurgatory("shared", timer, reaper_enabled=False) as shared:
        timer.add(task_class(impl)(50, "plain", recorder))
        shared.try_complete_else_watch(ops(50, "d"), ["k"])
        assert shared.num_delayed == 2


# ---- R29: cancel_for_key ---------------------------------------------------------------


def test_r29_cancel_for_key_returns_watch_order_and_never_completes(
    purg: Any, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R29: returns the key's ops in watch order (completed ones too), cancels their timer
    entries without completing or expiring them; they stay on other keys."""
    a, b, c = ops(10, "a"), ops(10, "b"), ops(10, "c")
    purg.try_complete_else_watch(a, ["k", "j"])
    purg.try_complete_else_watch(b, ["k"])
    purg.try_complete_else_watch(c, ["j", "k"])
    b.force_complete()
    events_before = list(recorder.events)
    estimate = purg.estimated_total_operations
    assert purg.cancel_for_key("k") == [a, b, c]
    assert purg.num_delayed == 0
    assert not a.is_completed and not c.is_completed
    assert (purg.watched, purg.watched_keys) == (2, 1)
    assert purg.estimated_total_operations == estimate
    purg.advance_clock(100)
    assert recorder.events == events_before  # nothing completed or expired
    assert purg.cancel_for_key("k") == []
    assert purg.cancel_for_key("never-seen") == []
    a.ready = True
    assert purg.check_and_complete("j") == 1  # still watched on "j"


# ---- R30: purge ------------------------------------------------------------------------


def test_r30_purge_needs_strictly_more_than_purge_interval(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any]
) -> None:
    """R30: estimate - num_delayed == purge_interval does not purge; one more does."""
    with make_purgatory(impl, clock, purge_interval=2) as purg:
        keep_busy(purg, impl, Recorder(clock))  # never idle: finished ones linger (R61)
        a, b = ops(100, "a"), ops(100, "b")
        purg.try_complete_else_watch(a, ["k"])
        purg.try_complete_else_watch(b, ["k"])
        a.force_complete()
        b.force_complete()
        purg.advance_clock(0)  # 3 - 1 == 2: no purge
        assert (purg.num_purged, purg.watched, purg.estimated_total_operations) == (0, 3, 3)
        c = ops(100, "c")
        purg.try_complete_else_watch(c, ["k"])
        purg.advance_clock(0)  # 4 - 2 == 2: no purge
        assert (purg.num_purged, purg.watched) == (0, 4)
        c.force_complete()
        purg.advance_clock(0)  # 4 - 1 > 2: purge
        assert (purg.num_purged, purg.watched, purg.watched_keys) == (3, 1, 1)
        assert purg.estimated_total_operations == 1


def test_r30_the_default_purge_interval_is_kafkas_1000(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any]
) -> None:
    """R30 with ``purge_interval`` left at its default, Kafka's ``purgeInterval`` of
    1000: an estimate 1000 over ``num_delayed`` does not purge, 1001 over does."""
    timer = impl.SystemTimer("p", clock=clock, executor=InlineExecutor())
    with impl.DelayedOperationPurgatory("p", timer, reaper_enabled=False) as purg:
        keep_busy(purg, impl, Recorder(clock))  # never idle: finished ones linger (R61)
        for index in range(1000):
            op = ops(100, f"o{index}")
            purg.try_complete_else_watch(op, ["k"])
            op.force_complete()
        purg.advance_clock(0)  # 1001 - 1 == 1000: no purge
        assert (purg.num_purged, purg.watched) == (0, 1001)
        last = ops(100, "last")
        purg.try_complete_else_watch(last, ["k"])
        last.force_complete()
        purg.advance_clock(0)  # 1002 - 1 > 1000: purge
        assert (purg.num_purged, purg.watched, purg.estimated_total_operations) == (1001, 1, 1)


def test_r30_estimate_is_reset_to_num_delayed_and_pending_ops_stay(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R30/R26: the estimate becomes num_delayed (timer size, other tasks included); only
    completed ops are unlinked; emptied lists are dropped."""
    timer = impl.SystemTimer("p", clock=clock, executor=InlineExecutor())
    with impl.DelayedOperationPurgatory("p", timer, purge_interval=1, reaper_enabled=False) as purg:
        timer.add(task_class(impl)(500, "plain", recorder))
        done = [ops(100, f"done{i}") for i in range(3)]
        for op in done:
            purg.try_complete_else_watch(op, ["x", "y"])
        pending = ops(100, "pending")
        purg.try_complete_else_watch(pending, ["x", "z"])
        for op in done:
            op.force_complete()
        assert purg.estimated_total_operations == 4
        assert purg.num_delayed == 2  # pending + plain
        purg.advance_clock(0)  # 4 - 2 > 1: purge
        assert purg.estimated_total_operations == 2
        assert purg.num_purged == 6  # three ops on two lists each
        assert (purg.watched, purg.watched_keys) == (2, 2)  # "y" dropped
        pending.ready = True
        assert purg.check_and_complete("z") == 1


def test_r30_a_rollback_after_a_purge_it_started_leaves_the_estimate_as_the_purge_set_it(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R30, R38: a submission's second ``try_complete`` advances the clock, which expires
    another operation and purges (estimate := num_delayed, which leaves the submission
    out), then raises. The rollback takes nothing back from the estimate: the purge set
    it since the submission counted it (found by the lifecycle machine: both
    implementations and the model went to -1)."""
    with make_purgatory(impl, clock, purge_interval=0) as purg:
        keep_busy(purg, impl, recorder)  # never idle: R61's let-go stays out of this
        expiring = ops(1, "expiring")
        purg.try_complete_else_watch(expiring, ["a"])
        base = operation_class(impl)

        class AdvancesThenRaises(base):  # type: ignore[misc,valid-type]
            def try_complete(self) -> bool:
                super().try_complete()
                if self.try_calls == 2:
                    clock.advance(1)
                    purg.advance_clock(0)  # expires ``expiring``, then the purge (R30)
                    raise ValueError("second try")
                return False

        failing = AdvancesThenRaises(100, "failing", recorder)
        with pytest.raises(ValueError, match="second try"):
            purg.try_complete_else_watch(failing, ["b"])
        assert recorder.names(OperationExpired) == ["expiring"]
        assert purg.num_delayed == 1  # the keeper
        assert purg.estimated_total_operations == 1  # as the purge set it, not 0
        assert (purg.watched, purg.watched_keys) == (1, 1)
        check = getattr(purg, "_check", None)
        if check is not None:
            check()


def test_r30_purge_runs_after_the_timer_step(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any]
) -> None:
    """R30: operations expired by this advance_clock are purged by the same call."""
    with make_purgatory(impl, clock, purge_interval=0) as purg:
        op = ops(10, "expiring")
        purg.try_complete_else_watch(op, ["k"])
        purg.advance_clock(0)  # 1 - 1 == 0: no purge
        assert (purg.num_purged, purg.watched) == (0, 1)
        purg.advance_clock(10)  # expires, then 1 - 0 > 0: purge
        assert op.is_completed
        assert (purg.num_purged, purg.watched, purg.watched_keys) == (1, 0, 0)
        assert purg.estimated_total_operations == 0


# ---- R32 / R33 / R34 ---------------------------------------------------------------------


def test_r32_shutdown_neither_completes_nor_expires(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R32: shutdown is idempotent, closes the timer, leaves pending ops pending, then refuses."""
    timer = impl.SystemTimer("p", clock=clock, executor=InlineExecutor())
    purg = impl.DelayedOperationPurgatory("p", timer, reaper_enabled=False)
    op = ops(10, "pending")
    purg.try_complete_else_watch(op, ["k"])
    purg.shutdown()
    purg.shutdown()
    assert not op.is_completed and recorder.events == []
    assert timer.advance_clock(100) is False
    assert recorder.events == []
    with pytest.raises(RuntimeError):
        purg.advance_clock(0)
    with pytest.raises(RuntimeError):
        purg.try_complete_else_watch(ops(10, "late"), ["k"])
    with pytest.raises(RuntimeError):
        timer.add(task_class(impl)(10, "t", recorder))


def test_r32_context_manager_shuts_down(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any]
) -> None:
    """R32: leaving the with block shuts the purgatory down."""
    with make_purgatory(impl, clock) as purg:
        purg.try_complete_else_watch(ops(10, "a"), ["k"])
    with pytest.raises(RuntimeError):
        purg.advance_clock(0)


def test_r33_timer_disabled_never_expires(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R33: with timer_enabled=False ops are not timed, never expire, and are not in num_delayed."""
    with make_purgatory(impl, clock, timer_enabled=False) as purg:
        op = ops(10, "untimed")
        assert purg.try_complete_else_watch(op, ["k"]) is False
        assert (purg.num_delayed, purg.watched) == (0, 1)
        purg.advance_clock(1000)
        assert not op.is_completed and recorder.events == []
        op.ready = True
        assert purg.check_and_complete("k") == 1


def test_r34_second_submission_is_value_error_and_changes_nothing(
    impl: ModuleType, clock: ManualClock, ops: Callable[..., Any]
) -> None:
    """R34: an operation goes through try_complete_else_watch once in its life, in any purgatory."""
    with (
        make_purgatory(impl, clock, name="one") as one,
        make_purgatory(impl, ManualClock(0), name="two") as two,
    ):
        op = ops(100, "once")
        one.try_complete_else_watch(op, ["k"])
        state = (one.watched, one.num_delayed, one.estimated_total_operations, op.try_calls)
        for purg in (one, two):
            with pytest.raises(ValueError):
                purg.try_complete_else_watch(op, ["k", "other"])
        assert (one.watched, one.num_delayed, one.estimated_total_operations, op.try_calls) == (
            state
        )
        assert (two.watched, two.num_delayed, two.watched_keys) == (0, 0, 0)
        quick = ops(100, "quick")
        quick.ready = True
        assert one.try_complete_else_watch(quick, ["k"]) is True
        with pytest.raises(ValueError):
            one.try_complete_else_watch(quick, ["k"])
        assert quick.try_calls == 1


# -- finished operations are let go (R61), also through the aio layer --------------------------


def inline_purgatory(impl: ModuleType, clock: ManualClock) -> Any:
    timer = impl.SystemTimer("p", clock=clock, executor=InlineExecutor())
    return impl.DelayedOperationPurgatory("p", timer, reaper_enabled=False)


def test_r61_a_round_of_completions_and_expiries_leaves_nothing_behind(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R61: 300 operations on 2 keys each (a shared key and their own); a third complete
    through the shared key, a third expire, a third are abandoned. While any is
    unfinished, the finished ones linger on their own keys; once all have finished,
    watched is 0 and none of them is reachable any more."""
    purgatory = inline_purgatory(impl, clock)
    op = operation_class(impl)
    refs: list[weakref.ref[Any]] = []
    ops = [op(50 if i % 3 == 1 else 10**6, f"o{i}", recorder) for i in range(300)]
    for index, each in enumerate(ops):
        purgatory.try_complete_else_watch(each, ["shared", f"own-{index}"])
        refs.append(weakref.ref(each))
    for each in ops[0::3]:
        each.ready = True
    assert purgatory.check_and_complete("shared") == 100
    assert purgatory.watched == 500  # 200 pending on 2 keys, 100 finished on their own
    clock.advance(50)
    purgatory.advance_clock(0)
    assert all(each.is_completed for each in ops[1::3])
    assert purgatory.watched > 0  # the abandoned third is still unfinished
    for each in ops[2::3]:
        assert purgatory.abandon(each) is True
    assert (purgatory.watched, purgatory.watched_keys, purgatory.num_delayed) == (0, 0, 0)
    assert purgatory.num_purged > 0
    del ops, each
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []


def test_r61_one_unfinished_operation_keeps_the_lazy_rules(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R61, R27: with one operation still unfinished nothing is unlinked early; when it
    finishes, everything goes at once."""
    purgatory = inline_purgatory(impl, clock)
    op = operation_class(impl)
    keeper, done = op(10**6, "keeper", recorder), op(10**6, "done", recorder)
    purgatory.try_complete_else_watch(keeper, ["a"])
    purgatory.try_complete_else_watch(done, ["a", "b"])
    done.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert (purgatory.watched, purgatory.watched_keys) == (2, 2)  # "done" lingers on "b"
    keeper.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert (purgatory.watched, purgatory.watched_keys) == (0, 0)


@pytest.mark.parametrize("implementation", ["optimized", "reference"])
def test_r61_aio_finished_waits_are_let_go(implementation: PurgatoryImplementation) -> None:
    """R61 on the aio layer: after a round of waits that all finished (published,
    expired, hung up), watched is 0 and no operation is reachable."""
    clock = ManualClock(0)
    log: list[Any] = []
    op = recording_operation(implementation)
    refs: list[weakref.ref[Any]] = []

    async def main() -> None:
        async with AsyncPurgatory[Any]("polls", implementation=implementation) as purgatory:
            tasks = []
            for index in range(90):
                operation = op(30, f"p{index}", log, clock, ready=False)
                refs.append(weakref.ref(operation))
                keys = ["topic", f"client-{index}"]
                tasks.append(asyncio.create_task(purgatory.wait(operation, keys)))
                del operation
            await asyncio.sleep(0)
            for task in tasks[2::3]:
                task.cancel()  # hung up
            for ref in refs[0::3]:
                alive = ref()
                assert alive is not None
                alive.ready = True
                del alive
            purgatory.check_and_complete("topic")
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            assert outcomes.count(Outcome.COMPLETED) == 30
            assert outcomes.count(Outcome.EXPIRED) == 30
            assert purgatory.purgatory.watched == 0
            del tasks, outcomes

    run(main(), clock)
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
