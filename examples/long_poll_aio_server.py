"""The long-poll HTTP server on ``kpurgatory.aio``: the event loop is the only thread.

Same HTTP API, log and answers as ``long_poll_server.py`` (see there), but the fetches
wait in an ``AsyncPurgatory``: each waiting fetch is ``await fetches.wait(fetch,
[topic])``; a produce completes the ready ones with ``check_and_complete`` on the loop;
expiry is one ``loop.call_at`` at the timer's next due time. No reaper thread, no
executor thread, no ``call_soon_threadsafe``.

A client that disconnects while its fetch waits is noticed (its connection reaches
end-of-file) and its fetch is abandoned: it leaves the purgatory at once and is never
answered (rule R47). ``close`` shuts the purgatory down, which answers every waiting
fetch with what its topic holds (``ABANDONED`` outcome, R49).

Run it with ``python examples/long_poll_aio_server.py --port 8080`` (docs/tutorial.md,
"The same server on asyncio").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from examples.long_poll_server import (
    MAX_RECORDS_PER_FETCH,
    FetchResult,
    LongPollHttp,
    TopicLog,
)
from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome

__all__ = ["AioFetch", "AioLongPollServer", "main"]


# --8<-- [start:operation]
class AioFetch(DelayedOperation):
    """A fetch waiting until ``min_bytes`` lie beyond ``offset`` or ``max_wait_ms`` passes.

    ``on_complete`` stores the answer; the handler awaiting ``wait`` sends it.
    """

    def __init__(
        self, log: TopicLog, topic: str, offset: int, min_bytes: int, max_wait_ms: int
    ) -> None:
        super().__init__(max_wait_ms)
        self.log, self.topic, self.offset, self.min_bytes = log, topic, offset, min_bytes
        self.result: FetchResult | None = None

    def try_complete(self) -> bool:
        """Complete iff enough data has arrived (runs on the loop: must not block)."""
        if self.log.bytes_after(self.topic, self.offset) >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        """Answer with whatever is there now: enough data, or what came before the timeout."""
        self.result = self.answer_now()

    def on_expiration(self) -> None:
        """Nothing to add: ``on_complete`` has already answered with ``timed_out``."""

    def answer_now(self) -> FetchResult:
        """The records from ``offset`` on, and whether that is still short of ``min_bytes``."""
        records = self.log.read(self.topic, self.offset, MAX_RECORDS_PER_FETCH)
        enough = self.log.bytes_after(self.topic, self.offset) >= self.min_bytes
        return FetchResult(records, self.offset + len(records), timed_out=not enough)


# --8<-- [end:operation]


class AioLongPollServer(LongPollHttp):
    """The long-poll server on one event loop: build it inside the running loop.

    ``close`` stops accepting, shuts the purgatory down (every waiting fetch is answered
    with what it has) and waits for the handlers. Idempotent.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        # --8<-- [start:purgatory]
        self.fetches: AsyncPurgatory[AioFetch] = AsyncPurgatory("Fetch", purge_interval=100)
        # --8<-- [end:purgatory]

    async def produce(self, topic: str, record: str) -> int:
        """Append a record, then complete the fetches it satisfies (on the loop)."""
        offset = self.log.append(topic, record)
        self.fetches.check_and_complete(topic)
        return offset

    # --8<-- [start:fetch]
    async def fetch(self, topic: str, offset: int, min_bytes: int, max_wait_ms: int) -> FetchResult:
        """Answer at once if enough data is there, else wait in the purgatory."""
        fetch = AioFetch(self.log, topic, offset, min_bytes, max_wait_ms)
        self._fetched_topics.add(topic)
        outcome = await self.fetches.wait(fetch, [topic])
        if outcome is Outcome.ABANDONED or fetch.result is None:  # shut down: answer now
            return fetch.answer_now()
        return fetch.result

    # --8<-- [end:fetch]

    # --8<-- [start:disconnect]
    async def fetch_request(
        self,
        reader: asyncio.StreamReader,
        topic: str,
        offset: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> FetchResult:
        """``fetch``, abandoned if the client hangs up first (its connection hits EOF)."""
        answer = asyncio.ensure_future(self.fetch(topic, offset, min_bytes, max_wait_ms))
        hangup = asyncio.ensure_future(reader.read(1))  # b"" when the client closes
        try:
            await asyncio.wait({answer, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hangup.cancel()
        if not answer.done():
            answer.cancel()  # the wait is abandoned: unwatched, untimed (R47)
            with contextlib.suppress(asyncio.CancelledError):
                await answer
            raise ConnectionResetError("the client went away while its fetch waited")
        return answer.result()

    # --8<-- [end:disconnect]

    async def close(self) -> None:
        """Stop listening, answer every waiting fetch, shut the purgatory down."""
        if self._server is not None:
            self._server.close()
        self.fetches.shutdown()  # each waiting fetch's wait returns ABANDONED: answered
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=5.0)
        if self._server is not None:
            await self._server.wait_closed()


async def serve(host: str, port: int) -> None:
    """Run a server until cancelled (Ctrl-C), then close it cleanly."""
    server = AioLongPollServer(host, port)
    bound_host, bound_port = await server.start()
    print(
        f"long-poll server (asyncio) on http://{bound_host}:{bound_port}/topics/<topic>", flush=True
    )
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--host`` (default 127.0.0.1) and ``--port`` (default 8080)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
