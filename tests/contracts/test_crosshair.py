"""CrossHair in CI: contract checks pass, wrong contracts are found, diffbehavior agrees.

Each test runs the ``crosshair`` command line in a subprocess with a bound on the
search (``--max_uninteresting_iterations``) and a wall-clock timeout, as
scripts/crosshair_check.sh does. Exit codes: 0 no counterexample, 1 counterexample
found, 2 other error. The bounds are the same for the real modules and for the
deliberately wrong ones, so "passes" is known to mean "searched hard enough to have
found a bug like those".
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpurgatory.optimized import wheel
from tests.contracts import diff_pairs

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(
        (wheel.__file__ or "").endswith((".so", ".pyd")),
        reason="kpurgatory.optimized is a mypyc build: it has no docstrings, so no contracts, "
        "and CrossHair cannot execute it symbolically (run these checks on the pure build)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("crosshair") is None,
        reason="CrossHair is not installed (the free-threaded venv has no wheel for it)",
    ),
]

ARITHMETIC_BOUND = 3
"""Iterations without progress before CrossHair stops, for the pure arithmetic modules."""

SEQUENCE_BOUND = 20
"""The same for the sequence drivers (symbolic lists need more to reach a bad sequence)."""

DIFF_BOUND = 5
"""For ``diffbehavior`` of the pure helper pairs."""

PLACEMENT_BOUND = 3
"""For ``diffbehavior`` of the real-wheel placement pair (each path builds a wheel)."""

TIMEOUT_S = 150
"""Wall-clock limit per CrossHair run (a run over it fails the test)."""

CHECKED_MODULES: list[tuple[list[str], int]] = [
    (["kpurgatory.spec.arithmetic", "kpurgatory.optimized.wheel"], ARITHMETIC_BOUND),
    (["tests.contracts.sequences"], SEQUENCE_BOUND),
]


def crosshair(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``crosshair <args>`` from the repository root with the test interpreter."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "crosshair", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def check(targets: list[str], bound: int) -> subprocess.CompletedProcess[str]:
    """``crosshair check`` with PEP 316 contracts at the given bound."""
    return crosshair(
        "check",
        "--analysis_kind=PEP316",
        f"--max_uninteresting_iterations={bound}",
        *targets,
    )


@pytest.mark.parametrize(
    ("targets", "bound"), CHECKED_MODULES, ids=["arithmetic+wheel", "sequences"]
)
def test_contracts_hold_within_the_bound(targets: list[str], bound: int) -> None:
    """R1-R3 arithmetic, the optimized wheel helpers, and the bucket/wheel invariants."""
    done = check(targets, bound)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("function", "bound"),
    [
        ("round_down_strictly_below", ARITHMETIC_BOUND),
        ("deadline_never_above_level_one", ARITHMETIC_BOUND),
        ("leaky_bucket_sequence", SEQUENCE_BOUND),
    ],
)
def test_a_wrong_contract_is_found_within_the_same_bound(function: str, bound: int) -> None:
    """The check can fail: each deliberately wrong contract is reported."""
    from tests.contracts import wrong_post  # subclasses an optimized class: pure build only

    assert function in wrong_post.WRONG
    done = check([f"tests.contracts.wrong_post.{function}"], bound)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"when calling {function}(" in done.stdout, done.stdout


def diffbehavior(first: str, second: str, bound: int) -> subprocess.CompletedProcess[str]:
    """``crosshair diffbehavior`` between two functions of tests/contracts/diff_pairs.py."""
    module = "tests.contracts.diff_pairs"
    return crosshair(
        "diffbehavior",
        f"--max_uninteresting_iterations={bound}",
        f"{module}.{first}",
        f"{module}.{second}",
    )


@pytest.mark.parametrize(
    ("spec", "optimized"), diff_pairs.PAIRS, ids=[s for s, _ in diff_pairs.PAIRS]
)
def test_optimized_helpers_behave_like_the_spec(spec: str, optimized: str) -> None:
    bound = PLACEMENT_BOUND if spec == "spec_placement" else DIFF_BOUND
    done = diffbehavior(spec, optimized, bound)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No differences found" in done.stdout


def test_diffbehavior_finds_the_planted_difference() -> None:
    """The comparison can fail: an off-by-one window bound is told apart from the spec."""
    done = diffbehavior(*diff_pairs.PLANTED, PLACEMENT_BOUND)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Given:" in done.stdout and "buggy_placement" in done.stdout
