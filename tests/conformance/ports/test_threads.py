"""The threads mode catches every concurrent plant of the port-bug catalogue, as a race.

For each bug of ``CONCURRENT_PORT_BUGS`` the port (``kpurgatory.optimized`` with the
bug planted) is served through the subprocess adapter (``adapter.py --bug NAME``)
exactly as a port in another language is, and checked with the run a porter is told to
use: ``kpurgatory conformance --adapter CMD --threads`` with its defaults (2000
histories of 2-4 threads, the default search budget), without shrinking (shrinking
changes what is printed, never the verdict).

- slow tier: the committed vectors and the stateful search (seed 1) pass every plant;
  every plant is rejected on every seed of ``SEEDS``, also with Kafka's
  R75 sweep accepted (what ``--allow kafka`` accepts as behaviour); the same plant with
  each program's threads run one after another (``--serial``) is never rejected on
  500 histories of seed 1, so each catch is a race; the honest adapters (the reference and the
  optimized package, no plant) have no history rejected on any seed (500 each), and
  at most ``MAX_UNDECIDED`` undecided over all of them. The figures (histories until
  the catch, histories per second, the most search nodes, the machine's load) are
  printed.
- quick tier: every plant is armed (its edits apply to the current source).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from kpurgatory.conformance.adapter import AdapterProcess, probe
from kpurgatory.conformance.threads_run import run_threads
from tests.conformance.ports.catalog import CONCURRENT_PORT_BUGS, PortBug
from tests.conformance.support import python_adapter
from tests.mutants.catalog import mutated_source
from tests.support import needs_python_source

ADAPTER = Path(__file__).resolve().parent / "adapter.py"
SEEDS: tuple[int, ...] = tuple(range(1, 11))
CONTROL_HISTORIES = 500
"""Histories per seed of the honest adapters, and of each serialized control."""
MAX_UNDECIDED = 2
"""Undecided histories the honest adapters may leave over all seeds (none rejected)."""
IDS = [bug.name for bug in CONCURRENT_PORT_BUGS]

pytestmark = [needs_python_source(), pytest.mark.realtime]


def command(bug: str) -> str:
    return shlex.join([sys.executable, str(ADAPTER), "--bug", bug])


@pytest.mark.parametrize("bug", CONCURRENT_PORT_BUGS, ids=IDS)
def test_every_concurrent_plant_is_armed(bug: PortBug) -> None:
    for edit in bug.edits:
        original, mutated = mutated_source(edit)
        assert original != mutated


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


@pytest.mark.slow
@pytest.mark.parametrize("bug", CONCURRENT_PORT_BUGS, ids=IDS)
def test_the_threads_mode_catches_the_plant_on_every_seed(bug: PortBug) -> None:
    caught: dict[int, int] = {}
    start = time.monotonic()
    with AdapterProcess(command(bug.name)) as adapter:
        assert probe(adapter) is None
        for seed in SEEDS:
            result = run_threads(adapter, seed=seed, shrink_attempts=0)
            assert not result.broken, result.broken
            if result.failure is not None:
                caught[seed] = result.failure.number + 1
    print(
        f"\n{bug.name}: caught on seeds {sorted(caught)} of {list(SEEDS)} after "
        f"{[caught.get(seed) for seed in SEEDS]} histories ({time.monotonic() - start:.1f} s, "
        f"{_load()})"
    )
    assert sorted(caught) == list(SEEDS), f"{bug.name} missed on {set(SEEDS) - set(caught)}"


@pytest.mark.slow
@pytest.mark.parametrize("bug", CONCURRENT_PORT_BUGS, ids=IDS)
def test_the_sequential_kit_does_not_see_the_plant(bug: PortBug) -> None:
    """The committed vectors and the stateful search (seed 1) pass the plant: it is a
    bug only threads show."""
    from tests.conformance.ports.test_catalogue import (
        adapter_command,
        search_catches,
        vectors_catch,
    )

    assert not vectors_catch(bug.name)
    with AdapterProcess(adapter_command(bug.name)) as adapter:
        assert not search_catches(adapter, 1)


@pytest.mark.slow
@pytest.mark.parametrize("bug", CONCURRENT_PORT_BUGS, ids=IDS)
def test_the_plant_is_still_caught_with_kafkas_sweep_accepted(bug: PortBug) -> None:
    """``--allow kafka`` lets the search explain a history with Kafka's sweep, which may
    also try operations watched after it began (R75): that acceptance hides no plant."""
    caught = []
    with AdapterProcess(command(bug.name)) as adapter:
        assert probe(adapter) is None
        for seed in SEEDS:
            result = run_threads(adapter, seed=seed, shrink_attempts=0, late_watches=True)
            caught.append(result.failure.number + 1 if result.failure else None)
    print(f"\n{bug.name} with Kafka's sweep accepted: caught after {caught} histories")
    assert None not in caught, f"{bug.name} missed on some seed: {caught}"


@pytest.mark.slow
@pytest.mark.parametrize("bug", CONCURRENT_PORT_BUGS, ids=IDS)
def test_the_plant_passes_when_the_threads_run_one_after_another(bug: PortBug) -> None:
    with AdapterProcess(command(bug.name)) as adapter:
        assert probe(adapter) is None
        result = run_threads(
            adapter, seed=1, serial=True, shrink_attempts=0, histories=CONTROL_HISTORIES
        )
    print(f"\n{bug.name} --serial: {result.explained} of {result.histories} explained")
    assert result.passed, (result.broken, result.failure)
    assert result.histories == CONTROL_HISTORIES


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["reference", "optimized"])
def test_the_honest_python_adapters_pass_every_seed(impl: str) -> None:
    undecided = 0
    with AdapterProcess(python_adapter(impl)) as adapter:
        assert probe(adapter) is None
        for seed in SEEDS:
            result = run_threads(adapter, seed=seed, shrink_attempts=0, histories=CONTROL_HISTORIES)
            print(
                f"\n{impl} seed {seed}: {result.explained} explained, {result.rejected} "
                f"rejected, {result.undecided} undecided; {result.per_second:.1f} histories/s; "
                f"most search nodes {result.max_nodes} of {result.budget} ({_load()})"
            )
            assert not result.rejected and not result.broken, (result.broken, result.failure)
            undecided += result.undecided
    # Undecided is no pass, and the CLI's verdict says FAIL for it; under a heavy load
    # an honest history can outgrow even the retry budget (seen: 1 in 10,000), so this
    # bounds them rather than forbidding them.
    assert undecided <= MAX_UNDECIDED, f"{undecided} undecided histories"
