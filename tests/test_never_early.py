"""Never early on a real clock (R60), on both implementations and the aio layer.

A millisecond clock that truncates its reading would make a task added at 10.9 ms with a
5 ms delay due at 15 ms: 4.1 ms after it was added. These tests measure, against
``time.monotonic``, that no operation or task is ever handed over before its delay has
passed since the call that added it. They assert only the lower bound (lateness depends
on the machine's load; docs/performance.md reports it).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome, ReferenceDelayedOperation
from kpurgatory.clock import ManualClock, MonotonicClock, deadline_reader
from kpurgatory.executors import InlineExecutor
from tests.support import task_class

pytestmark = [pytest.mark.realtime, pytest.mark.timeout(60)]

COUNT = 120
"""Tasks or waits per test: enough to land on every sub-millisecond phase many times."""


def test_r60_the_monotonic_deadline_base_rounds_up_and_manual_clocks_are_exact() -> None:
    """R60: MonotonicClock counts a deadline from its reading rounded up; a clock with no
    deadline_base_ms (a ManualClock) is read as it is, so virtual time stays exact."""
    clock = MonotonicClock()
    for _ in range(1000):
        before = time.monotonic_ns()
        base = clock.deadline_base_ms()
        assert base * 1_000_000 >= before
    manual = ManualClock(7)
    assert deadline_reader(manual)() == 7
    assert deadline_reader(clock) == clock.deadline_base_ms


def test_r60_timer_tasks_never_run_before_their_delay(impl: ModuleType) -> None:
    """R60: tasks added at random sub-millisecond phases to a real-clock timer driven by
    a thread; each run happens at least delay_ms after its add began."""
    late: list[float] = []
    early: list[str] = []
    base = task_class(impl)
    timer = impl.SystemTimer("never-early", executor=InlineExecutor())
    stop = threading.Event()

    def drive() -> None:
        while not stop.is_set():
            timer.advance_clock(5)

    class Timed(base):  # type: ignore[misc,valid-type]
        def __init__(self, delay_ms: int, added_ns: int) -> None:
            super().__init__(delay_ms, "t", self)
            self.added_ns = added_ns

        def ran(self, name: str) -> None:
            elapsed_ms = (time.monotonic_ns() - self.added_ns) / 1e6
            if elapsed_ms < self.delay_ms:
                early.append(f"delay {self.delay_ms} ran after {elapsed_ms:.3f} ms")
            late.append(elapsed_ms - self.delay_ms)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        rng = random.Random(60)
        for _ in range(COUNT):
            time.sleep(rng.random() / 1000)
            timer.add(Timed(rng.randint(1, 5), time.monotonic_ns()))
        deadline = time.monotonic() + 30
        while len(late) < COUNT and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        stop.set()
        timer.close()
        driver.join(5)
    assert not early, early[:5]
    assert len(late) == COUNT


@pytest.mark.parametrize("implementation", ["optimized", "reference"])
def test_r60_aio_waits_never_expire_before_timeout_ms(implementation: Any) -> None:
    """R60: on a real asyncio loop, every wait that expires does so at least
    timeout_ms after wait was called (measured with time.monotonic)."""
    base = DelayedOperation if implementation == "optimized" else ReferenceDelayedOperation

    class Poll(base):  # type: ignore[misc,valid-type]
        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    early: list[str] = []

    async def one(purgatory: AsyncPurgatory[Any], timeout_ms: int, phase_s: float) -> None:
        await asyncio.sleep(phase_s)
        started = time.monotonic()
        outcome = await purgatory.wait(Poll(timeout_ms), ["k"])
        elapsed_ms = (time.monotonic() - started) * 1000
        assert outcome is Outcome.EXPIRED
        if elapsed_ms < timeout_ms:
            early.append(f"timeout {timeout_ms} expired after {elapsed_ms:.3f} ms")

    async def main() -> None:
        rng = random.Random(61)
        async with AsyncPurgatory[Any]("polls", implementation=implementation) as purgatory:
            await asyncio.gather(
                *(one(purgatory, rng.randint(1, 20), rng.random() / 50) for _ in range(COUNT))
            )

    asyncio.run(main())
    assert not early, early[:5]
