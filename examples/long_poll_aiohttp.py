"""Long polling on aiohttp: ``GET /poll`` waits in ``kpurgatory.aio`` for a publish or a timeout.

The service of ``long_poll_service.py`` behind an aiohttp web application. A client
that hangs up abandons its poll only because the server is started with
``handler_cancellation=True``: aiohttp then cancels the handler's task when the
connection is lost, the ``CancelledError`` reaches ``AsyncPurgatory.wait`` and the
poll leaves the purgatory at once (R47). With aiohttp's default (no cancellation)
the handler would go on waiting until the timeout, answering nobody.

Run it with ``python -m examples.long_poll_aiohttp --port 8080`` (needs aiohttp: the
project's dev extra), then ``curl 'localhost:8080/poll?key=k&timeout_ms=30000'`` and,
from another shell, ``curl -X POST -d hello 'localhost:8080/publish?key=k'``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from examples.long_poll_service import (
    BadRequestError,
    PollBoard,
    RunningService,
    poll_arguments,
    request_key,
    run_command_line,
)
from kpurgatory.aio import Outcome

__all__ = ["main", "make_app", "serve"]

BOARD = web.AppKey("board", PollBoard)
"""Where the application keeps its ``PollBoard``."""


async def poll(request: web.Request) -> web.Response:
    """``GET /poll?key=K&timeout_ms=T``: the next message on ``K``, or ``EXPIRED`` after T ms."""
    try:
        key, timeout_ms = poll_arguments(request.query)
    except BadRequestError as error:
        return web.json_response({"error": str(error)}, status=400)
    answer = await request.app[BOARD].poll(key, timeout_ms)  # cancelled on hang-up
    status = 503 if answer.outcome is Outcome.ABANDONED else 200  # the server is closing
    return web.json_response(answer.as_json(), status=status)


async def publish(request: web.Request) -> web.Response:
    """``POST /publish?key=K`` with the message as the body: answers the polls on ``K``."""
    try:
        key = request_key(request.query)
    except BadRequestError as error:
        return web.json_response({"error": str(error)}, status=400)
    message = await request.text()
    return web.json_response({"answered": request.app[BOARD].publish(key, message)})


async def stats(request: web.Request) -> web.Response:
    """``GET /stats``: the purgatory's counters (``waiting``, ``watched``, ``delayed``)."""
    return web.json_response(request.app[BOARD].stats())


def make_app(board: PollBoard) -> web.Application:
    """The web application serving ``board``."""
    app = web.Application()
    app[BOARD] = board
    app.router.add_get("/poll", poll)
    app.router.add_post("/publish", publish)
    app.router.add_get("/stats", stats)
    return app


# --8<-- [start:serve]
@contextlib.asynccontextmanager
async def serve(host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[RunningService]:
    """Serve on ``host:port`` (0: any free port) until the block exits.

    ``handler_cancellation=True`` is what makes a hang-up cancel the handler, and so
    abandon its poll. On exit the board closes first (waiting polls answer
    ``ABANDONED``), then the server stops.
    """
    board = PollBoard()  # inside the running loop: the purgatory belongs to it
    runner = web.AppRunner(make_app(board), handler_cancellation=True, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        yield RunningService(f"http://{bound_host}:{bound_port}", board)
    finally:
        board.close()
        await runner.cleanup()


# --8<-- [end:serve]


def main(argv: list[str] | None = None) -> None:
    """``python -m examples.long_poll_aiohttp [--host H] [--port P]``."""
    run_command_line(serve, "aiohttp", argv)


if __name__ == "__main__":
    main()
