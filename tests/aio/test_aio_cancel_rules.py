"""Rules R47 and R48 of the asyncio purgatory: a cancelled wait abandons, callback errors.

As ``test_aio_rules.py``: an ``AsyncPurgatory`` on a ``VirtualTimeLoop`` over a
``ManualClock``, on both implementations (the ``aio`` fixture, over ``implementation``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from kpurgatory.aio import (
    AsyncPurgatory,
    Outcome,
    PurgatoryImplementation,
    run,
)
from tests.aio.support import (
    AioCase,
    BoomError,
    fresh,
    settle,
    spawn,
)

pytestmark = pytest.mark.timeout(30)


# ---- R47: cancelling a wait abandons ------------------------------------------------------


def test_r47_cancelled_task_abandons_its_operation(aio: AioCase) -> None:
    """R47: unwatched and untimed at once; never completed or expired afterwards."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(100, "a")
        other = spawn(purgatory.wait(aio.op(200, "b"), ["k"]))
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

    aio.run(main)
    assert aio.log == [("complete", "b", 200), ("expire", "b", 200)]


def test_r47_wait_for_timeout_and_task_group_abandon(aio: AioCase) -> None:
    """R47: a wait_for timeout and a failing TaskGroup sibling both abandon the waits."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        timed = aio.op(1000, "timed")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(purgatory.wait(timed, ["k"]), 0.25)
        assert aio.clock.now_ms() == 250
        assert timed.is_abandoned
        grouped = [aio.op(1000, f"g{i}") for i in range(3)]

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

    aio.run(main)
    assert aio.log == []


def test_r47_abandon_returns_abandoned_to_the_waiter(aio: AioCase) -> None:
    """R47: AsyncPurgatory.abandon: True once, the wait returns ABANDONED, no callbacks."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(100, "a")
        waiting = spawn(purgatory.wait(operation, ["k"]))
        await settle()
        assert purgatory.abandon(operation) is True
        assert purgatory.abandon(operation) is False
        assert await waiting is Outcome.ABANDONED
        done = aio.op(100, "done", ready=True)
        assert await purgatory.wait(done, ["k"]) is Outcome.COMPLETED
        assert purgatory.abandon(done) is False

    aio.run(main)
    assert aio.log == [("complete", "done", 0)]


def test_r47_cancel_of_a_submitted_operation_abandons_it(aio: AioCase) -> None:
    """R47: op.cancel() on an awaited operation is an abandon; its wait returns ABANDONED."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(100, "a")
        waiting = spawn(purgatory.wait(operation, ["k"]))
        await settle()
        operation.cancel()
        assert await waiting is Outcome.ABANDONED
        assert purgatory.purgatory.watched == 0

    aio.run(main)
    assert aio.log == []


def test_r47_completion_before_the_cancellation_landed_stays(aio: AioCase) -> None:
    """R47: completed, then its task cancelled before resuming: it stays completed."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(100, "a", ready=False)
        waiting = spawn(purgatory.wait(operation, ["k"]))
        await settle()
        operation.ready = True
        assert purgatory.check_and_complete("k") == 1
        waiting.cancel()  # the outcome is set but the task has not resumed yet
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert operation.is_completed and not operation.is_abandoned

    aio.run(main)
    assert aio.log == [("complete", "a", 0)]


# ---- R48: callback errors -----------------------------------------------------------------


def test_r48_on_complete_raising_reaches_the_waiter_and_the_completer(aio: AioCase) -> None:

    def boom() -> None:
        raise BoomError("on_complete failed")

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(100, "a", action=boom)
        waiting = spawn(purgatory.wait(operation, ["k"]))
        await settle()
        operation.ready = True
        with pytest.raises(BoomError):
            purgatory.check_and_complete("k")
        with pytest.raises(BoomError, match="on_complete failed"):
            await waiting
        assert operation.is_completed
        with pytest.raises(BoomError):  # completes at once inside wait: raised from wait
            await purgatory.wait(aio.op(100, "b", ready=True, action=boom), ["k"])

    aio.run(main)


def test_r48_on_complete_raising_on_expiry_is_logged_and_driving_goes_on(
    aio: AioCase, caplog: pytest.LogCaptureFixture
) -> None:

    def boom() -> None:
        raise BoomError("on_complete failed")

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        failing = spawn(purgatory.wait(aio.op(10, "a", action=boom), ["k"]))
        later = spawn(purgatory.wait(aio.op(20, "b"), ["k"]))
        with pytest.raises(BoomError):
            await failing
        assert await later is Outcome.EXPIRED

    with caplog.at_level(logging.ERROR, logger="kpurgatory"):
        aio.run(main)
    assert any("raised" in record.getMessage() for record in caplog.records)
    assert aio.log == [("complete", "a", 10), ("complete", "b", 20), ("expire", "b", 20)]


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
    clock, log, op = fresh(implementation)
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


def test_r46_r47_submit_returns_a_future_whose_cancel_abandons(aio: AioCase) -> None:
    """R46: submit's future resolves to the outcome; R47: cancelling it abandons."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        expiring = purgatory.submit(aio.op(20, "e"), ["k"])
        completing = aio.op(50, "c")
        answered = purgatory.submit(completing, ["k"])
        dropped_op = aio.op(30, "d")
        dropped = purgatory.submit(dropped_op, ["k"])
        at_once = purgatory.submit(aio.op(50, "now", ready=True), ["k"])
        assert at_once.done() and at_once.result() is Outcome.COMPLETED
        dropped.cancel()
        await settle()
        assert dropped_op.is_abandoned
        assert purgatory.purgatory.watched == 2
        completing.ready = True
        purgatory.check_and_complete("k")
        assert await answered is Outcome.COMPLETED
        assert await expiring is Outcome.EXPIRED
        assert aio.clock.now_ms() == 20

    aio.run(main)
    assert ("complete", "d", 0) not in aio.log and ("expire", "d", 30) not in aio.log


def test_r47_task_cancel_abandons_before_the_task_resumes(aio: AioCase) -> None:
    """R47: Task.cancel cancels the Waiter the task awaits, and that abandons at once:
    unwatched and untimed right after ``cancel()``, before the task has resumed."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        operation = aio.op(100, "a")
        waiting = spawn(purgatory.wait(operation, ["k", "j"]))
        await settle()
        assert waiting.cancel() is True
        assert operation.is_abandoned and not waiting.done()
        assert (purgatory.purgatory.watched, purgatory.purgatory.num_delayed) == (0, 0)
        assert purgatory.waiting == 0
        with pytest.raises(asyncio.CancelledError):
            await waiting

    aio.run(main)
    assert aio.log == []
