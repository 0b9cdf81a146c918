"""Seeded bugs in the bounded drain (R72, R73), each caught by the test that pins it.

The bounded drain's bugs are not the equivalence machines' (they never pass
``max_entries``), so each mutant here names its own check: a timer-level test, the
bounded-drain machine on a derandomized budget, or an aio test. Patched through
``tests.mutants.catalog.applied`` as the other catalogs are; the unmutated code passes the
same checks in the ordinary run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import settings

from kpurgatory import reference as reference_package
from kpurgatory.aio import PurgatoryImplementation
from tests import test_bounded_drain as timer_tests
from tests.aio import test_bounded_drain_driver as driver_tests
from tests.machines import test_bounded_drain_machine as machine
from tests.mutants.catalog import Mutant, applied, mutated_source
from tests.mutants.patching import QUEUE, TIMER
from tests.mutants.test_mutants_caught import MUTANT_SETTINGS
from tests.optimized import test_bounded_drain_structure as structure
from tests.support import needs_python_source

pytestmark = needs_python_source()

_REFERENCE_TIMER = "kpurgatory.reference.timer"
_DRIVER = "kpurgatory.aio.driver"
_AIO_PURGATORY = "kpurgatory.aio.purgatory"

Check = Callable[[], None]


def _machine(which: type[machine.BoundedDrainMachine]) -> Check:
    """The bounded-drain machine on a fixed, derandomized budget (no shrinking)."""
    budget = settings(MUTANT_SETTINGS, max_examples=80, stateful_step_count=40)
    return lambda: machine.run_machine(which, budget)


def _on(
    test: Callable[[PurgatoryImplementation], None], implementation: PurgatoryImplementation
) -> Check:
    return lambda: test(implementation)


BOUNDED_DRAIN_MUTANTS: tuple[tuple[Mutant, Check], ...] = (
    (
        Mutant(
            "wheel-advanced-past-unfinished",
            TIMER,
            "SystemTimer._drain",
            "if bucket is not None and queue.has_due(now):",
            "if False:",
            "R73: a drain that stopped early still moves the wheel to the reading, past the "
            "bucket it left half flushed: that bucket's entries cascade against a later time.",
        ),
        structure.test_r73_the_drain_stops_inside_a_bucket_and_resumes_it_first,
    ),
    (
        Mutant(
            "unfinished-bucket-dropped",
            TIMER,
            "SystemTimer._drain",
            "queue.put_back(bucket)",
            "pass",
            "R73, R5: the entries left in the bucket a drain stopped inside stay linked and "
            "counted, but no later drain polls the bucket: they never run.",
        ),
        structure.test_r73_a_plain_advance_finishes_a_pending_drain,
    ),
    (
        Mutant(
            "drain-bound-ignored",
            TIMER,
            "Drain.flush",
            "return bucket.flush(self.take, left)",
            "return bucket.flush(self.take)",
            "R73: the bound is ignored inside a bucket: one piece cascades a whole bucket.",
        ),
        structure.test_r73_the_drain_stops_inside_a_bucket_and_resumes_it_first,
    ),
    (
        Mutant(
            "unfinished-not-polled-first",
            QUEUE,
            "DelayQueue.poll",
            "if unfinished is not None:",
            "if unfinished is not None and not (self.heap and self.heap[0][0] <= now):",
            "R6, R73: the next drain takes the finer buckets the last one cascaded into "
            "before the bucket it left half flushed: expiries out of due order.",
        ),
        structure.test_r73_the_drain_stops_inside_a_bucket_and_resumes_it_first,
    ),
    (
        Mutant(
            "next-due-ignores-unfinished",
            QUEUE,
            "DelayQueue.earliest_due",
            "best: int | None = None if unfinished is None else unfinished.min_due()",
            "best: int | None = None",
            "R44, R73: next_due_time leaves out the tasks in the half-flushed bucket.",
        ),
        structure.test_r73_cancel_in_the_half_flushed_bucket_and_next_due_time,
    ),
    (
        Mutant(
            "pending-ignores-lagging-wheel",
            TIMER,
            "SystemTimer.drain_pending",
            "or self._wheel.current_time != self._current_time",
            "or False",
            "R73: a drain that stopped at a bucket's end with due buckets left reads as done: "
            "a driver would wait for a later due time while tasks are overdue.",
        ),
        _machine(machine.OptimizedBoundedDrain),
    ),
    (
        Mutant(
            "reference-bound-ignored",
            _REFERENCE_TIMER,
            "SystemTimer.advance_clock",
            "del due_entries[limit:]",
            "pass",
            "R73: the reference's bounded drain hands over every due task at once.",
        ),
        lambda: timer_tests.test_r73_pieces_hand_over_in_due_order_never_early_and_end(
            reference_package, 2
        ),
    ),
    (
        Mutant(
            "driver-ignores-drain-pending",
            _DRIVER,
            "LoopTimerDriver._next",
            "elif self._timer.drain_pending:",
            "elif False:",
            "R72: the rest of a drain waits for a call_at of the next due time instead of "
            "going on at once with call_soon.",
        ),
        _on(
            driver_tests.test_r72_a_firing_drains_at_most_the_bound_then_goes_on_with_call_soon,
            "optimized",
        ),
    ),
    (
        Mutant(
            "driver-drain-unbounded",
            _AIO_PURGATORY,
            "AsyncPurgatory._advance",
            "self._purgatory.advance_clock(0, max_entries)",
            "self._purgatory.advance_clock(0)",
            "R72: one firing cascades and collects every due entry, however many.",
        ),
        _on(
            driver_tests.test_r72_a_firing_drains_at_most_the_bound_then_goes_on_with_call_soon,
            "reference",
        ),
    ),
    (
        Mutant(
            "driver-arms-during-continuation",
            _DRIVER,
            "LoopTimerDriver.schedule",
            "if self._continuing:",
            "if False:",
            "R72: a submission between pieces arms a call_at while the continuation is under way.",
        ),
        _on(driver_tests.test_r72_submit_cancel_between_pieces, "optimized"),
    ),
)


@pytest.mark.parametrize(
    ("mutant", "check"), BOUNDED_DRAIN_MUTANTS, ids=[m.name for m, _ in BOUNDED_DRAIN_MUTANTS]
)
def test_bounded_drain_mutant_is_caught(mutant: Mutant, check: Check) -> None:
    """The mutant is armed (its fragment occurs once), and under it the named check
    fails (an assertion or an error)."""
    original, mutated = mutated_source(mutant)
    assert original != mutated
    with applied(mutant), pytest.raises(BaseException) as caught:
        check()
    assert not isinstance(caught.value, KeyboardInterrupt)


_TIMER_LEVEL = [m for m, _ in BOUNDED_DRAIN_MUTANTS if not m.module.startswith("kpurgatory.aio")]


@pytest.mark.parametrize("mutant", _TIMER_LEVEL, ids=[m.name for m in _TIMER_LEVEL])
def test_bounded_drain_machine_catches_timer_mutant(mutant: Mutant) -> None:
    """The bounded-drain machine alone (derandomized budget) fails on every timer-level
    mutant too: the model check finds each from scratch, not only its targeted test."""
    reference = mutant.module == _REFERENCE_TIMER
    which = machine.ReferenceBoundedDrain if reference else machine.OptimizedBoundedDrain
    with applied(mutant), pytest.raises(AssertionError):
        _machine(which)()
