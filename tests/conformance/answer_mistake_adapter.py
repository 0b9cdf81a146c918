"""The reference served through an adapter that makes one answer mistake a porter's adapter makes.

``python tests/conformance/answer_mistake_adapter.py --mistake NAME`` speaks the adapter
protocol (docs/conformance.md) with the reference's answers, rewritten in one way:

- ``nil-slices``: every empty list and empty object of an answer is sent as null, what
  Go's encoding/json does with a nil slice or a nil map (``events``, ``tries``, and a
  ``cancel_for_key`` result that found nothing);
- ``no-raised``: the ``raised`` field is left out;
- ``string-clock``: ``state.clock_ms`` is sent as a string;
- ``float-at-ms``: each event's ``at_ms`` is sent as a float (``5.0``);
- ``null-sizes``: ``state.timer_sizes`` is null, without declaring the port lacks ``size``;
- ``sizes-absent``: declares ``"without": ["size"]`` at init and answers
  ``timer_sizes`` null, or a null per timer: allowed, the sizes are not compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import IO, Any

from kpurgatory import reference
from kpurgatory.conformance.python_adapter import serve

Answer = dict[str, Any]


def _nil_slices(answer: Answer) -> Answer:
    def nil(value: Any) -> Any:
        if value == [] or value == {}:
            return None
        if isinstance(value, list):
            return [nil(item) for item in value]
        if isinstance(value, dict):
            return {key: nil(item) for key, item in value.items()}
        return value

    return {name: (nil(value) if name != "state" else value) for name, value in answer.items()}


def _no_raised(answer: Answer) -> Answer:
    return {name: value for name, value in answer.items() if name != "raised"}


def _string_clock(answer: Answer) -> Answer:
    return {**answer, "state": {**answer["state"], "clock_ms": str(answer["state"]["clock_ms"])}}


def _float_at_ms(answer: Answer) -> Answer:
    events = [{**event, "at_ms": float(event["at_ms"])} for event in answer["events"]]
    return {**answer, "events": events}


def _null_sizes(answer: Answer) -> Answer:
    return {**answer, "state": {**answer["state"], "timer_sizes": None}}


def _sizes_absent(answer: Answer) -> Answer:
    sizes = answer["state"]["timer_sizes"]
    absent = {label: None for label in sizes} if len(sizes) > 1 else None
    answer = {**answer, "state": {**answer["state"], "timer_sizes": absent}}
    if "capabilities" in answer or answer.get("_init"):
        answer["capabilities"] = {"without": ["size"]}
    return answer


MISTAKES: dict[str, Callable[[Answer], Answer]] = {
    "nil-slices": _nil_slices,
    "no-raised": _no_raised,
    "string-clock": _string_clock,
    "float-at-ms": _float_at_ms,
    "null-sizes": _null_sizes,
    "sizes-absent": _sizes_absent,
}


class _Rewriter:
    """stdout that rewrites each answer line ``serve`` writes; the first answer of a run
    (an ``init``'s) is marked so that a mistake may add capabilities to it."""

    def __init__(self, inner: IO[str], mistake: Callable[[Answer], Answer], steps: IO[str]) -> None:
        self.inner, self.mistake, self.steps = inner, mistake, steps
        self.init_pending = False

    def readline(self) -> str:
        """The next step line; notes whether it is an init."""
        line = self.steps.readline()
        try:
            self.init_pending = json.loads(line).get("step") == "init"
        except (json.JSONDecodeError, AttributeError):
            self.init_pending = False
        return line

    def write(self, text: str) -> int:
        """Rewrite one answer line (``serve`` writes each line whole)."""
        answer = json.loads(text)
        if "error" not in answer:
            if self.init_pending:
                answer["_init"] = True
            answer = self.mistake(answer)
            answer.pop("_init", None)
        return self.inner.write(json.dumps(answer) + "\n")

    def flush(self) -> None:
        """Flush the real stdout."""
        self.inner.flush()


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--mistake NAME``; serves stdin to stdout until end of input."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mistake", choices=sorted(MISTAKES), required=True)
    args = parser.parse_args(argv)
    rewriter = _Rewriter(sys.stdout, MISTAKES[args.mistake], sys.stdin)
    serve(reference, rewriter, rewriter)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
