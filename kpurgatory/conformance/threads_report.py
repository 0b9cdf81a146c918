"""The threads mode's report: counts, the rule a rejected history breaks, how to replay it.

``rule_broken`` names what a rejected history shows, from its points alone where a
pattern is unmistakable (an ``on_complete`` that ran twice: R16; two threads inside one
operation's ``try_complete`` at once: the operation's lock, R18/R25; an expiry of an
operation ``cancel_for_key`` returned: R29; state left after the clean-up: R26/R61,
R11) and otherwise from where the deepest interleaving the search found stops: the
first point no interleaving explains, and the rules of the call it belongs to.
``format_threads`` prints a run for a person; ``replay_document`` is the file
``--threads --replay`` runs again.
"""

from __future__ import annotations

from kpurgatory.conformance.threads_protocol import (
    CALL_NAMES,
    FORMAT,
    label,
    program_to_json,
)
from kpurgatory.conformance.threads_run import ThreadsFailure, ThreadsResult
from kpurgatory.history.format import format_history
from kpurgatory.history.history import History, Point
from kpurgatory.history.search import Verdict

__all__ = ["CALL_RULES", "format_threads", "replay_document", "rule_broken"]

CALL_RULES: dict[str, str] = {
    "submit": "R22 (try_complete_else_watch)",
    "set_ready": "the program's flag",
    "check": "R25 (check_and_complete takes each operation's lock)",
    "cancel_for_key": "R29, R55 (cancel_for_key)",
    "advance": "R7, R17 (advance_clock expires under the operation's lock)",
    "force": "R16 (force_complete completes exactly once)",
    "abandon": "R40 (abandon)",
    "safe_try": "R18, R41 (safe_try_complete)",
    "maybe_try": "R20, R41 (maybe_try_complete: a busy lock is knocked on, not skipped)",
}
"""The rules each call is bound by, for a rejection no pattern explains."""


def _names(history: History) -> list[str]:
    return [f"T{index}" for index in range(len(history.program.threads))] + ["M"]


def _calls_of(history: History, thread: int, point: Point) -> str:
    call = history.calls[thread][point.call]
    return call.describe(history.program)


def rule_broken(history: History, verdict: Verdict) -> str:
    """The rule a rejected history breaks, as one line for the report."""
    names = _names(history)
    if history.hung:
        hung = ", ".join(names[index] for index in history.hung)
        return f"R63/R37: {hung} did not finish: a deadlock or a hang (no answer in time)"
    every = [(thread, point) for thread, points in enumerate(history.points) for point in points]
    completions: dict[int, list[str]] = {}
    for thread, point in every:
        if point.kind == "oc":
            completions.setdefault(point.op, []).append(names[thread])
    for op, where in sorted(completions.items()):
        if len(where) > 1:
            return (
                f"R16: on_complete of {label(op)} ran {len(where)} times "
                f"(on {', '.join(where)}): an operation completes exactly once"
            )
    inside: dict[int, list[tuple[int, Point, Point]]] = {}
    for thread, points in enumerate(history.points):
        starts: list[Point] = []
        for point in points:
            if point.kind == "tc":
                starts.append(point)
            elif point.kind == "tc-end" and starts:
                begun = starts.pop()
                inside.setdefault(point.op, []).append((thread, begun, point))
    for op, spans in sorted(inside.items()):
        for index, (thread, begun, ended) in enumerate(spans):
            for other, other_begun, other_ended in spans[index + 1 :]:
                if other != thread and begun.lo < other_ended.hi and other_begun.lo < ended.hi:
                    return (
                        f"R18/R25: {names[thread]} and {names[other]} ran try_complete of "
                        f"{label(op)} at the same time: try_complete runs only under the "
                        f"operation's lock"
                    )
    for thread, point in every:
        expiring = history.calls[thread][point.call].kind == "advance"
        if point.kind != "oe" and not (point.kind == "oc" and expiring):
            continue  # a force_complete takes no lock (R16); an expiry does (R17)
        for holder, begun, ended in inside.get(point.op, ()):
            if holder != thread and begun.lo < point.lo and point.hi < ended.lo:
                return (
                    f"R17: {label(point.op)} completed or expired on {names[thread]} while "
                    f"{names[holder]} ran its try_complete, under the operation's lock: "
                    f"an expiry takes that lock too"
                )
    cancelled: dict[int, int] = {}
    for thread, point in every:
        if point.kind == "return" and history.calls[thread][point.call].kind == "cancel_for_key":
            assert isinstance(point.value, tuple)
            for op in point.value:
                cancelled.setdefault(op, point.hi)
    for thread, point in every:
        if point.kind == "oe" and point.op in cancelled and point.lo > cancelled[point.op]:
            return (
                f"R29: {label(point.op)} expired on {names[thread]} after cancel_for_key "
                f"returned it: an operation cancel_for_key took out never expires"
            )
    final = history.final
    if final is not None and verdict.progress and sum(verdict.progress) == history.size:
        return (
            f"R26/R61, R11: after the clean-up (every timeout passed, every operation "
            f"forced, every key checked) the state is {final}, which no interleaving "
            f"ends in"
        )
    return _where_it_stops(history, verdict)


def _where_it_stops(history: History, verdict: Verdict) -> str:
    names = _names(history)
    stops = []
    rules = []
    for thread, points in enumerate(history.points):
        done = verdict.progress[thread] if thread < len(verdict.progress) else 0
        if done < len(points):
            point = points[done]
            kind = history.calls[thread][point.call].kind
            what = (
                f"{point.kind}({label(point.op)}, {point.value})" if point.op >= 0 else point.kind
            )
            stops.append(f"{names[thread]} at {what} in {_calls_of(history, thread, point)}")
            if CALL_RULES[kind] not in rules:
                rules.append(CALL_RULES[kind])
    where = "; ".join(stops) if stops else "every point"
    return (
        f"{', '.join(rules) or 'the final state'}: no interleaving of the spec's steps "
        f"explains the history past: {where}"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def replay_document(failure: ThreadsFailure, command: str) -> dict[str, object]:
    """The replay file of a failure: its (shrunk) program, the seeds and the command."""
    program = failure.shrunk.program if failure.shrunk else failure.history.program
    return {
        "format": FORMAT,
        "seed": failure.seed,
        "history": failure.number,
        "program_seed": failure.program_seed,
        "adapter": command,
        "program": program_to_json(program),
    }


def format_threads(result: ThreadsResult, command: str, *, serial: bool = False) -> str:
    """The report of a threads run (without the replay line, which the CLI adds)."""
    low, high = result.shape.threads
    count = f"{low}" if low == high else f"{low}-{high}"
    how = "one after another (--serial)" if serial else "at once"
    lines = [
        f"threads: {result.histories} histories of {count} threads run {how} through "
        f"{command!r} (seed {result.seed}, search budget {result.budget} nodes)",
        "  calls by kind: "
        + ", ".join(f"{name} {result.calls.get(name, 0)}" for name in CALL_NAMES.values()),
    ]
    lines += [f"  {note}" for note in result.shape.notes]
    average = result.total_nodes // result.histories if result.histories else 0
    lines.append(
        f"  explained {result.explained}, rejected {result.rejected}, undecided "
        f"{result.undecided}; search nodes per history: {average} on average, at most "
        f"{result.max_nodes}; {result.per_second:.1f} histories/s"
    )
    if result.retried:
        lines.append(
            f"  {result.retried} of the explained histories needed a second search with "
            f"up to {result.retry_budget} nodes"
        )
    for reason, times in result.accepted.items():
        lines.append(
            f"  accepted {reason} (R75; --allow kafka): {times} "
            f"histor{'y' if times == 1 else 'ies'} explained only with Kafka's sweep, which "
            f"may also try operations watched after it began"
        )
    if result.undecided:
        numbers = ", ".join(map(str, result.undecided_numbers[:10]))
        why = "; ".join(f"{count}: {reason}" for reason, count in result.undecided_reasons.items())
        lines.append(
            f"  UNDECIDED {result.undecided} histories (numbers {numbers}"
            f"{', ...' if result.undecided > 10 else ''}; {why}): they are not passes "
            f"(they were searched again with up to {result.retry_budget} nodes; a bigger "
            f"--retry-budget may decide them)"
        )
    if result.broken:
        lines.append(f"ERROR threads: the adapter's answer is not a history: {result.broken}")
    failure = result.failure
    if failure is not None:
        shown, verdict = failure.history, failure.verdict
        if failure.shrunk is not None:
            shown, verdict = failure.shrunk.history, failure.shrunk.verdict
        lines.append(
            f"FAIL threads: history {failure.number} of seed {failure.seed} (program seed "
            f"{failure.program_seed}) is explained by no interleaving of the spec's steps"
        )
        lines.append(f"  rule: {rule_broken(shown, verdict)}")
        if failure.shrunk is not None:
            program = failure.shrunk.program
            before = failure.history.program
            lines.append(
                f"  shrunk from {_count(before.size, 'call')} on "
                f"{_count(len(before.threads), 'thread')} to {_count(program.size, 'call')} "
                f"on {_count(len(program.threads), 'thread')} (and the clean-up; "
                f"{failure.shrunk.recordings} runs sent):"
            )
        lines += ["    " + line for line in format_history(shown, verdict).splitlines()]
    return "\n".join(lines)
