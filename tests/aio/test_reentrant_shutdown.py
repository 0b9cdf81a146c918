"""Shutdown from inside the awaited operation's own submission, and after its loop is gone.

R49, R58: every waiter settles, whichever callback position ``shutdown`` is called from:
here from ``try_complete`` during the first try and during the retry after watching
(R41), with the timer on and off, through ``wait`` and ``submit``. R50: after the loop
closed, ``shutdown`` from a plain thread lets its waiters go (``waiting`` 0), and a
refusal from a second running loop says why it refuses.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, VirtualTimeLoop, run
from kpurgatory.clock import ManualClock
from tests.aio.support import Event, fresh, recording_operation


def _shutting_down(implementation: str, on_try: int) -> type[Any]:
    """An operation whose ``on_try``-th ``try_complete`` shuts its purgatory down."""
    base = recording_operation(implementation)

    class ShutsDownInTry(base):  # type: ignore[misc, valid-type]
        purgatory: AsyncPurgatory[Any]

        def try_complete(self) -> bool:
            if self.tries + 1 == on_try:
                self.purgatory.shutdown()
            return bool(super().try_complete())

    return ShutsDownInTry


@pytest.mark.parametrize("on_try", [1, 2], ids=["first-try", "retry-R41"])
@pytest.mark.parametrize("timer_enabled", [True, False], ids=["timer", "no-timer"])
@pytest.mark.parametrize("how", ["wait", "submit"])
def test_r49_r58_shutdown_from_the_awaited_operations_try_complete_settles_its_waiter(
    implementation: PurgatoryImplementation, on_try: int, timer_enabled: bool, how: str
) -> None:
    """The waiter of the operation being submitted gets ABANDONED (it was pending for
    ever: shutdown abandoned the waiters registered so far, and this one was registered
    after the submission returned); nothing stays watched, timed or armed."""
    clock = ManualClock(0)
    log: list[Event] = []
    operation = _shutting_down(implementation, on_try)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "p", implementation=implementation, timer_enabled=timer_enabled
        )
        op = operation(100, "self", log, clock)
        op.purgatory = purgatory
        if how == "wait":
            outcome = await asyncio.wait_for(purgatory.wait(op, ["k"]), 10)
        else:
            outcome = await asyncio.wait_for(purgatory.submit(op, ["k"]), 10)
        assert outcome is Outcome.ABANDONED
        assert op.tries >= on_try  # the core may still make R22's second try
        assert purgatory.closed and purgatory.waiting == 0
        assert purgatory.purgatory.watched == 0 and purgatory.timer.size == 0
        assert purgatory.driver.armed_due is None
        await asyncio.sleep(1)  # nothing expires later

    run(main(), clock)
    assert log == []


def test_r49_shutdown_from_another_operations_try_complete_during_a_submission(
    implementation: PurgatoryImplementation,
) -> None:
    """An earlier waiter and the one being submitted both settle ABANDONED."""
    clock, log, base = fresh(implementation)
    operation = _shutting_down(implementation, 2)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory("p", implementation=implementation)
        earlier = purgatory.submit(base(50, "earlier", log, clock), ["k"])
        op = operation(100, "self", log, clock)
        op.purgatory = purgatory
        assert await asyncio.wait_for(purgatory.wait(op, ["j"]), 10) is Outcome.ABANDONED
        assert await earlier is Outcome.ABANDONED
        assert purgatory.waiting == 0

    run(main(), clock)
    assert log == []


def test_r50_shutdown_from_a_thread_after_the_loop_closed_lets_the_waiters_go(
    implementation: PurgatoryImplementation,
) -> None:
    """Two awaited operations, the loop closed under them, then shutdown from a plain
    thread: both abandoned and ``waiting`` is 0 (it stayed 2, the waiters referenced)."""
    clock, log, base = fresh(implementation)
    loop = VirtualTimeLoop(clock)
    ops = [base(100, f"op{i}", log, clock) for i in range(2)]
    try:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "p", implementation=implementation, loop=loop
        )
        tasks = [loop.create_task(purgatory.wait(op, [f"k{i}"])) for i, op in enumerate(ops)]
        for task in tasks:
            task._log_destroy_pending = False  # type: ignore[attr-defined]  # pending at close on purpose
        loop.run_until_complete(asyncio.sleep(0.01))
        assert purgatory.waiting == 2
    finally:
        loop.close()
    errors: list[BaseException] = []

    def shut_down() -> None:
        try:
            purgatory.shutdown()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=shut_down)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and errors == []
    assert purgatory.closed and purgatory.waiting == 0
    assert all(op.is_abandoned for op in ops) and purgatory.purgatory.watched == 0
    assert log == []


def test_r50_a_refusal_from_a_second_running_loop_says_why(
    implementation: PurgatoryImplementation,
) -> None:
    """The purgatory's loop has stopped; shutdown from another running loop is refused
    (R50: from a thread with no running loop), and the message does not claim the loop
    still has to stop."""
    clock = ManualClock(0)
    first = VirtualTimeLoop(clock)
    try:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "p", implementation=implementation, loop=first
        )
    finally:
        first.close()

    async def from_another_loop() -> None:
        with pytest.raises(RuntimeError) as refused:
            purgatory.shutdown()
        message = str(refused.value)
        assert "once that loop has stopped" not in message
        assert "another running event loop" in message
        assert not purgatory.closed

    asyncio.run(from_another_loop())
    purgatory.shutdown()  # from this thread, no loop running: accepted
    assert purgatory.closed
