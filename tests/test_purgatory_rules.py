"""Purgatory rules R22-R34 (and the purgatory side of R21), and R61 (finished operations
are let go, also through the aio layer), through the public API.

Deterministic: ManualClock, InlineExecutor, reaper off. Besides the pinned API the
tests read the purgatory's bookkeeping properties ``watched_keys``,
``estimated_total_operations`` and ``num_purged``, which make R26 and R30 observable.
``FlagOperation.try_calls`` counts the ``try_complete`` attempts of R22.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, run
from kpurgatory.spec.events import OperationCompleted, OperationExpired
from tests.aio.support import recording_operation
from tests.support import Recorder, TrackingLock, operation_class, task_class

WAIT_S = 5.0
"""Upper bound for joining a helper thread; a healthy run needs milliseconds."""


class HookClock(ManualClock):
    """A ManualClock that calls ``hook`` (once) at its next reading.

    Lets a test act at the exact moment a timer reads the clock inside ``add``, i.e.
    between the purgatory's second ``try_complete`` and its timer step (R22).
    """

    def __init__(self, start_ms: int = 0) -> None:
        super().__init__(start_ms)
        self.hook: Callable[[], None] | None = None

    def now_ms(self) -> int:
        """Run and disarm the hook, then read the clock."""
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().now_ms()


class SpyKey:
    """A watch key that reports every hash to ``on_hash`` (the purgatory must hash to watch)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.on_hash: Callable[[], None] = lambda: None

    def __hash__(self) -> int:
        self.on_hash()
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpyKey) and other.name == self.name

    def __repr__(self) -> str:
        return f"SpyKey({self.name!r})"


def make_purgatory(
    impl: ModuleType,
    clock: ManualClock,
    *,
    purge_interval: int = 1000,
    timer_enabled: bool = True,
    name: str = "p",
) -> Any:
    """A purgatory of ``impl`` on an inline timer reading ``clock``, reaper off."""
    timer = impl.SystemTimer(name, clock=clock, executor=InlineExecutor())
    return impl.DelayedOperationPurgatory(
        name,
        timer,
        purge_interval=purge_interval,
        reaper_enabled=False,
        timer_enabled=timer_enabled,
    )


def keep_busy(purg: Any, impl: ModuleType, recorder: Recorder) -> Any:
    """Submit one operation that never completes on key "busy" (delay 10**6), so the
    purgatory is never idle and finished operations linger as R23-R30 describe (R61
    unlinks them all once nothing is unfinished). It adds 1 to watched, watched_keys,
    num_delayed and the estimate."""
    keeper = operation_class(impl)(10**6, "busy", recorder)
    assert purg.try_complete_else_watch(keeper, ["busy"]) is False
    return keeper


@pytest.fixture
def ops(impl: ModuleType, recorder: Recorder) -> Callable[..., Any]:
    """Factory: ``ops(delay_ms, name)`` builds a FlagOperation of ``impl`` on the recorder."""

    def build(delay_ms: int, name: str, lock: Any = None) -> Any:
        return operation_class(impl)(delay_ms, name, recorder, lock)

    return build


@pytest.fixture
def purg(impl: ModuleType, clock: ManualClock) -> Iterator[Any]:
    """A purgatory with purge_interval 1000 (no purge in these small tests)."""
    with make_purgatory(impl, clock) as made:
        yield made


# ---- R22 / R23: try_complete_else_watch ------------------------------------------------


def test_r22_r23_completed_on_first_try_is_never_watched(
    purg: Any, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R22/R23: ready at the first try: True, one attempt, not watched, counted or timed;
    ``num_completed`` counts it once (a True of the purgatory's own call)."""
    op = ops(100, "ready")
    op.ready = True
    assert purg.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.try_calls == 1
    assert purg.num_completed == 1
    assert (purg.watched, purg.watched_keys, purg.num_delayed) == (0, 0, 0)
    assert purg.estimated_total_operations == 0
    assert recorder.names(OperationCompleted) == ["ready"]


def test_r22_pending_is_watched_on_every_key_counted_once_and_timed(
    purg: Any, ops: Callable[..., Any]
) -> None:
    """R22: not ready: two attempts, watched on each key, estimate +1, added to the timer."""
    op = ops(100, "pending")
    assert purg.try_complete_else_watch(op, ["a", "b", "c"]) is False
    assert op.try_calls == 2
    assert (purg.watched, purg.watched_keys, purg.num_delayed) == (3, 3, 1)
    assert purg.estimated_total_operations == 1
    assert not op.is_completed


def test_r22_r23_completed_on_second_try_stays_watched_untimed(
    impl: ModuleType, purg: Any, recorder: Recorder
) -> None:
    """R22/R23: a condition that turns true between the tries completes on the second try.

    The result is True, the operation stays in the watcher lists (counted in the
    estimate) and never reaches the timer.
    """

    class FlipsOnFirstCall(operation_class(impl)):  # type: ignore[misc]
        def try_complete(self) -> bool:
            result = super().try_complete()
            self.ready = True  # becomes true right after the first check
            return bool(result)

    keep_busy(purg, impl, recorder)
    op = FlipsOnFirstCall(100, "second-try", recorder)
    assert purg.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.try_calls == 2 and op.is_completed
    assert purg.num_completed == 1
    assert (purg.watched, purg.watched_keys, purg.num_delayed) == (3, 3, 1)
    assert purg.estimated_total_operations == 2
    assert recorder.names(OperationCompleted) == ["second-try"]
    # it lingers until check_and_complete unlinks it (not counted, R25)
    assert purg.check_and_complete("a") == 0
    assert (purg.watched, purg.watched_keys) == (2, 2)


def test_r22_tries_watching_and_timer_add_all_hold_the_lock(
    impl: ModuleType, recorder: Recorder
) -> None:
    """R22/R21: both tries, the watching and the timer add happen under the op lock.

    The add under the lock is what makes R29's cancel (taken under the same lock) see
    the timer entry of a submission still under way."""
    clock = HookClock(0)
    with make_purgatory(impl, clock) as purg:
        lock = TrackingLock()
        op = operation_class(impl)(100, "locked", recorder, lock)
        held_during_watch: list[bool] = []
        key = SpyKey("k")
        key.on_hash = lambda: (
            held_during_watch.append(lock.held_by_me()) if op.try_calls == 1 else None
        )
        held_at_timer_add: list[bool] = []
        clock.hook = lambda: held_at_timer_add.append(lock.held_by_me())
        assert purg.try_complete_else_watch(op, [key]) is False
        assert held_during_watch and all(held_during_watch)
        assert held_at_timer_add == [True]
        assert purg.num_delayed == 1


def test_r22_watching_stops_once_completed(impl: ModuleType, purg: Any, recorder: Recorder) -> None:
    """R22/R24: completed while watching (by a key's hash), the keys after it are not watched.

    The second try still runs; the result is False (not completed by its own try,
    R23), and the operation is not added to the timer.
    """
    keep_busy(purg, impl, recorder)
    op = operation_class(impl)(100, "stopped", recorder)
    trigger = SpyKey("trigger")
    trigger.on_hash = lambda: op.force_complete() if op.try_calls >= 1 else None
    before = [f"before{i}" for i in range(5)]
    after = [f"after{i}" for i in range(5)]
    assert purg.try_complete_else_watch(op, [*before, trigger, *after, before[0]]) is False
    assert op.try_calls == 2 and op.is_completed
    assert purg.num_delayed == 1
    assert purg.estimated_total_operations == 2
    assert purg.watched in (6, 7)  # the trigger key itself may or may not be linked
    assert all(purg.cancel_for_key(k) == [] for k in after)
    assert all(purg.cancel_for_key(k) == [op] for k in before)


def test_r22_completed_during_timer_add_is_cancelled(impl: ModuleType, recorder: Recorder) -> None:
    """R22/R28: completed between the second try and the timer step: its entry is cancelled."""
    clock = HookClock(0)
    with make_purgatory(impl, clock) as purg:
        op = operation_class(impl)(100, "raced", recorder)
        fired: list[bool] = []

        def complete_now() -> None:
            fired.append(op.is_completed)
            op.force_complete()

        clock.hook = complete_now
        assert purg.try_complete_else_watch(op, ["k"]) is False
        assert fired == [False]  # it was still pending when the timer read the clock
        assert op.is_completed
        assert purg.num_delayed == 0
        purg.advance_clock(1000)
        assert recorder.names(OperationExpired) == []
        assert recorder.names(OperationCompleted) == ["raced"]


def test_r22_already_due_operation_expires_inside_the_call(
    impl: ModuleType, purg: Any, ops: Callable[..., Any], recorder: Recorder
) -> None:
    """R22/R3/R17: delay 0 pending: the timer step hands it over at once and it expires.

    It stays linked in its watcher list as a completed operation (R27) while another
    operation is unfinished; alone, R61 unlinks it at once.
    """
    op = ops(0, "due-now")
    assert purg.try_complete_else_watch(op, ["k"]) is False
    assert op.is_completed and op.try_calls == 2
    assert recorder.names(OperationExpired) == ["due-now"]
    assert (purg.watched, purg.num_delayed) == (0, 0)  # R61: nothing unfinished
    keep_busy(purg, impl, recorder)
    again = ops(0, "due-now-too")
    assert purg.try_complete_else_watch(again, ["k"]) is False
    assert (purg.watched, purg.num_delayed) == (2, 1)


def test_r22_pending_operation_expires_at_its_due_time(
    purg: Any, ops: Callable[..., Any], recorder: Recorder, clock: ManualClock
) -> None:
    """R22/R17: a watched pending operation expires through the purgatory's advance_clock."""
    op = ops(50, "slow")
    purg.try_complete_else_watch(op, ["k"])
    purg.advance_clock(49)
    assert not op.is_completed
    purg.advance_clock(1)
    assert recorder.events == [
        OperationCompleted("slow", 50, "force_complete"),
        OperationExpired("slow", 50),
    ]
    assert clock.now_ms() == 50
    assert purg.num_delayed == 0


# ---- R21 on the purgatory: no try_complete under purgatory or timer locks --------------


def test_r21_try_complete_runs_without_purgatory_or_timer_lock(
    impl: ModuleType, purg: Any, recorder: Recorder
) -> None:
    """R21/R37: during try_complete other threads can use the purgatory and the timer freely."""
    probes: list[bool] = []
    extra_task = task_class(impl)(500, "extra", recorder)
    other_op = operation_class(impl)(500, "other", recorder)

    def probe() -> None:
        def use_purgatory_and_timer() -> None:
            _ = purg.watched
            _ = purg.num_delayed
            purg.check_and_complete("unrelated")
            extra_task.cancel()

        worker = threading.Thread(target=use_purgatory_and_timer, daemon=True)
        worker.start()
        worker.join(WAIT_S)
        probes.append(not worker.is_alive())

    class Probing(operation_class(impl)):  # type: ignore[misc]
        def try_complete(self) -> bool:
            probe()
            return bool(super().try_complete())

    op = Probing(100, "probing", recorder)
    purg.try_complete_else_watch(other_op, ["k"])
    assert purg.try_complete_else_watch(op, ["k"]) is False  # probes twice
    op.ready = True
    assert purg.check_and_complete("k") == 1  # probes once more
    assert probes == [True, True, True]


# ---- R24: watch keys -------------------------------------------------------------------


def test_r24_duplicate_keys_are_watched_once(purg: Any, ops: Callable[..., Any]) -> None:
    """R24: duplicates are dropped; equal keys (by hash and ==) count as one."""
    op = ops(100, "dups")
    assert purg.try_complete_else_watch(op, ["a", "b", "a", "c", "b", "a"]) is False
    assert (purg.watched, purg.watched_keys) == (3, 3)
    numeric = ops(100, "numeric")
    purg.try_complete_else_watch(numeric, [1, 1.0, (2, "x"), (2, "x")])
    assert (purg.watched, purg.watched_keys) == (5, 5)
    numeric.ready = True
    assert purg.check_and_complete(1.0) == 1  # the key watched as 1


def test_r24_watch_keys_may_be_any_iterable(purg: Any, ops: Callable[..., Any]) -> None:
    """R24: a generator or set of keys works like a list."""
    op = ops(100, "gen")
    purg.try_complete_else_watch(op, (k for k in ["x", "y", "x"]))
    assert purg.watched == 2
    other = ops(100, "set")
    purg.try_complete_else_watch(other, {"y", "z"})
    assert (purg.watched, purg.watched_keys) == (4, 3)


# ---- R25: check_and_complete -----------------------------------------------------------


def test_r25_counts_only_what_it_completed_in_watch_order(
    impl: ModuleType, purg: Any, recorder: Recorder
) -> None:
    """R25: watch order; completed ones unlinked uncounted; only this call's completions count."""
    order: list[str] = []

    class Ordered(operation_class(impl)):  # type: ignore[misc]
        def try_complete(self) -> bool:
            order.append(self.name)
            return bool(super().try_complete())

    a, b, c, d = (Ordered(100, n, recorder) for n in "abcd")
    for op in (a, b, c, d):
        purg.try_complete_else_watch(op, ["k"])
    order.clear()
    b.force_complete()  # completed elsewhere: unlinked, not counted
    a.ready = d.ready = True
    assert purg.check_and_complete("k") == 2
    assert order == ["a", "c", "d"]
    assert (purg.watched, purg.watched_keys) == (1, 1)
    assert purg.num_completed == 2  # b's force_complete was not the purgatory's
    c.ready = True
    assert purg.check_and_complete("k") == 1
    assert purg.num_completed == 3
    assert (purg.watched, purg.watched_keys) == (0, 0)


def test_r25_cascade_completion_is_not_counted(impl: ModuleType, purg: Any) -> None:
    """R25: an operation completed by another's on_complete during the call is not counted."""
    recorder = Recorder(ManualClock(0))
    flag = operation_class(impl)
    second = flag(100, "second", recorder)

    class Cascading(flag):  # type: ignore[misc,valid-type]
        def on_complete(self) -> None:
            super().on_complete()
            second.force_complete()

    first = Cascading(100, "first", recorder)
    purg.try_complete_else_watch(first, ["k"])
    purg.try_complete_else_watch(second, ["k"])
    first.ready = True
    assert purg.check_and_complete("k") == 1
    assert second.is_completed and second.try_calls == 2
    assert purg.watched == 0


def test_r25_holds_the_op_lock_and_never_creates_a_key(
    impl: ModuleType, purg: Any, recorder: Recorder
) -> None:
    """R25: each attempt holds the op lock; an unknown key returns 0 and stays unknown."""
    lock = TrackingLock()
    held: list[bool] = []

    class Checking(operation_class(impl)):  # type: ignore[misc]
        def try_complete(self) -> bool:
            held.append(lock.held_by_me())
            return bool(super().try_complete())

    op = Checking(100, "checked", recorder, lock)
    purg.try_complete_else_watch(op, ["k"])
    assert purg.check_and_complete("missing") == 0
    assert purg.watched_keys == 1
    assert purg.check_and_complete("k") == 0
    op.ready = True
    assert purg.check_and_complete("k") == 1
    assert held == [True, True, True, True]


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
