"""The long-poll service both web framework recipes serve: polls wait in an ``AsyncPurgatory``.

``GET /poll?key=K&timeout_ms=T`` waits until ``POST /publish?key=K`` (its body is the
message) or until ``T`` ms have passed; ``GET /stats`` shows the purgatory's counters.
This module is the part that does not depend on the framework: the waiting poll (a
``kpurgatory.aio.DelayedOperation``), the ``PollBoard`` that submits and answers polls,
and the checks of the query arguments. ``long_poll_aiohttp.py`` and
``long_poll_starlette.py`` put it behind aiohttp and Starlette (under uvicorn); each
shows what its framework needs so that a client hanging up abandons its poll
(docs/tutorial.md, "Long polling on aiohttp and Starlette").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome

__all__ = [
    "MAX_TIMEOUT_MS",
    "BadRequestError",
    "Poll",
    "PollAnswer",
    "PollBoard",
    "RunningService",
    "poll_arguments",
    "request_key",
    "run_command_line",
]

MAX_TIMEOUT_MS = 3_600_000
"""The longest ``timeout_ms`` a poll may ask for (an hour)."""


class BadRequestError(ValueError):
    """A query argument is missing or wrong; the message names it (HTTP 400)."""


@dataclass(frozen=True)
class PollAnswer:
    """What a poll answers: how it finished, and the message if one was published."""

    outcome: Outcome
    message: str | None

    def as_json(self) -> dict[str, str | None]:
        """The JSON body: ``{"outcome": "COMPLETED" | "EXPIRED" | "ABANDONED", "message": ...}``."""
        return {"outcome": self.outcome.name, "message": self.message}


class Poll(DelayedOperation):
    """A poll on ``key``: completes at the first publish on it after the poll started."""

    def __init__(self, board: PollBoard, key: str, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.board, self.key = board, key
        self.seen = board.publishes(key)
        self.message: str | None = None

    def try_complete(self) -> bool:
        """Complete iff a message was published on the key since the poll started."""
        return self.board.publishes(self.key) > self.seen and self.force_complete()

    def on_complete(self) -> None:
        """Keep the latest message if one came (on expiry none did)."""
        if self.board.publishes(self.key) > self.seen:
            self.message = self.board.latest(self.key)

    def on_expiration(self) -> None:
        """Nothing to do: ``wait`` returns ``EXPIRED`` to the handler, which answers."""


class PollBoard:
    """The keys' latest messages and the purgatory where polls wait for the next one.

    Build it inside the running event loop that serves the requests (the purgatory
    belongs to that loop, R50); every call is made on that loop.
    """

    def __init__(self) -> None:
        self.polls: AsyncPurgatory[Poll] = AsyncPurgatory("Poll")
        self._published: dict[str, tuple[int, str]] = {}

    def publishes(self, key: str) -> int:
        """How many messages were published on ``key`` so far."""
        return self._published.get(key, (0, ""))[0]

    def latest(self, key: str) -> str | None:
        """The last message published on ``key``, or None."""
        found = self._published.get(key)
        return None if found is None else found[1]

    # --8<-- [start:poll]
    async def poll(self, key: str, timeout_ms: int) -> PollAnswer:
        """Wait for the next message on ``key``, at most ``timeout_ms`` ms.

        Cancelling the task that awaits this (a client that hung up) abandons the
        poll: it leaves the purgatory at once and nothing answers it later (R47).
        """
        poll = Poll(self, key, timeout_ms)
        outcome = await self.polls.wait(poll, [key])
        return PollAnswer(outcome, poll.message)

    def publish(self, key: str, message: str) -> int:
        """Publish ``message`` on ``key``; return how many waiting polls it answered."""
        self._published[key] = (self.publishes(key) + 1, message)
        return self.polls.check_and_complete(key)

    # --8<-- [end:poll]

    def stats(self) -> dict[str, int]:
        """The purgatory's counters: polls awaited, watcher entries, timer entries."""
        return {
            "waiting": self.polls.waiting,
            "watched": self.polls.purgatory.watched,
            "delayed": self.polls.purgatory.num_delayed,
        }

    def close(self) -> None:
        """Shut the purgatory down: every waiting poll answers ``ABANDONED`` (R49)."""
        self.polls.shutdown()


def poll_arguments(query: Mapping[str, str]) -> tuple[str, int]:
    """``key`` and ``timeout_ms`` of a poll's query; ``BadRequestError`` naming a wrong one."""
    key = request_key(query)
    text = query.get("timeout_ms")
    if text is None:
        raise BadRequestError("timeout_ms is required (milliseconds)")
    try:
        timeout_ms = int(text)
    except ValueError:
        wrong = f"timeout_ms must be an integer of milliseconds, not {text!r}"
        raise BadRequestError(wrong) from None
    if not 0 <= timeout_ms <= MAX_TIMEOUT_MS:
        wrong = f"timeout_ms must be between 0 and {MAX_TIMEOUT_MS}, not {timeout_ms}"
        raise BadRequestError(wrong)
    return key, timeout_ms


def request_key(query: Mapping[str, str]) -> str:
    """``key`` of a poll's or a publish's query; ``BadRequestError`` if it is missing."""
    key = query.get("key", "")
    if not key:
        raise BadRequestError("key is required (a non-empty string)")
    return key


@dataclass(frozen=True)
class RunningService:
    """A started server: its base URL and its board."""

    url: str
    board: PollBoard


Serve = Callable[[str, int], AbstractAsyncContextManager[RunningService]]
"""A recipe's ``serve(host, port)``: serves until its ``async with`` block exits."""


def run_command_line(serve: Serve, framework: str, argv: list[str] | None = None) -> None:
    """``python -m examples.long_poll_<framework> [--host H] [--port P]``: serve until Ctrl-C."""
    parser = argparse.ArgumentParser(description=f"The long-poll service on {framework}.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)

    async def serve_forever() -> None:
        async with serve(args.host, args.port) as service:
            print(f"long-poll service on {framework} at {service.url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever())
