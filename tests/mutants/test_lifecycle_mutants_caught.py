"""The lifecycle machine catches bugs both implementations share (R41, R52-R55).

For each ``tests.mutants.lifecycle_catalog.SHARED_BUGS`` entry: every patch is armed (its
fragment occurs exactly once, so the bug is really planted), and with all of them applied
at once (reference and optimized wrong the same way, which the equivalence machines
cannot see) the lifecycle machine fails on each implementation within a fixed,
derandomized budget. The same budget passes on the unmutated code.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.machines.fault_machine import make_lifecycle_machine
from tests.mutants.catalog import applied, mutated_source
from tests.mutants.lifecycle_catalog import SHARED_BUGS, SharedBug, all_applied
from tests.mutants.test_mutants_caught import MUTANT_SETTINGS, on_the_pinned_hypothesis
from tests.support import implementation_names, load

LIFECYCLE_MUTANT_SETTINGS = MUTANT_SETTINGS
"""The seeded mutants' budget: 100 derandomized examples of 50 steps, no shrinking."""


def _pure_python() -> bool:
    """Whether every patched module is a .py file (a mypyc build cannot be patched)."""
    if "optimized" not in implementation_names():
        return False
    modules = {patch.module for bug in SHARED_BUGS for patch in bug.patches}
    return all(
        str(getattr(importlib.import_module(name), "__file__", "")).endswith(".py")
        for name in modules
    )


pytestmark = pytest.mark.skipif(
    not _pure_python(),
    reason="kpurgatory.optimized is absent or compiled (mutants patch Python source)",
)


def _implementations(bug: SharedBug) -> list[ModuleType]:
    """The implementations a bug's patches touch (shared code: both)."""
    touched = {patch.module.split(".")[1] for patch in bug.patches}
    names = [name for name in ("reference", "optimized") if name in touched]
    return [load(name) for name in names or ["reference", "optimized"]]


def _caught(impl: ModuleType) -> bool:
    try:
        run_state_machine_as_test(
            make_lifecycle_machine(impl, leave_out_open=True), settings=LIFECYCLE_MUTANT_SETTINGS
        )
    except Exception:  # any failure of the machine counts as caught
        return True
    return False


@pytest.mark.parametrize("bug", SHARED_BUGS, ids=[bug.name for bug in SHARED_BUGS])
def test_shared_bug_is_armed(bug: SharedBug) -> None:
    """Each patch's fragment occurs exactly once, and the patch is undone afterwards."""
    for patch in bug.patches:
        original, mutated = mutated_source(patch)
        assert original != mutated
        with applied(patch):
            pass


@on_the_pinned_hypothesis
@pytest.mark.parametrize("bug", SHARED_BUGS, ids=[bug.name for bug in SHARED_BUGS])
def test_shared_bug_is_caught_on_each_implementation(bug: SharedBug) -> None:
    """With the bug planted in both implementations at once, the machine fails on each."""
    with all_applied(bug):
        missed = [impl.__name__ for impl in _implementations(bug) if not _caught(impl)]
    assert not missed, f"{bug.name} ({bug.description}) survived on {missed}"


@pytest.mark.parametrize("impl_name", ["reference", "optimized"])
def test_unmutated_code_passes_the_same_budget(impl_name: str) -> None:
    """Without a planted bug the same budget passes: a caught bug is real."""
    run_state_machine_as_test(
        make_lifecycle_machine(load(impl_name), leave_out_open=True),
        settings=LIFECYCLE_MUTANT_SETTINGS,
    )
