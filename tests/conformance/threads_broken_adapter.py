"""Adapters that get the threads mode wrong in one way, for tests of its reports.

``python tests/conformance/threads_broken_adapter.py --bug BUG`` serves the reference
implementation (``python_adapter.serve``) and rewrites its answers:

- ``no-threads``: its ``init`` answers declare ``"capabilities": {"without":
  ["threads"]}`` (a port with no threads mode, declared);
- ``unknown``: answers every ``threads`` message ``{"error": ...}`` (an adapter written
  before the mode existed);
- ``no-return``: leaves ``return_ns`` out of the first call record of thread 0;
- ``twice``: reports the first ``on_complete`` of every history twice, at the same
  times (a port whose operation completes twice, deterministically: R16);
- ``hang``: never answers a ``threads`` message (a port whose threads deadlock).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import IO

from kpurgatory import reference
from kpurgatory.conformance.python_adapter import serve

BUGS = ("no-threads", "unknown", "no-return", "twice", "hang")


class _Rewriter:
    """A stdout that rewrites each JSON answer line with ``bug``'s change."""

    def __init__(self, out: IO[str], bug: str) -> None:
        self.out = out
        self.bug = bug

    def write(self, text: str) -> int:
        answer = json.loads(text)
        if "threads" in answer and self.bug == "hang":
            time.sleep(3600)  # the kit stops the adapter after its --timeout
        if "threads" in answer:
            answer = self._threads(answer)
        elif self.bug == "no-threads" and "state" in answer:
            answer["capabilities"] = {"without": ["threads"]}
        return self.out.write(json.dumps(answer) + "\n")

    def flush(self) -> None:
        self.out.flush()

    def _threads(self, answer: dict[str, object]) -> dict[str, object]:
        if self.bug == "unknown":
            return {"error": "unknown step kind 'threads'"}
        if self.bug == "no-return":
            first = answer["threads"][0]  # type: ignore[index]
            if first:
                del first[0]["return_ns"]
        if self.bug == "twice":
            callbacks = answer["callbacks"]
            assert isinstance(callbacks, list)
            for callback in callbacks:
                if callback["callback"] == "on_complete":
                    callbacks.append(dict(callback))
                    break
        return answer


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--bug BUG``; serves stdin to stdout until end of input."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bug", choices=BUGS, required=True)
    args = parser.parse_args(argv)
    serve(reference, sys.stdin, _Rewriter(sys.stdout, args.bug))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
