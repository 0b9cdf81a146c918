"""Rules R47 and R48 of the asyncio purgatory: a cancelled wait abandons, callback errors.

As ``test_aio_rules.py``: an ``AsyncPurgatory`` on a ``VirtualTimeLoop`` over a
``ManualClock``, on both implementations (the ``implementation`` fixture).
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
    BoomError,
    fresh,
    settle,
    spawn,
)

pytestmark = pytest.mark.timeout(30)


# ---- R47: cancelling a wait abandons ------------------------------------------------------


def test_r47_cancelled_task_abandons_its_operation(implementation: PurgatoryImplementation) -> None:
    """R47: unwatched and untimed at once; never completed or expired afterwards."""
    clock, log, op = fresh(implementation)

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
    clock, log, op = fresh(implementation)

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
    clock, log, op = fresh(implementation)

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
    clock, log, op = fresh(implementation)

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
    clock, log, op = fresh(implementation)

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
    clock, log, op = fresh(implementation)

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
    clock, log, op = fresh(implementation)

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


def test_r46_r47_submit_returns_a_future_whose_cancel_abandons(
    implementation: PurgatoryImplementation,
) -> None:
    """R46: submit's future resolves to the outcome; R47: cancelling it abandons."""
    clock, log, op = fresh(implementation)

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


def test_r47_task_cancel_abandons_before_the_task_resumes(
    implementation: PurgatoryImplementation,
) -> None:
    """R47: Task.cancel cancels the Waiter the task awaits, and that abandons at once:
    unwatched and untimed right after ``cancel()``, before the task has resumed."""
    clock, log, op = fresh(implementation)

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
