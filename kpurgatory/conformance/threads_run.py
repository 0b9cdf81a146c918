"""The threads mode: real-thread histories of a port, checked against the spec's model.

``run_threads`` draws seeded programs with the history package's generator
(``kpurgatory.history.program.random_program``), sends each to the adapter as one
``threads`` message (``judge_on``), turns the answer into a history
(``kpurgatory.conformance.threads_protocol``) and searches it with the same model and
search as the project's own history checker (``kpurgatory.history.search.check``). It
counts explained, rejected and undecided histories (an undecided one ran out of search
budget: reported, never a pass), stops at the first rejection and shrinks it by
sending smaller programs to the adapter again (``shrink_with``).

``ProgramShape`` is what the programs may contain: calls the port declares it lacks
are never drawn, and the restrictions of an ``--allow`` (``RESTRICTIONS``) keep out
the calls where upstream Kafka's documented behaviour differs from the spec, so an
allowed difference is never checked rather than excused (docs/conformance.md).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from kpurgatory.conformance.adapter_process import AdapterError, AdapterProcess
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.threads_protocol import (
    CALL_NAMES,
    AmbiguousAnswerError,
    ThreadsAnswerError,
    histories_from_answer,
    program_message,
)
from kpurgatory.history.history import History
from kpurgatory.history.program import DEFAULT_WEIGHTS, Program, random_program
from kpurgatory.history.search import (
    DEFAULT_BUDGET,
    EXPLAINED,
    REJECTED,
    UNDECIDED,
    Verdict,
    VerdictCounts,
    check,
)
from kpurgatory.history.shrink import Shrunk, shrink_with

__all__ = [
    "DEFAULT_HISTORIES",
    "DEFAULT_RETRY_BUDGET",
    "IMPLEMENTATION",
    "KAFKA_RACE_NOTES",
    "LATE_WATCHES",
    "RESTRICTIONS",
    "ProgramShape",
    "ThreadsFailure",
    "ThreadsResult",
    "judge_on",
    "program_for",
    "run_threads",
    "shape_for",
]

DEFAULT_HISTORIES = 2000
"""Histories a threads run checks unless told otherwise (a few seconds for the
Python adapter; docs/verification.md has the figures)."""

IMPLEMENTATION = "the port's"
"""How a printed history names what it recorded."""

RESTRICTIONS: dict[str, tuple[str, dict[str, int], int, bool]] = {
    "kafka-stale-current-time": ("every delay >= 1 ms (due at once differs)", {}, 1, False),
    "kafka-flush-current-time": ("every delay >= 1 ms (due at once differs)", {}, 1, False),
    "kafka-cancel-keeps-watch": ("no abandon", {"abandon": 0}, 0, False),
    "kafka-cancel-for-key-race": ("no cancel_for_key", {"cancel_for_key": 0}, 0, False),
    "kafka-expiry-without-lock": (
        "purgatory_advance only in the clean-up, after the threads joined",
        {"advance": 0},
        0,
        False,
    ),
}
"""Per difference (a known difference's id, or one of the two Kafka race notes that
``--allow kafka`` covers in this mode): what the programs leave out so it cannot show:
a description, call weights set to 0, the least delay. The other known differences
cannot show in a threads program (no repeated submission or key, no negative time,
no shutdown, and the clean-up unlinks what a lazy purge leaves watched)."""

DEFAULT_RETRY_BUDGET = 4_000_000
"""Search nodes for a second search of a history undecided after the first budget."""

RETRIED = "retried"
"""The reason of a verdict explained only by the second, bigger search."""

LATE_WATCHES = "kafka-sweep-sees-later-watches"
"""The Kafka note the threads mode accepts as behaviour under ``--allow kafka``: the
model's sweep may go on to operations watched after it began (``Model``)."""

KAFKA_RACE_NOTES = ("kafka-cancel-for-key-race", "kafka-expiry-without-lock")
"""The Kafka notes no sequential run can observe that a threads run can: ``--allow
kafka`` restricts the programs for them too."""


@dataclass(frozen=True)
class ProgramShape:
    """What a run's programs may contain: threads per program (low, high), the call
    weights, the least delay, and why (one line per restriction, for the report)."""

    threads: tuple[int, int] = (2, 4)
    weights: tuple[tuple[str, int], ...] = tuple(DEFAULT_WEIGHTS.items())
    min_delay: int = 0
    notes: tuple[str, ...] = ()

    def allows(self, program: Program) -> bool:
        """Whether ``program`` keeps to the shape (shrinking sends no other)."""
        never = {kind for kind, weight in self.weights if weight == 0}
        return all(op.delay_ms >= self.min_delay for op in program.ops) and not any(
            call.kind in never for calls in program.threads for call in calls
        )


def shape_for(
    capabilities: Capabilities, allowed: tuple[str, ...], threads: tuple[int, int]
) -> ProgramShape:
    """The programs a port with ``capabilities`` gets under the allowed differences
    (ids, and ``KAFKA_RACE_NOTES`` when ``--allow kafka``)."""
    weights = dict(DEFAULT_WEIGHTS)
    notes = []
    lacking = [
        name for kind, name in CALL_NAMES.items() if kind in weights and not capabilities.has(name)
    ]
    for kind, name in CALL_NAMES.items():
        if name in lacking:
            weights[kind] = 0
    if lacking:
        notes.append(f"not called: {', '.join(lacking)} (the port declares it lacks them)")
    min_delay = 0
    for ident in allowed:
        if ident not in RESTRICTIONS:
            continue
        what, zero, least, _ = RESTRICTIONS[ident]
        weights.update(zero)
        min_delay = max(min_delay, least)
        notes.append(f"{what} (--allow {ident}: not checked)")
    return ProgramShape(threads, tuple(weights.items()), min_delay, tuple(notes))


def program_for(seed: int, shape: ProgramShape) -> Program:
    """The program of one history: drawn from ``seed``, kept to ``shape``."""
    program = random_program(
        random.Random(seed), threads=shape.threads, weights=dict(shape.weights)
    )
    if shape.min_delay:
        ops = tuple(replace(op, delay_ms=max(op.delay_ms, shape.min_delay)) for op in program.ops)
        program = replace(program, ops=ops)
    return program


def _judge(history: History, budget: int, late_watches: bool) -> Verdict:
    """The search's verdict on one history; with ``late_watches``, a rejection is
    searched again with Kafka's sweep and explained with that reason if it fits."""
    verdict = check(history, budget=budget)
    if verdict.outcome == REJECTED and late_watches:
        again = check(history, budget=budget, late_watches=True)
        if again.outcome == EXPLAINED:
            return Verdict(EXPLAINED, verdict.nodes + again.nodes, LATE_WATCHES)
    return verdict


def judge_on(
    adapter: AdapterProcess,
    program: Program,
    seed: int,
    *,
    serial: bool = False,
    budget: int = DEFAULT_BUDGET,
    late_watches: bool = False,
    retry_budget: int = 0,
) -> tuple[History, Verdict]:
    """Send ``program`` to the adapter once; its history and the search's verdict.

    An answer that fits several histories (callbacks on a library's thread, more than
    one call they may belong to) is explained if one of them is, rejected if every one
    is, undecided otherwise or when it fits too many to search. A timeout is a history
    whose threads all hung (a deadlock is a verdict). ``late_watches``: a history the
    spec's model rejects is searched again with Kafka's sweep (``LATE_WATCHES``), and
    explained with that reason if it fits. A history still undecided after ``budget``
    nodes is searched again with ``retry_budget`` nodes (if bigger). ``ThreadsAnswerError``
    for a malformed answer, ``AdapterError`` for none."""
    try:
        answer = adapter.exchange(program_message(program, seed, seed, serial=serial))
    except AdapterError as exc:
        if not exc.timed_out:
            raise
        hung = tuple(range(len(program.threads)))
        calls = program.threads
        history = History(program, IMPLEMENTATION, calls, tuple(() for _ in calls), None, hung)
        return history, check(history, budget=budget)
    try:
        histories = histories_from_answer(program, answer, IMPLEMENTATION)
    except AmbiguousAnswerError as exc:
        calls = program.threads
        empty = History(program, IMPLEMENTATION, calls, tuple(() for _ in calls), None)
        return empty, Verdict(UNDECIDED, 0, str(exc))
    verdicts = []
    for history in histories:
        verdict = _judge(history, budget, late_watches)
        if verdict.outcome == UNDECIDED and retry_budget > budget:
            verdict = _judge(history, retry_budget, late_watches)
            if verdict.outcome == EXPLAINED:
                verdict = Verdict(EXPLAINED, verdict.nodes, verdict.reason or RETRIED)
        if verdict.outcome == EXPLAINED:
            return history, verdict
        verdicts.append(verdict)
    for history, verdict in zip(histories, verdicts, strict=True):
        if verdict.outcome != REJECTED:
            return history, verdict
    return histories[0], verdicts[0]


@dataclass(frozen=True)
class ThreadsFailure:
    """A rejected history: the run seed and history number that drew it, its program
    seed, and the shrunk program with a rejected history of it."""

    seed: int
    number: int
    program_seed: int
    history: History
    verdict: Verdict
    shrunk: Shrunk | None


@dataclass
class ThreadsResult(VerdictCounts):
    """What a threads run checked: counts per verdict, search effort, time taken."""

    seed: int
    budget: int
    shape: ProgramShape
    retry_budget: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    undecided_numbers: list[int] = field(default_factory=list)
    undecided_reasons: Counter[str] = field(default_factory=Counter)
    accepted: Counter[str] = field(default_factory=Counter)
    """Per accepted Kafka behaviour, the histories only it explained."""
    retried: int = 0
    """Histories explained only by the second search, with the retry budget."""
    failure: ThreadsFailure | None = None
    broken: str = ""
    """Why the adapter's answer could not be read (the run stopped there), or ""."""

    @property
    def passed(self) -> bool:
        """Every history sent was explained: none rejected, none undecided, no bad answer."""
        return not (self.rejected or self.undecided or self.broken) and self.histories > 0


def history_seed(seed: int, number: int) -> int:
    """The program seed of history ``number`` of the run with ``seed``."""
    return seed * 100_000 + number


def run_threads(
    adapter: AdapterProcess,
    *,
    histories: int = DEFAULT_HISTORIES,
    seed: int = 0,
    budget: int = DEFAULT_BUDGET,
    shape: ProgramShape | None = None,
    serial: bool = False,
    shrink_attempts: int = 20,
    programs: Callable[[int], Program] | None = None,
    late_watches: bool = False,
    retry_budget: int = DEFAULT_RETRY_BUDGET,
) -> ThreadsResult:
    """Check ``histories`` histories of the adapter's port; stop at the first rejection
    and shrink it (``shrink_attempts`` sends per smaller program; 0: no shrinking).
    ``programs(number)`` replaces the seeded draw (a replay sends one program again).
    ``late_watches`` accepts Kafka's sweep, ``retry_budget`` searches an undecided
    history again (``judge_on``)."""
    shape = shape or ProgramShape()
    result = ThreadsResult(seed, budget, shape, retry_budget)
    judge = partial(judge_on, adapter, serial=serial, budget=budget, late_watches=late_watches)
    start = time.monotonic()
    try:
        for number in range(histories):
            program_seed = history_seed(seed, number)
            program = programs(number) if programs else program_for(program_seed, shape)
            result.calls.update(
                CALL_NAMES[call.kind] for calls in program.threads for call in calls
            )
            history, verdict = judge(program, program_seed, retry_budget=retry_budget)
            result.count(verdict)
            if verdict.outcome == EXPLAINED:
                if verdict.reason == RETRIED:
                    result.retried += 1
                elif verdict.reason:
                    result.accepted[verdict.reason] += 1
                continue
            if verdict.outcome != REJECTED:
                result.undecided_numbers.append(number)
                result.undecided_reasons[verdict.reason or "the search ran out of its budget"] += 1
                continue
            shrunk = None
            if shrink_attempts and not history.hung:  # a hang costs a timeout per run
                shrunk = shrink_with(
                    program,
                    history,
                    verdict,
                    judge,  # a smaller program is searched once, without the retry
                    attempts=shrink_attempts,
                    seed=program_seed,
                    keep=shape.allows,
                )
            result.failure = ThreadsFailure(seed, number, program_seed, history, verdict, shrunk)
            break
    except (AdapterError, ThreadsAnswerError) as exc:
        result.broken = str(exc)
    result.seconds = time.monotonic() - start
    return result
