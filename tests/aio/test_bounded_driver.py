"""R70: the driver's firings are bounded; the rest of a drain runs in ``call_soon`` batches.

Everything runs on a ``VirtualTimeLoop``: a callback that advances the clock stands for a
paused process, after which every operation is overdue at once; a heartbeat that
re-schedules itself with ``call_soon`` records where each batch ends (R70's fairness:
every ready callback runs between two batches).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, run
from kpurgatory.aio.driver import DEFAULT_MAX_HAND_OVERS
from kpurgatory.clock import ManualClock
from tests.aio.support import Event, assert_bound_is_checked, fresh, recording_operation

_BOUND = 3


class _Heartbeat:
    """A callback that re-schedules itself with ``call_soon`` and logs each run; it stops
    by itself after 50 beats (while it beats, a virtual loop never jumps its clock)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, log: list[Any], driver: Any) -> None:
        self.loop, self.log, self.driver = loop, log, driver
        self.running = True
        self.backlogs: list[int] = []

    def beat(self) -> None:
        if not self.running or len(self.backlogs) >= 50:
            return
        self.log.append(("beat", "", self.loop.clock.now_ms()))  # type: ignore[attr-defined]
        self.backlogs.append(self.driver.backlog)
        if self.driver.backlog:
            assert self.driver.armed_due is None  # a call_soon is pending, no call_at
        self.loop.call_soon(self.beat)


def _batches(log: list[Any]) -> list[list[str]]:
    """The expiries between consecutive heartbeats."""
    batches: list[list[str]] = [[]]
    for what, name, _ in log:
        if what == "beat":
            batches.append([])
        elif what == "expire":
            batches[-1].append(name)
    return [batch for batch in batches if batch]


def test_r70_a_firing_hands_over_at_most_the_bound_then_yields(
    implementation: PurgatoryImplementation,
) -> None:
    """Ten operations overdue at once (due 10..19, the process paused until 100): each
    firing runs at most three expiries, the heartbeat runs between batches, due order is
    kept, nothing runs before its due time, and the clock does not move between batches
    (the continuation is a call_soon, not a later call_at)."""
    clock, log, operation = fresh(implementation)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "bounded", implementation=implementation, max_hand_overs=_BOUND
        )
        assert purgatory.driver.max_hand_overs == _BOUND
        waiters = [
            purgatory.submit(operation(10 + i, f"op{i}", log, clock), [f"k{i}"])
            for i in (3, 0, 7, 1, 9, 2, 8, 4, 6, 5)
        ]
        assert purgatory.driver.armed_due == 10
        loop.call_soon(clock.advance, 100)  # the process pauses before anything is due
        await asyncio.sleep(0)
        heartbeat = _Heartbeat(loop, log, purgatory.driver)
        loop.call_soon(heartbeat.beat)
        outcomes = await asyncio.gather(*waiters)
        heartbeat.running = False
        assert outcomes == [Outcome.EXPIRED] * 10
        expiries = [(name, now) for what, name, now in log if what == "expire"]
        assert [name for name, _ in expiries] == [f"op{i}" for i in range(10)]  # R6
        assert all(now == 100 for _, now in expiries)  # one reading: no later call_at
        batches = _batches(log)
        assert [len(batch) for batch in batches] == [3, 3, 3, 1]
        assert heartbeat.backlogs[:4] == [0, 7, 4, 1]  # one beat before the firing, one per batch
        assert purgatory.driver.backlog == 0 and purgatory.driver.armed_due is None
        for _ in range(4):  # R71: the optimized let-go of the 10 goes on 3 per pass
            await asyncio.sleep(0)
        assert purgatory.purgatory.watched == 0
        purgatory.shutdown()

    run(main(), clock)


def test_r70_never_early_and_in_due_order_across_batches(
    implementation: PurgatoryImplementation,
) -> None:
    """Operations due at different times, some overdue and some not: the overdue ones
    run in batches of the bound, the rest each at its own due time, never before it."""
    clock, log, operation = fresh(implementation)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "order", implementation=implementation, max_hand_overs=2
        )
        delays = [5, 5, 5, 6, 7, 40, 41, 41, 60]
        ops = [operation(d, f"op{i}", log, clock) for i, d in enumerate(delays)]
        waiters = [purgatory.submit(op, ["k"]) for op in ops]
        loop.call_soon(clock.advance, 30)  # 5, 5, 5, 6 and 7 are overdue together
        assert set(await asyncio.gather(*waiters)) == {Outcome.EXPIRED}
        expiries = [(name, now) for what, name, now in log if what == "expire"]
        assert [name for name, _ in expiries] == [f"op{i}" for i in range(len(delays))]
        for (_, now), delay in zip(expiries, delays, strict=True):
            assert now >= delay  # R4: never early
        assert [now for _, now in expiries[5:]] == [40, 41, 41, 60]  # on time, not batched
        purgatory.shutdown()

    run(main(), clock)


def test_r70_shutdown_from_an_expiry_drops_the_rest_of_the_backlog(
    implementation: PurgatoryImplementation,
) -> None:
    """R70, R32, R49: the second expiry of a batch shuts the purgatory down; no operation
    of the backlog expires afterwards and every waiter settles (ABANDONED)."""
    clock, log, operation = fresh(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "drop", implementation=implementation, max_hand_overs=_BOUND
        )
        ops = [operation(10, f"op{i}", log, clock) for i in range(8)]

        def expire_then_shut_down(op: Any = ops[1]) -> None:
            type(op).on_expiration(op)
            purgatory.shutdown()

        ops[1].on_expiration = expire_then_shut_down
        waiters = [purgatory.submit(op, [f"k{i}"]) for i, op in enumerate(ops)]
        outcomes = await asyncio.wait_for(asyncio.gather(*waiters), 1)
        expired = [name for what, name, _ in log if what == "expire"]
        assert len(expired) == 2 and outcomes[:2] == [Outcome.EXPIRED] * 2
        assert outcomes[2:] == [Outcome.ABANDONED] * 6
        assert purgatory.waiting == 0 and purgatory.driver.backlog == 0
        await asyncio.sleep(1)
        assert len([e for e in log if e[0] == "expire"]) == 2  # nothing later either

    run(main(), clock)


def test_r70_a_task_added_due_at_once_by_an_expiry_runs_inside_its_add(
    implementation: PurgatoryImplementation,
) -> None:
    """R70, R6: an expiry that submits an operation with delay 0 expires it inside its
    own add, before the rest of the batch."""
    clock, log, operation = fresh(implementation)

    async def main() -> None:
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "nested", implementation=implementation, max_hand_overs=2
        )
        ops = [operation(10, f"op{i}", log, clock) for i in range(4)]
        nested = operation(0, "nested", log, clock)

        def expire_and_submit(op: Any = ops[0]) -> None:
            type(op).on_expiration(op)
            assert purgatory.try_complete_else_watch(nested, ["n"]) is False

        ops[0].on_expiration = expire_and_submit
        await asyncio.gather(*[purgatory.submit(op, ["k"]) for op in ops])
        expired = [name for what, name, _ in log if what == "expire"]
        assert expired == ["op0", "nested", "op1", "op2", "op3"]
        purgatory.shutdown()

    run(main(), clock)


def test_r70_the_bound_is_checked(implementation: PurgatoryImplementation) -> None:
    """R35 for the new argument: a clear error naming it, and no purgatory built."""
    assert_bound_is_checked(implementation, "max_hand_overs", 1.5, DEFAULT_MAX_HAND_OVERS)


@pytest.mark.parametrize("implementation", ["optimized", "reference"])
def test_r44_a_sooner_wait_re_arms_on_a_clock_below_zero(
    implementation: PurgatoryImplementation,
) -> None:
    """R44, R4: on a clock that reads below zero, a wait due sooner than the armed one
    re-arms the driver, so it expires at its own due time, not at the later one.

    Kills: ``floor / floor % tick`` and ``floor - floor * tick`` for ``floor - floor %
    tick`` in ``AsyncPurgatory``'s arming shortcut (on a negative reading either one
    takes the armed due time for early enough and keeps it)."""
    operation = recording_operation(implementation)
    clock = ManualClock(-1000)

    async def main() -> None:
        log: list[Event] = []
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
            "negative", implementation=implementation, clock=clock, tick_ms=10
        )
        later = purgatory.submit(operation(500, "later", log, clock), ["k"])
        sooner = purgatory.submit(operation(100, "sooner", log, clock), ["k"])
        assert purgatory.driver.armed_due == -900
        assert await sooner is Outcome.EXPIRED
        assert await later is Outcome.EXPIRED
        expiries = [(name, now) for what, name, now in log if what == "expire"]
        assert expiries == [("sooner", -900), ("later", -500)]
        purgatory.shutdown()

    run(main(), clock)
