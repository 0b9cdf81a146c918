"""``VirtualTimeLoop`` (R51): behaviours the project's own mutation run (``make
mutation``) found no test pinning. Each test was seen to fail with its mutant applied."""

from __future__ import annotations

import asyncio
import socket

from kpurgatory.aio import VirtualTimeLoop, run


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
