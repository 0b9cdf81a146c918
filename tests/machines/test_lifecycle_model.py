"""The lifecycle machine with fault injection, on each implementation (R22-R41, R52-R56).

``tests.machines.fault_machine`` drives one implementation against
``tests.machines.lifecycle_model``, a model that shares no code with either
implementation: so a bug both implementations share shows here, where the equivalence
machines cannot see it. Runs under the active Hypothesis profile (``make slow`` and
``make deep`` run it longer).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.machines.fault_machine import make_lifecycle_machine
from tests.support import implementation_names, load

MODEL = Path(__file__).with_name("lifecycle_model.py")


def test_model_imports_nothing_from_kpurgatory() -> None:
    """The model is independent: no import of kpurgatory at all (nor a relative one)."""
    tree = ast.parse(MODEL.read_text())
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in the model"
            imported.append(node.module or "")
    assert imported, "the model's imports were not found"
    assert not [name for name in imported if name.split(".")[0] in {"kpurgatory", "tests"}], imported


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r52_r53_r54_lifecycle_with_failing_user_code_matches_the_model(impl_name: str) -> None:
    """R22-R41, R52-R56: results, errors (one as is, several as a group), outcomes,
    callbacks and counters match the model on every step with faults injected."""
    run_state_machine_as_test(make_lifecycle_machine(load(impl_name)), settings=settings())
