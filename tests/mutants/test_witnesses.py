"""Every seeded mutant is caught by a targeted example, on any Hypothesis version.

The derandomized budgets of ``test_mutants_caught.py`` and
``test_lifecycle_mutants_caught.py`` show the machines find each mutant from scratch, but
only for the Hypothesis version that drew those examples. Here each mutant (and each
shared bug, on each implementation it breaks) has its recorded witness
(``tests/mutants/witnesses.py``): a short program of machine steps replayed by plain
method calls. It must fail with the mutant applied and pass on the unmutated code, so a
mutant stays caught whatever Hypothesis draws.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from hypothesis.stateful import RuleBasedStateMachine

from tests.machines.fault_machine import lifecycle_machine
from tests.machines.purgatory_equivalence import make_purgatory_machine
from tests.machines.timer_equivalence import make_timer_machine
from tests.mutants.catalog import MUTANTS, applied
from tests.mutants.witness import replay, steps_of
from tests.mutants.witnesses import WITNESSES
from tests.support import load, needs_python_source, run_in_a_fresh_interpreter

pytestmark = needs_python_source()

MachineFactory = Callable[[], type[RuleBasedStateMachine]]

ROOT = Path(__file__).resolve().parents[2]


def _factory(machine: str) -> MachineFactory:
    reference, optimized = load("reference"), load("optimized")
    if machine == "timer":
        return lambda: make_timer_machine(reference, optimized)
    if machine == "purgatory":
        return lambda: make_purgatory_machine(reference, optimized)
    side = machine.removeprefix("lifecycle-")
    return lambda: lifecycle_machine(side)


def _cases() -> list[tuple[str, Callable[[], AbstractContextManager[Any]]]]:
    """The seeded mutants of the equivalence machines. The shared bugs of the lifecycle
    machine have none: its re-entrant rules draw nested calls as they run (``st.data()``)
    and its thread executor interleaves for real, so a printed program does not replay;
    they rely on the pinned Hypothesis's budget and on their deterministic regression
    tests (tests/test_reentrancy.py, tests/test_user_code_failures.py)."""
    return [(mutant.name, functools.partial(applied, mutant)) for mutant in MUTANTS]


CASES = _cases()


def test_every_mutant_has_a_witness_and_every_witness_a_mutant() -> None:
    names = [name for name, _ in CASES]
    assert sorted(names) == sorted(WITNESSES), (
        "record the witnesses again: python -m tests.mutants.witness > tests/mutants/witnesses.py"
    )


def check_witness(name: str) -> None:
    """The witness of case ``name`` passes on the unmutated code and fails under its patch."""
    patched = dict(CASES)[name]
    machine, steps = WITNESSES[name]
    factory = _factory(machine)
    replay(factory(), steps)  # the unmutated code passes the witness
    with patched(), pytest.raises(Exception) as caught:  # any failure of the machine counts
        replay(factory(), steps)
    assert not isinstance(caught.value, (SyntaxError, NameError)), caught.value


@pytest.mark.parametrize("name", [name for name, _ in CASES])
def test_witness_fails_with_the_mutant_and_passes_without(name: str) -> None:
    """Each witness replays in a fresh interpreter with ``PYTHONHASHSEED=0``: a program
    may depend on where a str key's hash puts it (``negative-hash-shard`` does), which
    changes from process to process otherwise, and the lifecycle machine's outcome on
    state earlier tests of the same process left behind (seen: a witness passed its
    mutant after other tests ran in that worker, never alone). They were recorded with
    the same seed."""
    run_in_a_fresh_interpreter("tests.mutants.test_witnesses", f"check_witness({name!r})", 300)


def test_steps_of_reads_the_program_hypothesis_attached() -> None:
    failure = AssertionError("differs")
    failure.add_note(
        "Falsifying example:\n"
        "state = Machine()\n"
        "state.set_up(tick=1)\n"
        "tasks_0, tasks_1 = state.race(action='readd')\n"
        "state.teardown()\n"
        "Highest target score: 35"
    )
    assert steps_of(failure) == (
        "state.set_up(tick=1)",
        "tasks_0, tasks_1 = state.race(action='readd')",
        "state.teardown()",
    )
    with pytest.raises(ValueError, match="no state machine program"):
        steps_of(AssertionError("no notes"))
