"""Seeded bugs in the aio layer, each caught by the test that pins the behaviour.

The loop driver and the aio purgatory had behaviours no test pinned (a sampled mutation
run killed 16 of 23 mutants there): these mutants plant each one back, through the same
``applied`` patching as ``tests/mutants``, and assert that the named test fails under it.
The unmutated code passes the same tests in the ordinary run.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from kpurgatory.aio import PurgatoryImplementation
from tests.aio import test_bounded_driver as bounded
from tests.aio import test_bounded_let_go as let_go
from tests.aio import test_cancellation as cancellation
from tests.aio import test_reentrant_shutdown as reentrant
from tests.aio import test_waiter_settling as settling
from tests.aio.support import AioCase
from tests.aio.test_cancellation_machine import MACHINES
from tests.mutants.catalog import Mutant, MutantError, applied, mutated_source
from tests.mutants.patching import OPERATION, PURGATORY
from tests.mutants.test_mutants_caught import MUTANT_SETTINGS

_PURGATORY = "kpurgatory.aio.purgatory"
_DRIVER = "kpurgatory.aio.driver"
_OPERATION = "kpurgatory.aio.operation"

Check = Callable[[], None]


def _on(test: Callable[[Any], None], implementation: str) -> Check:
    return lambda: test(implementation)


def _on_aio(test: Callable[[AioCase], None], implementation: PurgatoryImplementation) -> Check:
    """``test`` on the ``aio`` fixture's value for ``implementation``."""
    return lambda: test(AioCase(implementation))


def _machine(implementation: str) -> Check:
    """The cancellation machine on a fixed, derandomized budget (no shrinking)."""

    def check() -> None:
        run_state_machine_as_test(
            MACHINES[implementation],
            settings=settings(MUTANT_SETTINGS, max_examples=60, stateful_step_count=30),
        )

    return check


AIO_MUTANTS: tuple[tuple[Mutant, Check], ...] = (
    (
        Mutant(
            "waiter-cancel-does-not-abandon",
            _OPERATION,
            "Waiter.cancel",
            "self._registry._give_up(self._operation)",
            "pass",
            "R47: cancelling the wait leaves the operation watched and timed.",
        ),
        _machine("optimized"),
    ),
    (
        Mutant(
            "reference-waiter-not-told-of-base-exception",
            _OPERATION,
            "ReferenceDelayedOperation.force_complete",
            "except BaseException as exc:  # raised by on_complete (anything): this call won",
            "except Exception as exc:",
            "R58: a CancelledError from on_complete leaves the reference's waiter pending.",
        ),
        _machine("reference"),
    ),
    (
        Mutant(
            "loop-check-accepts-no-running-loop",
            _PURGATORY,
            "AsyncPurgatory._check_loop",
            "if running_loop() is not self._loop:",
            "if running_loop() not in (self._loop, None):",
            "R59: a call from a thread with no running loop is accepted (checked once, "
            "used later).",
        ),
        _on(settling.test_r59_a_call_before_the_loop_runs_is_refused_with_no_trace, "optimized"),
    ),
    (
        Mutant(
            "driver-ignores-wrapped-shutdown",
            _PURGATORY,
            "AsyncPurgatory._advance",
            "if self._timer.closed:",
            "if False:",
            "R58: a wrapped purgatory shut down directly makes the driver spin.",
        ),
        _on(
            settling.test_r58_the_wrapped_purgatory_shut_down_directly_ends_the_driver_and_the_waiters,
            "optimized",
        ),
    ),
    (
        Mutant(
            "reference-abandon-silent",
            _OPERATION,
            "ReferenceDelayedOperation._abandon",
            "waiter._abandoned()",
            "pass",
            "R58: purgatory.abandon on the reference never settles the waiter.",
        ),
        _on_aio(settling.test_r58_abandon_on_the_wrapped_purgatory_settles_the_waiter, "reference"),
    ),
    (
        Mutant(
            "reference-abandon-without-waiter",
            _OPERATION,
            "ReferenceDelayedOperation._abandon",
            "if waiter is not None:",
            "if True:",
            "R40: cancel on a reference operation submitted without a waiter fails.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "reference"),
    ),
    (
        Mutant(
            "base-exception-not-told",
            OPERATION,
            "DelayedOperation._on_complete_told",
            "except BaseException as exc:  # anything, CancelledError included (R48, R58)",
            "except Exception as exc:",
            "R58: a CancelledError from on_complete leaves the waiter pending.",
        ),
        lambda: settling.test_r58_a_waiter_settles_whatever_on_complete_raises(
            AioCase("optimized"), asyncio.CancelledError("x")
        ),
    ),
    (
        Mutant(
            "user-clock-inverted",
            _DRIVER,
            "LoopTimerDriver._loop_time_of",
            "(due - self._clock.now_ms()) / 1000",
            "(self._clock.now_ms() - due) / 1000",
            "R45: a user's clock mapped to loop time backwards (fires early).",
        ),
        settling.test_r45_the_driver_maps_a_users_clock_to_loop_time,
    ),
    (
        Mutant(
            "user-clock-multiplied",
            _DRIVER,
            "LoopTimerDriver._loop_time_of",
            "(due - self._clock.now_ms()) / 1000",
            "(due - self._clock.now_ms()) * 1000",
            "R45: a user's clock mapped with the wrong unit (never fires).",
        ),
        settling.test_r45_the_driver_maps_a_users_clock_to_loop_time,
    ),
    (
        Mutant(
            "user-clock-none",
            _DRIVER,
            "LoopTimerDriver._loop_time_of",
            "return self._loop.time() + (due - self._clock.now_ms()) / 1000",
            "return None  # type: ignore[return-value]",
            "R45: no loop time for a user's clock.",
        ),
        settling.test_r45_the_driver_maps_a_users_clock_to_loop_time,
    ),
    (
        Mutant(
            "waiter-cancel-returns-false",
            _OPERATION,
            "Waiter.cancel",
            "\n    return True",
            "\n    return False",
            "R47: Waiter.cancel breaks Future.cancel's return contract.",
        ),
        lambda: cancellation.test_r57_cancelled_while_suspended_abandons_through_every_composition(
            AioCase("optimized"), "asyncio.wait"
        ),
    ),
    (
        Mutant(
            "loop-argument-unchecked",
            _PURGATORY,
            "AsyncPurgatory.__init__",
            "elif not isinstance(loop, asyncio.AbstractEventLoop):",
            "elif False:",
            "R35: a loop that is not an event loop is accepted.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "armed-for-a-completed-operation",
            _PURGATORY,
            "AsyncPurgatory.try_complete_else_watch",
            "if not completed and self._timer_enabled:",
            "if self._timer_enabled:",
            "R45: the driver is armed for an operation that completed at once.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "armed-with-timer-disabled",
            _PURGATORY,
            "AsyncPurgatory._submit",
            "elif self._timer_enabled:  # _arm_for's first test inlined",
            "else:  # _arm_for's first test inlined",
            "R33, R45: the driver is armed though nothing is ever timed.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "armed-due-kept-after-stop",
            _DRIVER,
            "LoopTimerDriver.stop",
            "self._armed_due = None",
            "pass",
            "R49: armed_due still reports a handle after shutdown.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "default-wheel-size",
            _PURGATORY,
            "AsyncPurgatory.__init__",
            "impl.SystemTimer(name, tick_ms, wheel_size,",
            "impl.SystemTimer(name, tick_ms, 16,",
            "R15: the aio purgatory's timer does not get the default wheel size.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "purgatory-repr",
            _PURGATORY,
            "AsyncPurgatory.__repr__",
            "waiting={len(self._waiting)}",
            "waiting={len(self._waiting) + 1}",
            "The repr misreports the waiting count.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "driver-repr",
            _DRIVER,
            "LoopTimerDriver.__repr__",
            'f"armed_due={self._armed_due}"',
            'f"armed={self._armed_due}"',
            "The driver's repr misnames its state.",
        ),
        _on(settling.test_aio_purgatory_small_contracts, "optimized"),
    ),
    (
        Mutant(
            "driver-unbounded-firing",
            _DRIVER,
            "LoopTimerDriver._continue",
            "executor.run_backlog(self._max_hand_overs)",
            "executor.run_backlog(1 << 62)",
            "R70: one firing runs every expiry of its drain, however many.",
        ),
        _on(bounded.test_r70_a_firing_hands_over_at_most_the_bound_then_yields, "optimized"),
    ),
    (
        Mutant(
            "driver-continues-later",
            _DRIVER,
            "LoopTimerDriver._next",
            "self._handle = self._loop.call_soon(self._continue)",
            "self._handle = self._loop.call_later(0.001, self._continue)",
            "R70: the next batch waits for a later timer instead of running at once.",
        ),
        _on(bounded.test_r70_a_firing_hands_over_at_most_the_bound_then_yields, "reference"),
    ),
    (
        Mutant(
            "driver-stop-keeps-backlog",
            _DRIVER,
            "LoopTimerDriver.stop",
            "self._executor.drop_backlog()",
            "pass",
            "R70, R32: the rest of a batch still expires after shutdown.",
        ),
        _on(bounded.test_r70_shutdown_from_an_expiry_drops_the_rest_of_the_backlog, "optimized"),
    ),
    (
        Mutant(
            "let-go-unbounded",
            _DRIVER,
            "LoopTimerDriver.__init__",
            "let_go._let_go_bound = LET_GO_PER_HAND_OVER * max_hand_overs",
            "let_go._let_go_bound = 0",
            "R71: the last expiry of a pause unlinks every finished operation in one call.",
        ),
        let_go.test_r71_a_let_go_pass_unlinks_at_most_its_bound_and_goes_on_by_itself,
    ),
    (
        Mutant(
            "let-go-not-continued",
            _DRIVER,
            "LoopTimerDriver._continue_let_go",
            "let_go._let_go_step()",
            "pass",
            "R71, R61: what a bounded pass left behind stays watched until some later call.",
        ),
        let_go.test_r71_a_let_go_pass_unlinks_at_most_its_bound_and_goes_on_by_itself,
    ),
    (
        Mutant(
            "bounded-let-go-overflows-into-a-scan",
            PURGATORY,
            "DelayedOperationPurgatory._note_completed",
            "if len(candidates) > self._candidates_limit and not self._let_go_bound:",
            "if len(candidates) > self._candidates_limit:",
            "R71: many finished operations fall back to one unbounded scan of every list.",
        ),
        let_go.test_r71_many_finished_never_overflow_into_an_unbounded_scan,
    ),
    (
        Mutant(
            "let-go-owed-after-a-failed-scan",
            PURGATORY,
            "DelayedOperationPurgatory._purge_pass",
            "if bound:  # a scan took every candidate: owed only if more came meanwhile",
            "if bound and not self._scan_all:",
            "R71, R67: a key failing in every scan keeps a let-go owed: endless passes.",
        ),
        let_go.failing_key_round,
    ),
    (
        Mutant(
            "waiter-registered-after-submission",
            _PURGATORY,
            "AsyncPurgatory._submit",
            "waiting[id(waiter)] = waiter  # before the submission",
            "pass  # after the submission",
            "R49, R58: a shutdown from the operation's own try_complete leaves its wait "
            "pending for ever.",
        ),
        lambda: (
            reentrant.test_r49_r58_shutdown_from_the_awaited_operations_try_complete_settles_its_waiter(
                "optimized", 2, False, "submit"
            )
        ),
    ),
    (
        Mutant(
            "shutdown-off-loop-keeps-waiters",
            _PURGATORY,
            "AsyncPurgatory.shutdown",
            "self._forget(waiter)  # loop), so",
            "pass  # loop), so",
            "R50: after the loop closed, shutdown abandons the operations but their waiters "
            "stay counted and referenced.",
        ),
        _on(
            reentrant.test_r50_shutdown_from_a_thread_after_the_loop_closed_lets_the_waiters_go,
            "reference",
        ),
    ),
)


def _patchable(module: str) -> bool:
    """A module written in Python (a mypyc-compiled one has no source to patch)."""
    return str(getattr(importlib.import_module(module), "__file__", "")).endswith(".py")


@pytest.mark.parametrize(("mutant", "check"), AIO_MUTANTS, ids=[m.name for m, _ in AIO_MUTANTS])
def test_aio_mutant_is_caught(mutant: Mutant, check: Check) -> None:
    """Under the mutant the named test fails (an assertion, an error, or a timeout of
    the virtual-time wait it bounds itself with).

    Skipped, saying why, when the code the mutant patches is not the code it expects
    (its target or fragment is gone: the aio source was changed from outside, as a
    mutation run does, or refactored; then adapt the mutant to the new code): failing
    there would blame the named test for a patch that never applied."""
    if not _patchable(mutant.module):
        pytest.skip(f"{mutant.module} is compiled: nothing to patch")
    try:
        mutated_source(mutant)
    except MutantError as exc:
        pytest.skip(f"the code this mutant patches is not the code it expects: {exc}")
    with applied(mutant), pytest.raises(BaseException) as caught:
        check()
    assert not isinstance(caught.value, KeyboardInterrupt)
