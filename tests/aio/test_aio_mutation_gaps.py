"""Behaviours of the aio layer a sampled mutation run left unpinned, each pinned here.

Each test names, in its docstring, the mutant it kills: the one-line change that passed
every other test. They use the public API (``AsyncPurgatory``, ``LoopTimerDriver``,
``Waiter``) on a virtual-time loop, on both implementations where the purgatory is
involved.
"""

from __future__ import annotations

import asyncio
import gc
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
from tests.aio.support import Event, recording_operation

pytestmark = pytest.mark.timeout(30)


class BoomError(Exception):
    """What ``on_complete`` raises in these tests."""


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


class OffsetClock:
    """A user's own clock: a ManualClock's reading plus a fixed offset (neither a
    ManualClock nor a MonotonicClock, so the driver maps it through both readings)."""

    def __init__(self, inner: ManualClock, offset: int) -> None:
        self._inner, self._offset = inner, offset

    def now_ms(self) -> int:
        return self._inner.now_ms() + self._offset

    def wait(self, condition: Any, timeout_ms: int, next_due: Any) -> int:
        return self.now_ms()


class NoTimer:
    """A timer with nothing scheduled (the driver does not re-arm after a firing)."""

    next_due_time = None


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
            loop, NoTimer(), user_clock, lambda: readings.append(user_clock.now_ms()), direct=False
        )
        due = user_clock.now_ms() + delay_ms
        driver.schedule(due)
        assert driver.armed_due == due
        loop.run_until_complete(asyncio.sleep(delay_ms / 1000 + 1))
    finally:
        loop.close()
    assert readings == [due]
