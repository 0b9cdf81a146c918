"""The lifecycle machine with fault injection, on each implementation (R22-R41, R52-R56).

``tests.machines.fault_machine`` drives one implementation against
``tests.machines.lifecycle_model``, a model that shares no code with either
implementation: so a bug both implementations share shows here, where the equivalence
machines cannot see it. Runs under the active Hypothesis profile (``make slow`` and
``make deep`` run it longer). Callbacks call back in (R63-R69); the machine also runs
on the aio layer's ``LoopExecutor``, with ``threading.RLock`` operation locks, and with
a real worker thread for the expiries, each on a smaller quick budget (deeper under
``slow``).
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.machines.fault_machine import lifecycle_machine
from tests.machines.lifecycle_model import CLOSE_REFUSE, KNOCK, SHUTDOWN
from tests.machines.user_code import Context, fault_operation_class
from tests.support import implementation_names, load

VARIANTS = [("loop", "scripted"), ("inline", "rlock"), ("thread", "rlock")]
"""(executor, locks) besides the default (inline, scripted): see tests.machines.fault_machine."""

VARIANT_EXAMPLES = 15
"""Quick budget of each variant (the default run has 100): they share its rules."""

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
    assert not [name for name in imported if name.split(".")[0] in {"kpurgatory", "tests"}], (
        imported
    )


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r52_r53_r54_lifecycle_with_failing_user_code_matches_the_model(impl_name: str) -> None:
    """R22-R41, R52-R56: results, errors (one as is, several as a group), outcomes,
    callbacks and counters match the model on every step with faults injected."""
    machine = lifecycle_machine(impl_name)
    run_state_machine_as_test(machine, settings=settings())


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 40 s of CPU per implementation; the machine is shared
@pytest.mark.parametrize("impl_name", implementation_names())
def test_r52_r53_r54_lifecycle_model_deeper(impl_name: str) -> None:
    """The same machine, 500 examples of 100 steps (``make slow``)."""
    machine = lifecycle_machine(impl_name)
    deeper = settings(settings(), max_examples=500, stateful_step_count=100)
    run_state_machine_as_test(machine, settings=deeper)


@pytest.mark.parametrize(("executor", "locks"), VARIANTS)
@pytest.mark.parametrize("impl_name", implementation_names())
def test_r63_r69_reentrant_lifecycle_matches_the_model_on_each_executor(
    impl_name: str, executor: str, locks: str
) -> None:
    """R63-R69 on the loop executor, with RLock operation locks, and with expiries on a
    real worker thread (run between the machine's calls, so deterministic)."""
    machine = lifecycle_machine(impl_name, executor, locks)
    quick = settings(settings(), max_examples=min(settings().max_examples, VARIANT_EXAMPLES))
    run_state_machine_as_test(machine, settings=quick)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("executor", "locks"), VARIANTS)
@pytest.mark.parametrize("impl_name", implementation_names())
def test_r63_r69_reentrant_lifecycle_on_each_executor_deeper(
    impl_name: str, executor: str, locks: str
) -> None:
    """The variants, 300 examples of 100 steps (``make slow``)."""
    machine = lifecycle_machine(impl_name, executor, locks)
    deeper = settings(settings(), max_examples=300, stateful_step_count=100)
    run_state_machine_as_test(machine, settings=deeper)


@pytest.mark.parametrize("lock", [threading.Lock(), threading.Semaphore()])
@pytest.mark.parametrize("impl_name", implementation_names())
def test_r63_the_machine_operation_refuses_a_lock_it_cannot_take_twice(
    impl_name: str, lock: object
) -> None:
    """The spec's decision for ``threading.Lock`` (R63): refused at construction, so the
    machine's operations run with ``threading.RLock`` (or its counting lock) only."""
    operation_class = fault_operation_class(load(impl_name))
    with pytest.raises(TypeError, match="lock must be re-entrant"):
        operation_class("op0", 0, {}, Context(), lock)
    assert operation_class("op0", 0, {}, Context(), threading.RLock()).lock is not None


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r64_shutdown_from_try_complete_refuses_the_submission_with_timers_off(
    impl_name: str,
) -> None:
    """R64, a finding of the machine's strict model (fixed): try_complete's second call
    shuts the purgatory down in a submission with timers off; it is refused."""
    machine: Any = lifecycle_machine(impl_name)(leave_out_open=False)
    machine.setup(tick=1, wheel_size=4, purge_interval=1000, timer_enabled=False)
    name = machine.create(10, {("try_complete", 2): SHUTDOWN})
    machine.submit(name, ["a"], None, "Exception")  # RuntimeError, rolled back
    machine.same_state()


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r64_shutdown_from_the_r41_retry_refuses_the_submission(impl_name: str) -> None:
    """R64 (fixed): a knock during the submission's second try leaves the R41 retry to
    it; the retry's try_complete shuts the purgatory down; the submission is refused."""
    machine: Any = lifecycle_machine(impl_name)(leave_out_open=False)
    machine.setup(tick=1, wheel_size=4, purge_interval=1000, timer_enabled=True)
    name = machine.create(10, {("try_complete", 2): KNOCK, ("try_complete", 3): SHUTDOWN})
    machine.submit(name, ["a"], None, "Exception")
    machine.same_state()


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r64_r65_shutdown_inside_the_timer_add_refuses_the_submission(impl_name: str) -> None:
    """R64, a finding of the machine (fixed): an operation due at once whose hand-over
    the executor refuses after shutting the purgatory down; the submission is refused
    and rolled back, nothing left watched in the closed purgatory."""
    machine: Any = lifecycle_machine(impl_name)(leave_out_open=False)
    machine.setup(tick=1, wheel_size=4, purge_interval=1000, timer_enabled=True)
    name = machine.create(0, {})
    machine.submit(name, ["a"], "executor", "Exception", CLOSE_REFUSE)
    machine.same_state()


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r54_submission_whose_lock_fails_to_acquire_keeps_no_claim(impl_name: str) -> None:
    """R54: the lock's acquire raises before the submission changed anything, so the
    call leaves no trace and the operation may be submitted again (the machine's
    shortest failing run with the lock fault site, replayed)."""
    machine: Any = lifecycle_machine(impl_name)(leave_out_open=False)
    machine.setup(tick=1, wheel_size=4, purge_interval=1000, timer_enabled=True)
    name = machine.create(10, {})
    machine.submit(name, ["a"], "lock", "Exception")
    machine.submit(name, ["a"], None, "Exception")
    machine.same_state()


@pytest.mark.parametrize("impl_name", implementation_names())
@pytest.mark.parametrize("early", ["completed before submission", "cancelled by its first try"])
def test_r61_operation_finished_before_watching_does_not_hold_finished_ones(
    impl_name: str, early: str
) -> None:
    """R61: only an operation that reaches the watching step unfinished counts; when the
    last one that did finishes, every finished operation is let go (watched drops to 0)."""
    machine: Any = lifecycle_machine(impl_name)(leave_out_open=False)
    machine.setup(tick=1, wheel_size=4, purge_interval=1000, timer_enabled=True)
    if early == "completed before submission":
        first = machine.create(10, {})
        machine.force_complete(first)
    else:
        first = machine.create(10, {("try_complete", 1): "cancel"})
    machine.submit(first, ["a"], None, "Exception")
    second = machine.create(10, {})
    machine.submit(second, ["a"], None, "Exception")
    machine.force_complete(second)
    machine.same_state()


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r61_an_operation_finished_before_its_submission_is_never_counted(impl_name: str) -> None:
    """R61: an operation completed before it is submitted never counts as unfinished, so
    its submission triggers no purge: the estimate keeps growing (R22) as the model says
    (the machine's shrunk run, replayed)."""
    machine: Any = lifecycle_machine(impl_name)(leave_out_open=False)
    machine.setup(tick=1, wheel_size=2, purge_interval=0, timer_enabled=True)
    for _ in range(2):
        name = machine.new_operation(delay=0, faults={})
        machine.force_complete(name=name)
        machine.submit(keys=["a"], kind="Exception", name=name, site=None)
        machine.same_state()
    machine.teardown()
