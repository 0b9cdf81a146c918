"""The equivalence machines catch every seeded mutant of the optimized package.

For each mutant in ``tests.mutants.catalog.MUTANTS``: it is armed (its target exists and
its source fragment occurs exactly once, so the patch really changes the code), and the
machines of ``tests.machines.equivalence`` fail on it within a fixed, derandomized
budget. The same budget on the unmutated code passes, so a failure means the mutant was
caught, not that the budget produces false alarms. A mutant the machines miss means the
machines are too weak: strengthen them, never drop the mutant.

The budget is independent of the Hypothesis profile: ``derandomize=True`` (the same
examples on every run), no shrinking (only detection matters here), and
``MUTANT_EXAMPLES`` examples of ``MUTANT_STEPS`` steps per machine.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType

import hypothesis
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from tests.machines.purgatory_equivalence import make_purgatory_machine
from tests.machines.timer_equivalence import make_timer_machine
from tests.mutants.catalog import MUTANTS, MachineName, Mutant, applied, mutated_source
from tests.mutants.witness import HUNTING
from tests.support import load, needs_python_source, run_in_a_fresh_interpreter

MUTANT_EXAMPLES = 100
"""Examples per machine and mutant (every mutant is caught well within it; why the budget
is shaped so: docs/verification.md, "Seeded mutants of the optimized package")."""

MUTANT_STEPS = 50
"""Steps per example."""

MUTANT_SETTINGS = settings(
    HUNTING, max_examples=MUTANT_EXAMPLES, stateful_step_count=MUTANT_STEPS, derandomize=True
)


pytestmark = needs_python_source()


def _packages() -> tuple[ModuleType, ModuleType]:
    return load("reference"), load("optimized")


def _machine(name: MachineName) -> type[RuleBasedStateMachine]:
    reference, optimized = _packages()
    factory = make_timer_machine if name == "timer" else make_purgatory_machine
    return factory(reference, optimized)


def _first_failure(mutant: Mutant) -> tuple[MachineName, BaseException] | None:
    """Run the mutant's machines in order with the mutant applied; the first failure."""
    for name in mutant.machines:
        machine = _machine(name)
        with applied(mutant):
            try:
                run_state_machine_as_test(machine, settings=MUTANT_SETTINGS)
            except Exception as failure:  # any failure of the machine counts as caught
                return name, failure
    return None


def test_catalog_is_large_and_well_formed() -> None:
    """At least 8 mutants, unique names, all in kpurgatory.optimized, each a real change."""
    names = [mutant.name for mutant in MUTANTS]
    assert len(names) >= 8
    assert len(set(names)) == len(names), "mutant names must be unique"
    for mutant in MUTANTS:
        assert mutant.module.startswith("kpurgatory.optimized."), mutant
        assert mutant.old != mutant.new, mutant
        assert mutant.machines, mutant


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_mutant_is_armed(mutant: Mutant) -> None:
    """The target exists, the fragment occurs exactly once (else ``MutantError``), the
    patched function differs from the original, and the original comes back after."""
    original_source, new_source = mutated_source(mutant)
    assert new_source != original_source
    owner: object = importlib.import_module(mutant.module)
    *path, attr = mutant.target.split(".")
    for part in path:
        owner = getattr(owner, part)
    before = inspect.getattr_static(owner, attr)
    with applied(mutant) as replacement:
        assert inspect.getattr_static(owner, attr) is replacement
        assert replacement is not before
    assert inspect.getattr_static(owner, attr) is before


def pinned_hypothesis() -> str | None:
    """The Hypothesis version constraints.txt pins (None if the file is not beside the tests)."""
    constraints = Path(__file__).resolve().parents[2] / "constraints.txt"
    if not constraints.is_file():
        return None
    for line in constraints.read_text(encoding="utf-8").splitlines():
        if line.startswith("hypothesis=="):
            return line.split("==", 1)[1].strip()
    return None


on_the_pinned_hypothesis = pytest.mark.skipif(
    hypothesis.__version__ != pinned_hypothesis(),
    reason=f"the budget was calibrated on the pinned Hypothesis ({pinned_hypothesis()}), "
    f"this is {hypothesis.__version__}: test_witnesses.py catches every mutant on any version",
)


def check_caught(name: str) -> None:
    """The equivalence machines fail with mutant ``name`` applied, within the budget."""
    mutant = {mutant.name: mutant for mutant in MUTANTS}[name]
    assert _first_failure(mutant) is not None, (
        f"mutant {mutant.name!r} ({mutant.description}) survived {MUTANT_EXAMPLES} examples "
        f"of {mutant.machines}: strengthen the machines, do not drop the mutant"
    )


@on_the_pinned_hypothesis
@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_mutant_is_caught(mutant: Mutant) -> None:
    """The equivalence machines fail on the mutant (fixed seed, bounded budget): they find
    every mutant from scratch. Another Hypothesis version draws other examples, so this
    runs on the pinned one only; each mutant's witness (test_witnesses.py) is the check
    that holds on every version. Each budget runs in a fresh interpreter with
    ``PYTHONHASHSEED=0``: under pytest-xdist, what earlier tests of the same process left
    behind changed a derandomized run's course (``readd-keeps-old-entry`` survived after
    other tests in its worker and was caught alone)."""
    run_in_a_fresh_interpreter(
        "tests.mutants.test_mutants_caught", f"check_caught({mutant.name!r})"
    )


@pytest.mark.parametrize("machine", ["timer", "purgatory"])
def test_unmutated_code_passes_the_same_budget(machine: MachineName) -> None:
    """Without a mutant the same derandomized budget passes: a caught mutant is real."""
    run_state_machine_as_test(_machine(machine), settings=MUTANT_SETTINGS)
