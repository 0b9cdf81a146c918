"""asyncio waiters always settle (R48, R53, R58, R59, R62).

How a waiter settles when a callback raises anything, when the wrapped purgatory is
used or shut down directly, when an abandon raises during shutdown, and how calls off
the loop or after shutdown are refused; plus the small contracts a sampled mutation run
of the loop driver and the aio purgatory pinned. All on a virtual-time loop, both
implementations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kpurgatory.aio import (
    AsyncPurgatory,
    LoopTimerDriver,
    Outcome,
    PurgatoryImplementation,
    VirtualTimeLoop,
    run,
)
from kpurgatory.clock import ManualClock
from tests.aio.support import AioCase, NoTimer, OffsetClock, fresh
from tests.support import DelegatingLock

pytestmark = pytest.mark.timeout(30)


# ---- R48, R58: every waiter settles ---------------------------------------------------------


@pytest.mark.parametrize("error", [ValueError("boom"), asyncio.CancelledError("from fut")])
def test_r58_a_waiter_settles_whatever_on_complete_raises(
    aio: AioCase, error: BaseException
) -> None:
    """R48, R58 (bug: a CancelledError from on_complete left the waiter pending for
    ever, even after shutdown): the completing call and the waiter both raise it."""

    def fail() -> None:
        raise error

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a", action=fail)
        waiter = purgatory.submit(operation, ["k"])
        operation.ready = True
        with pytest.raises(type(error)):
            purgatory.check_and_complete("k")
        assert waiter.done() and purgatory.waiting == 0
        assert waiter.exception() is error
        assert operation.is_completed

    aio.run(main)


def test_r58_abandon_on_the_wrapped_purgatory_settles_the_waiter(aio: AioCase) -> None:
    """R58 (bug: on the reference, purgatory.abandon never told the waiter): abandon and
    cancel() made on the wrapped purgatory directly settle the waiter ABANDONED."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        first, second = aio.op(50, "a"), aio.op(50, "b")
        waiters = [purgatory.submit(first, ["k"]), purgatory.submit(second, ["k"])]
        assert purgatory.purgatory.abandon(first) is True
        second.cancel()
        outcomes = [await asyncio.wait_for(waiter, 1) for waiter in waiters]
        assert outcomes == [Outcome.ABANDONED] * 2
        assert purgatory.waiting == 0

    aio.run(main)


def test_r58_the_wrapped_purgatory_shut_down_directly_ends_the_driver_and_the_waiters(
    implementation: PurgatoryImplementation,
) -> None:
    """R58 (bug: the driver fired about 50,000 times a second after the wrapped purgatory
    was shut down directly): at its next firing the AsyncPurgatory shuts itself down, the
    waiters get ABANDONED, and nothing is armed any more."""
    clock, log, op = fresh(implementation)
    firings: list[int] = []

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        original = purgatory._advance

        def counting(max_entries: int) -> None:
            firings.append(clock.now_ms())
            if len(firings) > 100:  # spinning: stop it so the test ends (and fails)
                purgatory.driver.stop()
            original(max_entries)

        purgatory.driver._advance = counting
        waiter = purgatory.submit(op(50, "a", log, clock), ["k"])
        purgatory.purgatory.shutdown()
        assert await asyncio.wait_for(waiter, 1) is Outcome.ABANDONED
        await asyncio.sleep(1)
        assert purgatory.closed and purgatory.driver.stopped
        assert purgatory.driver.armed_due is None

    run(main(), clock)
    assert firings == [50]
    assert log == []


def test_r58_a_call_after_the_wrapped_purgatory_was_shut_down_settles_and_refuses(
    implementation: PurgatoryImplementation,
) -> None:
    """R58: with nothing armed (timer disabled), the next call notices the shutdown."""
    clock, log, op = fresh(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any](
            "p", implementation=implementation, timer_enabled=False
        )
        waiter = purgatory.submit(op(50, "a", log, clock), ["k"])
        purgatory.purgatory.shutdown()
        with pytest.raises(RuntimeError, match="shut down"):
            purgatory.submit(op(50, "b", log, clock), ["k"])
        assert await waiter is Outcome.ABANDONED

    run(main(), clock)


def test_r53_asyncio_shutdown_settles_every_waiter_even_if_an_abandon_raises(
    implementation: PurgatoryImplementation,
) -> None:
    """R49, R53: an operation whose supplied lock fails the abandon; shutdown still
    abandons every other waiter, shuts down, then raises the lock's error."""
    clock, log, op = fresh(implementation)

    class BrokenLock(DelegatingLock):
        broken = False

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            if self.broken:
                raise OSError("lock service down")
            return super().acquire(blocking, timeout)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        lock = BrokenLock()
        broken = op(50, "broken", log, clock)
        broken._lock = lock  # the operation's own lock, swapped before submission
        waiters = [purgatory.submit(op(50, f"o{i}", log, clock), ["k"]) for i in range(2)]
        waiters.insert(1, purgatory.submit(broken, ["k"]))
        lock.broken = True
        with pytest.raises(OSError, match="lock service down"):
            purgatory.shutdown()
        assert purgatory.closed and purgatory.timer.closed
        assert [waiters[0].result(), waiters[2].result()] == [Outcome.ABANDONED] * 2

    run(main(), clock)


# ---- R50, R59: calls only on the loop, in its thread ----------------------------------------


def test_r59_a_call_before_the_loop_runs_is_refused_with_no_trace(
    implementation: PurgatoryImplementation,
) -> None:
    """R59 (bug: a call from a thread with no running loop passed the check, the loop
    started meanwhile, and call_at came from the wrong thread): every call needs the
    purgatory's loop running in the calling thread; refused, it leaves no trace."""
    clock, log, op = fresh(implementation)
    loop = VirtualTimeLoop(clock)
    try:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any](
            "p", implementation=implementation, loop=loop
        )
        operation = op(50, "a", log, clock)
        for call in (
            lambda: purgatory.submit(operation, ["k"]),
            lambda: purgatory.try_complete_else_watch(operation, ["k"]),
            lambda: purgatory.check_and_complete("k"),
            lambda: purgatory.cancel_for_key("k"),
            lambda: purgatory.abandon(operation),
        ):
            with pytest.raises(RuntimeError, match="purgatory's loop"):
                call()
        assert purgatory.purgatory.watched == 0 and purgatory.driver.armed_due is None
        assert loop.run_until_complete(purgatory.wait(operation, ["k"])) is Outcome.EXPIRED
    finally:
        loop.close()


# ---- mutation gaps of the loop driver and the aio purgatory --------------------------------


def test_r45_the_driver_maps_a_users_clock_to_loop_time() -> None:
    """R45: with a clock of the user's own (direct=False) the handle fires exactly when
    that clock reaches the due time (an inverted, missing or multiplied mapping fires
    early, crashes or never)."""
    clock = ManualClock(0)
    user_clock = OffsetClock(clock, offset=5_000)
    loop = VirtualTimeLoop(clock)
    fired: list[float] = []
    try:
        driver = LoopTimerDriver(
            loop, NoTimer(), user_clock, lambda _: fired.append(loop.time()), direct=False
        )
        driver.schedule(user_clock.now_ms() + 30)
        assert driver.armed_due == 5_030
        loop.run_until_complete(asyncio.sleep(1))
    finally:
        loop.close()
    assert fired == [pytest.approx(0.030)]


def test_aio_purgatory_small_contracts(implementation: PurgatoryImplementation) -> None:
    """R45, R49, R35: no arming for an operation completed at once or with the timer
    disabled; nothing armed after shutdown; the default wheel_size; reprs; a loop that is
    not a loop; a reference operation submitted without a waiter cancels cleanly."""
    clock, log, op = fresh(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("p", implementation=implementation)
        assert purgatory.timer.wheel_size == 20
        assert purgatory.try_complete_else_watch(op(50, "now", log, clock, ready=True), ["k"])
        assert purgatory.driver.armed_due is None
        assert repr(purgatory) == f"AsyncPurgatory('p', {implementation}, waiting=0)"
        assert repr(purgatory.driver) == "LoopTimerDriver(armed_due=None)"
        plain = op(50, "plain", log, clock)
        assert purgatory.try_complete_else_watch(plain, ["k"]) is False
        plain.cancel()  # submitted without a waiter: the plain abandon
        assert plain.is_abandoned and purgatory.purgatory.watched == 0
        waiter = purgatory.submit(op(70, "w", log, clock), ["k"])
        assert purgatory.driver.armed_due == 50  # armed for plain's due time earlier
        assert repr(purgatory) == f"AsyncPurgatory('p', {implementation}, waiting=1)"
        purgatory.shutdown()
        assert await waiter is Outcome.ABANDONED
        assert purgatory.driver.armed_due is None
        assert repr(purgatory) == f"AsyncPurgatory('p', {implementation}, waiting=0, closed)"
        assert repr(purgatory.driver) == "LoopTimerDriver(stopped)"
        untimed: AsyncPurgatory[Any] = AsyncPurgatory[Any](
            "u", implementation=implementation, timer_enabled=False
        )
        untimed.submit(op(50, "u", log, clock), ["k"])
        assert untimed.driver.armed_due is None
        untimed.shutdown()

    run(main(), clock)
    with pytest.raises(TypeError, match="loop"):
        AsyncPurgatory[Any]("p", loop=object())  # type: ignore[arg-type]


# ---- R62: one rule for misuse ----------------------------------------------------------------


def test_r62_every_call_after_shutdown_is_refused_the_same_way(
    implementation: PurgatoryImplementation,
) -> None:
    """R62: on the loop, after shutdown, every acting call raises RuntimeError naming
    the purgatory and changes nothing; shutdown again is fine; properties answer."""
    clock, log, op = fresh(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory[Any]("shut", implementation=implementation)
        left = op(50, "left", log, clock)
        purgatory.try_complete_else_watch(left, ["k"])
        purgatory.shutdown()
        fresh = op(50, "fresh", log, clock)
        with pytest.raises(RuntimeError, match="'shut' is shut down"):
            await purgatory.wait(fresh, ["k"])
        calls: dict[str, Callable[[], Any]] = {
            "submit": lambda: purgatory.submit(fresh, ["k"]),
            "try_complete_else_watch": lambda: purgatory.try_complete_else_watch(fresh, ["k"]),
            "check_and_complete": lambda: purgatory.check_and_complete("k"),
            "cancel_for_key": lambda: purgatory.cancel_for_key("k"),
            "abandon": lambda: purgatory.abandon(left),
        }
        for call in calls.values():
            with pytest.raises(RuntimeError, match="'shut' is shut down"):
                call()
        assert purgatory.purgatory.watched == 1 and not left.is_abandoned
        purgatory.shutdown()
        assert purgatory.closed and purgatory.waiting == 0

    run(main(), clock)
