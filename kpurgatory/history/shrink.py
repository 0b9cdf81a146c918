"""Shrink a program whose history was rejected to a smaller one that still fails.

A race does not show on every run, so a candidate program (a thread dropped, a call
dropped, an advance or a delay made 0) is recorded again up to ``attempts`` times; it
replaces the current program as soon as one of its histories is rejected. Passes
repeat until no candidate fails. The result is the smallest failing program found and
one rejected history of it: minimal for this greedy search, not the smallest there is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from kpurgatory.history.history import History
from kpurgatory.history.program import Call, Program
from kpurgatory.history.recorder import Implementation, record
from kpurgatory.history.search import DEFAULT_BUDGET, REJECTED, Verdict, check

__all__ = ["Shrunk", "shrink", "shrink_with"]


@dataclass(frozen=True)
class Shrunk:
    """The smallest failing program found, a rejected history of it, and its verdict."""

    program: Program
    history: History
    verdict: Verdict
    recordings: int  # histories recorded while shrinking


def _candidates(program: Program) -> Iterator[Program]:
    """Smaller variants of ``program``, biggest cuts first."""
    if len(program.threads) > 1:
        for thread in range(len(program.threads)):
            yield program.without_thread(thread)
    for thread, calls in enumerate(program.threads):
        for index in range(len(calls)):
            yield program.without_call(thread, index)
    for thread, calls in enumerate(program.threads):
        for index, call in enumerate(calls):
            if call.kind == "advance" and call.ms:
                yield program.with_call(thread, index, Call("advance", ms=0))
    for index, op in enumerate(program.ops):
        if op.delay_ms:
            ops = (*program.ops[:index], replace(op, delay_ms=0), *program.ops[index + 1 :])
            yield replace(program, ops=ops)


def shrink(
    program: Program,
    impl: Implementation,
    history: History,
    verdict: Verdict,
    *,
    attempts: int = 50,
    budget: int = DEFAULT_BUDGET,
    yield_chance: float = 0.05,
    seed: int = 0,
) -> Shrunk:
    """Shrink ``program`` (whose ``history`` got ``verdict``, rejected) while some
    recording of the smaller program on ``impl`` within ``attempts`` tries is rejected too."""

    def again(candidate: Program, attempt_seed: int) -> tuple[History, Verdict]:
        history = record(candidate, impl, seed=attempt_seed, yield_chance=yield_chance)
        return history, check(history, budget=budget)

    return shrink_with(program, history, verdict, again, attempts=attempts, seed=seed)


def shrink_with(
    program: Program,
    history: History,
    verdict: Verdict,
    judge: Callable[[Program, int], tuple[History, Verdict]],
    *,
    attempts: int = 50,
    seed: int = 0,
    keep: Callable[[Program], bool] | None = None,
) -> Shrunk:
    """``shrink`` with any way of recording: ``judge(program, seed)`` runs a candidate
    once and returns its history and the search's verdict on it (the conformance kit
    sends it to a port's adapter). ``keep`` rejects candidates a run may not send
    (None: every one goes)."""
    if verdict.outcome != REJECTED:
        raise ValueError(f"verdict must be a rejection to shrink, not {verdict.outcome!r}")
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, not {attempts}")
    recordings = 0
    improved = True
    while improved:
        improved = False
        for candidate in _candidates(program):
            if keep is not None and not keep(candidate):
                continue
            for attempt in range(attempts):
                recordings += 1
                again, judged = judge(candidate, seed + attempt)
                if judged.outcome == REJECTED:
                    program, history, verdict = candidate, again, judged
                    improved = True
                    break
            if improved:
                break
    return Shrunk(program, history, verdict, recordings)
