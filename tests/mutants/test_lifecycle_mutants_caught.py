"""The lifecycle machine catches bugs both implementations share (R41, R52-R55).

For each ``tests.mutants.lifecycle_catalog.SHARED_BUGS`` entry: every patch is armed (its
fragment occurs exactly once, so the bug is really planted), and with all of them applied
at once (reference and optimized wrong the same way, which the equivalence machines
cannot see) the lifecycle machine fails on each implementation within a fixed,
derandomized budget. The same budget passes on the unmutated code. The
``OUTSIDE_THE_MACHINE`` bugs (R63, R67), which the machine cannot reach by design, are
each caught by a deterministic check here that passes on the unmutated code.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis.stateful import run_state_machine_as_test

from kpurgatory import ManualClock
from tests.machines.fault_machine import make_lifecycle_machine
from tests.mutants.catalog import applied, mutated_source
from tests.mutants.lifecycle_catalog import (
    OUTSIDE_THE_MACHINE,
    SHARED_BUGS,
    SharedBug,
    all_applied,
)
from tests.mutants.test_mutants_caught import MUTANT_SETTINGS, on_the_pinned_hypothesis
from tests.support import implementation_names, load, run_in_a_fresh_interpreter
from tests.test_reentrancy import FlakyKey, hooked_operation, inline_purgatory

ROOT = Path(__file__).resolve().parents[2]

LIFECYCLE_MUTANT_SETTINGS = MUTANT_SETTINGS
"""The seeded mutants' budget: 100 derandomized examples of 50 steps, no shrinking."""


def _pure_python() -> bool:
    """Whether every patched module is a .py file (a mypyc build cannot be patched)."""
    if "optimized" not in implementation_names():
        return False
    bugs = SHARED_BUGS + OUTSIDE_THE_MACHINE
    modules = {patch.module for bug in bugs for patch in bug.patches}
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


def check_caught(name: str) -> None:
    """With shared bug ``name`` planted in both implementations, the machine fails on each."""
    bug = {bug.name: bug for bug in SHARED_BUGS}[name]
    with all_applied(bug):
        missed = [impl.__name__ for impl in _implementations(bug) if not _caught(impl)]
    assert not missed, f"{bug.name} ({bug.description}) survived on {missed}"


def check_unmutated(impl_name: str) -> None:
    """Without a planted bug the same budget passes on ``impl_name``."""
    run_state_machine_as_test(
        make_lifecycle_machine(load(impl_name), leave_out_open=True),
        settings=LIFECYCLE_MUTANT_SETTINGS,
    )


def _in_a_fresh_interpreter(call: str) -> None:
    """Each budget runs from scratch: the derandomized machine's course also depends on
    state that earlier tests of the same process left behind (seen under pytest-xdist: a
    bug caught alone survived after other tests in that worker)."""
    run_in_a_fresh_interpreter("tests.mutants.test_lifecycle_mutants_caught", call)


@on_the_pinned_hypothesis
@pytest.mark.parametrize("bug", SHARED_BUGS, ids=[bug.name for bug in SHARED_BUGS])
def test_shared_bug_is_caught_on_each_implementation(bug: SharedBug) -> None:
    """With the bug planted in both implementations at once, the machine fails on each."""
    _in_a_fresh_interpreter(f"check_caught({bug.name!r})")


@pytest.mark.parametrize("impl_name", ["reference", "optimized"])
def test_unmutated_code_passes_the_same_budget(impl_name: str) -> None:
    """Without a planted bug the same budget passes: a caught bug is real."""
    _in_a_fresh_interpreter(f"check_unmutated({impl_name!r})")


def _plain_lock_is_refused(impl: ModuleType) -> None:
    """R63: an operation with a ``threading.Lock`` is refused at construction."""
    try:
        hooked_operation(impl)(0, threading.Lock())
    except TypeError:
        return
    raise AssertionError("an operation accepted a threading.Lock")


def _key_failing_in_the_idle_purge_stays_there(impl: ModuleType) -> None:
    """R67: a key whose hash raises in the idle purge does not escape the unrelated
    ``force_complete`` that purged, which still runs ``on_complete``."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    cls = hooked_operation(impl)
    flaky = FlakyKey(good=10**6)
    done, other = cls(100), cls(100)
    purgatory.try_complete_else_watch(done, [flaky, "x"])
    purgatory.try_complete_else_watch(other, ["y"])
    done.ready = True
    assert purgatory.check_and_complete("x") == 1
    flaky.good = 0
    logging.disable(logging.ERROR)  # the purge logs the key's error (R67)
    try:
        assert other.force_complete() is True
    finally:
        logging.disable(logging.NOTSET)
    assert other.log[-1] == "on_complete"


CHECKS: dict[str, Callable[[ModuleType], None]] = {
    "plain-lock-accepted": _plain_lock_is_refused,
    "purge-lets-a-key-error-escape": _key_failing_in_the_idle_purge_stays_there,
}
"""The deterministic check that catches each ``OUTSIDE_THE_MACHINE`` bug."""


def test_every_bug_outside_the_machine_has_a_check() -> None:
    assert sorted(CHECKS) == sorted(bug.name for bug in OUTSIDE_THE_MACHINE)


@pytest.mark.parametrize("bug", OUTSIDE_THE_MACHINE, ids=[bug.name for bug in OUTSIDE_THE_MACHINE])
def test_bug_outside_the_machine_is_armed_and_caught_by_its_check(bug: SharedBug) -> None:
    """Armed; its check passes on the unmutated code and fails with the bug planted."""
    check = CHECKS[bug.name]
    for patch in bug.patches:
        original, mutated = mutated_source(patch)
        assert original != mutated
    for impl in _implementations(bug):
        check(impl)
    with all_applied(bug):
        survived = []
        for impl in _implementations(bug):
            try:
                check(impl)
            except Exception:  # the check's assertion, or the escaped key error
                continue
            survived.append(impl.__name__)
    assert not survived, f"{bug.name} ({bug.description}) survived on {survived}"
