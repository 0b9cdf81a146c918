"""asyncio cancelling at any point, and waiters that always settle (R47, R48, R57-R59).

Each test cancels the code waiting for an operation at one point asyncio offers (before
the task's first step, while suspended, through ``wait_for``, ``asyncio.timeout``,
``TaskGroup``, ``gather``, ``shield``, ``asyncio.wait``, during ``try_complete``, by
closing the coroutine) and checks that the operation is abandoned exactly then and never
completes afterwards; the rest pin how a waiter settles when a callback raises anything
or the wrapped purgatory is used directly. All on a virtual-time loop, both
implementations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kpurgatory.aio import (
    AsyncPurgatory,
    DelayedOperation,
    LoopTimerDriver,
    Outcome,
    PurgatoryImplementation,
    VirtualTimeLoop,
    run,
)
from kpurgatory.clock import ManualClock
from tests.aio.support import Event, NoTimer, OffsetClock, recording_operation
from tests.support import DelegatingLock

pytestmark = pytest.mark.timeout(30)


def never_completes_afterwards(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    """The abandon contract (R40, R47): out of every list and the timer, and a later
    event on its key completes nothing."""
    assert operation.is_abandoned and not operation.is_completed
    assert (purgatory.purgatory.watched, purgatory.purgatory.num_delayed) == (0, 0)
    assert purgatory.waiting == 0
    operation.ready = True
    assert purgatory.check_and_complete("k") == 0


# ---- R57: cancelled before the first step: never submitted ---------------------------------


def test_r57_a_task_cancelled_before_its_first_step_never_submits(
    implementation: PurgatoryImplementation,
) -> None:
    """R57 (bug: the operation stayed watched and timed, later completed or expired, and
    waiting counted it): create_task(p.wait(...)).cancel() before the task runs."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            task = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (purgatory.purgatory.watched, purgatory.waiting) == (0, 0)
            assert not operation.is_abandoned and not operation.is_completed
            await asyncio.sleep(0.1)
            assert log == []
            operation.ready = True  # never submitted: it may be submitted now
            assert await purgatory.wait(operation, ["k"]) is Outcome.COMPLETED

    run(main(), clock)


def test_r57_a_task_group_whose_body_raises_after_create_task_submits_nothing(
    implementation: PurgatoryImplementation,
) -> None:
    """R57: a TaskGroup cancels a child that has not started; nothing was submitted."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            with pytest.raises(ExceptionGroup):
                async with asyncio.TaskGroup() as group:
                    group.create_task(purgatory.wait(operation, ["k"]))
                    raise ValueError("body failed")
            assert (purgatory.purgatory.watched, purgatory.waiting) == (0, 0)
            await asyncio.sleep(0.1)
            assert log == [] and not operation.is_completed

    run(main(), clock)


# ---- R47, R57: cancelled while suspended, through every composition -----------------------


async def _wait_for(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(purgatory.wait(operation, ["k"]), 0.01)


async def _timeout(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await purgatory.wait(operation, ["k"])


async def _task_group(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    async def fail_later() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("sibling failed")

    with pytest.raises(ExceptionGroup):
        async with asyncio.TaskGroup() as group:
            group.create_task(purgatory.wait(operation, ["k"]))
            group.create_task(fail_later())


async def _gather(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    gathered = asyncio.gather(purgatory.wait(operation, ["k"]))
    await asyncio.sleep(0.01)
    gathered.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gathered


async def _asyncio_wait_then_cancel(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    waiter = purgatory.submit(operation, ["k"])
    _done, pending = await asyncio.wait([waiter], timeout=0.01)
    assert pending == {waiter}
    assert waiter.cancel() is True
    assert waiter.cancel() is False  # Future.cancel's contract: already cancelled


async def _task_cancel(purgatory: AsyncPurgatory[Any], operation: Any) -> None:
    task = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
    await asyncio.sleep(0.01)
    assert task.cancel() is True
    assert operation.is_abandoned  # inside the cancel() call, before the task resumed
    with pytest.raises(asyncio.CancelledError):
        await task


COMPOSITIONS: dict[str, Callable[[AsyncPurgatory[Any], Any], Awaitable[None]]] = {
    "wait_for": _wait_for,
    "asyncio.timeout": _timeout,
    "TaskGroup": _task_group,
    "gather": _gather,
    "asyncio.wait": _asyncio_wait_then_cancel,
    "Task.cancel": _task_cancel,
}


@pytest.mark.parametrize("composition", sorted(COMPOSITIONS))
def test_r57_cancelled_while_suspended_abandons_through_every_composition(
    implementation: PurgatoryImplementation, composition: str
) -> None:
    """R47, R57: whichever asyncio composition gives up on the wait, the operation is
    abandoned and never completes or expires afterwards."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            await COMPOSITIONS[composition](purgatory, operation)
            never_completes_afterwards(purgatory, operation)
            await asyncio.sleep(0.1)

    run(main(), clock)
    assert log == []


def test_r57_shield_keeps_the_inner_wait_until_the_inner_task_gives_up(
    implementation: PurgatoryImplementation,
) -> None:
    """R57: cancelling the outer side of shield leaves the inner wait going (nobody gave
    up on it): it still completes; cancelling the inner task then would abandon."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            inner = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(asyncio.shield(inner), 0.01)
            assert not operation.is_abandoned and purgatory.purgatory.watched == 1
            operation.ready = True
            assert purgatory.check_and_complete("k") == 1
            assert await inner is Outcome.COMPLETED

    run(main(), clock)
    assert log == [("complete", "a", 10)]


def test_r57_a_task_cancelling_itself_in_try_complete_abandons_at_its_next_yield(
    implementation: PurgatoryImplementation,
) -> None:
    """R57: try_complete (run inside wait's first step) cancels its own task; the wait
    then yields its waiter, the task cancels it, and the operation is abandoned before
    any other callback runs."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            state: dict[str, Any] = {}

            def cancel_own_task() -> None:
                task = asyncio.current_task()
                if task is not None and "cancelled" not in state:
                    state["cancelled"] = task.cancel()

            operation = op(50, "a", log, clock, blocker=cancel_own_task)
            task = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
            with pytest.raises(asyncio.CancelledError):
                await task
            assert state["cancelled"] is True
            never_completes_afterwards(purgatory, operation)

    run(main(), clock)
    assert log == []


def test_r57_a_coroutine_closed_while_suspended_abandons(
    implementation: PurgatoryImplementation,
) -> None:
    """R57: closing wait's coroutine while it waits (GeneratorExit) abandons too."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            coroutine = purgatory.wait(operation, ["k"])
            coroutine.send(None)  # the first step: submits, then suspends on the waiter
            assert purgatory.purgatory.watched == 1
            coroutine.close()
            never_completes_afterwards(purgatory, operation)

    run(main(), clock)
    assert log == []


def test_r47_cancel_after_the_outcome_changes_nothing(
    implementation: PurgatoryImplementation,
) -> None:
    """R47, R57: a waiter whose outcome was set refuses cancel (False): the operation
    stays completed."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock)
            waiter = purgatory.submit(operation, ["k"])
            operation.ready = True
            purgatory.check_and_complete("k")
            assert waiter.cancel() is False
            assert operation.is_completed and await waiter is Outcome.COMPLETED

    run(main(), clock)


# ---- R48, R58: every waiter settles ---------------------------------------------------------


@pytest.mark.parametrize("error", [ValueError("boom"), asyncio.CancelledError("from fut")])
def test_r58_a_waiter_settles_whatever_on_complete_raises(
    implementation: PurgatoryImplementation, error: BaseException
) -> None:
    """R48, R58 (bug: a CancelledError from on_complete left the waiter pending for
    ever, even after shutdown): the completing call and the waiter both raise it."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    def fail() -> None:
        raise error

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            operation = op(50, "a", log, clock, action=fail)
            waiter = purgatory.submit(operation, ["k"])
            operation.ready = True
            with pytest.raises(type(error)):
                purgatory.check_and_complete("k")
            assert waiter.done() and purgatory.waiting == 0
            assert waiter.exception() is error
            assert operation.is_completed

    run(main(), clock)


def test_r58_abandon_on_the_wrapped_purgatory_settles_the_waiter(
    implementation: PurgatoryImplementation,
) -> None:
    """R58 (bug: on the reference, purgatory.abandon never told the waiter): abandon and
    cancel() made on the wrapped purgatory directly settle the waiter ABANDONED."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

    async def main() -> None:
        async with AsyncPurgatory[Any]("p", implementation=implementation) as purgatory:
            first, second = op(50, "a", log, clock), op(50, "b", log, clock)
            waiters = [purgatory.submit(first, ["k"]), purgatory.submit(second, ["k"])]
            assert purgatory.purgatory.abandon(first) is True
            second.cancel()
            outcomes = [await asyncio.wait_for(waiter, 1) for waiter in waiters]
            assert outcomes == [Outcome.ABANDONED] * 2
            assert purgatory.waiting == 0

    run(main(), clock)


def test_r58_the_wrapped_purgatory_shut_down_directly_ends_the_driver_and_the_waiters(
    implementation: PurgatoryImplementation,
) -> None:
    """R58 (bug: the driver fired about 50,000 times a second after the wrapped purgatory
    was shut down directly): at its next firing the AsyncPurgatory shuts itself down, the
    waiters get ABANDONED, and nothing is armed any more."""
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
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
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

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
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

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
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)
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
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

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
    clock = ManualClock(0)
    log: list[Event] = []
    op = recording_operation(implementation)

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


class _ExitingLock(DelegatingLock):
    """An operation lock whose ``acquire`` raises ``SystemExit`` while ``exiting``."""

    exiting = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.exiting:
            raise SystemExit("the lock's owner is exiting")
        return super().acquire(blocking, timeout)


class _NeverReady(DelayedOperation):
    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


def test_r57_a_system_exit_from_the_abandon_inside_cancel_reaches_the_caller() -> None:
    """R57, R52: cancelling a task's wait abandons its operation inside ``cancel``; an
    error from that abandon (a supplied lock failing) goes to the loop's exception
    handler, except ``KeyboardInterrupt`` and ``SystemExit``, which reach the code that
    called ``cancel``.

    Kills: ``SystemExit`` left out of ``except (KeyboardInterrupt, SystemExit)`` in
    ``AsyncPurgatory._give_up`` (the exit would be reported and swallowed)."""
    lock = _ExitingLock()

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory("exit")
        task = asyncio.ensure_future(purgatory.wait(_NeverReady(1000, lock), ["k"]))
        await asyncio.sleep(0)
        lock.exiting = True
        try:
            with pytest.raises(SystemExit):
                task.cancel()
        finally:
            lock.exiting = False
            purgatory.shutdown()

    run(main(), ManualClock(0))
