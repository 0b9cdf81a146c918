"""Purgatory rules R21-R25 through the public API: try_complete_else_watch, no
try_complete under the purgatory's or timer's locks, watch keys, check_and_complete.

Deterministic: ManualClock, InlineExecutor, reaper off. ``FlagOperation.try_calls``
counts the ``try_complete`` attempts of R22. Bookkeeping, purge, shutdown and letting
finished operations go (R26-R34, R61) are in ``test_purgatory_purge_rules.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kpurgatory import ManualClock
from kpurgatory.spec.events import OperationCompleted, OperationExpired
from tests.purgatory_support import WAIT_S, HookClock, SpyKey, keep_busy, make_purgatory
from tests.support import Recorder, TrackingLock, operation_class, task_class

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
