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

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import seed
from hypothesis.stateful import run_state_machine_as_test

from kpurgatory import ManualClock
from tests.machines.fault_machine import LifecycleMachine, OptimizedLifecycleMachine
from tests.mutants.catalog import applied, mutated_source
from tests.mutants.lifecycle_catalog import (
    OUTSIDE_THE_MACHINE,
    SHARED_BUGS,
    SharedBug,
    all_applied,
)
from tests.mutants.test_mutants_caught import MUTANT_SETTINGS, on_the_pinned_hypothesis
from tests.support import load, needs_python_source, run_in_a_fresh_interpreter
from tests.test_reentrancy import hooked_operation, inline_purgatory
from tests.test_reentrant_calls import FlakyKey

ROOT = Path(__file__).resolve().parents[2]

LIFECYCLE_MUTANT_SETTINGS = MUTANT_SETTINGS
"""The seeded mutants' budget: 100 derandomized examples of 50 steps, no shrinking."""

LIFECYCLE_MUTANT_SEED = 2
"""The budget's examples, pinned. Derandomized, Hypothesis would draw them from a digest
of the machine class's source, so that any edit of the machine drew others (and a bug
one draw catches, another may miss: one in three draws misses drain-ignores-its-own-close)."""


@seed(LIFECYCLE_MUTANT_SEED)
class SeededLifecycleMachine(LifecycleMachine):
    """The reference's lifecycle machine on the pinned examples."""


@seed(LIFECYCLE_MUTANT_SEED)
class SeededOptimizedLifecycleMachine(OptimizedLifecycleMachine):
    """The optimized package's lifecycle machine on the pinned examples."""


SEEDED = {"reference": SeededLifecycleMachine, "optimized": SeededOptimizedLifecycleMachine}


pytestmark = needs_python_source()


def _implementations(bug: SharedBug) -> list[ModuleType]:
    """The implementations a bug's patches touch (shared code: both)."""
    touched = {patch.module.split(".")[1] for patch in bug.patches}
    names = [name for name in ("reference", "optimized") if name in touched]
    return [load(name) for name in names or ["reference", "optimized"]]


def _caught(impl: ModuleType) -> bool:
    try:
        run_state_machine_as_test(
            SEEDED[impl.__name__.rsplit(".", 1)[-1]],
            settings=LIFECYCLE_MUTANT_SETTINGS,
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
        SEEDED[impl_name],
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


TARGETED: dict[str, str] = {
    "retry-escapes-rollback": "tests/test_user_code_failures.py::"
    "test_r54_the_r41_retry_that_raises_rolls_the_submission_back",
    "check-stops-at-first-error": "tests/test_user_code_failures.py::"
    "test_r53_check_and_complete_tries_every_operation_when_some_raise",
    "drain-stops-at-first-error": "tests/test_user_code_failures.py::"
    "test_r53_a_drain_hands_every_due_task_over_when_one_raises_a_base_exception",
    "inline-executor-keeps-base-exceptions": "tests/test_user_code_failures.py::"
    "test_r52_inline_executor_raises_a_base_exception_and_stores_an_exception",
    "cancel-for-key-drops-knock": "tests/test_user_code_failures.py::"
    "test_r55_a_knock_during_cancel_for_key_is_honoured",
    "pending-flag-not-cleared": "tests/test_user_code_failures.py::"
    "test_r41_a_stale_knock_is_cleared_by_safe_try_complete",
    "or-else-skips-the-retry": "tests/test_user_code_failures.py::"
    "test_r41_safe_try_complete_or_else_makes_the_attempt_a_knocker_left",
    "drain-ignores-its-own-close": "tests/test_reentrancy.py::"
    "test_r64_shutdown_from_on_expiration_stops_the_rest_of_the_drain",
    "executor-refusal-swallowed": "tests/test_reentrancy.py::"
    "test_r65_a_refused_hand_over_in_a_drain_is_raised",
    "cancel-for-key-leaves-it-timed": "tests/test_reentrancy.py::"
    "test_r66_cancel_for_key_inside_the_submission_leaves_no_timer_entry",
}
"""The deterministic regression test that fails with each shared bug planted. The
machine's catch above is calibrated on the pinned Hypothesis; this one holds on every
version."""


class _Outcomes:
    """A pytest plugin that keeps the outcome of each test's call phase."""

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.calls[report.nodeid] = report.outcome


def check_targeted(name: str) -> None:
    """Run bug ``name``'s targeted test with the bug planted: every case of it must fail
    (a hang counts, after 60 s). The suite itself runs the same test on the real code."""
    bug = {bug.name: bug for bug in SHARED_BUGS}[name]
    outcomes = _Outcomes()
    args = [TARGETED[name], "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    with all_applied(bug):
        pytest.main([*args, "-p", "no:xdist", "--timeout", "60"], plugins=[outcomes])
    assert outcomes.calls, f"{TARGETED[name]} ran no test"
    passed = [node for node, outcome in outcomes.calls.items() if outcome != "failed"]
    assert not passed, f"{name} planted, yet these cases did not fail: {passed}"


def test_every_shared_bug_has_a_targeted_test() -> None:
    assert sorted(TARGETED) == sorted(bug.name for bug in SHARED_BUGS)


@pytest.mark.parametrize("bug", SHARED_BUGS, ids=[bug.name for bug in SHARED_BUGS])
def test_shared_bug_is_caught_by_its_targeted_test_on_any_hypothesis(bug: SharedBug) -> None:
    """The targeted test fails on each implementation with the bug planted (in a fresh
    interpreter: the patches never reach this process's other tests)."""
    _in_a_fresh_interpreter(f"check_targeted({bug.name!r})")


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
