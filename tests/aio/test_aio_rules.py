"""Rules R44-R46 of the asyncio purgatory: the loop drives the timer, awaiting an operation.

Every test runs an ``AsyncPurgatory`` on a ``VirtualTimeLoop`` (R51) over a
``ManualClock``, so "expires at its due time" is an exact clock reading, never a
duration. The ``implementation`` fixture runs each test on the optimized and on the
reference purgatory. Operations are ``tests.aio.support.recording_operation``: they log
``on_complete``/``on_expiration`` with the clock reading. Cancelling and callback errors
(R47, R48) are in ``test_aio_cancel_rules.py``; shutdown and the loop thread (R49, R50,
R59) in ``test_aio_loop_rules.py``.
"""

from __future__ import annotations

import asyncio
import inspect
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
from tests.aio.support import (
    AioCase,
    Event,
    NoTimer,
    OffsetClock,
    fresh,
    recording_operation,
    settle,
    spawn,
)
from tests.support import pending_operation

pytestmark = pytest.mark.timeout(30)


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


def test_r45_one_handle_armed_at_the_next_due_time_and_re_armed_earlier(aio: AioCase) -> None:
    """R45, R44: the handle follows next_due_time; an earlier submission re-arms it."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        driver = purgatory.driver
        assert driver.armed_due is None
        waits = [spawn(purgatory.wait(aio.op(100, "late"), ["k"]))]
        await settle()
        assert driver.armed_due == 100 == purgatory.timer.next_due_time
        waits.append(spawn(purgatory.wait(aio.op(30, "early"), ["k"])))
        await settle()
        assert driver.armed_due == 30
        waits.append(spawn(purgatory.wait(aio.op(60, "mid"), ["k"])))
        await settle()
        assert driver.armed_due == 30  # a later due time does not re-arm
        assert await waits[1] is Outcome.EXPIRED
        assert aio.clock.now_ms() == 30
        assert driver.armed_due == 60  # re-armed after the firing
        assert await waits[0] is Outcome.EXPIRED
        assert driver.armed_due is None  # nothing scheduled: nothing armed
        assert await waits[2] is Outcome.EXPIRED

    aio.run(main)
    assert [(kind, name, at) for kind, name, at in aio.log if kind == "expire"] == [
        ("expire", "early", 30),
        ("expire", "mid", 60),
        ("expire", "late", 100),
    ]


def test_r45_many_expiries_in_due_order_never_early(
    implementation: PurgatoryImplementation,
) -> None:
    """R45, R4, R6: forty operations with scattered delays expire in due order, each at
    its due time (tick 7: due = floor(submitted + delay, 7))."""
    clock, log, op = fresh(implementation)
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
    clock, log, op = fresh(implementation)

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


def test_r46_completed_by_check_and_complete_on_the_loop(aio: AioCase) -> None:
    """R46, R25: a loop-side check_and_complete completes the waiter; no time passes."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(500, "a")
        waiting = spawn(purgatory.wait(operation, ["k1", "k2"]))
        await settle()
        assert (purgatory.waiting, purgatory.purgatory.num_delayed) == (1, 1)
        assert purgatory.purgatory.watched == 2
        assert purgatory.check_and_complete("k1") == 0  # not ready: stays
        operation.ready = True
        assert purgatory.check_and_complete("k1") == 1
        assert await waiting is Outcome.COMPLETED
        assert aio.clock.now_ms() == 0
        assert (purgatory.waiting, purgatory.purgatory.num_delayed) == (0, 0)
        assert purgatory.driver.armed_due is None or purgatory.timer.next_due_time is None

    aio.run(main)
    assert aio.log == [("complete", "a", 0)]


def test_r46_completed_at_once_is_never_timed(aio: AioCase) -> None:
    """R46, R23: a ready operation completes inside wait; nothing is watched or armed."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        outcome = await purgatory.wait(aio.op(50, "a", ready=True), ["k"])
        assert outcome is Outcome.COMPLETED
        assert purgatory.purgatory.watched == 0
        assert purgatory.driver.armed_due is None
        assert purgatory.purgatory.num_completed == 1

    aio.run(main)


def test_r46_force_complete_by_hand_and_zero_delay_expiry(aio: AioCase) -> None:
    """R46: force_complete gives COMPLETED; a delay of 0 gives EXPIRED with no time passing."""
    aio.clock.advance(9)  # the clock reads 9 when the purgatory starts

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        manual = aio.op(10_000, "manual")
        waiting = spawn(purgatory.wait(manual, ["k"]))
        await settle()
        assert manual.force_complete() is True
        assert await waiting is Outcome.COMPLETED
        assert await purgatory.wait(aio.op(0, "zero"), ["k"]) is Outcome.EXPIRED
        assert aio.clock.now_ms() == 9

    aio.run(main)
    assert aio.log == [("complete", "manual", 9), ("complete", "zero", 9), ("expire", "zero", 9)]


def test_r1_r3_negative_delays_expire_at_submission_or_the_next_drain(aio: AioCase) -> None:
    """R1, R3 (docs/tutorial.md, "Negative timeouts"): a negative delay is accepted. Due
    at or before the timer's current time, it expires within the submitting call;
    due between that and the clock (the clock moved since the last drain), at the next
    drain. Neither waits for the clock; a ready operation completes instead."""
    aio.clock.advance(100)  # the clock reads 100 when the purgatory starts

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        aio.clock.advance(3)  # the timer still reads 100: it has not drained since
        past = aio.op(-5, "past")  # due 98: before the timer's time
        assert purgatory.submit(past, ["k"]).result() is Outcome.EXPIRED
        assert aio.log == [("complete", "past", 103), ("expire", "past", 103)]
        between = aio.op(-1, "between")  # due 102: after the timer's 100
        waiter = purgatory.submit(between, ["k"])
        assert not waiter.done() and purgatory.purgatory.num_delayed == 1
        assert await waiter is Outcome.EXPIRED  # at the next drain
        ready = aio.op(-50, "ready", ready=True)
        assert await purgatory.wait(ready, ["k"]) is Outcome.COMPLETED
        assert aio.clock.now_ms() == 103  # no time passed for any of them

    aio.run(main)
    assert aio.log[2:] == [
        ("complete", "between", 103),
        ("expire", "between", 103),
        ("complete", "ready", 103),
    ]


def test_r46_bad_arguments_raise_and_leave_no_trace(aio: AioCase) -> None:
    """R46 with R34-R36: errors as try_complete_else_watch's; nothing watched, timed, armed."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        with pytest.raises(ValueError, match="watch_keys"):
            await purgatory.wait(operation, [])
        with pytest.raises(TypeError):
            unhashable: Any = [["unhashable"]]
            await purgatory.wait(aio.op(50, "b"), unhashable)
        with pytest.raises(TypeError, match=r"operation must be a kpurgatory\.aio"):
            await purgatory.wait(pending_operation(PlainOperation)(50), ["k"])
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

    aio.run(main)


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


def test_r46_wait_is_a_coroutine_function_and_submit_returns_a_plain_future(aio: AioCase) -> None:
    """R46, R57: wait is an async def (it submits when its coroutine first runs); submit
    submits at the call and returns a Future that is not a coroutine, so asyncio.wait,
    gather and create_task take each as they take any future or coroutine."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        assert inspect.iscoroutinefunction(type(purgatory).wait)
        coroutine = purgatory.wait(aio.op(100, "a"), ["k"])
        assert asyncio.iscoroutine(coroutine)
        assert purgatory.purgatory.watched == 0 and purgatory.waiting == 0
        task = asyncio.get_running_loop().create_task(coroutine)
        await settle()
        assert purgatory.purgatory.watched == 1 and purgatory.waiting == 1
        waiter = purgatory.submit(aio.op(50, "b"), ["k"])
        assert isinstance(waiter, asyncio.Future) and not asyncio.iscoroutine(waiter)
        assert purgatory.purgatory.watched == 2 and purgatory.waiting == 2
        done, pending = await asyncio.wait([waiter])  # a coroutine face would be refused
        assert done == {waiter} and not pending
        assert list(await asyncio.gather(task, waiter)) == [Outcome.EXPIRED, Outcome.EXPIRED]

    aio.run(main)
    assert [name for kind, name, _ in aio.log if kind == "expire"] == ["b", "a"]
