"""R71: the let-go of finished operations is bounded per loop callback, the rest goes on
in ``call_soon`` callbacks until none is owed.

On a ``VirtualTimeLoop``: the process pauses until many operations are overdue at once;
a heartbeat that re-schedules itself with ``call_soon`` reads ``watched`` between loop
callbacks, so each drop it sees is what one callback unlinked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kpurgatory.aio import AsyncPurgatory, Outcome, run
from kpurgatory.aio.driver import LET_GO_PER_HAND_OVER
from kpurgatory.clock import ManualClock
from tests.aio.support import Event, recording_operation


class _Watcher:
    """Reads ``watched`` once per loop iteration until stopped (or 5,000 reads)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, purgatory: AsyncPurgatory[Any]) -> None:
        self.loop, self.purgatory = loop, purgatory
        self.readings: list[int] = []
        self.running = True

    def beat(self) -> None:
        if self.running and len(self.readings) < 5_000:
            self.readings.append(self.purgatory.purgatory.watched)
            self.loop.call_soon(self.beat)

    def drops(self) -> list[int]:
        return [a - b for a, b in zip(self.readings, self.readings[1:], strict=False) if a > b]


def _loop_pieces() -> tuple[asyncio.AbstractEventLoop, ManualClock, list[Event], type[Any]]:
    """Inside ``run``: the running virtual-time loop, its clock, an empty event log and
    the optimized recording operation."""
    loop = asyncio.get_running_loop()
    clock: ManualClock = loop.clock  # type: ignore[attr-defined]
    return loop, clock, [], recording_operation("optimized")


async def _overdue_at_once(
    count: int, max_hand_overs: int, purge_interval: int = 1000
) -> tuple[_Watcher, Any, list[Any]]:
    """``count`` operations on their own keys, all overdue after a pause; returns the
    watcher (stopped once nothing is watched or owed), the purgatory and the log.

    The drain is left in one piece (R72's bound above ``count``): a later piece is a
    driver callback that purges (R30) in the same loop iteration as a let-go pass, and
    the watcher reads once per iteration, so it would see two bounded passes as one."""
    loop, clock, log, operation = _loop_pieces()
    purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
        "let-go",
        max_hand_overs=max_hand_overs,
        purge_interval=purge_interval,
        max_drain_entries=count + 1,
    )
    waiters = [
        purgatory.submit(operation(10 + i % 7, f"op{i}", log, clock), [f"k{i}"])
        for i in range(count)
    ]
    assert purgatory.purgatory.watched == count
    loop.call_soon(clock.advance, 100)  # the process pauses: everything is overdue
    await asyncio.sleep(0)
    watcher = _Watcher(loop, purgatory)
    loop.call_soon(watcher.beat)
    outcomes = await asyncio.gather(*waiters)
    assert outcomes == [Outcome.EXPIRED] * count
    for _ in range(count):  # no further completion or advance: the callbacks go on
        if purgatory.purgatory.watched == 0:
            break
        await asyncio.sleep(0)
    watcher.running = False
    return watcher, purgatory, log


def test_r71_a_let_go_pass_unlinks_at_most_its_bound_and_goes_on_by_itself() -> None:
    """R71, R61: 30 expiries at once with a bound of 8 per pass: the last expiry
    starts the let-go, which unlinks 8, 8, 8 and 6 in successive loop callbacks (the
    heartbeat runs between them) until nothing finished is watched; every unlink is
    counted as purged; expiries stay in due order and none is early (R4, R6)."""

    async def main() -> None:
        bound = LET_GO_PER_HAND_OVER * 8
        watcher, purgatory, log = await _overdue_at_once(30, 8)
        assert purgatory.purgatory.watched == 0
        assert watcher.drops() == [8, 8, 8, 6] and bound == 8
        assert purgatory.purgatory.num_purged == 30
        expiries = [(name, now) for what, name, now in log if what == "expire"]
        dues = [10 + int(name[2:]) % 7 for name, _ in expiries]
        assert dues == sorted(dues) and all(now == 100 for _, now in expiries)
        purgatory.shutdown()

    run(main(), ManualClock(0))


def test_r71_many_finished_never_overflow_into_an_unbounded_scan() -> None:
    """R71, R30: 1,100 expiries at once with a bound of 4 per pass, more than the purge
    candidates hold (``2 * purge_interval + 1024``) before they fall back to scanning
    every list: no loop callback unlinks more than the bound, and all are let go."""

    async def main() -> None:
        watcher, purgatory, _ = await _overdue_at_once(1_100, 4, purge_interval=0)
        assert purgatory.purgatory.watched == 0
        assert watcher.drops() and max(watcher.drops()) <= 4 * LET_GO_PER_HAND_OVER
        assert purgatory.purgatory.num_purged == 1_100
        purgatory.shutdown()

    run(main(), ManualClock(0))


def test_r71_shutdown_stops_an_owed_let_go() -> None:
    """R71, R49: a shutdown while a let-go is owed runs no further pass (nothing is
    unlinked by the loop after it)."""

    async def main() -> None:
        loop, clock, log, operation = _loop_pieces()
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory("stop", max_hand_overs=1)
        ops = [operation(10, f"op{i}", log, clock) for i in range(20)]
        waiters = [purgatory.submit(op, [f"k{i}"]) for i, op in enumerate(ops)]
        loop.call_soon(clock.advance, 100)
        await asyncio.gather(*waiters)
        left = purgatory.purgatory.watched
        assert 0 < left < 20  # one bounded pass ran, more is owed
        purgatory.shutdown()
        for _ in range(10):
            await asyncio.sleep(0)
        assert purgatory.purgatory.watched == left

    run(main(), ManualClock(0))


class _FailingKey:
    """A key whose ``__hash__`` raises once ``failing`` is set (R67)."""

    failing = False

    def __hash__(self) -> int:
        if _FailingKey.failing:
            raise ValueError("this key cannot be hashed any more")
        return 7


def failing_key_round() -> None:
    """Twelve operations, one on a key that cannot be hashed by the time they expire at
    once (bound 2 per pass): after the let-go, none is owed and only that key's pair is
    still watched."""

    async def main() -> None:
        loop, clock, log, operation = _loop_pieces()
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory("failing", max_hand_overs=2)
        bad = _FailingKey()
        ops = [operation(10, f"op{i}", log, clock) for i in range(12)]
        waiters = [purgatory.submit(op, [bad if i == 5 else f"k{i}"]) for i, op in enumerate(ops)]
        _FailingKey.failing = True
        try:
            loop.call_soon(clock.advance, 100)
            await asyncio.gather(*waiters)
            for _ in range(30):
                await asyncio.sleep(0)
            assert purgatory.purgatory._let_go_owed is False
            assert purgatory.purgatory.watched == 1  # only the failing key's pair is left
        finally:
            _FailingKey.failing = False
        purgatory.shutdown()

    run(main(), ManualClock(0))


def test_r71_r67_a_key_failing_in_a_bounded_pass_ends_the_let_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R71, R67: a key that raises in a bounded pass asks for a scan of every list; that
    pass takes every candidate, so no let-go is owed afterwards (no endless passes), the
    other keys are let go, and the failure is logged."""
    failing_key_round()
    assert "cannot be hashed" in caplog.text


def test_r71_a_stopped_driver_lets_nothing_more_go() -> None:
    """R71, R49: a let-go continuation queued before ``shutdown`` runs no pass once the
    driver is stopped: what was watched at the shutdown stays as it was.

    Kills: ``self._stopped and let_go is None`` for ``or`` in
    ``LoopTimerDriver._continue_let_go`` (one more bounded pass after the stop)."""

    async def main() -> None:
        loop, clock, log, operation = _loop_pieces()
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory("stop", max_hand_overs=2)
        waiters = [
            purgatory.submit(operation(10, f"op{i}", log, clock), [f"k{i}"]) for i in range(12)
        ]
        loop.call_soon(clock.advance, 100)
        assert await asyncio.gather(*waiters) == [Outcome.EXPIRED] * 12
        left = purgatory.purgatory.watched
        assert left > 0  # the let-go goes on in later callbacks: stop it half way
        purgatory.shutdown()
        for _ in range(20):
            await asyncio.sleep(0)
        assert purgatory.purgatory.watched == left

    run(main(), ManualClock(0))
