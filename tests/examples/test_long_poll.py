"""The long-poll example server, tested over loopback with its real HTTP client.

The server runs on its own event loop in a background thread, with the purgatory on
the real clock and its reaper on (R31); clients are ``http.client`` connections to
127.0.0.1 from test threads. Every wait is bounded (socket timeouts, ``wait_until``),
so a broken server fails the test within seconds instead of hanging it. No test
asserts a duration: ordering is forced by waiting on the purgatory's own counters.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import pytest

from examples.long_poll_client import fetch, produce
from examples.long_poll_server import LongPollServer

pytestmark = pytest.mark.realtime

ROOT = Path(__file__).resolve().parents[2]
LONG_WAIT_MS = 30_000
"""A max_wait no test waits for: a fetch answered before it was answered by data."""
GUARD_S = 60.0
"""How long a test waits for what must happen before it fails: a bound for a broken run
only (a loaded machine, one of whose runs started a script in over 10 s, never meets it)."""


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = GUARD_S) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class Serving(Protocol):
    """What a long-poll example server offers the harness (both servers do)."""

    async def start(self) -> tuple[str, int]: ...

    async def close(self) -> None: ...


S = TypeVar("S", bound=Serving)


class RunningServer(Generic[S]):
    """A server made by ``make`` on a private event loop in a daemon thread.

    The server is built on that loop (the asyncio one needs a running loop)."""

    def __init__(self, make: Callable[[], S], name: str = "long-poll-test") -> None:
        self.address: tuple[str, int] = ("", 0)
        self.threads_before = set(threading.enumerate())
        self._make = make
        self._server: S | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def server(self) -> S:
        assert self._server is not None, "server not started"
        return self._server

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._server = self._make()
            try:
                self.address = await self._server.start()
            finally:
                self._ready.set()
            await self._stop.wait()
            await self._server.close()

        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced by start()/stop()
            self._error = exc
            self._ready.set()

    def start(self) -> None:
        self.thread.start()
        assert self._ready.wait(GUARD_S), "server did not start"
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Close the server and join its thread; idempotent."""
        if self.thread.is_alive() and self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)
        assert not self.thread.is_alive(), "server did not stop"
        if self._error is not None:
            raise self._error

    def fetch(self, topic: str, **params: Any) -> dict[str, Any]:
        return fetch(*self.address, topic, **params)

    def produce(self, topic: str, record: str) -> int:
        return produce(*self.address, topic, record)


Running = RunningServer[LongPollServer]
"""The threaded-purgatory server under test."""


@pytest.fixture
def running() -> Iterator[Running]:
    made = RunningServer(LongPollServer)
    made.start()
    try:
        yield made
    finally:
        made.stop()


def test_fetch_is_answered_by_data_before_its_timeout(
    running: Running,
) -> None:
    """A waiting fetch completes through check_and_complete when a produce arrives (R25)."""
    purgatory = running.server.fetches
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(running.fetch, "orders", max_wait_ms=LONG_WAIT_MS)
        wait_until(lambda: purgatory.num_delayed == 1, "the fetch to wait in the purgatory")
        assert purgatory.watched == 1
        assert running.produce("orders", "hello") == 0
        assert answer.result(GUARD_S) == {
            "records": ["hello"],
            "next_offset": 1,
            "timed_out": False,
        }
    assert purgatory.num_delayed == 0  # force_complete cancelled its timer entry (R28)
    assert purgatory.watched == 0  # check_and_complete unlinked it, dropping the key (R26)


def test_fetch_times_out_through_the_reaper(running: Running) -> None:
    """With no data, the reaper expires the fetch and it answers empty (R17, R31)."""
    assert running.fetch("quiet", max_wait_ms=100) == {
        "records": [],
        "next_offset": 0,
        "timed_out": True,
    }
    assert running.server.fetches.num_delayed == 0


def test_fetch_with_data_already_there_is_never_watched(
    running: Running,
) -> None:
    """Completed by the first try_complete: not watched, not timed (R23)."""
    running.produce("ready", "a")
    running.produce("ready", "b")
    answer = running.fetch("ready", offset=1, max_wait_ms=LONG_WAIT_MS)
    assert answer == {"records": ["b"], "next_offset": 2, "timed_out": False}
    assert running.server.fetches.watched == 0
    assert running.server.fetches.estimated_total_operations == 0


def test_min_bytes_holds_the_fetch_until_enough_arrived(
    running: Running,
) -> None:
    """check_and_complete leaves an operation whose condition is still false in place (R25)."""
    purgatory = running.server.fetches
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(running.fetch, "t", min_bytes=10, max_wait_ms=LONG_WAIT_MS)
        wait_until(lambda: purgatory.num_delayed == 1, "the fetch to wait")
        running.produce("t", "12345")
        assert purgatory.num_delayed == 1  # 5 bytes are not enough: still waiting
        assert not answer.done()
        running.produce("t", "678901")
        assert answer.result(GUARD_S) == {
            "records": ["12345", "678901"],
            "next_offset": 2,
            "timed_out": False,
        }


def clients_on_two_topics(running: Any, delayed: Callable[[], int]) -> None:
    """Eight fetches answered by one produce, four others expiring, all at once, on a
    running server (``fetch``, ``produce``) whose ``delayed()`` counts the waiting ones."""
    with ThreadPoolExecutor(12) as pool:
        served = [pool.submit(running.fetch, "hot", max_wait_ms=LONG_WAIT_MS) for _ in range(8)]
        wait_until(lambda: delayed() == 8, "eight fetches on 'hot' to wait")
        expiring = [pool.submit(running.fetch, "cold", max_wait_ms=150) for _ in range(4)]
        running.produce("hot", "news")
        for future in served:
            assert future.result(GUARD_S) == {
                "records": ["news"],
                "next_offset": 1,
                "timed_out": False,
            }
        for future in expiring:
            assert future.result(GUARD_S) == {"records": [], "next_offset": 0, "timed_out": True}
    wait_until(lambda: delayed() == 0, "the timer to be empty")


def test_concurrent_clients_on_two_topics(running: Running) -> None:
    """Eight fetches answered by one produce, four others expiring, all at once (R25, R17)."""
    purgatory = running.server.fetches
    clients_on_two_topics(running, lambda: purgatory.num_delayed)
    assert purgatory.num_completed >= 8  # the eight counted by check_and_complete


def test_close_answers_waiting_fetches(running: Running) -> None:
    """cancel_for_key takes them out (R29); force_complete answers them (R16)."""
    with ThreadPoolExecutor(2) as pool:
        waiting = [pool.submit(running.fetch, "idle", max_wait_ms=LONG_WAIT_MS) for _ in range(2)]
        wait_until(lambda: running.server.fetches.num_delayed == 2, "two fetches to wait")
        running.stop()
        for future in waiting:
            assert future.result(GUARD_S) == {"records": [], "next_offset": 0, "timed_out": True}
    assert running.server.fetches.num_delayed == 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"offset": -1}, "offset must be in"),
        ({"max_wait_ms": 10**9}, "max_wait_ms must be in"),
        ({"min_bytes": -5}, "min_bytes must be in"),
    ],
)
def test_bad_parameters_are_refused_with_their_name(
    running: Running, query: dict[str, int], message: str
) -> None:
    with pytest.raises(RuntimeError, match=f"HTTP 400: {message}"):
        running.fetch("x", **query)


def _default_ctrl_c() -> None:
    """In the child, before ``exec``: SIGINT back to its default. A shell starts a
    background job with SIGINT ignored, the child inherits that, and Python then installs
    no KeyboardInterrupt handler: the script would ignore the test's Ctrl-C (it did under
    a backgrounded mutation run, hanging to the guard)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def serves_and_stops_on_ctrl_c(command: list[str], banner: str, use: Callable[[str], None]) -> None:
    """Run ``command`` (from the repository root), read its first line (it must contain
    ``banner`` and the URL it serves on 127.0.0.1), call ``use(url)``, then send SIGINT
    and require exit code 0. Every wait is bounded by ``GUARD_S``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        preexec_fn=_default_ctrl_c,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", first)
        assert banner in first and found is not None, first
        use(found.group(0))
        process.send_signal(signal.SIGINT)
        assert process.wait(GUARD_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(GUARD_S)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def fetch_produced_through(url: str) -> None:
    """A long fetch on the server at ``url`` is answered by a produce (both scripts)."""
    port = int(url.rsplit(":", 1)[1])
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(fetch, "127.0.0.1", port, "cli", max_wait_ms=LONG_WAIT_MS)
        assert produce("127.0.0.1", port, "cli", "via the script") == 0
        assert answer.result(GUARD_S)["records"] == ["via the script"]


def test_the_script_serves_and_stops_on_ctrl_c() -> None:
    """``python examples/long_poll_server.py --port 0`` serves, and exits 0 on SIGINT."""
    script = str(ROOT / "examples" / "long_poll_server.py")
    serves_and_stops_on_ctrl_c(
        [sys.executable, script, "--port", "0"], "long-poll server on ", fetch_produced_through
    )
