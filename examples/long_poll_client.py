"""A blocking client for ``long_poll_server.py``: plain ``http.client``, one request per call.

``produce`` appends a record; ``fetch`` long-polls and returns the server's JSON
answer. Both raise ``RuntimeError`` with the server's message on an HTTP error. The
socket timeout bounds every call, so a server that never answers fails the caller
instead of hanging it.

Run ``python examples/long_poll_client.py fetch orders --max-wait-ms 5000`` in one
terminal and ``python examples/long_poll_client.py produce orders hello`` in another.
"""

from __future__ import annotations

import argparse
import http.client
import json
from typing import Any
from urllib.parse import quote, urlencode

__all__ = ["fetch", "main", "produce"]


def _request(
    host: str, port: int, method: str, path: str, body: bytes | None, timeout_s: float
) -> dict[str, Any]:
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        payload: dict[str, Any] = json.loads(response.read())
    finally:
        connection.close()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: HTTP {response.status}: {payload.get('error')}")
    return payload


# --8<-- [start:client]
def produce(host: str, port: int, topic: str, record: str, timeout_s: float = 10.0) -> int:
    """Append ``record`` to ``topic``; return its offset."""
    path = f"/topics/{quote(topic, safe='')}"
    answer = _request(host, port, "POST", path, record.encode(), timeout_s)
    return int(answer["offset"])


def fetch(
    host: str,
    port: int,
    topic: str,
    offset: int = 0,
    min_bytes: int = 1,
    max_wait_ms: int = 500,
    timeout_s: float = 10.0,
) -> dict[str, Any]:
    """Long-poll ``topic`` from ``offset``: ``{"records", "next_offset", "timed_out"}``."""
    query = urlencode({"offset": offset, "min_bytes": min_bytes, "max_wait_ms": max_wait_ms})
    path = f"/topics/{quote(topic, safe='')}?{query}"
    return _request(host, port, "GET", path, None, timeout_s)


# --8<-- [end:client]


def main(argv: list[str] | None = None) -> int:
    """Command line: ``produce TOPIC RECORD`` or ``fetch TOPIC [--offset N ...]``."""
    parser = argparse.ArgumentParser(description="client for examples/long_poll_server.py")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    commands = parser.add_subparsers(dest="command", required=True)
    produce_cmd = commands.add_parser("produce")
    produce_cmd.add_argument("topic")
    produce_cmd.add_argument("record")
    fetch_cmd = commands.add_parser("fetch")
    fetch_cmd.add_argument("topic")
    fetch_cmd.add_argument("--offset", type=int, default=0)
    fetch_cmd.add_argument("--min-bytes", type=int, default=1)
    fetch_cmd.add_argument("--max-wait-ms", type=int, default=500)
    args = parser.parse_args(argv)
    if args.command == "produce":
        print(produce(args.host, args.port, args.topic, args.record))
    else:
        timeout_s = args.max_wait_ms / 1000 + 10
        answer = fetch(
            args.host,
            args.port,
            args.topic,
            args.offset,
            args.min_bytes,
            args.max_wait_ms,
            timeout_s,
        )
        print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
