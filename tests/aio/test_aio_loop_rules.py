"""Rules R49, R50 and R59 of the asyncio purgatory: shutdown, the loop thread, the Waiter.

As ``test_aio_rules.py``: an ``AsyncPurgatory`` on a ``VirtualTimeLoop`` over a
``ManualClock``, on both implementations (the ``implementation`` fixture); a few tests
add a thread that completes or waits from outside the loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kpurgatory.aio import (
    AsyncPurgatory,
    Outcome,
    PurgatoryImplementation,
    VirtualTimeLoop,
    run,
)
from kpurgatory.clock import ManualClock
from tests.aio.support import (
    AioCase,
    BoomError,
    Event,
    fresh,
    recording_operation,
    settle,
    spawn,
)

pytestmark = pytest.mark.timeout(30)


# ---- R49: shutdown --------------------------------------------------------------------------


def test_r49_shutdown_abandons_every_waiter_and_refuses_new_waits(
    implementation: PurgatoryImplementation,
) -> None:
    clock, log, op = fresh(implementation)

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
    clock, log, base = fresh(implementation)
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
    clock, log, op = fresh(implementation)
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


def test_r50_blocking_try_complete_delays_expiries_which_keep_due_order(aio: AioCase) -> None:
    """R50: a try_complete that blocks (here: 100 virtual ms pass inside it) stalls the
    loop; the operations due meanwhile expire late, after it returns, in due order."""

    async def main(purgatory: AsyncPurgatory[Any]) -> None:
        waits = [spawn(purgatory.wait(aio.op(d, f"d{d}"), ["k"])) for d in (20, 10, 30)]
        await asyncio.sleep(0.005)
        blocking = aio.op(1000, "blocker", blocker=lambda: aio.clock.advance(50))
        blocked = spawn(purgatory.wait(blocking, ["b"]))  # 2 try_completes: 100 ms
        assert [await w for w in waits] == [Outcome.EXPIRED] * 3
        blocked.cancel()

    aio.run(main)
    assert [(name, at) for kind, name, at in aio.log if kind == "expire"] == [
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
    clock, log, op = fresh(implementation)
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


# ---- R50, R45, R46: calls from other threads, the driver armed without a waiter ------------


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
    clock, log, op = fresh(implementation)
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
    clock, log, base = fresh(implementation)

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
    clock, log, op = fresh(implementation)
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
    clock, log, op = fresh(implementation)
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
