"""Long polling on Starlette under uvicorn: ``GET /poll`` waits in ``kpurgatory.aio``.

The service of ``long_poll_service.py`` behind a Starlette application served by
uvicorn. Neither cancels a handler whose client hung up: uvicorn only marks the
connection as gone, and the application learns it by receiving the ASGI
``http.disconnect`` message (``request.is_disconnected()`` polls for it). So the poll
handler waits for two things at once (``until_hang_up``): the poll's answer and that
message. Whichever comes first wins; a hang-up cancels the wait, which abandons the
poll at once (R47).

Run it with ``python -m examples.long_poll_starlette --port 8080`` (needs starlette and
uvicorn: the project's dev extra), then poll and publish as for
``long_poll_aiohttp.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from examples.long_poll_service import (
    BadRequestError,
    PollBoard,
    RunningService,
    poll_arguments,
    request_key,
    run_command_line,
)
from kpurgatory.aio import Outcome

__all__ = ["HungUpError", "hang_up", "main", "make_app", "serve", "until_hang_up"]

R = TypeVar("R")


class HungUpError(Exception):
    """The client closed its connection before the answer was ready."""


# --8<-- [start:hang-up]
async def hang_up(request: Request) -> None:
    """Return once the ASGI server reports ``http.disconnect`` (the client closed)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass  # the (empty) request body: the next message comes at the hang-up


async def until_hang_up(request: Request, work: Coroutine[Any, Any, R]) -> R:
    """Run ``work`` to its end, unless the client hangs up first: then ``HungUpError``.

    At the hang-up ``work``'s task is cancelled, which for ``AsyncPurgatory.wait`` is
    the abandon of its operation, made inside that ``cancel`` call (R47). The same
    happens if the task running this is cancelled (the server shutting down).
    """
    answer = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(hang_up(request))
    try:
        await asyncio.wait((answer, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        answer.cancel()  # nothing if it has finished; else it gives up: abandoned here
    if not answer.done() or answer.cancelled():
        raise HungUpError
    return answer.result()


async def poll(request: Request) -> Response:
    """``GET /poll?key=K&timeout_ms=T``: the next message on ``K``, or ``EXPIRED`` after T ms."""
    try:
        key, timeout_ms = poll_arguments(request.query_params)
    except BadRequestError as error:
        return JSONResponse({"error": str(error)}, status_code=400)
    board: PollBoard = request.app.state.board
    try:
        answer = await until_hang_up(request, board.poll(key, timeout_ms))
    except HungUpError:
        return Response(status_code=499)  # nobody reads it: uvicorn drops it
    status = 503 if answer.outcome is Outcome.ABANDONED else 200  # the server is closing
    return JSONResponse(answer.as_json(), status_code=status)


# --8<-- [end:hang-up]


async def publish(request: Request) -> Response:
    """``POST /publish?key=K`` with the message as the body: answers the polls on ``K``."""
    try:
        key = request_key(request.query_params)
    except BadRequestError as error:
        return JSONResponse({"error": str(error)}, status_code=400)
    message = (await request.body()).decode("utf-8", errors="replace")
    board: PollBoard = request.app.state.board
    return JSONResponse({"answered": board.publish(key, message)})


async def stats(request: Request) -> Response:
    """``GET /stats``: the purgatory's counters (``waiting``, ``watched``, ``delayed``)."""
    board: PollBoard = request.app.state.board
    return JSONResponse(board.stats())


def make_app(board: PollBoard) -> Starlette:
    """The ASGI application serving ``board``."""
    app = Starlette(
        routes=[
            Route("/poll", poll, methods=["GET"]),
            Route("/publish", publish, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )
    app.state.board = board
    return app


@contextlib.asynccontextmanager
async def serve(host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[RunningService]:
    """Serve on ``host:port`` (0: any free port) with uvicorn until the block exits.

    On exit the board closes first (waiting polls answer ``ABANDONED``), then uvicorn
    stops.
    """
    board = PollBoard()  # inside the running loop: the purgatory belongs to it
    config = uvicorn.Config(
        make_app(board), host=host, port=port, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():  # failed to start (the address is taken, ...)
                await serving
                raise RuntimeError(f"uvicorn stopped before serving on {host}:{port}")
            await asyncio.sleep(0.01)
        bound_host, bound_port = server.servers[0].sockets[0].getsockname()[:2]
        yield RunningService(f"http://{bound_host}:{bound_port}", board)
    finally:
        board.close()
        server.should_exit = True
        await serving


def main(argv: list[str] | None = None) -> None:
    """``python -m examples.long_poll_starlette [--host H] [--port P]``."""
    run_command_line(serve, "Starlette (uvicorn)", argv)


if __name__ == "__main__":
    main()
