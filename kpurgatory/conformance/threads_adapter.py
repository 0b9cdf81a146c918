"""The Python implementations' answer to a ``threads`` message (the adapter side).

``answer_threads`` runs the message's program on real threads with the history
package's recorder (``kpurgatory.history.recorder.record``: one shared purgatory on a
``ManualClock`` and an ``InlineExecutor``, the threads started at a barrier, a 1 µs
switch interval) on the implementation module the adapter serves, and writes what it
recorded in the protocol's answer shape: what a port's adapter writes
(docs/conformance.md, "Checking a port on real threads"). It is the honest adapter the
kit's threads mode is tested with, and what the port-bug catalogue's concurrent plants
are served through.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from kpurgatory.conformance.threads_protocol import (
    CALLBACK_NAMES,
    CLEANUP,
    call_from_json,
    label,
    program_from_json,
)
from kpurgatory.history.history import History, Point, Result
from kpurgatory.history.program import cleanup_calls
from kpurgatory.history.recorder import implementation_of, record

__all__ = ["DEFAULT_YIELD_CHANCE", "answer_threads"]

DEFAULT_YIELD_CHANCE = 0.3
"""How often a callback yields its thread between start and end (a wider race window)."""

_NAMES = {short: name for name, short in CALLBACK_NAMES.items()}


def answer_threads(
    module: ModuleType,
    message: Mapping[str, Any],
    *,
    yield_chance: float = DEFAULT_YIELD_CHANCE,
    timeout_s: float = 10.0,
) -> dict[str, object]:
    """The answer to one ``threads`` message, run on ``module``'s classes;
    ``{"error": ...}`` for a message that is not a program."""
    try:
        program = program_from_json(message)
        cleanup = message.get("cleanup")
        if not isinstance(cleanup, list):
            raise ValueError("cleanup: expected a list of calls")
        given = tuple(call_from_json(call, f"cleanup[{i}]") for i, call in enumerate(cleanup))
        if given != cleanup_calls(program):
            raise ValueError("cleanup: expected the clean-up calls the protocol defines")
        seed, serial = message.get("seed", 0), message.get("serial", False)
        if type(seed) is not int or type(serial) is not bool:
            raise ValueError("seed must be an integer and serial true or false")
    except ValueError as exc:
        return {"error": f"not a threads message: {exc}"}
    impl = implementation_of(module, module.__name__)
    history = record(
        program, impl, seed=seed, serial=serial, yield_chance=yield_chance, timeout_s=timeout_s
    )
    return _answer(history)


def _answer(history: History) -> dict[str, object]:
    count = len(history.program.threads)
    threads: list[list[dict[str, object]]] = []
    callbacks: list[dict[str, object]] = []
    for thread, points in enumerate(history.points):
        name: int | str = thread if thread < count else CLEANUP
        threads.append(_calls(points))
        callbacks += _callbacks(points, name)
    answer: dict[str, object] = {
        "threads": threads[:count],
        "cleanup": threads[count] if len(threads) > count else [],
        "callbacks": callbacks,
    }
    if history.hung:
        answer["hung"] = list(history.hung)
        answer["final"] = None
        return answer
    final = history.final
    assert final is not None
    answer["final"] = {
        "watched": final.watched,
        "watched_keys": final.watched_keys,
        "num_delayed": final.num_delayed,
        "outcomes": {label(op): outcome for op, outcome in enumerate(final.outcomes)},
    }
    return answer


def _value(result: Result) -> tuple[object, object]:
    """(result, raised) of a recorded result."""
    if isinstance(result, str):
        return None, result.removeprefix("raised ")
    if isinstance(result, tuple):
        return [label(op) for op in result], None
    return result, None


def _calls(points: tuple[Point, ...]) -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for point in points:
        if point.kind == "call":
            records.append({"invoke_ns": point.lo, "return_ns": None})
        elif point.kind == "return":
            result, raised = _value(point.value)
            records[-1].update(return_ns=point.lo, result=result, raised=raised)
    return records


def _callbacks(points: tuple[Point, ...], thread: int | str) -> list[dict[str, object]]:
    """Each callback's record: a start point matched with the end point that closes it."""
    out: list[dict[str, object]] = []
    open_: list[dict[str, object]] = []
    for point in points:
        if point.kind in _NAMES:
            record: dict[str, object] = {
                "thread": thread,
                "operation": label(point.op),
                "callback": _NAMES[point.kind],
                "start_ns": point.lo,
            }
            if point.kind == "tc":
                record["ready"] = point.value
                record["read_ns"] = point.hi  # the recorder's time just after the read
            out.append(record)
            open_.append(record)
        elif point.kind.endswith("-end"):
            record = open_.pop()
            record["end_ns"] = point.lo
            if point.kind == "tc-end":
                record["returned"] = point.value
    for record in open_:  # a hung thread's callback that never ended
        record["end_ns"] = record["start_ns"]
    return out
