"""The kit's mutation score: every catalogued port bug is caught by the run porters are told to use.

docs/conformance.md tells a porter to run ``kpurgatory conformance --adapter CMD
--stateful``: the committed vectors, then the stateful search (100 runs of 50 steps, a
fresh seed each time). Its verdict on a port is FAIL iff the vectors fail or the search
finds a difference, so for each bug of ``tests/conformance/ports/catalog.py`` and each
seed of ``SEEDS`` this module measures both parts through the subprocess adapter
(``adapter.py --bug NAME``) exactly as the CLI runs them, the search without shrinking
(shrinking changes the reported sequence, never the verdict).

- slow tier (``make slow``): the whole catalogue on every seed; asserts that the default
  run catches every bug on every seed and that the vectors alone catch at least 90%,
  and prints the figures (per-seed rates of the run and of the search alone, timings,
  the machine's load).
- quick tier: every bug is armed (its edits apply), the port without a bug passes the
  default run, and a sample of bugs fails the committed vectors through the real
  command line.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kpurgatory.cli import main
from kpurgatory.conformance.adapter import (
    DEFAULT_VECTORS_DIR,
    AdapterProcess,
    replay_vectors,
    vector_paths,
)
from kpurgatory.conformance.stateful import AdapterSide, run_stateful
from tests.conformance.ports.catalog import PORT_BUGS, PortBug, planted
from tests.support import load, needs_python_source

ADAPTER = Path(__file__).resolve().parent / "adapter.py"
SEEDS: tuple[int, ...] = tuple(range(1, 11))
"""The fixed battery of seeds for the stateful search."""

VECTOR_GOAL = 0.9
"""The share of the catalogue the committed vectors alone must catch."""

QUICK_SAMPLE: tuple[str, ...] = (
    "current-time-after-hand-over",
    "purge-not-strict",
    "cancel-is-not-abandon",
    "shutdown-checked-before-keys",
)
"""Bugs the quick tier replays the committed vectors on, through the real command line."""


pytestmark = needs_python_source()


def adapter_command(bug: str) -> str:
    return shlex.join([sys.executable, str(ADAPTER), "--bug", bug])


def vectors_catch(bug: str) -> bool:
    """Whether replaying the committed vectors fails (or does not consume one) on ``bug``."""
    with AdapterProcess(adapter_command(bug)) as adapter:
        results = replay_vectors(adapter, vector_paths([DEFAULT_VECTORS_DIR]))
    return any(result.status != "passed" for result in results)


def search_catches(adapter: AdapterProcess, seed: int) -> bool:
    """Whether the default stateful search with ``seed`` finds a difference."""
    failure, _ = run_stateful(
        AdapterSide(adapter), reference=load("reference"), seed=seed, shrink=False
    )
    return failure is not None


@dataclass
class BugResult:
    """What each part of the default run did on one bug."""

    bug: PortBug
    vectors: bool
    vectors_s: float
    search: dict[int, bool] = field(default_factory=dict)
    search_s: float = 0.0

    def default_run(self, seed: int) -> bool:
        return self.vectors or self.search[seed]


CLEAN = PortBug("none", "none", "the port as it is", ())
"""The port with no bug planted: it must pass every part of the run on every seed."""


def measure(bug: PortBug) -> BugResult:
    started = time.perf_counter()
    vectors = vectors_catch(bug.name)
    result = BugResult(bug, vectors, time.perf_counter() - started)
    started = time.perf_counter()
    with AdapterProcess(adapter_command(bug.name)) as adapter:
        for seed in SEEDS:
            result.search[seed] = search_catches(adapter, seed)
    result.search_s = time.perf_counter() - started
    return result


def report(results: list[BugResult], elapsed_s: float) -> str:
    """The figures: catalogue size, rates per seed, vectors alone, timings and load."""
    size = len(results)
    lines = [f"port-bug catalogue: {size} bugs, seeds {SEEDS[0]}-{SEEDS[-1]}"]
    caught_by_vectors = sum(result.vectors for result in results)
    lines.append(
        f"  vectors alone: {caught_by_vectors}/{size} ({caught_by_vectors / size:.0%}); missed: "
        + (", ".join(r.bug.name for r in results if not r.vectors) or "none")
    )
    for seed in SEEDS:
        run = sum(result.default_run(seed) for result in results)
        search = sum(result.search[seed] for result in results)
        lines.append(
            f"  seed {seed:2d}: default run {run}/{size} ({run / size:.0%}), "
            f"search alone {search}/{size} ({search / size:.0%})"
        )
    for result in results:
        missed = [seed for seed in SEEDS if not result.search[seed]]
        if missed:
            lines.append(f"  search alone misses {result.bug.name} on seeds {missed}")
    vectors_s = sum(result.vectors_s for result in results)
    search_s = sum(result.search_s for result in results)
    load_1, load_5, _ = os.getloadavg()
    lines.append(
        f"  time: {elapsed_s:.0f} s in all (vectors {vectors_s:.0f} s, searches {search_s:.0f} s "
        f"for {size * len(SEEDS)} seeded searches); load average {load_1:.1f} / {load_5:.1f} "
        f"on {os.cpu_count()} cores"
    )
    return "\n".join(lines)


# ---- quick tier ----------------------------------------------------------------------------


def test_catalogue_is_large_named_and_armed() -> None:
    names = [bug.name for bug in PORT_BUGS]
    assert len(names) >= 30 and len(set(names)) == len(names)
    for bug in PORT_BUGS:
        assert bug.edits and bug.description and bug.area, bug.name
        with planted(bug):  # MutantError if an edit no longer applies
            pass


def test_the_port_without_a_bug_passes_the_default_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Through the real command line; a shorter search than the default (the slow tier
    runs the default search on every seed of the battery)."""
    args = ["--stateful", "--seed", "1", "--max-examples", "30"]
    code = main(["conformance", "--adapter", adapter_command("none"), *args])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASS stateful: no difference from the reference" in out
    assert "summary: " in out and " 0 failed, 0 not consumed" in out
    assert out.rstrip().endswith("conformance: PASS (vectors: PASS; search: PASS)")


@pytest.mark.parametrize("name", QUICK_SAMPLE)
def test_a_sample_of_port_bugs_fails_the_committed_vectors(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first half of the default run, through the real command line (the search, and
    shrinking a failure through a subprocess, are the slow tier's)."""
    code = main(["conformance", "--adapter", adapter_command(name)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "\nFAIL " in out


# ---- slow tier -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_the_default_run_catches_every_port_bug_on_every_seed() -> None:
    started = time.perf_counter()
    clean = measure(CLEAN)
    assert not clean.vectors and not any(clean.search.values()), clean
    results = [measure(bug) for bug in PORT_BUGS]
    figures = report(results, time.perf_counter() - started)
    print("\n" + figures)
    escaped = [
        (result.bug.name, seed)
        for result in results
        for seed in SEEDS
        if not result.default_run(seed)
    ]
    assert not escaped, f"the default run passed a bugged port: {escaped}\n{figures}"
    caught_by_vectors = sum(result.vectors for result in results)
    assert caught_by_vectors >= VECTOR_GOAL * len(results), figures
