"""The Python implementations exposed as a conformance adapter (stdin steps, stdout observations).

``python -m kpurgatory.conformance.python_adapter --impl reference`` (or ``optimized``)
speaks the adapter protocol of docs/conformance.md: it reads one JSON step per line,
executes it with ``kpurgatory.conformance.driver.DriverSide`` (a ``Driver`` per run) on
the chosen implementation, and writes the observation as one JSON line. An ``init`` step
starts a new run. A line it cannot execute (bad JSON, an unknown step kind, a step that
does not fit the run) is answered with ``{"error": "<message>"}`` and the run carries on.

A ``threads`` message (the kit's threads mode) is run on real threads by
``kpurgatory.conformance.threads_adapter.answer_threads`` and answered with the calls'
times, results and callbacks.

It exists so that the protocol is exercised end to end by the Python implementations
themselves (CI runs ``kpurgatory conformance`` through it), and as a model for
porters: ``serve`` is the whole loop an adapter needs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import IO, Any, Protocol

from kpurgatory.conformance.driver import DriverSide, StepError
from kpurgatory.conformance.steps import step_from_json
from kpurgatory.conformance.threads_adapter import DEFAULT_YIELD_CHANCE, answer_threads

__all__ = ["IMPLEMENTATIONS", "LineSource", "main", "serve"]

IMPLEMENTATIONS: dict[str, str] = {
    "reference": "kpurgatory.reference",
    "optimized": "kpurgatory.optimized",
}
"""The ``--impl`` choices and the modules they load."""


class LineSource(Protocol):
    """Where ``serve`` reads steps: anything with ``readline`` ("" at end), like stdin."""

    def readline(self) -> str: ...


def serve(
    impl: ModuleType | Callable[[], ModuleType],
    stdin: LineSource,
    stdout: IO[str],
    *,
    yield_chance: float = DEFAULT_YIELD_CHANCE,
) -> int:
    """Answer steps from ``stdin`` on ``stdout`` until end of input; returns how many.

    ``impl`` is the implementation module (or a factory called at each ``init``, for
    implementations that keep state between runs). Each answer is flushed at once, so
    the client can send the next step only after reading this one. ``yield_chance``:
    how often a callback of a ``threads`` run yields its thread (a wider race window).
    """
    runs = DriverSide(impl)
    answered = 0

    def threads(message: dict[str, Any]) -> dict[str, object]:
        module = impl if isinstance(impl, ModuleType) else impl()
        return answer_threads(module, message, yield_chance=yield_chance)

    try:
        for line in iter(stdin.readline, ""):
            if not line.strip():
                continue
            stdout.write(json.dumps(_answer(runs, line, threads)) + "\n")
            stdout.flush()
            answered += 1
    finally:
        runs.close()
    return answered


def _answer(
    runs: DriverSide, line: str, threads: Callable[[dict[str, Any]], dict[str, object]]
) -> dict[str, object]:
    """The JSON answer to one input line: an observation, a ``threads`` answer, or
    ``{"error": ...}``."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return {"error": f"not JSON: {exc}"}
    if isinstance(data, dict) and data.get("step") == "threads":
        return threads(data)
    try:
        step = step_from_json(data)
    except (TypeError, ValueError) as exc:
        return {"error": str(exc)}
    try:
        return runs.execute(step).to_json()
    except StepError as exc:  # the step does not fit the run (no init yet, unknown label)
        return {"error": str(exc)}


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--impl reference|optimized``; serves stdin to stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m kpurgatory.conformance.python_adapter",
        description="Run a Python implementation as a conformance adapter (JSON lines).",
    )
    parser.add_argument("--impl", choices=sorted(IMPLEMENTATIONS), default="reference")
    parser.add_argument(
        "--yield-chance",
        type=float,
        default=DEFAULT_YIELD_CHANCE,
        help="threads mode: how often a callback yields its thread "
        f"(default {DEFAULT_YIELD_CHANCE})",
    )
    args = parser.parse_args(argv)
    if not 0.0 <= args.yield_chance <= 1.0:
        parser.error(f"--yield-chance must be between 0 and 1, not {args.yield_chance}")
    try:
        impl = importlib.import_module(IMPLEMENTATIONS[args.impl])
    except ImportError as exc:
        print(f"cannot import the {args.impl} implementation: {exc}", file=sys.stderr)
        return 2
    serve(impl, sys.stdin, sys.stdout, yield_chance=args.yield_chance)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
