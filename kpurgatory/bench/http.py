"""What a long poll costs a web server: ``kpurgatory.aio`` against a plain ``Future``.

One aiohttp server per way of waiting, each in its own process on 127.0.0.1, serving
``GET /poll?key=K&timeout_ms=T`` (wait for the next publish on ``K``, or ``T`` ms) and
``POST /publish?key=K``. The two servers differ only in the wait: ``aio`` awaits
``AsyncPurgatory.wait`` (one ``DelayedOperation`` per poll, watched on its key);
``future+call_at`` awaits a ``Future`` kept per key, resolved by the publish or by a
``loop.call_at`` that expires it. A round sends ``polls`` concurrent polls on distinct
keys, waits until the server says every one is waiting, publishes on 90 % of the keys
(the other 10 % expire after 50 ms), and reads the server's own process CPU before and
after. Rounds alternate between the servers; the figure is the median per poll (its
publish included).

Run ``python -m kpurgatory.bench.http --help`` (needs aiohttp: the dev extra). A
benchmark, not a test: print the load beside it (the report does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from kpurgatory.aio import AsyncPurgatory
from kpurgatory.bench.waits import QuietOperation, expire

__all__ = ["WAITS", "main", "measure"]

WAITS: tuple[str, ...] = ("future+call_at", "aio")
"""The ways of waiting compared, in the order rounds alternate."""

ANSWERED_SHARE = 0.9
EXPIRING_MS = 50
ANSWERED_MS = 30_000


class _Poll(QuietOperation):
    """One ``aio`` poll: completes once its key was published after the poll began."""

    __slots__ = ("key", "published", "seen")

    def __init__(self, key: str, timeout_ms: int, published: dict[str, int]) -> None:
        super().__init__(timeout_ms)
        self.key, self.published, self.seen = key, published, published.get(key, 0)

    def try_complete(self) -> bool:
        return self.published.get(self.key, 0) > self.seen and self.force_complete()


class _Board:
    """One server's waits: publishes per key, the ``Future`` of each waiting poll (way
    ``future+call_at``) or the purgatory (way ``aio``, set at the application's start)."""

    def __init__(self, wait: str) -> None:
        self.wait = wait
        self.published: dict[str, int] = {}
        self.pending: dict[str, asyncio.Future[bool]] = {}
        self.purgatory: AsyncPurgatory[Any] | None = None

    async def wait_for(self, key: str, timeout_ms: int) -> bool:
        """Wait for the next publish on ``key`` or ``timeout_ms``; whether it came."""
        if self.wait == "aio":
            assert self.purgatory is not None
            outcome = await self.purgatory.wait(_Poll(key, timeout_ms, self.published), (key,))
            return outcome.name == "COMPLETED"
        loop = asyncio.get_running_loop()
        future = self.pending[key] = loop.create_future()
        handle = loop.call_at(loop.time() + timeout_ms / 1000, expire, future)
        try:
            answered: bool = await future
            return answered
        finally:
            handle.cancel()
            if self.pending.get(key) is future:
                del self.pending[key]

    def publish(self, key: str) -> int:
        """Publish on ``key``; how many waiting polls it answered."""
        self.published[key] = self.published.get(key, 0) + 1
        if self.wait == "aio":
            assert self.purgatory is not None
            answered: int = self.purgatory.check_and_complete(key)
            return answered
        future = self.pending.pop(key, None)
        if future is None or future.done():
            return 0
        future.set_result(True)
        return 1


def _server(wait: str) -> Any:
    """The aiohttp application for ``wait`` (imported here: aiohttp is an extra)."""
    from aiohttp import web

    board = _Board(wait)
    started = [0]  # polls that reached their wait, ever; /ready?n=N waits for N
    reached: list[tuple[int, asyncio.Future[None]]] = []

    async def poll(request: web.Request) -> web.Response:
        key = request.query["key"]
        started[0] += 1
        while reached and reached[0][0] <= started[0]:
            reached.pop(0)[1].set_result(None)  # runs after this step: the wait is in
        answered = await board.wait_for(key, int(request.query["timeout_ms"]))
        return web.json_response({"answered": answered})

    async def publish(request: web.Request) -> web.Response:
        return web.json_response({"answered": board.publish(request.query["key"])})

    async def cpu(request: web.Request) -> web.Response:
        return web.json_response({"cpu_s": time.process_time()})

    async def ready(request: web.Request) -> web.Response:
        target = int(request.query["n"])
        if started[0] < target:
            future = asyncio.get_running_loop().create_future()
            reached.append((target, future))
            reached.sort(key=lambda pair: pair[0])
            await asyncio.wait_for(future, 60)
        return web.json_response({"started": started[0]})

    async def start(app: web.Application) -> None:
        if wait == "aio":
            board.purgatory = AsyncPurgatory("http-bench")

    async def stop(app: web.Application) -> None:
        if board.purgatory is not None:
            board.purgatory.shutdown()

    app = web.Application()
    app.on_startup.append(start)
    app.on_shutdown.append(stop)
    app.router.add_get("/poll", poll)
    app.router.add_post("/publish", publish)
    app.router.add_get("/cpu", cpu)
    app.router.add_get("/ready", ready)
    return app


def _serve(wait: str) -> None:
    from aiohttp import web

    async def run() -> None:
        runner = web.AppRunner(_server(wait), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


async def _round(session: Any, url: str, polls: int, round_no: int) -> float:
    """One round (the ``round_no``-th on this server, from 0) on the server at ``url``;
    its CPU seconds per poll."""

    async def get(path: str) -> Any:
        async with session.get(url + path) as response:
            return await response.json()

    before = (await get("/cpu"))["cpu_s"]
    keys = [f"r{round_no}k{index}" for index in range(polls)]
    answered = keys[: int(polls * ANSWERED_SHARE)]
    expiring = set(keys[len(answered) :])

    async def one(key: str) -> bool:
        timeout = EXPIRING_MS if key in expiring else ANSWERED_MS
        result: bool = (await get(f"/poll?key={key}&timeout_ms={timeout}"))["answered"]
        return result

    tasks = [asyncio.ensure_future(one(key)) for key in keys]
    await get(f"/ready?n={(round_no + 1) * polls}")  # every poll of the round is waiting
    for key in answered:
        async with session.post(url + f"/publish?key={key}", data=b"m") as response:
            await response.read()
    results = await asyncio.gather(*tasks)
    if sum(results) != len(answered):
        raise RuntimeError(f"{url}: {sum(results)} polls answered, {len(answered)} expected")
    after = (await get("/cpu"))["cpu_s"]
    return float(after - before) / polls


async def _rounds(ports: dict[str, int], polls: int, rounds: int) -> dict[str, list[float]]:
    import aiohttp

    per_poll: dict[str, list[float]] = {wait: [] for wait in ports}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for round_no in range(rounds + 1):  # round 0 is a warm-up, not counted
            for wait, port in ports.items():
                seconds = await _round(session, f"http://127.0.0.1:{port}", polls, round_no)
                if round_no:
                    per_poll[wait].append(seconds)
    return per_poll


def measure(polls: int = 1000, rounds: int = 9) -> dict[str, Any]:
    """Run both servers and the alternating rounds; the medians, ratio and load."""
    servers = {
        wait: subprocess.Popen(
            [sys.executable, "-m", "kpurgatory.bench.http", "--serve", wait],
            stdout=subprocess.PIPE,
            text=True,
        )
        for wait in WAITS
    }
    try:
        ports = {}
        for wait, server in servers.items():
            assert server.stdout is not None
            ports[wait] = int(server.stdout.readline())
        load_before = os.getloadavg()
        per_poll = asyncio.run(_rounds(ports, polls, rounds))
        load_after = os.getloadavg()
    finally:
        for server in servers.values():
            server.terminate()
            server.wait(30)
    medians = {wait: statistics.median(values) * 1e6 for wait, values in per_poll.items()}
    return {
        "polls_per_round": polls,
        "rounds": rounds,
        "cpu_us_per_poll": medians,
        "aio_over_future": medians["aio"] / medians["future+call_at"],
        "rounds_us": {wait: [v * 1e6 for v in values] for wait, values in per_poll.items()},
        "load": [round(load_before[0], 2), round(load_after[0], 2)],
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--polls N --rounds R`` (or ``--serve WAIT``, what each server runs)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--polls", type=int, default=1000, help="concurrent polls per round")
    parser.add_argument("--rounds", type=int, default=9, help="rounds per server")
    parser.add_argument("--serve", choices=WAITS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.serve)
        return 0
    if args.polls < 10:
        parser.error(f"--polls must be at least 10, not {args.polls}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    print(json.dumps(measure(args.polls, args.rounds), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
