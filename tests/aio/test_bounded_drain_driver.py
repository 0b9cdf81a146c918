"""R72: each firing of the driver drains at most ``max_drain_entries`` timer entries; the
rest of the drain goes on in ``call_soon`` callbacks.

On a ``VirtualTimeLoop``: a few hundred operations wait in one bucket of a high wheel
level; a callback that advances the clock stands for a paused process, after which all of
them are due at once, so the first firing must cascade the whole bucket. A heartbeat that
re-schedules itself with ``call_soon`` reads the timer's work counters between loop
callbacks: each step it sees is what one callback of the driver did.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, run
from kpurgatory.aio.driver import DEFAULT_MAX_DRAIN_ENTRIES, LoopTimerDriver
from kpurgatory.aio.virtual import VirtualTimeLoop
from kpurgatory.clock import ManualClock
from tests.aio.support import Event, NoTimer, assert_bound_is_checked, recording_operation

_BOUND = 16


def _expiries(log: list[Event]) -> list[tuple[str, int]]:
    return [(name, now) for what, name, now in log if what == "expire"]


class _Heartbeat:
    """Reads the drain's work so far (entries cascaded, collected) between loop callbacks,
    until stopped or after ``beats`` readings; ``action`` (if any) runs at beat ``at``."""

    def __init__(
        self,
        purgatory: AsyncPurgatory[Any],
        log: list[Event],
        *,
        beats: int = 1_000,
        at: int = -1,
        action: Any = None,
    ) -> None:
        self.purgatory, self.log, self.beats, self.at, self.action = (
            purgatory,
            log,
            beats,
            at,
            action,
        )
        self.loop = purgatory.loop
        self.work: list[int] = []
        self.continuing: list[bool] = []
        self.armed_while_continuing: list[int | None] = []
        self.running = True

    def read(self) -> int:
        stats = getattr(self.purgatory.timer, "stats", None)
        cascades = 0 if stats is None else int(stats["cascades"])
        collected = len(_expiries(self.log)) + self.purgatory.driver.backlog
        return cascades + collected

    def beat(self) -> None:
        if not self.running or len(self.work) >= self.beats:
            return
        if len(self.work) == self.at:
            self.action()
        self.work.append(self.read())
        driver = self.purgatory.driver
        self.continuing.append(driver.continuing)
        if driver.continuing and driver.armed_due is not None:  # a call_soon is pending,
            self.armed_while_continuing.append(driver.armed_due)  # no call_at may be
        self.loop.call_soon(self.beat)

    def steps(self) -> list[int]:
        return [b - a for a, b in zip(self.work, self.work[1:], strict=False)]


async def _one_high_bucket(
    implementation: PurgatoryImplementation, count: int, log: list[Event], **options: Any
) -> tuple[AsyncPurgatory[Any], list[Any], list[Any]]:
    """``count`` operations due 8,000 + i (one bucket of the fourth wheel level)."""
    operation = recording_operation(implementation)
    clock: ManualClock = asyncio.get_running_loop().clock  # type: ignore[attr-defined]
    purgatory: AsyncPurgatory[Any] = AsyncPurgatory(
        "drain", implementation=implementation, **options
    )
    ops = [operation(8_000 + (i * 37) % count, f"op{i}", log, clock) for i in range(count)]
    waiters = [purgatory.submit(op, [f"k{i}"]) for i, op in enumerate(ops)]
    return purgatory, ops, waiters


def test_r72_a_firing_drains_at_most_the_bound_then_goes_on_with_call_soon(
    implementation: PurgatoryImplementation,
) -> None:
    """R72, R4, R6: 300 operations due at once after a pause: between two heartbeats the
    timer takes at most the bound of entries (cascaded or collected); the driver goes on
    with call_soon (continuing, nothing armed, the clock does not move) until all have
    expired, in due order, none early; then it re-arms for nothing (idle)."""
    clock = ManualClock(0)

    async def main() -> None:
        log: list[Event] = []
        loop = asyncio.get_running_loop()
        purgatory, _, waiters = await _one_high_bucket(
            implementation, 300, log, max_drain_entries=_BOUND, max_hand_overs=1_000
        )
        assert purgatory.driver.max_drain_entries == _BOUND
        loop.call_soon(clock.advance, 8_400)  # the process pauses: all 300 are due
        await asyncio.sleep(0)
        heartbeat = _Heartbeat(purgatory, log)
        loop.call_soon(heartbeat.beat)
        outcomes = await asyncio.gather(*waiters)
        heartbeat.running = False
        assert heartbeat.armed_while_continuing == []
        assert outcomes == [Outcome.EXPIRED] * 300
        steps = heartbeat.steps()
        assert max(steps) <= _BOUND
        assert sum(1 for step in steps if step) >= 300 // _BOUND  # many callbacks, not one
        assert any(heartbeat.continuing)  # R72's transition: call_soon, no call_at
        expiries = _expiries(log)
        dues = [8_000 + int(name[2:]) * 37 % 300 for name, _ in expiries]
        assert dues == sorted(dues)  # R6 across pieces
        assert all(now == 8_400 for _, now in expiries)  # no later call_at: no clock move
        assert not purgatory.driver.continuing and purgatory.driver.armed_due is None
        assert not purgatory.timer.drain_pending
        purgatory.shutdown()

    run(main(), clock)


def test_r72_never_early_and_in_due_order_when_only_part_is_due(
    implementation: PurgatoryImplementation,
) -> None:
    """R72, R4, R6: the clock stops inside the bucket's range: the due part expires over
    several pieces at the pause's reading, the rest each at its own due time."""
    clock = ManualClock(0)

    async def main() -> None:
        log: list[Event] = []
        loop = asyncio.get_running_loop()
        purgatory, ops, waiters = await _one_high_bucket(
            implementation, 100, log, max_drain_entries=4
        )
        loop.call_soon(clock.advance, 8_050)
        assert set(await asyncio.gather(*waiters)) == {Outcome.EXPIRED}
        expiries = _expiries(log)
        due = {op.name: op.delay_ms for op in ops}
        assert [due[name] for name, _ in expiries] == sorted(due.values())
        for name, now in expiries:
            assert now >= due[name]  # R4
            assert now == max(due[name], 8_050)  # the due part at the pause, then on time
        purgatory.shutdown()

    run(main(), clock)


def test_r72_submit_cancel_between_pieces(implementation: PurgatoryImplementation) -> None:
    """R72, R3, R47: between pieces, a submission due at once expires inside it; one due
    later expires at its own due time; a wait cancelled before its piece is abandoned
    and never expires."""
    clock = ManualClock(0)
    operation = recording_operation(implementation)

    async def main() -> None:
        log: list[Event] = []
        loop = asyncio.get_running_loop()
        purgatory, ops, waiters = await _one_high_bucket(
            implementation, 200, log, max_drain_entries=8
        )
        late = ops[-1]  # due 8,000 + 199 * 37 % 200 = 8,163: the last in due order
        extra: dict[str, Any] = {}

        def between_pieces() -> None:
            assert purgatory.driver.continuing and purgatory.timer.drain_pending
            assert ("expire", late.name, 8_400) not in log
            waiters[-1].cancel()
            at_once = operation(-5, "at-once", log, clock)
            extra["at-once"] = purgatory.submit(at_once, ["x"])
            assert log[-1] == ("expire", "at-once", 8_400)  # inside its submission (R3)
            extra["later"] = purgatory.submit(operation(30, "later", log, clock), ["y"])

        loop.call_soon(clock.advance, 8_400)
        await asyncio.sleep(0)
        heartbeat = _Heartbeat(purgatory, log, at=3, action=between_pieces)
        loop.call_soon(heartbeat.beat)
        outcomes = await asyncio.gather(*waiters, return_exceptions=True)
        heartbeat.running = False
        assert heartbeat.armed_while_continuing == []
        assert isinstance(outcomes[-1], asyncio.CancelledError)
        assert outcomes[:-1] == [Outcome.EXPIRED] * 199
        assert late.is_abandoned and ("expire", late.name, 8_400) not in log
        assert await extra["at-once"] is Outcome.EXPIRED
        assert await extra["later"] is Outcome.EXPIRED
        assert _expiries(log)[-1] == ("later", 8_430)  # on time, never early
        purgatory.shutdown()

    run(main(), clock)


def test_r72_shutdown_between_pieces_stops_the_drain(
    implementation: PurgatoryImplementation,
) -> None:
    """R72, R32, R49: a shutdown between pieces: no further piece runs, nothing expires
    afterwards, every waiter settles (ABANDONED) and the driver is stopped."""
    clock = ManualClock(0)

    async def main() -> None:
        log: list[Event] = []
        loop = asyncio.get_running_loop()
        purgatory, _, waiters = await _one_high_bucket(
            implementation, 200, log, max_drain_entries=8
        )
        expired_at_shutdown: list[int] = []

        def shut_down() -> None:
            assert purgatory.timer.drain_pending
            expired_at_shutdown.append(len(_expiries(log)))
            purgatory.shutdown()

        loop.call_soon(clock.advance, 8_400)
        await asyncio.sleep(0)
        heartbeat = _Heartbeat(purgatory, log, at=4, action=shut_down)
        loop.call_soon(heartbeat.beat)
        outcomes = await asyncio.wait_for(asyncio.gather(*waiters), 1)
        heartbeat.running = False
        assert heartbeat.armed_while_continuing == []
        [count] = expired_at_shutdown
        assert 0 < count < 200
        assert outcomes.count(Outcome.EXPIRED) == count
        assert outcomes.count(Outcome.ABANDONED) == 200 - count
        await asyncio.sleep(1)
        assert len(_expiries(log)) == count
        assert purgatory.driver.stopped
        assert purgatory.driver.armed_due is None and purgatory.waiting == 0

    run(main(), clock)


def test_r72_the_bound_is_checked(implementation: PurgatoryImplementation) -> None:
    """R35 for the new argument: a clear error naming it, and no purgatory built."""
    assert_bound_is_checked(implementation, "max_drain_entries", 2.5, DEFAULT_MAX_DRAIN_ENTRIES)


@pytest.mark.parametrize("bound", [0, -1])
def test_r72_the_driver_refuses_a_drain_bound_below_one_naming_it(bound: int) -> None:
    """R72, R35: a piece must take at least one entry (or the pieces would never end), so
    ``LoopTimerDriver`` itself refuses ``max_drain_entries`` below 1 with an error naming
    it, whoever builds it."""
    clock = ManualClock(0)
    loop = VirtualTimeLoop(clock)
    try:
        with pytest.raises(ValueError, match="max_drain_entries must be >= 1"):
            LoopTimerDriver(
                loop, NoTimer(), clock, lambda _: None, direct=True, max_drain_entries=bound
            )
    finally:
        loop.close()
