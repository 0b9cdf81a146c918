"""Rules R45-R50 of the asyncio purgatory, in virtual time on both implementations.

Every test runs an ``AsyncPurgatory`` on a ``VirtualTimeLoop`` (R51) over a
``ManualClock``, so "expires at its due time" is an exact clock reading, never a
duration. The ``implementation`` fixture runs each test on the optimized and on the
reference purgatory. Operations are ``tests.aio.support.recording_operation``: they log
``on_complete``/``on_expiration`` with the clock reading.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import threading
from typing import Any

import pytest

from kpurgatory import DelayedOperation as PlainOperation
from kpurgatory.aio import (
    AsyncPurgatory,
    LoopTimerDriver,
    Outcome,
    PurgatoryImplementation,
    VirtualTimeLoop,
    run,
)
from kpurgatory.clock import ManualClock
from tests.aio.support import Event, NoTimer, OffsetClock, recording_operation

pytestmark = pytest.mark.timeout(30)


class BoomError(Exception):
    """What a failing on_complete raises."""


def spawn(coro: Any) -> asyncio.Task[Outcome]:
    task: asyncio.Task[Outcome] = asyncio.get_running_loop().create_task(coro)
    return task


async def settle() -> None:
    """Let every ready callback and task step run (no virtual time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


# ---- R45: the loop drives the timer ------------------------------------------------------


def test_r45_expiry_on_the_loop_thread_at_its_due_time_with_no_thread(
    implementation: PurgatoryImplementation,
) -> None:
    """R45, R4: an operation expires exactly at its due time, on the loop thread; no thread."""
    clock = ManualClock(3)
    log: list[Event] = []
    op_class = recording_operation(implementation)
    threads_before = set(threading.enumerate())
    expired_on: list[int] = []

    class Watched(op_class):  # type: ignore[misc, valid-type]
        def on_expiration(self) -> None:
            super().on_expiration()
            expired_on.append(threading.get_ident())

    async def main() -> Outcome:
        async with AsyncPurgatory[Any]("p", implementation=implementation, tick_ms=5) as purgatory:
            outcome = await purgatory.wait(Watched(40, "a", log, clock), ["k"])
            assert set(threading.enumerate()) == threads_before
            return outcome

    assert run(main(), clock) is Outcome.EXPIRED
    assert log == [("complete", "a", 40), ("expire", "a", 40)]  # due = floor(3 + 40, 5)
    assert expired_on == [threading.get_ident()]


def test_r45_one_handle_armed_at_the_next_due_time_and_re_armed_earlier(
    implementation: PurgatoryImplementation,
) -> None:
    """R45, R44: the handle follows next_due_time; an earlier submission re-arms it."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            driver = purgatory.driver
            assert driver.armed_due is None
            waits = [spawn(purgatory.wait(op(100, "late", log, clock), ["k"]))]
            await settle()
            assert driver.armed_due == 100 == purgatory.timer.next_due_time
            waits.append(spawn(purgatory.wait(op(30, "early", log, clock), ["k"])))
            await settle()
            assert driver.armed_due == 30
            waits.append(spawn(purgatory.wait(op(60, "mid", log, clock), ["k"])))
            await settle()
            assert driver.armed_due == 30  # a later due time does not re-arm
            assert await waits[1] is Outcome.EXPIRED
            assert clock.now_ms() == 30
            assert driver.armed_due == 60  # re-armed after the firing
            assert await waits[0] is Outcome.EXPIRED
            assert driver.armed_due is None  # nothing scheduled: nothing armed
            assert await waits[2] is Outcome.EXPIRED

    run(main(), clock)
    assert [(kind, name, at) for kind, name, at in log if kind == "expire"] == [
        ("expire", "early", 30),
        ("expire", "mid", 60),
        ("expire", "late", 100),
    ]


def test_r45_many_expiries_in_due_order_never_early(
    implementation: PurgatoryImplementation,
) -> None:
    """R45, R4, R6: forty operations with scattered delays expire in due order, each at
    its due time (tick 7: due = floor(submitted + delay, 7))."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    delays = [(i * 37) % 400 + 1 for i in range(40)]

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation, tick_ms=7) as purgatory:
            waits = [
                spawn(purgatory.wait(op(d, f"o{i}", log, clock), [i % 3]))
                for i, d in enumerate(delays)
            ]
            assert {await w for w in waits} == {Outcome.EXPIRED}

    run(main(), clock)
    expiries = [(at, name) for kind, name, at in log if kind == "expire"]
    assert [at for at, _ in expiries] == sorted(at for at, _ in expiries)
    due = {f"o{i}": (d // 7) * 7 for i, d in enumerate(delays)}
    assert all(at == due[name] for at, name in expiries)


def test_r45_a_firing_purges_like_a_reaper_step(implementation: PurgatoryImplementation) -> None:
    """R45, R30: a completed operation left on its other key is purged at the next firing."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any](
            "p", implementation=implementation, purge_interval=0
        ) as purgatory:
            two_keys = op(1000, "two", log, clock)
            first = spawn(purgatory.wait(two_keys, ["a", "b"]))
            timer_op = spawn(purgatory.wait(op(10, "timer", log, clock), ["c"]))
            await settle()
            two_keys.ready = True
            assert purgatory.check_and_complete("a") == 1
            assert await first is Outcome.COMPLETED
            assert purgatory.purgatory.watched == 2  # still linked on "b", plus "timer"
            assert await timer_op is Outcome.EXPIRED  # the firing at 10 purges
            assert purgatory.purgatory.watched == 0
            assert purgatory.purgatory.num_purged == 2

    run(main(), clock)


# ---- R46: awaiting an operation ----------------------------------------------------------


def test_r46_completed_by_check_and_complete_on_the_loop(
    implementation: PurgatoryImplementation,
) -> None:
    """R46, R25: a loop-side check_and_complete completes the waiter; no time passes."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(500, "a", log, clock)
            waiting = spawn(purgatory.wait(operation, ["k1", "k2"]))
            await settle()
            assert (purgatory.waiting, purgatory.purgatory.num_delayed) == (1, 1)
            assert purgatory.purgatory.watched == 2
            assert purgatory.check_and_complete("k1") == 0  # not ready: stays
            operation.ready = True
            assert purgatory.check_and_complete("k1") == 1
            assert await waiting is Outcome.COMPLETED
            assert clock.now_ms() == 0
            assert (purgatory.waiting, purgatory.purgatory.num_delayed) == (0, 0)
            assert purgatory.driver.armed_due is None or purgatory.timer.next_due_time is None

    run(main(), clock)
    assert log == [("complete", "a", 0)]


def test_r46_completed_at_once_is_never_timed(implementation: PurgatoryImplementation) -> None:
    """R46, R23: a ready operation completes inside wait; nothing is watched or armed."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            outcome = await purgatory.wait(op(50, "a", log, clock, ready=True), ["k"])
            assert outcome is Outcome.COMPLETED
            assert purgatory.purgatory.watched == 0
            assert purgatory.driver.armed_due is None
            assert purgatory.purgatory.num_completed == 1

    run(main(), clock)


def test_r46_force_complete_by_hand_and_zero_delay_expiry(
    implementation: PurgatoryImplementation,
) -> None:
    """R46: force_complete gives COMPLETED; a delay of 0 gives EXPIRED with no time passing."""
    clock = ManualClock(9)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            manual = op(10_000, "manual", log, clock)
            waiting = spawn(purgatory.wait(manual, ["k"]))
            await settle()
            assert manual.force_complete() is True
            assert await waiting is Outcome.COMPLETED
            assert await purgatory.wait(op(0, "zero", log, clock), ["k"]) is Outcome.EXPIRED
            assert clock.now_ms() == 9

    run(main(), clock)
    assert log == [("complete", "manual", 9), ("complete", "zero", 9), ("expire", "zero", 9)]


def test_r1_r3_negative_delays_expire_at_submission_or_the_next_drain(
    implementation: PurgatoryImplementation,
) -> None:
    """R1, R3 (docs/tutorial.md, "Negative timeouts"): a negative delay is accepted. Due
    at or before the timer's current time, it expires within the submitting call;
    due between that and the clock (the clock moved since the last drain), at the next
    drain. Neither waits for the clock; a ready operation completes instead."""
    clock = ManualClock(100)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            clock.advance(3)  # the timer still reads 100: it has not drained since
            past = op(-5, "past", log, clock)  # due 98: before the timer's time
            assert purgatory.submit(past, ["k"]).result() is Outcome.EXPIRED
            assert log == [("complete", "past", 103), ("expire", "past", 103)]
            between = op(-1, "between", log, clock)  # due 102: after the timer's 100
            waiter = purgatory.submit(between, ["k"])
            assert not waiter.done() and purgatory.purgatory.num_delayed == 1
            assert await waiter is Outcome.EXPIRED  # at the next drain
            ready = op(-50, "ready", log, clock, ready=True)
            assert await purgatory.wait(ready, ["k"]) is Outcome.COMPLETED
            assert clock.now_ms() == 103  # no time passed for any of them

    run(main(), clock)
    assert log[2:] == [
        ("complete", "between", 103),
        ("expire", "between", 103),
        ("complete", "ready", 103),
    ]


def test_r46_bad_arguments_raise_and_leave_no_trace(
    implementation: PurgatoryImplementation,
) -> None:
    """R46 with R34-R36: errors as try_complete_else_watch's; nothing watched, timed, armed."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            with pytest.raises(ValueError, match="watch_keys"):
                await purgatory.wait(operation, [])
            with pytest.raises(TypeError):
                unhashable: Any = [["unhashable"]]
                await purgatory.wait(op(50, "b", log, clock), unhashable)
            with pytest.raises(TypeError, match=r"operation must be a kpurgatory\.aio"):
                await purgatory.wait(PlainOperationStub(50), ["k"])
            assert purgatory.purgatory.watched == 0
            assert purgatory.purgatory.num_delayed == 0
            assert purgatory.waiting == 0
            assert purgatory.driver.armed_due is None
            waiting = spawn(purgatory.wait(operation, ["k"]))  # usable after a refused try
            await settle()
            with pytest.raises(ValueError, match="already awaited"):
                await purgatory.wait(operation, ["k"])
            assert purgatory.purgatory.watched == 1
            assert await waiting is Outcome.EXPIRED
            with pytest.raises(ValueError, match="already passed"):  # R34: once in its life
                await purgatory.wait(operation, ["k"])

    run(main(), clock)


def test_r45_try_complete_else_watch_names_the_wrapped_implementation_it_accepts(
    implementation: PurgatoryImplementation,
) -> None:
    """R35: the no-waiter submission takes any operation of the wrapped implementation,
    and its refusal names that class (not the awaitable one ``wait`` needs)."""
    clock = ManualClock(0)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            wanted = rf"^operation must be a kpurgatory\.{implementation}\.DelayedOperation"
            with pytest.raises(TypeError, match=wanted):
                purgatory.try_complete_else_watch(object(), ["k"])  # type: ignore[arg-type]
            assert purgatory.purgatory.watched == 0

    run(main(), clock)


class PlainOperationStub(PlainOperation):
    """A plain kpurgatory.DelayedOperation: no waiter, so not awaitable."""

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


# ---- R47: cancelling a wait abandons ------------------------------------------------------


def test_r47_cancelled_task_abandons_its_operation(implementation: PurgatoryImplementation) -> None:
    """R47: unwatched and untimed at once; never completed or expired afterwards."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, clock)
            other = spawn(purgatory.wait(op(200, "b", log, clock), ["k"]))
            waiting = spawn(purgatory.wait(operation, ["k", "j"]))
            await settle()
            assert purgatory.purgatory.watched == 3
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert operation.is_abandoned
            assert (purgatory.purgatory.watched, purgatory.purgatory.num_delayed) == (1, 1)
            assert purgatory.waiting == 1
            operation.ready = True
            assert purgatory.check_and_complete("k") == 0  # never completes later
            assert await other is Outcome.EXPIRED  # time passes the abandoned one's due too

    run(main(), clock)
    assert log == [("complete", "b", 200), ("expire", "b", 200)]


def test_r47_wait_for_timeout_and_task_group_abandon(
    implementation: PurgatoryImplementation,
) -> None:
    """R47: a wait_for timeout and a failing TaskGroup sibling both abandon the waits."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            timed = op(1000, "timed", log, clock)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(purgatory.wait(timed, ["k"]), 0.25)
            assert clock.now_ms() == 250
            assert timed.is_abandoned
            grouped = [op(1000, f"g{i}", log, clock) for i in range(3)]

            async def fail_soon() -> None:
                await asyncio.sleep(0.01)
                raise BoomError

            with pytest.raises(ExceptionGroup):
                async with asyncio.TaskGroup() as group:
                    for operation in grouped:
                        group.create_task(purgatory.wait(operation, ["g"]))
                    group.create_task(fail_soon())
            assert all(operation.is_abandoned for operation in grouped)
            assert purgatory.purgatory.watched == 0
            assert purgatory.purgatory.num_delayed == 0
            assert purgatory.waiting == 0
            await asyncio.sleep(2)  # past every due time: nothing expires

    run(main(), clock)
    assert log == []


def test_r47_abandon_returns_abandoned_to_the_waiter(
    implementation: PurgatoryImplementation,
) -> None:
    """R47: AsyncPurgatory.abandon: True once, the wait returns ABANDONED, no callbacks."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, clock)
            waiting = spawn(purgatory.wait(operation, ["k"]))
            await settle()
            assert purgatory.abandon(operation) is True
            assert purgatory.abandon(operation) is False
            assert await waiting is Outcome.ABANDONED
            done = op(100, "done", log, clock, ready=True)
            assert await purgatory.wait(done, ["k"]) is Outcome.COMPLETED
            assert purgatory.abandon(done) is False

    run(main(), clock)
    assert log == [("complete", "done", 0)]


def test_r47_cancel_of_a_submitted_operation_abandons_it(
    implementation: PurgatoryImplementation,
) -> None:
    """R47: op.cancel() on an awaited operation is an abandon; its wait returns ABANDONED."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, clock)
            waiting = spawn(purgatory.wait(operation, ["k"]))
            await settle()
            operation.cancel()
            assert await waiting is Outcome.ABANDONED
            assert purgatory.purgatory.watched == 0

    run(main(), clock)
    assert log == []


def test_r47_completion_before_the_cancellation_landed_stays(
    implementation: PurgatoryImplementation,
) -> None:
    """R47: completed, then its task cancelled before resuming: it stays completed."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, clock, ready=False)
            waiting = spawn(purgatory.wait(operation, ["k"]))
            await settle()
            operation.ready = True
            assert purgatory.check_and_complete("k") == 1
            waiting.cancel()  # the outcome is set but the task has not resumed yet
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert operation.is_completed and not operation.is_abandoned

    run(main(), clock)
    assert log == [("complete", "a", 0)]


# ---- R48: callback errors -----------------------------------------------------------------


def test_r48_on_complete_raising_reaches_the_waiter_and_the_completer(
    implementation: PurgatoryImplementation,
) -> None:
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    def boom() -> None:
        raise BoomError("on_complete failed")

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, clock, action=boom)
            waiting = spawn(purgatory.wait(operation, ["k"]))
            await settle()
            operation.ready = True
            with pytest.raises(BoomError):
                purgatory.check_and_complete("k")
            with pytest.raises(BoomError, match="on_complete failed"):
                await waiting
            assert operation.is_completed
            with pytest.raises(BoomError):  # completes at once inside wait: raised from wait
                await purgatory.wait(op(100, "b", log, clock, ready=True, action=boom), ["k"])

    run(main(), clock)


def test_r48_on_complete_raising_on_expiry_is_logged_and_driving_goes_on(
    implementation: PurgatoryImplementation, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    def boom() -> None:
        raise BoomError("on_complete failed")

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            failing = spawn(purgatory.wait(op(10, "a", log, clock, action=boom), ["k"]))
            later = spawn(purgatory.wait(op(20, "b", log, clock), ["k"]))
            with pytest.raises(BoomError):
                await failing
            assert await later is Outcome.EXPIRED

    with caplog.at_level(logging.ERROR, logger="kpurgatory"):
        run(main(), clock)
    assert any("raised" in record.getMessage() for record in caplog.records)
    assert log == [("complete", "a", 10), ("complete", "b", 20), ("expire", "b", 20)]


# ---- R49: shutdown --------------------------------------------------------------------------


def test_r49_shutdown_abandons_every_waiter_and_refuses_new_waits(
    implementation: PurgatoryImplementation,
) -> None:
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        waits = [spawn(purgatory.wait(op(100 + i, f"o{i}", log, clock), ["k"])) for i in range(3)]
        await settle()
        purgatory.shutdown()
        purgatory.shutdown()  # idempotent
        assert [await w for w in waits] == [Outcome.ABANDONED] * 3
        assert purgatory.closed and purgatory.driver.stopped
        assert purgatory.purgatory.watched == 0
        with pytest.raises(RuntimeError, match="shut down"):
            await purgatory.wait(op(10, "late", log, clock), ["k"])
        await asyncio.sleep(1)  # nothing expires after shutdown

    run(main(), clock)
    assert log == []


@pytest.mark.parametrize("where", ["on_complete", "on_expiration"])
def test_r49_shutdown_from_a_callback(implementation: PurgatoryImplementation, where: str) -> None:
    """R49: shutdown inside a callback; the calling operation keeps its outcome."""
    clock = ManualClock(0)
    log: list[Event] = []
    base = recording_operation(implementation)
    holder: list[AsyncPurgatory[Any]] = []

    class ShutsDown(base):  # type: ignore[misc, valid-type]
        def on_expiration(self) -> None:
            super().on_expiration()
            if where == "on_expiration":
                holder[0].shutdown()

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        holder.append(purgatory)
        action = purgatory.shutdown if where == "on_complete" else None
        caller = spawn(purgatory.wait(ShutsDown(10, "caller", log, clock, action=action), ["k"]))
        others = [spawn(purgatory.wait(base(50, f"o{i}", log, clock), ["k"])) for i in range(2)]
        assert await caller is Outcome.EXPIRED
        assert [await o for o in others] == [Outcome.ABANDONED] * 2
        assert purgatory.closed

    run(main(), clock)
    assert log == [("complete", "caller", 10), ("expire", "caller", 10)]


# ---- R50: the loop thread ------------------------------------------------------------------


def test_r50_wait_off_the_purgatory_loop_raises(implementation: PurgatoryImplementation) -> None:
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    other_loop = VirtualTimeLoop(clock)
    try:

        async def main() -> None:
            purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any](
                "p", implementation=implementation, loop=other_loop
            )
            with pytest.raises(RuntimeError, match="purgatory's loop"):
                await purgatory.wait(op(10, "a", log, clock), ["k"])
            assert purgatory.purgatory.watched == 0

        run(main(), clock)
    finally:
        other_loop.close()


def test_r50_clock_and_loop_must_agree() -> None:
    async def real_loop() -> None:
        with pytest.raises(ValueError, match="clock must be the loop's own"):
            AsyncPurgatory[Any]("p", clock=ManualClock(0))

    asyncio.run(real_loop())

    async def virtual_loop() -> None:
        with pytest.raises(ValueError, match="clock must be the loop's own"):
            AsyncPurgatory[Any]("p", clock=ManualClock(0))  # not the loop's ManualClock

    run(virtual_loop(), ManualClock(0))
    with pytest.raises(RuntimeError, match="needs an event loop"):
        AsyncPurgatory[Any]("p")
    with pytest.raises(ValueError, match="implementation must be"):
        run(_build("wrong"), ManualClock(0))


async def _build(implementation: Any) -> None:
    AsyncPurgatory[Any]("p", implementation=implementation)


def test_r50_blocking_try_complete_delays_expiries_which_keep_due_order(
    implementation: PurgatoryImplementation,
) -> None:
    """R50: a try_complete that blocks (here: 100 virtual ms pass inside it) stalls the
    loop; the operations due meanwhile expire late, after it returns, in due order."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            waits = [spawn(purgatory.wait(op(d, f"d{d}", log, clock), ["k"])) for d in (20, 10, 30)]
            await asyncio.sleep(0.005)
            blocking = op(1000, "blocker", log, clock, blocker=lambda: clock.advance(50))
            blocked = spawn(purgatory.wait(blocking, ["b"]))  # 2 try_completes: 100 ms
            assert [await w for w in waits] == [Outcome.EXPIRED] * 3
            blocked.cancel()

    run(main(), clock)
    assert [(name, at) for kind, name, at in log if kind == "expire"] == [
        ("d10", 105),
        ("d20", 105),
        ("d30", 105),
    ]


def test_r50_completion_on_another_thread_reaches_the_waiter(
    implementation: PurgatoryImplementation,
) -> None:
    """R50: a thread's check_and_complete runs on_complete there; the waiter wakes on the loop."""
    log: list[Event] = []
    op = recording_operation(implementation)
    completed_on: list[int] = []

    async def main() -> Outcome:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(30_000, "a", log, purgatory.timer.clock, ready=True)
            operation.ready = False
            operation.action = lambda: completed_on.append(threading.get_ident())
            waiting = spawn(purgatory.wait(operation, ["k"]))
            await settle()
            operation.ready = True
            worker = threading.Thread(target=purgatory.purgatory.check_and_complete, args=("k",))
            worker.start()
            outcome = await asyncio.wait_for(waiting, 10)
            worker.join(10)
            assert not worker.is_alive()
            assert completed_on and completed_on[0] != threading.get_ident()
            return outcome

    assert asyncio.run(main()) is Outcome.COMPLETED


def test_r50_loop_closed_with_operations_pending(implementation: PurgatoryImplementation) -> None:
    """R50: after the loop closed, a completion is dropped quietly and shutdown works."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    loop = VirtualTimeLoop(clock)
    operation = op(100, "a", log, clock)
    try:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any](
            "p", implementation=implementation, loop=loop
        )
        waiting = loop.create_task(purgatory.wait(operation, ["k"]))
        waiting._log_destroy_pending = False  # type: ignore[attr-defined]  # pending at close on purpose: no GC warning
        loop.run_until_complete(asyncio.sleep(0.01))
        assert not waiting.done()
    finally:
        loop.close()  # with the wait still pending
    operation.ready = True
    with pytest.raises(RuntimeError, match="purgatory's loop"):  # R59: no loop runs here
        purgatory.check_and_complete("k")
    assert purgatory.purgatory.check_and_complete("k") == 1  # completes; nobody to wake
    assert log == [("complete", "a", 10)]
    purgatory.shutdown()
    assert purgatory.closed


def test_r46_r47_submit_returns_a_future_whose_cancel_abandons(
    implementation: PurgatoryImplementation,
) -> None:
    """R46: submit's future resolves to the outcome; R47: cancelling it abandons."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            expiring = purgatory.submit(op(20, "e", log, clock), ["k"])
            completing = op(50, "c", log, clock)
            answered = purgatory.submit(completing, ["k"])
            dropped_op = op(30, "d", log, clock)
            dropped = purgatory.submit(dropped_op, ["k"])
            at_once = purgatory.submit(op(50, "now", log, clock, ready=True), ["k"])
            assert at_once.done() and at_once.result() is Outcome.COMPLETED
            dropped.cancel()
            await settle()
            assert dropped_op.is_abandoned
            assert purgatory.purgatory.watched == 2
            completing.ready = True
            purgatory.check_and_complete("k")
            assert await answered is Outcome.COMPLETED
            assert await expiring is Outcome.EXPIRED
            assert clock.now_ms() == 20

    run(main(), clock)
    assert ("complete", "d", 0) not in log and ("expire", "d", 30) not in log


# ---- the Waiter: a future that is also a coroutine (R46, R47) --------------------------------


def test_r47_task_cancel_abandons_before_the_task_resumes(
    implementation: PurgatoryImplementation,
) -> None:
    """R47: Task.cancel cancels the Waiter the task awaits, and that abandons at once:
    unwatched and untimed right after ``cancel()``, before the task has resumed."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, clock)
            waiting = spawn(purgatory.wait(operation, ["k", "j"]))
            await settle()
            assert waiting.cancel() is True
            assert operation.is_abandoned and not waiting.done()
            assert (purgatory.purgatory.watched, purgatory.purgatory.num_delayed) == (0, 0)
            assert purgatory.waiting == 0
            with pytest.raises(asyncio.CancelledError):
                await waiting

    run(main(), clock)
    assert log == []


def test_r46_wait_is_a_coroutine_function_and_submit_returns_a_plain_future(
    implementation: PurgatoryImplementation,
) -> None:
    """R46, R57: wait is an async def (it submits when its coroutine first runs); submit
    submits at the call and returns a Future that is not a coroutine, so asyncio.wait,
    gather and create_task take each as they take any future or coroutine."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            assert inspect.iscoroutinefunction(type(purgatory).wait)
            coroutine = purgatory.wait(op(100, "a", log, clock), ["k"])
            assert asyncio.iscoroutine(coroutine)
            assert purgatory.purgatory.watched == 0 and purgatory.waiting == 0
            task = asyncio.get_running_loop().create_task(coroutine)
            await settle()
            assert purgatory.purgatory.watched == 1 and purgatory.waiting == 1
            waiter = purgatory.submit(op(50, "b", log, clock), ["k"])
            assert isinstance(waiter, asyncio.Future) and not asyncio.iscoroutine(waiter)
            assert purgatory.purgatory.watched == 2 and purgatory.waiting == 2
            done, pending = await asyncio.wait([waiter])  # a coroutine face would be refused
            assert done == {waiter} and not pending
            assert list(await asyncio.gather(task, waiter)) == [Outcome.EXPIRED, Outcome.EXPIRED]

    run(main(), clock)
    assert [name for kind, name, _ in log if kind == "expire"] == ["b", "a"]


def test_r50_wait_from_another_thread_while_the_loop_runs_raises(
    implementation: PurgatoryImplementation,
) -> None:
    """R50: a call from a thread other than the running loop's is refused, leaving no trace."""
    log: list[Event] = []
    op = recording_operation(implementation)
    errors: list[BaseException] = []

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(100, "a", log, purgatory.timer.clock)

            def call() -> None:
                try:
                    purgatory.submit(operation, ["k"])
                except RuntimeError as exc:
                    errors.append(exc)
                try:  # the coroutine on a loop of this thread: another loop (R50)
                    asyncio.run(purgatory.wait(operation, ["k"]))
                except RuntimeError as exc:
                    errors.append(exc)

            worker = threading.Thread(target=call)
            worker.start()
            await asyncio.get_running_loop().run_in_executor(None, worker.join)
            assert purgatory.purgatory.watched == 0 and purgatory.waiting == 0

    asyncio.run(main())
    assert len(errors) == 2 and all("purgatory's loop" in str(error) for error in errors)


def test_r45_try_complete_else_watch_on_the_loop_arms_the_driver_without_a_waiter(
    implementation: PurgatoryImplementation,
) -> None:
    """R22, R45: AsyncPurgatory.try_complete_else_watch submits with no waiter and arms
    the driver; the operation expires at its due time; shutdown leaves such operations
    alone (R49: nobody awaits them); an awaited operation is refused."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    plain = _plain_recording(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        assert purgatory.try_complete_else_watch(op(30, "a", log, clock), ["k"]) is False
        assert purgatory.driver.armed_due == 30
        assert purgatory.try_complete_else_watch(plain(10, "plain", log, clock), ["k"]) is False
        assert purgatory.driver.armed_due == 10
        assert purgatory.try_complete_else_watch(op(5, "now", log, clock, ready=True), ["k"])
        awaited = op(100, "awaited", log, clock)
        waiter = purgatory.submit(awaited, ["k"])
        with pytest.raises(ValueError, match="already awaited"):
            purgatory.try_complete_else_watch(awaited, ["k"])
        with pytest.raises(TypeError, match="operation must be"):
            purgatory.try_complete_else_watch(object(), ["k"])  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        left = op(100, "left", log, clock)
        assert purgatory.try_complete_else_watch(left, ["k"]) is False
        purgatory.shutdown()
        assert await waiter is Outcome.ABANDONED
        assert not left.is_completed and not left.is_abandoned

    run(main(), clock)
    assert log == [
        ("complete", "now", 0),
        ("complete", "plain", 10),
        ("expire", "plain", 10),
        ("complete", "a", 30),
        ("expire", "a", 30),
    ]


def _plain_recording(implementation: str) -> type[Any]:
    """A recording operation on the implementation's plain (not awaitable) base."""
    from kpurgatory import optimized, reference

    base = (
        optimized.DelayedOperation if implementation == "optimized" else reference.DelayedOperation
    )

    class Plain(base):  # type: ignore[misc, valid-type]
        def __init__(self, delay_ms: int, name: str, log: list[Event], clock: Any) -> None:
            super().__init__(delay_ms)
            self.name, self.log, self.clock = name, log, clock

        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            self.log.append(("complete", self.name, self.clock.now_ms()))

        def on_expiration(self) -> None:
            self.log.append(("expire", self.name, self.clock.now_ms()))

    return Plain


def test_r46_a_completion_from_another_thread_racing_the_expiry_is_completed(
    implementation: PurgatoryImplementation,
) -> None:
    """R46, R17: the expiry's run has begun (on the loop) when another thread's
    force_complete wins: the outcome is COMPLETED, not EXPIRED, and on_expiration does
    not run. (The waiter learns which call won from the thread that won it.)"""
    clock = ManualClock(0)
    log: list[Event] = []
    base = recording_operation(implementation)

    class Racing(base):  # type: ignore[misc, valid-type]
        raced = False

        def force_complete(self) -> bool:
            if threading.current_thread() is threading.main_thread() and not self.raced:
                self.raced = True  # inside run, on the loop: another thread wins first
                racer = threading.Thread(target=lambda: base.force_complete(self))
                racer.start()
                racer.join(10)
            return bool(super().force_complete())

    async def main() -> Outcome:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            return await purgatory.wait(Racing(10, "a", log, clock), ["k"])

    assert run(main(), clock) is Outcome.COMPLETED
    assert log == [("complete", "a", 10)]


# -- pinned by a sampled mutation run (R45, R48, R49, R59) ------------------------------------


def _raise_boom() -> None:
    raise BoomError("on_complete failed")


# ---- R48: on_complete raising at once leaves no unretrieved exception --------------------------


def test_r48_on_complete_raising_at_submission_reports_nothing_to_the_loop(
    implementation: PurgatoryImplementation,
) -> None:
    """R48: an operation that completes inside ``submit`` (or ``wait``) and whose
    ``on_complete`` raises: the call raises the error, and the waiter that call dropped
    reports nothing to the loop's exception handler (no "Future exception was never
    retrieved") once it is collected.

    Kills: removing ``waiter.exception()`` in ``AsyncPurgatory._submit``'s error path
    (the dropped waiter then logs its unretrieved exception when garbage collected)."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    reported: list[dict[str, Any]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            submitted = op(50, "submitted", log, clock, ready=True, action=_raise_boom)
            with pytest.raises(BoomError):
                purgatory.submit(submitted, ["k"])
            waited = op(50, "waited", log, clock, ready=True, action=_raise_boom)
            with pytest.raises(BoomError):
                await purgatory.wait(waited, ["k"])
            assert submitted.is_completed and waited.is_completed
            assert purgatory.waiting == 0
        gc.collect()  # the dropped waiters (and the tracebacks holding them) are gone

    run(main(), clock)
    gc.collect()
    unretrieved = [c for c in reported if "never retrieved" in str(c.get("message", ""))]
    assert unretrieved == [], unretrieved
    assert reported == []
    assert [entry[:2] for entry in log] == [("complete", "submitted"), ("complete", "waited")]


# ---- R50, R59: an operation class already accepted is still refused off the loop --------------


def test_r59_try_complete_else_watch_off_the_loop_with_a_class_accepted_on_it(
    implementation: PurgatoryImplementation,
) -> None:
    """R50, R59: ``try_complete_else_watch`` remembers the operation classes it checked
    (a fast path), but the loop check is made on every call: after an operation of a
    class was accepted on the loop, another of that class is refused with no running
    loop and from another running loop, and leaves no trace.

    Kills: inverting the loop test of the fast path in
    ``AsyncPurgatory.try_complete_else_watch`` (``running_loop() is self._loop``): the
    off-loop call then skips the check and watches the operation."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    loop = VirtualTimeLoop(clock)
    other = VirtualTimeLoop(ManualClock(0))
    try:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any](
            "p", implementation=implementation, loop=loop
        )
        accepted = op(50, "accepted", log, clock)

        async def on_the_loop() -> bool:
            return purgatory.try_complete_else_watch(accepted, ["k"])

        assert loop.run_until_complete(on_the_loop()) is False
        assert purgatory.purgatory.watched == 1
        armed = purgatory.driver.armed_due

        late = op(50, "late", log, clock)
        with pytest.raises(RuntimeError, match="purgatory's loop"):
            purgatory.try_complete_else_watch(late, ["k"])  # no running loop

        async def on_another_loop() -> bool:
            return purgatory.try_complete_else_watch(late, ["k"])

        with pytest.raises(RuntimeError, match="purgatory's loop"):
            other.run_until_complete(on_another_loop())
        assert purgatory.purgatory.watched == 1 and purgatory.purgatory.num_delayed == 1
        assert purgatory.driver.armed_due == armed
        assert not late.is_completed and not late.is_abandoned
        loop.run_until_complete(asyncio.sleep(0.1))
        assert [entry[:2] for entry in log] == [("complete", "accepted"), ("expire", "accepted")]
    finally:
        other.close()
        loop.close()


# ---- R49: leaving `async with` shuts the purgatory down -----------------------------------------


@pytest.mark.parametrize("leaving", ["normally", "by an error"])
def test_r49_leaving_async_with_shuts_the_purgatory_down(
    implementation: PurgatoryImplementation, leaving: str
) -> None:
    """R49: ``async with AsyncPurgatory(...)`` shuts it down on the way out, however the
    block is left: closed, every waiter still pending ``ABANDONED``, the driver stopped
    with nothing armed, the wrapped purgatory's timer closed; an error in the block
    propagates unchanged.

    Kills: ``AsyncPurgatory.__aexit__`` that does not call ``shutdown`` (``pass``)."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
    seen: dict[str, Any] = {}

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        seen["purgatory"] = purgatory
        try:
            async with purgatory as entered:
                assert entered is purgatory
                seen["waiter"] = purgatory.submit(op(50, "a", log, clock), ["k"])
                task = asyncio.create_task(purgatory.wait(op(70, "b", log, clock), ["k"]))
                seen["task"] = task
                await asyncio.sleep(0)  # the task submits
                assert purgatory.waiting == 2 and purgatory.driver.armed_due == 50
                if leaving != "normally":
                    raise BoomError("the block failed")
        except BoomError:
            seen["raised"] = True
        seen["task_outcome"] = await task
        await asyncio.sleep(1)  # long past both due times: nothing fires any more

    run(main(), clock)
    purgatory = seen["purgatory"]
    assert seen.get("raised", False) is (leaving != "normally")
    assert purgatory.closed
    assert seen["waiter"].result() is Outcome.ABANDONED
    assert seen["task_outcome"] is Outcome.ABANDONED
    assert purgatory.waiting == 0
    assert purgatory.driver.stopped and purgatory.driver.armed_due is None
    assert purgatory.timer.closed
    assert log == []


# ---- R45, R4: a user's clock mapped to loop time never fires early ------------------------------


@pytest.mark.parametrize("delay_ms", [1_000, 2_500, 60_000, 3_600_000])
def test_r45_a_users_clock_fires_never_early_at_long_delays(delay_ms: int) -> None:
    """R45, R4: with a clock of the user's own (``direct=False``) the driver's handle
    fires when that clock reads the due time, not a millisecond before, at delays of a
    second up to an hour (a mapping off by 0.1% fires milliseconds early from a few
    seconds on, while at tens of milliseconds the error rounds away).

    Kills: ``(due - self._clock.now_ms()) / 1001`` in
    ``LoopTimerDriver._loop_time_of`` (fires 0.1% early), and ``/ 999`` (late)."""
    clock = ManualClock(0)
    user_clock = OffsetClock(clock, offset=7_000)
    loop = VirtualTimeLoop(clock)
    readings: list[int] = []
    try:
        driver = LoopTimerDriver(
            loop,
            NoTimer(),
            user_clock,
            lambda _: readings.append(user_clock.now_ms()),
            direct=False,
        )
        due = user_clock.now_ms() + delay_ms
        driver.schedule(due)
        assert driver.armed_due == due
        loop.run_until_complete(asyncio.sleep(delay_ms / 1000 + 1))
    finally:
        loop.close()
    assert readings == [due]


def test_r44_a_later_schedule_keeps_the_earlier_arming_and_stopped_reads_true_after_stop() -> None:
    """R44, R49: ``schedule`` re-arms only for an earlier due time (a later one must not
    move the handle past a task due sooner), and ``stopped`` is a flag that reads False
    until ``stop``, True after it.

    Kills: ``due != armed`` for ``due < armed`` in ``LoopTimerDriver.schedule`` (the
    handle moved to the later due time, the earlier firing lost), and ``stopped`` without
    ``@property`` (a bound method, always true)."""
    clock = ManualClock(0)
    loop = VirtualTimeLoop(clock)
    fired: list[int] = []
    try:
        driver = LoopTimerDriver(
            loop, NoTimer(), clock, lambda _: fired.append(clock.now_ms()), direct=True
        )
        assert driver.stopped is False
        driver.schedule(10)
        driver.schedule(20)
        assert driver.armed_due == 10
        loop.run_until_complete(asyncio.sleep(0.015))
        assert fired == [10]
        driver.stop()
        assert driver.stopped is True
    finally:
        loop.close()
