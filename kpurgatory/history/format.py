"""Print a history as a reader follows it: one line per call, in order of invocation.

Each line names the thread (``M`` is the main thread's clean-up after the others
joined), the call's invocation and return times in microseconds from the first
invocation, the call and its result, then the callbacks it ran in that thread:
``tc(op1,True)`` is a ``try_complete`` of op1 that read the flag True, ``oc``/``oe``
are ``on_complete``/``on_expiration``.
"""

from __future__ import annotations

from kpurgatory.history.history import History, Point, Result
from kpurgatory.history.search import Verdict

__all__ = ["format_history"]

LEGEND = (
    "times in microseconds from the first call; tc(op, R): try_complete read the flag R; "
    "oc/oe: on_complete/on_expiration; M: the main thread's clean-up after the others joined"
)


def _result(value: Result) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(f"op{index}" for index in value) + "]"
    return str(value)


def _callbacks(points: list[Point]) -> str:
    shown = []
    for point in points:
        if point.kind == "tc":
            shown.append(f"tc(op{point.op},{point.value})")
        elif point.kind in ("oc", "oe"):
            shown.append(f"{point.kind}(op{point.op})")
    return " ".join(shown)


def format_history(history: History, verdict: Verdict | None = None) -> str:
    """``history`` as text; with ``verdict``, what the search concluded and how far the
    deepest interleaving it found explained each thread."""
    program = history.program
    names = [f"T{index}" for index in range(len(program.threads))] + ["M"]
    ops = ", ".join(
        f"op{index} (delay {spec.delay_ms} ms, keys {', '.join(spec.keys)}, owner T{spec.owner})"
        for index, spec in enumerate(program.ops)
    )
    lines = [
        f"{history.implementation} purgatory, ManualClock, InlineExecutor, reaper off",
        f"ops: {ops}",
        LEGEND,
    ]
    rows: list[tuple[int, str]] = []
    starts = [point.lo for thread in history.points for point in thread if point.kind == "call"]
    origin = min(starts) if starts else 0
    for thread, points in enumerate(history.points):
        by_call: dict[int, list[Point]] = {}
        for point in points:
            by_call.setdefault(point.call, []).append(point)
        for index, call in enumerate(history.calls[thread]):
            mine = by_call.get(index, [])
            invoked = next((p.lo for p in mine if p.kind == "call"), None)
            returned = next((p for p in mine if p.kind == "return"), None)
            if invoked is None:
                continue
            end = f"{(returned.lo - origin) / 1000:7.1f}" if returned else "  (hung)"
            result = f" -> {_result(returned.value)}" if returned else ""
            text = f"{call.describe(program)}{result}"
            callbacks = _callbacks(mine)
            rows.append(
                (
                    invoked,
                    f"{names[thread]:<2} [{(invoked - origin) / 1000:7.1f} .. {end}] "
                    f"{text}{'  ' + callbacks if callbacks else ''}",
                )
            )
    lines += [row for _, row in sorted(rows)]
    if history.final is not None:
        final = history.final
        outcomes = ", ".join(f"op{index} {name}" for index, name in enumerate(final.outcomes))
        lines.append(
            f"final: watched {final.watched}, watched_keys {final.watched_keys}, "
            f"num_delayed {final.num_delayed}; {outcomes}"
        )
    if history.hung:
        lines.append("hung: " + ", ".join(names[index] for index in history.hung))
    if verdict is not None:
        lines.append(f"verdict: {verdict.outcome} after {verdict.nodes} search nodes")
        if verdict.reason:
            lines.append(f"why: {verdict.reason}")
        if verdict.progress and verdict.outcome != "explained":
            reached = ", ".join(
                f"{names[index]} {done}/{len(history.points[index])}"
                for index, done in enumerate(verdict.progress)
            )
            lines.append(f"points the deepest interleaving explained: {reached}")
    return "\n".join(lines)
