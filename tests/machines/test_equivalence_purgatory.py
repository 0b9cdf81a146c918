"""The purgatory equivalence machine: reference and optimized purgatories in step (R16-R34).

Runs ``tests.machines.purgatory_equivalence.make_purgatory_machine`` under the active Hypothesis
profile and checks that the runs exercised every path the comparison is about:
completions, expiries and purges all happened.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.machines.equivalence import MachineStats
from tests.machines.purgatory_equivalence import make_purgatory_machine
from tests.machines.test_equivalence_timer import other_implementation
from tests.support import load


def test_purgatory_machine_reference_vs_other() -> None:
    """Same results, events in order (same-due expiries as a multiset), counters
    (R26-R30), completed flags and try_complete counts on every step."""
    stats = MachineStats()
    machine = make_purgatory_machine(load("reference"), load(other_implementation()), stats=stats)
    run_state_machine_as_test(machine, settings=settings())
    print(f"purgatory machine: {stats.summary()}")
    assert stats.examples > 0
    for counter in ("complete", "expire", "purges"):
        assert stats.counters[counter] > 0, f"no {counter} in any run: {stats.summary()}"
