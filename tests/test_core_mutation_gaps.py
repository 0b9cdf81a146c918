"""Behaviours the project's own mutation run (``make mutation``, docs/verification.md,
"Mutation score") found no test pinning in the reference modules, on every
implementation. Each test was seen to fail with its mutant applied."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kpurgatory import InlineExecutor


class JumpingClock:
    """A virtual clock that honours ``next_due``: ``wait`` jumps to the earlier of the
    timeout and the next due time (as a ``VirtualTimeLoop`` does), and does not move at
    all when the due time is already reached. Readings may be below zero (R1)."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        return self.now

    def wait(
        self,
        condition: threading.Condition,
        timeout_ms: int,
        next_due: Callable[[], int | None],
    ) -> int:
        due = next_due()
        if due is not None and due <= self.now:
            return self.now
        deadline = self.now + timeout_ms
        self.now = deadline if due is None else min(deadline, due)
        return self.now


def _task(impl: ModuleType, ran: list[str], name: str, delay_ms: int) -> Any:
    class Named(impl.TimerTask):  # type: ignore[misc,name-defined]
        def run(self) -> None:
            ran.append(name)

    return Named(delay_ms)


def test_r7_wakeup_ends_the_wait_on_a_clock_reading_below_zero(impl: ModuleType) -> None:
    """``wakeup()`` ends the wait at once, at the current reading, also on a clock that
    reads below zero (R7, R1): the due time a woken wait reports is below every reading,
    not merely below zero."""
    clock = JumpingClock(-10_000)
    timer = impl.SystemTimer("below-zero", clock=clock, executor=InlineExecutor())
    ran: list[str] = []
    timer.add(_task(impl, ran, "late", 5_000))
    timer.wakeup()
    assert timer.advance_clock(60_000) is False
    assert clock.now == -10_000, "the woken wait moved the clock"
    assert timer.current_time == -10_000
    assert ran == []
    assert timer.advance_clock(60_000) is True, "unwoken, the wait jumps to the due task"
    assert (clock.now, ran) == (-5_000, ["late"])
