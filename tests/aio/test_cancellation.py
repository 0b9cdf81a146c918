"""asyncio cancelling at any point (R47, R57).

Each test cancels the code waiting for an operation at one point asyncio offers (before
the task's first step, while suspended, through ``wait_for``, ``asyncio.timeout``,
``TaskGroup``, ``gather``, ``shield``, ``asyncio.wait``, during ``try_complete``, by
closing the coroutine) and checks that the operation is abandoned exactly then and never
completes afterwards. All on a virtual-time loop, both implementations. How waiters
settle is in ``test_waiter_settling.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kpurgatory.aio import (
    AsyncPurgatory,
    DelayedOperation,
    Outcome,
    run,
)
from kpurgatory.clock import ManualClock
from tests.aio.support import AioCase
from tests.support import DelegatingLock, pending_operation

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


def test_r57_a_task_cancelled_before_its_first_step_never_submits(aio: AioCase) -> None:
    """R57 (bug: the operation stayed watched and timed, later completed or expired, and
    waiting counted it): create_task(p.wait(...)).cancel() before the task runs."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        task = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (purgatory.purgatory.watched, purgatory.waiting) == (0, 0)
        assert not operation.is_abandoned and not operation.is_completed
        await asyncio.sleep(0.1)
        assert aio.log == []
        operation.ready = True  # never submitted: it may be submitted now
        assert await purgatory.wait(operation, ["k"]) is Outcome.COMPLETED

    aio.run(main)


def test_r57_a_task_group_whose_body_raises_after_create_task_submits_nothing(aio: AioCase) -> None:
    """R57: a TaskGroup cancels a child that has not started; nothing was submitted."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        with pytest.raises(ExceptionGroup):
            async with asyncio.TaskGroup() as group:
                group.create_task(purgatory.wait(operation, ["k"]))
                raise ValueError("body failed")
        assert (purgatory.purgatory.watched, purgatory.waiting) == (0, 0)
        await asyncio.sleep(0.1)
        assert aio.log == [] and not operation.is_completed

    aio.run(main)


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
    aio: AioCase, composition: str
) -> None:
    """R47, R57: whichever asyncio composition gives up on the wait, the operation is
    abandoned and never completes or expires afterwards."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        await COMPOSITIONS[composition](purgatory, operation)
        never_completes_afterwards(purgatory, operation)
        await asyncio.sleep(0.1)

    aio.run(main)
    assert aio.log == []


def test_r57_shield_keeps_the_inner_wait_until_the_inner_task_gives_up(aio: AioCase) -> None:
    """R57: cancelling the outer side of shield leaves the inner wait going (nobody gave
    up on it): it still completes; cancelling the inner task then would abandon."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        inner = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(inner), 0.01)
        assert not operation.is_abandoned and purgatory.purgatory.watched == 1
        operation.ready = True
        assert purgatory.check_and_complete("k") == 1
        assert await inner is Outcome.COMPLETED

    aio.run(main)
    assert aio.log == [("complete", "a", 10)]


def test_r57_a_task_cancelling_itself_in_try_complete_abandons_at_its_next_yield(
    aio: AioCase,
) -> None:
    """R57: try_complete (run inside wait's first step) cancels its own task; the wait
    then yields its waiter, the task cancels it, and the operation is abandoned before
    any other callback runs."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        state: dict[str, Any] = {}

        def cancel_own_task() -> None:
            task = asyncio.current_task()
            if task is not None and "cancelled" not in state:
                state["cancelled"] = task.cancel()

        operation = aio.op(50, "a", blocker=cancel_own_task)
        task = asyncio.get_running_loop().create_task(purgatory.wait(operation, ["k"]))
        with pytest.raises(asyncio.CancelledError):
            await task
        assert state["cancelled"] is True
        never_completes_afterwards(purgatory, operation)

    aio.run(main)
    assert aio.log == []


def test_r57_a_coroutine_closed_while_suspended_abandons(aio: AioCase) -> None:
    """R57: closing wait's coroutine while it waits (GeneratorExit) abandons too."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        coroutine = purgatory.wait(operation, ["k"])
        coroutine.send(None)  # the first step: submits, then suspends on the waiter
        assert purgatory.purgatory.watched == 1
        coroutine.close()
        never_completes_afterwards(purgatory, operation)

    aio.run(main)
    assert aio.log == []


def test_r47_cancel_after_the_outcome_changes_nothing(aio: AioCase) -> None:
    """R47, R57: a waiter whose outcome was set refuses cancel (False): the operation
    stays completed."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(50, "a")
        waiter = purgatory.submit(operation, ["k"])
        operation.ready = True
        purgatory.check_and_complete("k")
        assert waiter.cancel() is False
        assert operation.is_completed and await waiter is Outcome.COMPLETED

    aio.run(main)


class _ExitingLock(DelegatingLock):
    """An operation lock whose ``acquire`` raises ``SystemExit`` while ``exiting``."""

    exiting = False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.exiting:
            raise SystemExit("the lock's owner is exiting")
        return super().acquire(blocking, timeout)


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
        task = asyncio.ensure_future(
            purgatory.wait(pending_operation(DelayedOperation)(1000, lock), ["k"])
        )
        await asyncio.sleep(0)
        lock.exiting = True
        try:
            with pytest.raises(SystemExit):
                task.cancel()
        finally:
            lock.exiting = False
            purgatory.shutdown()

    run(main(), ManualClock(0))
