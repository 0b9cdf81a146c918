"""The threads mode's messages: a program out to a port's adapter, a history back.

The kit sends one ``threads`` message per history: the operations (label, delay,
keys), one call list per thread and the clean-up calls (``program_message``). The
adapter runs the threads at once against one shared purgatory and timer and answers
with each call's monotonic invoke and return times, its result or raised error, the
callbacks it ran (operation, callback, thread, start and end times) and the state
once the clean-up was done. ``history_from_answer`` turns that answer into the
``kpurgatory.history`` format the model and the search check, and refuses a
malformed answer with a ``ThreadsAnswerError`` that names the field, shows what was
got and says what was expected (a porter never sees a Python exception).

The call names are the step language's (``watch`` is ``try_complete_else_watch``);
``CALL_NAMES`` maps the history package's call kinds onto them. docs/conformance.md,
"Checking a port on real threads", is the contract for porters.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kpurgatory.history.history import Final, History, Point, Result
from kpurgatory.history.program import Call, OpSpec, Program, cleanup_calls

__all__ = [
    "CALLBACK_NAMES",
    "CALL_NAMES",
    "CLEANUP",
    "FORMAT",
    "MAX_PLACEMENTS",
    "AmbiguousAnswerError",
    "ThreadsAnswerError",
    "call_from_json",
    "call_to_json",
    "histories_from_answer",
    "history_from_answer",
    "program_from_json",
    "program_message",
    "program_to_json",
]

FORMAT = "kpurgatory-threads/1"
"""The ``format`` of a saved program (a replay file)."""

CALL_NAMES: dict[str, str] = {
    "submit": "watch",
    "set_ready": "set_ready",
    "check": "check_and_complete",
    "cancel_for_key": "cancel_for_key",
    "advance": "purgatory_advance",
    "force": "force_complete",
    "abandon": "abandon",
    "safe_try": "safe_try_complete",
    "maybe_try": "maybe_try_complete",
}
"""The history package's call kinds and the names a ``threads`` message gives them."""

_KINDS = {name: kind for kind, name in CALL_NAMES.items()}

CALLBACK_NAMES = {"try_complete": "tc", "on_complete": "oc", "on_expiration": "oe"}
"""The callbacks an answer reports, and the history's point kinds for their start."""

CLEANUP = "cleanup"
"""The ``thread`` of a callback run by a clean-up call (on the adapter's main thread)."""

RAISED = ("ValueError", "TypeError", "RuntimeError")
"""The errors a call may raise (docs/conformance.md, "Exceptions and crashes")."""

OUTCOMES = ("pending", "completed", "abandoned")


def label(op: int) -> str:
    """The label of operation ``op`` in messages: ``op0``, ``op1``, ..."""
    return f"op{op}"


def call_to_json(call: Call) -> dict[str, object]:
    """One call as a ``threads`` message writes it."""
    data: dict[str, object] = {"call": CALL_NAMES[call.kind]}
    if call.kind in ("check", "cancel_for_key"):
        data["key"] = call.key
    elif call.kind == "advance":
        data["ms"] = call.ms
    elif call.kind != "advance":
        data["operation"] = label(call.op)
    return data


def call_from_json(data: object, where: str) -> Call:
    """The call a message wrote (``ValueError`` naming ``where``)."""
    if (
        not isinstance(data, Mapping)
        or not isinstance(data.get("call"), str)
        or data["call"] not in _KINDS
    ):
        raise ValueError(f"{where}: expected a call with 'call' one of {sorted(_KINDS)}")
    kind = _KINDS[data["call"]]
    if kind in ("check", "cancel_for_key"):
        return Call(kind, key=str(data.get("key", "")))
    if kind == "advance":
        ms = data.get("ms")
        if type(ms) is not int or ms < 0:
            raise ValueError(f"{where}.ms: expected an integer >= 0")
        return Call(kind, ms=ms)
    name = data.get("operation")
    if not isinstance(name, str) or not name.startswith("op") or not name[2:].isdigit():
        raise ValueError(f"{where}.operation: expected a label op0, op1, ...")
    return Call(kind, op=int(name[2:]))


def program_to_json(program: Program) -> dict[str, object]:
    """The program part of a ``threads`` message (and of a replay file)."""
    return {
        "keys": list(program.keys),
        "ops": [
            {
                "operation": label(index),
                "delay_ms": spec.delay_ms,
                "keys": list(spec.keys),
                "owner": spec.owner,
            }
            for index, spec in enumerate(program.ops)
        ],
        "threads": [[call_to_json(call) for call in calls] for calls in program.threads],
    }


def program_from_json(data: object) -> Program:
    """The program a replay file holds; ``ValueError`` naming the field."""
    if not isinstance(data, Mapping):
        raise ValueError("program: expected a JSON object")
    keys = data.get("keys")
    ops = data.get("ops")
    threads = data.get("threads")
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise ValueError("program.keys: expected a list of strings")
    if not isinstance(ops, list) or not isinstance(threads, list):
        raise ValueError("program.ops and program.threads: expected lists")
    specs = []
    for index, op in enumerate(ops):
        if not isinstance(op, Mapping) or op.get("operation") != label(index):
            raise ValueError(f"program.ops[{index}]: expected the operation {label(index)}")
        delay, op_keys, owner = op.get("delay_ms"), op.get("keys"), op.get("owner", 0)
        if type(delay) is not int or type(owner) is not int or not isinstance(op_keys, list):
            raise ValueError(f"program.ops[{index}]: delay_ms, owner: integers; keys: a list")
        specs.append(OpSpec(delay, tuple(str(key) for key in op_keys), owner))
    calls = []
    for number, thread in enumerate(threads):
        if not isinstance(thread, list):
            raise ValueError(f"program.threads[{number}]: expected a list of calls")
        calls.append(
            tuple(
                call_from_json(call, f"program.threads[{number}][{index}]")
                for index, call in enumerate(thread)
            )
        )
    return Program(tuple(specs), tuple(keys), tuple(calls))


def program_message(program: Program, history: int, seed: int, *, serial: bool) -> dict[str, Any]:
    """The ``threads`` message for one history of ``program``."""
    return {
        "step": "threads",
        "history": history,
        "seed": seed,
        "serial": serial,
        **program_to_json(program),
        "cleanup": [call_to_json(call) for call in cleanup_calls(program)],
    }


class ThreadsAnswerError(ValueError):
    """A ``threads`` answer that is not a history: names the field, what was got and
    what was expected."""


class AmbiguousAnswerError(ThreadsAnswerError):
    """A well-formed answer whose callbacks on a library's thread fit too many
    placements to search each: its history counts as undecided, never a pass."""


MAX_PLACEMENTS = 16
"""The most ways to place a library thread's callbacks that one answer is searched in."""


@dataclass(frozen=True)
class _Callback:
    thread: int
    call: int
    kind: str  # tc, oc, oe
    op: int
    start: int
    end: int
    ready: bool
    returned: bool
    read: int  # try_complete: by when it had read its flag


def _clip(value: object, limit: int = 200) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _bad(field: str, got: object, expected: str) -> ThreadsAnswerError:
    return ThreadsAnswerError(f"{field}: got {_clip(got)}, expected {expected}")


def _missing(data: Mapping[str, Any], name: str, where: str, expected: str) -> None:
    """``ThreadsAnswerError`` if ``data`` lacks ``name``: it shows the object got."""
    if name not in data:
        raise ThreadsAnswerError(
            f"{where}.{name}: missing from {_clip(dict(data))}, expected {expected}"
        )


def _int(data: Mapping[str, Any], name: str, where: str) -> int:
    _missing(data, name, where, "an integer >= 0 (monotonic nanoseconds)")
    value = data.get(name)
    if type(value) is not int or value < 0:
        raise _bad(f"{where}.{name}", value, "an integer >= 0 (monotonic nanoseconds)")
    return value


def _result(call: Call, record: Mapping[str, Any], where: str, ops: int) -> Result:
    """The call's result in the history's terms: a value, or ``raised <Name>``."""
    raised = record.get("raised")
    if raised is not None:
        if raised not in RAISED:
            raise _bad(f"{where}.raised", raised, f"null or one of {', '.join(RAISED)}")
        return f"raised {raised}"
    _missing(record, "result", where, "the call's result (null if it returns nothing)")
    value = record.get("result")
    kind = call.kind
    if kind in ("set_ready", "advance"):
        if value is not None:
            raise _bad(f"{where}.result", value, f"null ({CALL_NAMES[kind]} returns nothing)")
        return None
    if kind == "check":
        if type(value) is not int or value < 0:
            raise _bad(f"{where}.result", value, "the number of operations it completed")
        return value
    if kind == "cancel_for_key":
        if not isinstance(value, list) or not all(
            isinstance(name, str) and name[2:].isdigit() and int(name[2:]) < ops for name in value
        ):
            raise _bad(f"{where}.result", value, 'a list of operation labels, e.g. ["op0"]')
        return tuple(int(name[2:]) for name in value)
    if type(value) is not bool:
        raise _bad(f"{where}.result", value, "true or false")
    return value


def history_from_answer(program: Program, answer: object, implementation: str) -> History:
    """The one history an answer records (``ThreadsAnswerError`` if its callbacks on a
    library's thread leave several ways to place them: see ``histories_from_answer``)."""
    histories = histories_from_answer(program, answer, implementation)
    if len(histories) != 1:
        raise AmbiguousAnswerError(f"the answer fits {len(histories)} histories, not one")
    return histories[0]


def histories_from_answer(program: Program, answer: object, implementation: str) -> list[History]:
    """The histories an adapter's answer to ``program_message(program, ...)`` may record.

    Each call becomes a ``call`` and a ``return`` point at its invoke and return times;
    each callback a start point (``tc`` with the flag it read, somewhere between its
    start and end) and an end point (``tc``'s with what it returned), placed in the call
    of its thread whose times enclose it. The callbacks one operation ran on a thread
    the program does not name (a library's executor: its expiry) go in a call in flight
    around them that can hand an expiry over (``watch``, ``purgatory_advance``); where
    several can, there is one history per choice (at most ``MAX_PLACEMENTS``, else
    ``AmbiguousAnswerError``), and the answer is explained if any of them is.
    ``ThreadsAnswerError`` if the answer is malformed or a callback fits no call."""
    if not isinstance(answer, Mapping):
        raise _bad("answer", answer, "a JSON object with threads, cleanup, callbacks, final")
    if set(answer) == {"error"}:
        error = str(answer["error"])
        hint = (
            ""
            if error.startswith("crash")
            else " (an adapter with no threads mode declares it in its init answer: "
            '"capabilities": {"without": ["threads"]})'
        )
        raise ThreadsAnswerError(f"the adapter reported an error: {error}{hint}")
    calls = (*program.threads, cleanup_calls(program))
    hung = _hung(answer, len(program.threads))
    records = _records(program, answer, calls, hung)
    placed, groups = _callbacks(answer, records, calls, len(program.ops))
    choices = 1
    for _, candidates in groups:
        choices *= len(candidates)
    if choices > MAX_PLACEMENTS:
        raise AmbiguousAnswerError(
            f"the callbacks on the library's threads fit {choices} placements in the calls "
            f"in flight around them (more than {MAX_PLACEMENTS})"
        )
    final = None if hung else _final(answer, len(program.ops))
    histories = []
    misfit: ThreadsAnswerError | None = None
    for choice in itertools.product(*(candidates for _, candidates in groups)):
        callbacks = list(placed)
        for (members, _), (owner, call) in zip(groups, choice, strict=True):
            callbacks += [replace(member, thread=owner, call=call) for member in members]
        try:
            points = tuple(
                _thread_points(thread, calls[thread], records[thread], callbacks)
                for thread in range(len(calls))
            )
        except ThreadsAnswerError as exc:  # a placement that overlaps the call's own
            misfit = exc
            continue
        if hung:  # no clean-up ran
            histories.append(History(program, implementation, calls[:-1], points[:-1], None, hung))
        else:
            histories.append(History(program, implementation, calls, points, final))
    if not histories:
        assert misfit is not None
        raise misfit
    return histories


def _hung(answer: Mapping[str, Any], count: int) -> tuple[int, ...]:
    hung = answer.get("hung", [])
    if not isinstance(hung, list) or not all(type(t) is int and 0 <= t < count for t in hung):
        raise _bad("hung", hung, f"a list of thread indices 0..{count - 1} (or absent)")
    return tuple(sorted(set(hung)))


_Record = tuple[int, int, Result]  # invoke, return (-1: hung), result


def _records(
    program: Program,
    answer: Mapping[str, Any],
    calls: tuple[tuple[Call, ...], ...],
    hung: tuple[int, ...],
) -> list[list[_Record]]:
    threads = answer.get("threads")
    if not isinstance(threads, list) or len(threads) != len(program.threads):
        raise _bad("threads", threads, f"a list of {len(program.threads)} lists, one per thread")
    cleanup = answer.get("cleanup")
    if hung:
        cleanup = []
    elif not isinstance(cleanup, list) or len(cleanup) != len(calls[-1]):
        raise _bad("cleanup", cleanup, f"a list of {len(calls[-1])} call records")
    out: list[list[_Record]] = []
    for thread, given in enumerate((*threads, cleanup)):
        name = f"threads[{thread}]" if thread < len(program.threads) else "cleanup"
        expected = len(calls[thread]) if thread not in hung and name != "cleanup" else None
        if not isinstance(given, list) or (expected is not None and len(given) != expected):
            raise _bad(name, given, f"a list of {len(calls[thread])} call records, one per call")
        if len(given) > len(calls[thread]):
            raise _bad(name, given, f"at most {len(calls[thread])} call records")
        mine: list[_Record] = []
        previous = -1
        for index, record in enumerate(given):
            where = f"{name}[{index}]"
            if not isinstance(record, Mapping):
                raise _bad(where, record, "an object with invoke_ns, return_ns, result, raised")
            invoke = _int(record, "invoke_ns", where)
            if invoke < previous:
                raise _bad(
                    f"{where}.invoke_ns",
                    invoke,
                    f">= the previous call's return_ns "
                    f"({previous}): a thread's calls run one after another",
                )
            back = record.get("return_ns")
            if back is None and thread in hung and index == len(given) - 1:
                mine.append((invoke, -1, None))  # the call that never returned
                break
            back = _int(record, "return_ns", where)
            if back < invoke:
                raise _bad(f"{where}.return_ns", back, f">= invoke_ns ({invoke})")
            mine.append(
                (invoke, back, _result(calls[thread][index], record, where, len(program.ops)))
            )
            previous = back
        out.append(mine)
    return out


def _callbacks(
    answer: Mapping[str, Any],
    records: list[list[_Record]],
    calls: tuple[tuple[Call, ...], ...],
    ops: int,
) -> tuple[list[_Callback], list[tuple[list[_Callback], list[tuple[int, int]]]]]:
    """The callbacks placed in their call, and the groups (one operation's callbacks on
    one library thread) with the calls each group may belong to."""
    threads = len(calls) - 1
    given = answer.get("callbacks")
    if not isinstance(given, list):
        raise _bad("callbacks", given, "a list of callback records (empty if none ran)")
    out = []
    groups: dict[tuple[str, int], tuple[list[_Callback], list[tuple[int, int]]]] = {}
    for index, record in enumerate(given):
        where = f"callbacks[{index}]"
        if not isinstance(record, Mapping):
            raise _bad(
                where, record, "an object with thread, operation, callback, start_ns, end_ns"
            )
        name = record.get("callback")
        if not isinstance(name, str) or name not in CALLBACK_NAMES:
            raise _bad(f"{where}.callback", name, f"one of {', '.join(CALLBACK_NAMES)}")
        op_label = record.get("operation")
        if not (
            isinstance(op_label, str)
            and op_label[2:].isdigit()
            and int(op_label[2:]) < ops
            and op_label == label(int(op_label[2:]))
        ):
            raise _bad(f"{where}.operation", op_label, f"an operation label op0..op{ops - 1}")
        start, end = _int(record, "start_ns", where), _int(record, "end_ns", where)
        if end < start:
            raise _bad(f"{where}.end_ns", end, f">= start_ns ({start})")
        ready: object = False
        returned: object = False
        read = start
        if name == "try_complete":
            ready, returned = record.get("ready"), record.get("returned")
            if type(ready) is not bool:
                raise _bad(f"{where}.ready", ready, "true or false: the flag try_complete read")
            read = record.get("read_ns", end)
            if type(read) is not int or not start <= read <= end:
                raise _bad(
                    f"{where}.read_ns",
                    read,
                    f"absent, or the time just after try_complete read its flag, between "
                    f"start_ns ({start}) and end_ns ({end})",
                )
            if type(returned) is not bool:
                raise _bad(
                    f"{where}.returned", returned, "true or false: what try_complete returned"
                )
        thread = record.get("thread")
        candidates = _owners(thread, threads, records, start, end, where)
        op = int(op_label[2:])
        library = isinstance(thread, str) and thread != CLEANUP
        if library:
            candidates = [
                (owner, call)
                for owner, call in candidates
                if calls[owner][call].kind in ("submit", "advance")
            ]
        if not candidates or (len(candidates) > 1 and not library):
            place = "no call" if not candidates else "calls of several threads"
            hands = " that can hand an expiry over (watch, purgatory_advance)" if library else ""
            raise _bad(
                f"{where}.thread",
                thread,
                f"a thread with a call{hands} in flight from start_ns to end_ns "
                f"({start}..{end}); {place} enclose it",
            )
        callback = _Callback(
            -1,
            -1,
            CALLBACK_NAMES[name],
            op,
            start,
            end,
            bool(ready),
            bool(returned),
            read,
        )
        if not library:
            owner, call = candidates[0]
            out.append(replace(callback, thread=owner, call=call))
            continue
        members, fits = groups.setdefault((str(thread), op), ([], candidates))
        members.append(callback)
        fits[:] = [pair for pair in fits if pair in candidates]
        if not fits:
            raise _bad(
                f"{where}.thread",
                thread,
                f"the callbacks of {op_label} on this thread to be in one call in flight "
                f"around them all (an expiry runs in one call)",
            )
    return out, list(groups.values())


def _owners(
    thread: object,
    threads: int,
    records: list[list[_Record]],
    start: int,
    end: int,
    where: str,
) -> list[tuple[int, int]]:
    """(thread, call) pairs whose call encloses [start, end]: on ``thread`` if it names a
    program thread (an index) or the clean-up; on any thread for another name."""
    if thread == CLEANUP:
        pool: Sequence[int] = (threads,)
    elif type(thread) is int:
        if not 0 <= thread < threads:
            raise _bad(
                f"{where}.thread",
                thread,
                f"a thread index 0..{threads - 1}, "
                f'"{CLEANUP}", or the name of a thread the library owns',
            )
        pool = (thread,)
    elif isinstance(thread, str) and thread:
        pool = range(threads + 1)
    else:
        raise _bad(f"{where}.thread", thread, f'a thread index, "{CLEANUP}" or a thread name')
    found = []
    for index in pool:
        for number, (invoke, back, _) in enumerate(records[index]):
            if invoke <= start and (back < 0 or end <= back):
                found.append((index, number))
    return found


def _thread_points(
    thread: int, calls: tuple[Call, ...], records: list[_Record], callbacks: list[_Callback]
) -> tuple[Point, ...]:
    """The points of one thread in the order they happened: per call, its invocation,
    its callbacks' starts and ends (nested as their times say: a callback that starts
    inside another and ends by its end ran inside it), its return."""
    points: list[Point] = []
    for number, (invoke, back, result) in enumerate(records):
        op = calls[number].op
        points.append(Point("call", number, op, None, invoke, invoke))
        mine = sorted(
            (c for c in callbacks if c.thread == thread and c.call == number),
            key=lambda c: (c.start, -c.end),
        )
        open_: list[_Callback] = []
        for callback in mine:
            while open_ and callback.end > open_[-1].end:
                if callback.start < open_[-1].end:
                    raise ThreadsAnswerError(
                        f"callbacks: on one thread the {_describe(callback)} overlaps the "
                        f"{_describe(open_[-1])} without running inside it: a thread runs "
                        f"one callback at a time, nested ones inside their caller"
                    )
                points.append(_end(open_.pop(), number))
            value: Result = callback.ready if callback.kind == "tc" else None
            # try_complete read its flag at some time between its start and read_ns
            points.append(
                Point(callback.kind, number, callback.op, value, callback.start, callback.read)
            )
            open_.append(callback)
        while open_:
            points.append(_end(open_.pop(), number))
        if back >= 0:
            points.append(Point("return", number, op, result, back, back))
    return tuple(points)


def _end(callback: _Callback, number: int) -> Point:
    value: Result = callback.returned if callback.kind == "tc" else None
    return Point(callback.kind + "-end", number, callback.op, value, callback.end, callback.end)


def _describe(callback: _Callback) -> str:
    name = {short: long for long, short in CALLBACK_NAMES.items()}[callback.kind]
    return f"{name} of {label(callback.op)} ({callback.start}..{callback.end} ns)"


def _final(answer: Mapping[str, Any], ops: int) -> Final:
    final = answer.get("final")
    expected = "an object with watched, watched_keys, num_delayed and outcomes"
    if not isinstance(final, Mapping):
        raise _bad("final", final, expected)
    counts = [_int(final, name, "final") for name in ("watched", "watched_keys", "num_delayed")]
    outcomes = final.get("outcomes")
    labels = [label(index) for index in range(ops)]
    if not isinstance(outcomes, Mapping) or sorted(outcomes) != sorted(labels):
        raise _bad("final.outcomes", outcomes, f"an object naming each of {', '.join(labels)}")
    for name in labels:
        if outcomes[name] not in OUTCOMES:
            raise _bad(f"final.outcomes.{name}", outcomes[name], f"one of {', '.join(OUTCOMES)}")
    return Final(counts[0], counts[1], counts[2], tuple(outcomes[name] for name in labels))
