"""The history checker catches every planted race on real threads, and never a
serialized run of the same bug (so each catch is a race, not a sequential bug).

Each catch test records seeded random programs (biased toward the mutant's calls,
``WEIGHTS``) on real threads with the mutant planted, until the search rejects one;
``MAX_HISTORIES`` bounds it. Each control runs the first ``SERIAL_HISTORIES`` of the same
programs with the threads one after another: every one must be explained.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kpurgatory.history import check, format_history, implementation, random_program, record
from kpurgatory.history.search import EXPLAINED, REJECTED
from kpurgatory.history.shrink import shrink
from tests.concurrency.lockset import is_pure
from tests.history.mutants import HISTORY_MUTANTS, WEIGHTS
from tests.mutants.catalog import Mutant, applied, mutated_source

pytestmark = [
    pytest.mark.realtime,
    pytest.mark.skipif(
        not all(is_pure(mutant.module) for mutant in HISTORY_MUTANTS),
        reason="a patched module is compiled (the patches need Python source)",
    ),
]

MAX_HISTORIES = 1_000
"""Histories a catch test may record; measured catches took 1-130 here (GIL on)."""
SERIAL_HISTORIES = 30
YIELD_CHANCE = 0.3
"""Callbacks yield often: the knock of ``ignored-knock`` needs a lock held a while."""
IDS = [mutant.name for mutant in HISTORY_MUTANTS]


def _package(mutant: Mutant) -> str:
    return "reference" if mutant.module.startswith("kpurgatory.reference") else "optimized"


@pytest.mark.parametrize("mutant", HISTORY_MUTANTS, ids=IDS)
def test_history_mutant_is_armed(mutant: Mutant) -> None:
    original, mutated = mutated_source(mutant)
    assert original != mutated


def _first_rejection(mutant: Mutant, impl: Any) -> tuple[Any, Any, Any]:
    """(program, history, verdict) of the first history of ``mutant`` (applied) that the
    checker rejects, recording at most ``MAX_HISTORIES``; fails the test if none is."""
    for seed in range(MAX_HISTORIES):
        program = random_program(random.Random(seed), weights=WEIGHTS[mutant.name])
        history = record(program, impl, seed=seed, yield_chance=YIELD_CHANCE)
        verdict = check(history)
        if verdict.outcome == REJECTED:
            return program, history, verdict
    pytest.fail(f"{mutant.name}: no history of {MAX_HISTORIES} was rejected")


@pytest.mark.parametrize("mutant", HISTORY_MUTANTS, ids=IDS)
def test_history_mutant_is_caught_on_real_threads(mutant: Mutant) -> None:
    impl = implementation(_package(mutant))
    with applied(mutant):
        _, history, verdict = _first_rejection(mutant, impl)
    assert format_history(history, verdict)


@pytest.mark.parametrize("mutant", HISTORY_MUTANTS, ids=IDS)
def test_history_mutant_passes_when_threads_run_one_after_another(mutant: Mutant) -> None:
    impl = implementation(_package(mutant))
    with applied(mutant):
        for seed in range(SERIAL_HISTORIES):
            program = random_program(random.Random(seed), weights=WEIGHTS[mutant.name])
            history = record(program, impl, seed=seed, yield_chance=YIELD_CHANCE, serial=True)
            verdict = check(history)
            assert verdict.outcome == EXPLAINED, format_history(history, verdict)


def test_a_caught_race_shrinks_to_a_smaller_program_that_still_fails() -> None:
    """KAFKA-6653's sweep, caught, shrinks to two threads and at most the calls it had;
    the shrunk history prints with its verdict."""
    mutant = next(m for m in HISTORY_MUTANTS if m.name == "kafka-6653-lost-completion")
    impl = implementation(_package(mutant))
    with applied(mutant):
        program, history, verdict = _first_rejection(mutant, impl)
        shrunk = shrink(program, impl, history, verdict, attempts=20, yield_chance=YIELD_CHANCE)
    assert shrunk.verdict.outcome == REJECTED
    assert shrunk.program.size <= program.size
    assert len(shrunk.program.threads) <= len(program.threads)
    text = format_history(shrunk.history, shrunk.verdict)
    assert "verdict: rejected" in text and "check_and_complete" in text
