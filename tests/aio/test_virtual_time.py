"""R51: the virtual-time loop: loop.time() follows a ManualClock and jumps instead of sleeping."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from kpurgatory.aio import VirtualTimeLoop, run
from kpurgatory.clock import ManualClock


def test_r51_loop_time_is_the_clock_reading_in_seconds() -> None:
    clock = ManualClock(1234)
    loop = VirtualTimeLoop(clock)
    try:
        assert loop.time() == 1.234
        clock.advance(6)
        assert loop.time() == 1.24
        assert loop.clock is clock
    finally:
        loop.close()


def test_r51_sleep_jumps_exactly_and_runs_timers_in_time_order() -> None:
    """Timers of 30, 10 and 20 ms fire in time order at exactly their virtual times."""
    clock = ManualClock(0)
    fired: list[tuple[str, int]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def fire(name: str) -> None:
            fired.append((name, clock.now_ms()))

        for name, delay in (("c", 0.03), ("a", 0.01), ("b", 0.02)):
            loop.call_later(delay, fire, name)
        started = time.monotonic()
        await asyncio.sleep(0.05)
        assert time.monotonic() - started < 5  # no real sleeping (bound, not a timing)
        assert clock.now_ms() == 50

    run(main(), clock)
    assert fired == [("a", 10), ("b", 20), ("c", 30)]


def test_r51_jumps_round_float_noise_to_whole_milliseconds() -> None:
    """Many small sleeps add up exactly: no drift from float seconds."""
    clock = ManualClock(0)

    async def main() -> None:
        for _ in range(100):
            await asyncio.sleep(0.007)

    run(main(), clock)
    assert clock.now_ms() == 700


def test_r51_wait_for_timeout_in_virtual_time() -> None:
    clock = ManualClock(5)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 2.5)

    run(main(), clock)
    assert clock.now_ms() == 2505


def test_r51_ready_io_is_served_without_a_jump() -> None:
    """A socket with data waiting is read at once; the clock does not move for it."""
    clock = ManualClock(0)
    left, right = socket.socketpair()
    left.setblocking(False)
    right.setblocking(False)
    try:
        right.send(b"x")

        async def main() -> bytes:
            loop = asyncio.get_running_loop()
            loop.call_later(10, lambda: None)  # a far timer the loop could jump to
            return await loop.sock_recv(left, 1)

        assert run(main(), clock) == b"x"
        assert clock.now_ms() == 0
    finally:
        left.close()
        right.close()


def test_r51_clock_must_be_a_manual_clock() -> None:
    with pytest.raises(TypeError, match="clock must be a ManualClock"):
        VirtualTimeLoop(object())  # type: ignore[arg-type]


def test_r45_loop_executor_runs_inline_and_refuses_after_shutdown() -> None:
    """R45: the driver's executor runs each hand-over inside submit, on the caller's thread."""
    from kpurgatory.aio import LoopExecutor

    calls: list[int] = []
    executor = LoopExecutor()
    first = executor.submit(calls.append, 1)
    assert calls == [1] and first.done() and first.result() is None

    def boom() -> None:
        raise ValueError("boom")

    failed = executor.submit(boom)
    assert isinstance(failed.exception(), ValueError)
    executor.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(calls.append, 2)
    assert calls == [1]


# -- the virtual loop's start and its wait for I/O (R51) ---------------------------------------


def test_r51_a_virtual_loop_without_a_clock_starts_at_zero() -> None:
    """``VirtualTimeLoop()`` makes its own ``ManualClock(0)``: its time starts at 0.0 and
    a sleep moves it by exactly the sleep."""
    loop = VirtualTimeLoop()
    try:
        assert loop.clock.now_ms() == 0 and loop.time() == 0.0
    finally:
        loop.close()

    async def sleep_then_read() -> float:
        await asyncio.sleep(0.25)
        return asyncio.get_running_loop().time()

    assert run(sleep_then_read()) == 0.25


def test_r51_a_virtual_loop_with_no_timer_waits_for_io() -> None:
    """With no timer to jump to, the loop waits for I/O as a real loop does (its
    selector gets no timeout) and the clock does not move. The byte is sent once the
    receiver waits on its socket, so the loop must select to see it."""
    reader, writer = socket.socketpair()
    reader.setblocking(False)

    async def receive() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        receiving = asyncio.ensure_future(loop.sock_recv(reader, 1))
        await asyncio.sleep(0)  # the receiver finds nothing and waits on the socket
        writer.send(b"x")
        return await receiving, loop.time()

    try:
        assert run(receive()) == (b"x", 0.0)
    finally:
        reader.close()
        writer.close()
