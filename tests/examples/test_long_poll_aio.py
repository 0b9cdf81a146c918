"""The asyncio long-poll server (examples/long_poll_aio_server.py) over loopback.

As tests/examples/test_long_poll.py, with the purgatory on the event loop (R45-R50):
the server runs on a private loop in one test thread, clients are ``http.client``
connections (and raw sockets, to hang up mid-wait) from other test threads. Every wait
is bounded; ordering is forced by waiting on the purgatory's own counters; no test
asserts a duration.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from examples.long_poll_aio_server import AioLongPollServer
from tests.examples.test_long_poll import (
    GUARD_S,
    LONG_WAIT_MS,
    RunningServer,
    clients_on_two_topics,
    fetch_produced_through,
    serves_and_stops_on_ctrl_c,
    wait_until,
)

pytestmark = pytest.mark.realtime

ROOT = Path(__file__).resolve().parents[2]


class RunningAioServer(RunningServer[AioLongPollServer]):
    """An ``AioLongPollServer`` on a private event loop in a daemon thread."""

    def __init__(self) -> None:
        super().__init__(AioLongPollServer, "long-poll-aio-test")

    @property
    def delayed(self) -> int:
        delayed: int = self.server.fetches.purgatory.num_delayed
        return delayed

    @property
    def watched(self) -> int:
        watched: int = self.server.fetches.purgatory.watched
        return watched


@pytest.fixture
def running() -> Iterator[RunningAioServer]:
    made = RunningAioServer()
    made.start()
    try:
        yield made
    finally:
        made.stop()


def test_r45_no_thread_but_the_loop_while_fetches_wait(running: RunningAioServer) -> None:
    """R45: waiting fetches, expiries and completions add no thread to the process."""
    with ThreadPoolExecutor(2) as pool:
        clients = set(threading.enumerate())
        answers = [pool.submit(running.fetch, "t", max_wait_ms=LONG_WAIT_MS) for _ in range(2)]
        wait_until(lambda: running.delayed == 2, "two fetches to wait")
        assert running.fetch("t2", max_wait_ms=50)["timed_out"] is True  # expired on the loop
        server_threads = set(threading.enumerate()) - clients - set(pool._threads)
        assert server_threads <= {running.thread}
        running.produce("t", "x")
        for answer in answers:
            assert answer.result(GUARD_S) == {
                "records": ["x"],
                "next_offset": 1,
                "timed_out": False,
            }


def test_r46_fetch_answered_by_data_and_counters_drop(running: RunningAioServer) -> None:
    """R46, R25: a produce completes the waiting fetch on the loop."""
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(running.fetch, "orders", max_wait_ms=LONG_WAIT_MS)
        wait_until(lambda: running.delayed == 1, "the fetch to wait")
        assert running.produce("orders", "hello") == 0
        assert answer.result(GUARD_S) == {
            "records": ["hello"],
            "next_offset": 1,
            "timed_out": False,
        }
    assert (running.delayed, running.watched) == (0, 0)


def test_r45_fetch_times_out_through_the_loop_driver(running: RunningAioServer) -> None:
    """R45, R17: no reaper: the call_at driver expires the fetch."""
    assert running.fetch("quiet", max_wait_ms=100) == {
        "records": [],
        "next_offset": 0,
        "timed_out": True,
    }
    assert running.delayed == 0


def test_r47_a_client_hanging_up_mid_wait_abandons_its_fetch(running: RunningAioServer) -> None:
    """R47: the connection's EOF cancels the wait: unwatched and untimed at once."""
    request = b"GET /topics/gone?max_wait_ms=30000 HTTP/1.1\r\nHost: x\r\n\r\n"
    with ThreadPoolExecutor(1) as pool:
        staying = pool.submit(running.fetch, "gone", max_wait_ms=LONG_WAIT_MS)
        for _ in range(3):
            client = socket.create_connection(running.address, timeout=GUARD_S)
            client.sendall(request)
            wait_until(lambda: running.delayed == 2, "the raw fetch to wait")
            client.close()  # hang up mid-wait
            wait_until(lambda: running.delayed == 1, "the hung-up fetch to be abandoned")
            assert running.watched == 1
        assert running.produce("gone", "late") == 0  # completes only the client still there
        assert staying.result(GUARD_S)["records"] == ["late"]
    assert (running.delayed, running.watched) == (0, 0)
    assert running.server.fetches.waiting == 0


def test_r49_shutdown_answers_every_waiting_fetch(running: RunningAioServer) -> None:
    """R49: close shuts the purgatory down; every waiter is answered with what it has."""
    running.produce("partial", "abc")
    with ThreadPoolExecutor(3) as pool:
        idle = [pool.submit(running.fetch, "idle", max_wait_ms=LONG_WAIT_MS) for _ in range(2)]
        short = pool.submit(running.fetch, "partial", min_bytes=10, max_wait_ms=LONG_WAIT_MS)
        wait_until(lambda: running.delayed == 3, "three fetches to wait")
        running.stop()
        for answer in idle:
            assert answer.result(GUARD_S) == {"records": [], "next_offset": 0, "timed_out": True}
        assert short.result(GUARD_S) == {"records": ["abc"], "next_offset": 1, "timed_out": True}
    assert running.delayed == 0


def test_r46_concurrent_clients_on_two_topics(running: RunningAioServer) -> None:
    """Eight fetches answered by one produce, four others expiring, all at once."""
    clients_on_two_topics(running, lambda: running.delayed)


def test_the_aio_script_serves_and_stops_on_ctrl_c() -> None:
    """``python -m examples.long_poll_aio_server --port 0`` serves, and exits 0 on SIGINT."""
    serves_and_stops_on_ctrl_c(
        [sys.executable, "-m", "examples.long_poll_aio_server", "--port", "0"],
        "long-poll server (asyncio) on ",
        fetch_produced_through,
    )
