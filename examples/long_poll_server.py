"""A long-poll HTTP server built on ``DelayedOperationPurgatory``.

Clients append records to named topics and fetch them. A fetch that finds fewer than
``min_bytes`` bytes beyond its offset is not answered at once: it waits in a purgatory
until a produce brings enough data (``check_and_complete`` on the topic) or until
``max_wait_ms`` passes (the purgatory's timer expires it, driven by the reaper thread
on the real clock). This is how a Kafka broker holds fetch requests.

The server runs on asyncio and never blocks its event loop on a waiting request: each
waiting fetch is an ``asyncio.Future`` that the operation's ``on_complete`` resolves,
from whichever thread completes it (the event loop itself, on a produce, or the
timer's executor thread, on expiry).

HTTP API (JSON bodies, one request per connection)::

    POST /topics/<topic>                      body = the record (UTF-8 text)
         -> 200 {"offset": <offset of the record>}
    GET  /topics/<topic>?offset=N&min_bytes=B&max_wait_ms=M
         -> 200 {"records": [...], "next_offset": N', "timed_out": bool}

Run it with ``python examples/long_poll_server.py --port 8080`` and try it with curl
(docs/tutorial.md walks through the code).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from kpurgatory import DelayedOperation, DelayedOperationPurgatory

__all__ = ["DelayedFetch", "FetchResult", "LongPollHttp", "LongPollServer", "TopicLog", "main"]

MAX_BODY_BYTES = 1 << 20
"""Largest record a produce may carry; bigger bodies get 413."""

MAX_WAIT_LIMIT_MS = 60_000
"""Largest ``max_wait_ms`` a fetch may ask for."""

MAX_RECORDS_PER_FETCH = 100
"""How many records one fetch response carries at most."""


# --8<-- [start:log]
class TopicLog:
    """Append-only record lists, one per topic; safe to use from any thread."""

    def __init__(self) -> None:
        self._records: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def append(self, topic: str, record: str) -> int:
        """Append ``record`` to ``topic``; return its offset."""
        with self._lock:
            records = self._records.setdefault(topic, [])
            records.append(record)
            return len(records) - 1

    def bytes_after(self, topic: str, offset: int) -> int:
        """UTF-8 bytes held in ``topic`` at offsets >= ``offset``."""
        with self._lock:
            records = self._records.get(topic, [])
            return sum(len(record.encode()) for record in records[offset:])

    def read(self, topic: str, offset: int, limit: int) -> list[str]:
        """Up to ``limit`` records of ``topic`` starting at ``offset``."""
        with self._lock:
            return list(self._records.get(topic, [])[offset : offset + limit])


# --8<-- [end:log]


# --8<-- [start:operation]
@dataclass(frozen=True)
class FetchResult:
    """What a fetch answers: the records, where to fetch next, and whether it timed out."""

    records: list[str]
    next_offset: int
    timed_out: bool


class DelayedFetch(DelayedOperation):
    """A fetch waiting until ``min_bytes`` lie beyond ``offset`` or ``max_wait_ms`` passes.

    ``deliver`` receives the answer exactly once, from ``on_complete``: the purgatory
    guarantees that one of the two paths (data or timeout) wins and the other does
    nothing (rules R16, R17).
    """

    def __init__(
        self,
        log: TopicLog,
        topic: str,
        offset: int,
        min_bytes: int,
        max_wait_ms: int,
        deliver: Callable[[FetchResult], None],
    ) -> None:
        super().__init__(max_wait_ms)
        self.log, self.topic, self.offset, self.min_bytes = log, topic, offset, min_bytes
        self.deliver = deliver

    def try_complete(self) -> bool:
        """Complete iff enough data has arrived (called by the purgatory, under our lock)."""
        if self.log.bytes_after(self.topic, self.offset) >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        """Answer with whatever is there now: enough data, or what arrived before the timeout."""
        records = self.log.read(self.topic, self.offset, MAX_RECORDS_PER_FETCH)
        enough = self.log.bytes_after(self.topic, self.offset) >= self.min_bytes
        self.deliver(FetchResult(records, self.offset + len(records), timed_out=not enough))

    def on_expiration(self) -> None:
        """Nothing to add: ``on_complete`` has already answered with ``timed_out``."""


# --8<-- [end:operation]


class RefusedError(ValueError):
    """A request the server refuses with an HTTP error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _int_param(query: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    values = query.get(name)
    if not values:
        return default
    try:
        value = int(values[0])
    except ValueError:
        raise RefusedError(400, f"{name} must be an integer, got {values[0]!r}") from None
    if not low <= value <= high:
        raise RefusedError(400, f"{name} must be in [{low}, {high}], got {value}")
    return value


class LongPollHttp:
    """The HTTP front end shared by the threaded and the asyncio servers.

    Parses one request per connection and calls ``produce`` or ``fetch_request``;
    subclasses provide those and ``close``. ``start`` binds (port 0 picks a free port)
    and returns the bound address.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.log = TopicLog()
        self._fetched_topics: set[str] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def produce(self, topic: str, record: str) -> int:
        """Append a record; complete what it satisfies; return its offset."""
        raise NotImplementedError

    async def fetch_request(
        self,
        reader: asyncio.StreamReader,
        topic: str,
        offset: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> FetchResult:
        """Answer one GET (``reader`` is its connection, read to the end of the request)."""
        raise NotImplementedError

    async def start(self) -> tuple[str, int]:
        """Start listening; return the bound (host, port)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        try:
            status, payload = await self._respond(reader)
        except RefusedError as refused:
            status, payload = refused.status, {"error": str(refused)}
        except (ConnectionError, asyncio.IncompleteReadError):
            writer.close()
            return
        body = json.dumps(payload).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}
        head = (
            f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        try:
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, object]]:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) != 3:
            raise RefusedError(400, "malformed request line")
        method, target, _version = request_line
        length = 0
        for _ in range(100):
            header = (await reader.readline()).decode("latin-1")
            if header in ("\r\n", "\n", ""):
                break
            name, _, value = header.partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise RefusedError(400, "Content-Length must be an integer") from None
        else:
            raise RefusedError(400, "too many headers")
        if not 0 <= length <= MAX_BODY_BYTES:
            raise RefusedError(413, f"body must be at most {MAX_BODY_BYTES} bytes")
        body = await reader.readexactly(length)
        url = urlsplit(target)
        parts = url.path.split("/")
        if len(parts) != 3 or parts[1] != "topics" or not parts[2]:
            raise RefusedError(404, f"no such resource: {url.path}")
        topic = unquote(parts[2])
        if method == "POST":
            try:
                record = body.decode()
            except UnicodeDecodeError:
                raise RefusedError(400, "the record must be UTF-8 text") from None
            return 200, {"offset": await self.produce(topic, record)}
        if method == "GET":
            query = parse_qs(url.query)
            offset = _int_param(query, "offset", 0, 0, 1 << 62)
            min_bytes = _int_param(query, "min_bytes", 1, 0, 1 << 30)
            max_wait_ms = _int_param(query, "max_wait_ms", 500, 0, MAX_WAIT_LIMIT_MS)
            result = await self.fetch_request(reader, topic, offset, min_bytes, max_wait_ms)
            return 200, {
                "records": result.records,
                "next_offset": result.next_offset,
                "timed_out": result.timed_out,
            }
        raise RefusedError(400, f"method {method} is not supported")


class LongPollServer(LongPollHttp):
    """The threaded server: appends records, parks fetches in a threaded purgatory.

    Constructing it starts the purgatory's reaper thread; ``start`` binds (port 0
    picks a free port) and returns the bound address; ``close`` stops accepting,
    answers every waiting fetch with what it has, and shuts the purgatory down (which
    stops its reaper thread without waiting for it, R39). Call ``close`` even if
    ``start`` failed.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        # --8<-- [start:purgatory]
        self.fetches: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch", purge_interval=100
        )  # real clock, reaper thread "ExpirationReaper-0-Fetch"
        # --8<-- [end:purgatory]

    async def close(self) -> None:
        """Stop listening, answer the waiting fetches, shut the purgatory down.

        Idempotent. Each waiting fetch is taken out of the purgatory with
        ``cancel_for_key`` (which neither completes nor expires it, R29) and then
        completed by hand, so its client gets an answer instead of a reset connection.
        """
        if self._server is not None:
            self._server.close()
        # --8<-- [start:close]
        for topic in sorted(self._fetched_topics):
            for operation in self.fetches.cancel_for_key(topic):
                operation.force_complete()  # answers now, with what it has
        self.fetches.shutdown()  # stops the reaper, closes the timer; waits for no thread (R39)
        # --8<-- [end:close]
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=5.0)
        if self._server is not None:
            await self._server.wait_closed()

    async def produce(self, topic: str, record: str) -> int:
        """Append a record, then complete the fetches it satisfies."""
        # --8<-- [start:produce]
        offset = self.log.append(topic, record)
        self.fetches.check_and_complete(topic)  # completes every fetch that now has enough
        return offset
        # --8<-- [end:produce]

    async def fetch_request(
        self,
        reader: asyncio.StreamReader,
        topic: str,
        offset: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> FetchResult:
        """A GET: ``fetch`` (the connection itself is not watched while waiting)."""
        return await self.fetch(topic, offset, min_bytes, max_wait_ms)

    async def fetch(self, topic: str, offset: int, min_bytes: int, max_wait_ms: int) -> FetchResult:
        """Answer at once if enough data is there, else wait in the purgatory."""
        # --8<-- [start:fetch]
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[FetchResult] = loop.create_future()

        def deliver(result: FetchResult) -> None:  # may run on any thread
            loop.call_soon_threadsafe(_resolve, answer, result)

        operation = DelayedFetch(self.log, topic, offset, min_bytes, max_wait_ms, deliver)
        self._fetched_topics.add(topic)
        self.fetches.try_complete_else_watch(operation, [topic])
        return await answer
        # --8<-- [end:fetch]


# --8<-- [start:resolve]
def _resolve(future: asyncio.Future[FetchResult], result: FetchResult) -> None:
    """Set the fetch's answer; runs on the event loop (scheduled by ``deliver``)."""
    if not future.done():  # the handler may have been cancelled meanwhile
        future.set_result(result)


# --8<-- [end:resolve]


async def serve(host: str, port: int) -> None:
    """Run a server until cancelled (Ctrl-C), then close it cleanly."""
    server = LongPollServer(host, port)
    bound_host, bound_port = await server.start()
    print(f"long-poll server on http://{bound_host}:{bound_port}/topics/<topic>", flush=True)
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
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the way to stop it
        asyncio.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
