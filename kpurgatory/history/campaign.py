"""Record and check many histories of one implementation; count what each search said.

A campaign draws seeded random programs, records each on real threads and searches
it. It stops after ``histories`` histories or ``seconds`` seconds, whichever comes
first, and counts explained, rejected and undecided histories (an undecided one ran
out of search budget: it is reported, never counted as a pass). Rejected and
undecided histories are kept, with their seeds, for shrinking and printing.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from kpurgatory.history.history import History
from kpurgatory.history.program import random_program
from kpurgatory.history.recorder import implementation, record
from kpurgatory.history.search import (
    DEFAULT_BUDGET,
    EXPLAINED,
    REJECTED,
    Verdict,
    VerdictCounts,
    check,
)

__all__ = ["CampaignResult", "Failure", "run_campaign"]


@dataclass(frozen=True)
class Failure:
    """A rejected (or undecided) history and the seed that drew and recorded its program."""

    seed: int
    history: History
    verdict: Verdict


@dataclass
class CampaignResult(VerdictCounts):
    """What a campaign checked: counts per verdict, search effort, time taken."""

    implementation: str
    budget: int
    failures: list[Failure] = field(default_factory=list)
    over_budget: list[Failure] = field(default_factory=list)
    """The undecided histories, kept to be read (and searched with a bigger budget)."""

    def summary(self) -> str:
        """One line for a person reading a log."""
        return (
            f"{self.implementation}: {self.histories} histories in {self.seconds:.1f} s "
            f"({self.per_second:.0f}/s): {self.explained} explained, {self.rejected} rejected, "
            f"{self.undecided} undecided (search budget {self.budget} nodes; most nodes "
            f"one search needed: {self.max_nodes})"
        )


def run_campaign(
    implementation_name: str,
    *,
    histories: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    budget: int = DEFAULT_BUDGET,
    weights: dict[str, int] | None = None,
    yield_chance: float = 0.05,
    serial: bool = False,
    stop_after_failures: int | None = None,
) -> CampaignResult:
    """Check histories of ``implementation_name`` drawn from seeds ``seed``, ``seed+1``,
    ...; at most ``histories`` of them and for at most ``seconds`` (one must be given).
    ``serial`` runs each program's threads one after another. ``stop_after_failures``
    ends the campaign once that many histories were rejected."""
    if histories is None and seconds is None:
        raise ValueError("histories or seconds must be given: a campaign needs an end")
    if histories is not None and histories < 1:
        raise ValueError(f"histories must be >= 1, not {histories}")
    if seconds is not None and seconds <= 0:
        raise ValueError(f"seconds must be > 0, not {seconds}")
    impl = implementation(implementation_name)
    result = CampaignResult(implementation_name, budget)
    start = time.monotonic()
    current = seed
    while True:
        if histories is not None and result.histories >= histories:
            break
        if seconds is not None and time.monotonic() - start >= seconds:
            break
        program = random_program(random.Random(current), weights=weights)
        history = record(program, impl, seed=current, yield_chance=yield_chance, serial=serial)
        verdict = check(history, budget=budget)
        result.count(verdict)
        if verdict.outcome == REJECTED:
            result.failures.append(Failure(current, history, verdict))
        elif verdict.outcome != EXPLAINED:
            result.over_budget.append(Failure(current, history, verdict))
        current += 1
        if stop_after_failures is not None and result.rejected >= stop_after_failures:
            break
    result.seconds = time.monotonic() - start
    return result
