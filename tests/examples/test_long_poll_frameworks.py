"""The web framework recipes (examples/long_poll_aiohttp.py, long_poll_starlette.py) over HTTP.

Each test starts one recipe's server on 127.0.0.1 (any free port) and talks to it over
real HTTP with aiohttp's client, in one ``asyncio.run``: the server, its purgatory and
the client share that loop, so the test reads the purgatory's counters from the board
directly (on the loop's thread, R50). Every wait is bounded; the only time asserted is
the lower bound a client relies on: an ``EXPIRED`` answer never comes before
``timeout_ms`` (measured with ``time.monotonic`` in the client, from before the
request was sent).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import ModuleType
from typing import Any

import pytest

from examples.long_poll_service import PollBoard, RunningService
from tests.examples.test_long_poll import GUARD_S, serves_and_stops_on_ctrl_c

aiohttp = pytest.importorskip("aiohttp", reason="the dev extra installs aiohttp")

pytestmark = pytest.mark.realtime

RECIPES = ["long_poll_aiohttp", "long_poll_starlette"]
LONG_TIMEOUT_MS = 60_000
"""A poll that only a publish, a hang-up or the server closing may end."""
BOUND_S = 20.0
"""The most any one test may take (a loaded machine included)."""
IDLE = {"waiting": 0, "watched": 0, "delayed": 0}


def recipe(name: str) -> ModuleType:
    """The example module ``name`` (skipped if its framework is not installed)."""
    if name == "long_poll_starlette":
        pytest.importorskip("starlette", reason="the dev extra installs starlette")
        pytest.importorskip("uvicorn", reason="the dev extra installs uvicorn")
    return importlib.import_module(f"examples.{name}")


Scenario = Callable[[RunningService, Any], Awaitable[None]]


def run_against(name: str, scenario: Scenario) -> None:
    """Serve recipe ``name`` and run ``scenario(service, client_session)`` against it."""
    serve: Callable[..., AbstractAsyncContextManager[RunningService]] = recipe(name).serve

    async def main() -> None:
        async with asyncio.timeout(BOUND_S), serve("127.0.0.1", 0) as service:
            assert service.url.startswith("http://127.0.0.1:")
            async with aiohttp.ClientSession(service.url) as client:
                await scenario(service, client)

    asyncio.run(main())


async def until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the loop until ``condition()`` holds (bounded by ``BOUND_S`` overall)."""
    deadline = time.monotonic() + BOUND_S / 2
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def get_poll(client: Any, key: str, timeout_ms: int) -> tuple[int, dict[str, Any]]:
    """``GET /poll``: the status and the JSON body."""
    params = {"key": key, "timeout_ms": str(timeout_ms)}
    async with client.get("/poll", params=params) as response:
        return response.status, await response.json()


async def post_publish(client: Any, key: str, message: str) -> int:
    """``POST /publish``: how many polls it answered."""
    async with client.post("/publish", params={"key": key}, data=message) as response:
        assert response.status == 200
        answered: int = (await response.json())["answered"]
        return answered


async def hang_up_while_polling(url: str, board: PollBoard) -> asyncio.StreamReader:
    """Send a long poll on a raw connection, wait until it waits, close the connection
    (the hang-up); return the connection's reader."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    target = f"/poll?key=gone&timeout_ms={LONG_TIMEOUT_MS}"
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("ascii"))
    await writer.drain()
    await until(lambda: board.polls.waiting == 1, "the poll to wait")
    assert board.stats() == {"waiting": 1, "watched": 1, "delayed": 1}
    writer.close()
    await writer.wait_closed()
    return reader


@pytest.fixture(params=RECIPES)
def name(request: pytest.FixtureRequest) -> str:
    found: str = request.param
    return found


def test_r46_an_early_publish_answers_the_poll(name: str) -> None:
    """R46, R25: a publish before the timeout answers the waiting poll with its message,
    and the poll leaves the purgatory."""

    async def scenario(service: RunningService, client: Any) -> None:
        polling = asyncio.create_task(get_poll(client, "news", LONG_TIMEOUT_MS))
        await until(lambda: service.board.polls.waiting == 1, "the poll to wait")
        assert await post_publish(client, "other", "not for it") == 0
        assert await post_publish(client, "news", "hello") == 1
        assert await polling == (200, {"outcome": "COMPLETED", "message": "hello"})
        assert service.board.stats() == IDLE
        async with client.get("/stats") as response:
            assert await response.json() == IDLE

    run_against(name, scenario)


def test_r60_a_timeout_answers_expired_never_before_timeout_ms(name: str) -> None:
    """R60, R46: with no publish each poll answers EXPIRED, and not before its
    ``timeout_ms`` on the client's monotonic clock (late is allowed, early never).

    The polls go one after another on one kept-alive connection, warmed first, so
    that little but the timeout lies between the client's clock readings; a batch of
    concurrent polls follows (each on its own connection). Seen from the client, an
    expiry early by less than the loop's usual lateness hides behind it: planted in
    the service, polls 3 ms early failed this test in 8 of 8 runs, 2 ms early in 1 of
    3. The sub-millisecond bound is measured on the server side, in
    tests/test_realtime.py."""

    async def timed_poll(client: Any, key: str, timeout_ms: int) -> float:
        started = time.monotonic()
        answer = await get_poll(client, key, timeout_ms)
        elapsed = time.monotonic() - started
        assert answer == (200, {"outcome": "EXPIRED", "message": None})
        return elapsed

    async def scenario(service: RunningService, client: Any) -> None:
        async with client.get("/stats") as response:  # opens the connection
            assert response.status == 200
        one_by_one = [3, 7, 10, 13, 20, 3, 7, 10, 13, 20]
        elapsed = [await timed_poll(client, "quiet", t) for t in one_by_one]
        together = [0, 1, 5, 37, 120, 250, 250]
        elapsed += await asyncio.gather(
            *(timed_poll(client, f"quiet-{i % 3}", t) for i, t in enumerate(together))
        )
        for timeout_ms, seconds in zip(one_by_one + together, elapsed, strict=True):
            assert seconds >= timeout_ms / 1000, (timeout_ms, seconds)  # never early
            assert seconds < timeout_ms / 1000 + BOUND_S / 2  # answered at all
        assert service.board.polls.waiting == 0

    run_against(name, scenario)


def test_r47_a_client_hang_up_abandons_its_poll(name: str) -> None:
    """R47: a client that closes its connection while its poll waits: the poll is
    abandoned (its waiter, watcher entry and timer entry go at once), nothing answers it
    later, and the server goes on serving."""

    async def scenario(service: RunningService, client: Any) -> None:
        reader = await hang_up_while_polling(service.url, service.board)
        await until(lambda: service.board.stats() == IDLE, "the hung-up poll to be abandoned")
        assert await post_publish(client, "gone", "too late") == 0  # nobody left to answer
        assert await reader.read() == b""  # and nothing was sent to the closed socket

    run_against(name, scenario)


def test_r49_closing_the_server_answers_waiting_polls_abandoned(name: str) -> None:
    """R49: leaving ``serve`` shuts the purgatory down first: a waiting poll is answered
    (503, ``ABANDONED``) instead of being cut off."""

    async def main() -> None:
        async with asyncio.timeout(BOUND_S):
            async with recipe(name).serve("127.0.0.1", 0) as service:
                client = aiohttp.ClientSession(service.url)
                polling = asyncio.create_task(get_poll(client, "k", LONG_TIMEOUT_MS))
                await until(lambda: service.board.polls.waiting == 1, "the poll to wait")
            try:
                assert await polling == (503, {"outcome": "ABANDONED", "message": None})
            finally:
                await client.close()
            assert service.board.polls.closed

    asyncio.run(main())


def test_r35_bad_query_arguments_are_refused_naming_the_argument(name: str) -> None:
    """R35 (at the HTTP edge): a missing or wrong argument answers 400 naming it, and
    leaves nothing in the purgatory."""

    async def scenario(service: RunningService, client: Any) -> None:
        for params, named in [
            ({"timeout_ms": "10"}, "key"),
            ({"key": "k"}, "timeout_ms"),
            ({"key": "k", "timeout_ms": "soon"}, "timeout_ms"),
            ({"key": "k", "timeout_ms": "-1"}, "timeout_ms"),
        ]:
            async with client.get("/poll", params=params) as response:
                assert response.status == 400
                assert (await response.json())["error"].startswith(named)
        async with client.post("/publish", data="x") as response:
            assert response.status == 400
            assert (await response.json())["error"].startswith("key")
        assert service.board.stats() == IDLE

    run_against(name, scenario)


# -- what the frameworks do without the recipes' hang-up handling ----------------------
# These pin the behaviour docs/tutorial.md describes (and show that the hang-up test
# above can fail): with aiohttp's default server, or a Starlette handler that does not
# listen for ``http.disconnect``, a hung-up poll goes on waiting after the server has
# seen the connection go.


def test_aiohttp_by_default_leaves_a_hung_up_handler_waiting() -> None:
    """aiohttp's default (``handler_cancellation=False``): the connection is gone, the
    handler is not cancelled, so its poll still waits (until its timeout)."""
    web = recipe("long_poll_aiohttp").web

    async def main() -> None:
        async with asyncio.timeout(BOUND_S):
            board = PollBoard()
            runner = web.AppRunner(recipe("long_poll_aiohttp").make_app(board))
            await runner.setup()
            try:
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                host, port = runner.addresses[0][:2]
                await hang_up_while_polling(f"http://{host}:{port}", board)
                protocols = runner.server.connections  # aiohttp's RequestHandler
                await until(lambda: protocols[0].transport is None, "aiohttp to see the hang-up")
                await asyncio.sleep(0.05)  # a few more loop turns: nothing cancels it
                assert board.stats() == {"waiting": 1, "watched": 1, "delayed": 1}
            finally:
                board.close()
                await runner.cleanup()

    asyncio.run(main())


def test_uvicorn_does_not_cancel_a_hung_up_starlette_handler() -> None:
    """uvicorn only marks the request as disconnected: a Starlette handler that awaits
    the poll without listening for ``http.disconnect`` goes on waiting."""
    starlette = recipe("long_poll_starlette")
    uvicorn = starlette.uvicorn

    async def main() -> None:
        async with asyncio.timeout(BOUND_S):
            board = PollBoard()

            async def naive_poll(request: Any) -> Any:
                answer = await board.poll("gone", LONG_TIMEOUT_MS)
                return starlette.JSONResponse(answer.as_json())

            app = starlette.Starlette(routes=[starlette.Route("/poll", naive_poll)])
            config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off")
            server = uvicorn.Server(config)
            serving = asyncio.create_task(server.serve())
            try:
                await until(lambda: server.started, "uvicorn to start")
                host, port = server.servers[0].sockets[0].getsockname()[:2]
                await hang_up_while_polling(f"http://{host}:{port}", board)
                connections = server.server_state.connections
                await until(lambda: not connections, "uvicorn to see the hang-up")
                await asyncio.sleep(0.05)  # a few more loop turns: nothing cancels it
                assert board.stats() == {"waiting": 1, "watched": 1, "delayed": 1}
            finally:
                board.close()
                server.should_exit = True
                await serving

    asyncio.run(main())


@pytest.mark.parametrize("name", RECIPES)
def test_the_recipe_scripts_serve_and_stop_on_ctrl_c(name: str) -> None:
    """``python -m examples.<recipe> --port 0`` serves on 127.0.0.1 and exits 0 on SIGINT."""
    recipe(name)  # skipped here, not in the child, if the framework is missing

    def idle_stats(url: str) -> None:
        with urllib.request.urlopen(f"{url}/stats", timeout=GUARD_S) as response:
            assert json.load(response) == IDLE

    serves_and_stops_on_ctrl_c(
        [sys.executable, "-m", f"examples.{name}", "--port", "0"], " at http://", idle_stats
    )
