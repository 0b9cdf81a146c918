"""Every pair of public calls that share an operation or a lifecycle, under controlled
schedules, on every instrumentable implementation (issue 11; scenarios in
tests/concurrency/lifecycle.py). Exhaustive within a preemption bound in the quick
suite, one bound deeper under ``slow``, and random PCT schedules through Hypothesis."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.concurrency import lifecycle as lc
from tests.concurrency import scenarios as sc
from tests.concurrency.scheduler import PriorityChooser, RunResult, explore

slow = pytest.mark.slow


@pytest.mark.parametrize("bound", [2, pytest.param(3, marks=slow)])
def test_r22_r29_cancel_for_key_racing_submission_never_leaves_a_timer_entry(
    subject: sc.Impl, bound: int
) -> None:
    sc.exhaust(subject, lc.submit_vs_cancel_for_key(), bound=bound)


@pytest.mark.parametrize("bound", [2, pytest.param(3, marks=slow)])
def test_r32_r38_submission_racing_shutdown_fails_without_trace(
    subject: sc.Impl, bound: int
) -> None:
    sc.exhaust(subject, lc.submit_vs_shutdown(), bound=bound)


@pytest.mark.parametrize(
    ("submitted", "bound"), [(True, 2), (False, 2), pytest.param(True, 3, marks=slow)]
)
def test_r32_r39_concurrent_shutdowns_all_return_shut_down(
    subject: sc.Impl, submitted: bool, bound: int
) -> None:
    sc.exhaust(subject, lc.shutdown_vs_shutdown(submitted), bound=bound)


@pytest.mark.parametrize(
    ("other", "bound"),
    [("submit", 1), ("check", 1), ("force", 1), pytest.param("check", 2, marks=slow),
     pytest.param("force", 2, marks=slow), pytest.param("submit", 2, marks=slow),
     pytest.param("submit", 3, marks=slow), pytest.param("check", 3, marks=slow)],
)  # fmt: skip
def test_r30_purge_racing_submission_and_check(subject: sc.Impl, other: str, bound: int) -> None:
    sc.exhaust(subject, lc.purge_vs(other), bound=bound, max_runs=20_000)


@pytest.mark.parametrize("delay_ms", [0, sc.DELAY_MS])
def test_r14_close_racing_add_all_interleavings(subject: sc.Impl, delay_ms: int) -> None:
    sc.exhaust(subject, lc.close_vs_add(delay_ms), bound=None)


@pytest.mark.parametrize("bound", [2, pytest.param(4, marks=slow)])
def test_r20_r41_blocking_path_honours_the_pending_flag(subject: sc.Impl, bound: int) -> None:
    sc.exhaust(subject, lc.maybe_vs_check(), bound=bound)


@pytest.mark.parametrize(
    ("via", "rivals", "bound"),
    [("abandon", ("check",), 2), ("abandon", ("expire",), 2), ("abandon", ("check", "expire"), 1),
     ("cancel", ("check",), 2), pytest.param("cancel", ("expire",), 2, marks=slow),
     pytest.param("cancel", ("check", "expire"), 1, marks=slow),
     pytest.param("abandon", ("check", "expire"), 2, marks=slow),
     pytest.param("cancel", ("check", "expire"), 2, marks=slow)],
)  # fmt: skip
def test_r40_abandon_racing_completion_and_expiry(
    subject: sc.Impl, via: str, rivals: tuple[str, ...], bound: int
) -> None:
    sc.exhaust(subject, lc.abandon_race(rivals, via), bound=bound, max_runs=20_000)


@pytest.mark.parametrize("bound", [2, pytest.param(3, marks=slow)])
def test_r40_cancel_racing_the_submission(subject: sc.Impl, bound: int) -> None:
    """Found a schedule on the reference before ``cancel`` decided under the operation's
    lock (choices [0, 1, 1, 0, ...]: the operation was left watched but untimed)."""
    sc.exhaust(subject, lc.submit_vs_cancel(), bound=bound)


@pytest.mark.parametrize(
    ("mode", "bound"),
    [
        *((mode, 1) for mode in ("candidates", "scan", "bounded", "unwatch")),
        *(pytest.param(mode, 2, marks=slow) for mode in ("candidates", "scan", "bounded")),
        pytest.param("unwatch", 2, marks=slow),
        pytest.param("candidates", 3, marks=slow),
    ],
)
def test_r61_r71_let_go_racing_the_submission_of_the_operation_it_finishes(
    subject: sc.Impl, mode: str, bound: int
) -> None:
    """A let-go pass popped the same candidate twice (the submission recorded it again
    while the pass ran) and raised KeyError out of the winning force_complete; and a
    let-go that ran before the submission's last watch left a finished operation
    watched with nothing unfinished (both implementations)."""
    if mode in ("scan", "bounded") and subject.name != "optimized":
        pytest.skip("the modes are the optimized purgatory's ways to find finished operations")
    sc.exhaust(subject, lc.let_go_vs_submission(mode), bound=bound, max_runs=150_000)


@pytest.mark.parametrize("bound", [2, pytest.param(3, marks=slow)])
def test_r29_an_operation_cancel_for_key_returned_never_expires(
    subject: sc.Impl, bound: int
) -> None:
    """Found by the history checker: a drain handed the expiry over before cancel_for_key
    took the operation's lock; the run then won the completion of an operation that
    cancel_for_key returned pending."""
    sc.exhaust(subject, lc.cancel_for_key_vs_expiry(), bound=bound)


@pytest.mark.parametrize("bound", [1, pytest.param(2, marks=slow)])
def test_r29_r41_a_run_that_finds_its_operation_taken_out_answers_a_knock(
    subject: sc.Impl, bound: int
) -> None:
    """Found by the history checker right after the R29 fix: a run that held the lock
    only to find the operation taken out returned without looking at the pending flag,
    and the knock it met was lost."""
    sc.exhaust(subject, lc.cancel_for_key_vs_expiry(knock=True), bound=bound)


@pytest.mark.parametrize("holder", lc.KNOCK_HOLDERS)
@pytest.mark.parametrize(
    ("force", "bound"), [(False, 2), (True, 1), pytest.param(True, 2, marks=slow)]
)
def test_r20_r41_r55_a_knock_is_tried_after_it_began_unless_a_force_finished_it(
    subject: sc.Impl, holder: str, force: bool, bound: int
) -> None:
    sc.exhaust(subject, lc.knock_vs_holder(holder, force), bound=bound, max_runs=20_000)


@pytest.mark.parametrize("holder", ["check", "submit"])
def test_r20_a_knock_may_return_untried_once_a_force_finished_the_operation(
    subject: sc.Impl, holder: str
) -> None:
    """The shape of a real-thread history an outside checker rejected: the knock's try-lock
    fails, the holder releases and looks at the pending flag before the knock sets it,
    then a force_complete finishes the operation, and the knocker, seeing it finished,
    returns without its retry. No try_complete started after the knock began, and none
    is owed: the operation was finished before the knock returned (R20)."""
    outcomes: list[tuple[bool, bool]] = []
    knock = lc.knock_vs_holder(holder, True, outcomes)

    def stop_at_the_shape(world: sc.World) -> sc.Check:
        check = knock(world)

        def checked(result: RunResult) -> None:
            check(result)  # the guarantee holds on this schedule too
            if outcomes[-1] == (False, True):
                raise AssertionError(f"untried knock, finished on return: {result.choices}")

        return checked

    found = explore(
        lambda chooser: sc.run_scenario(subject, stop_at_the_shape, chooser),
        preemption_bound=2,
        max_runs=20_000,
    )
    assert found.failure is not None, f"shape never met: {found.describe()}"
    assert "untried knock, finished on return" in str(found.failure), str(found.failure)


BUILDS: dict[str, Callable[[], sc.Build]] = {
    "cancel_for_key": lc.submit_vs_cancel_for_key,
    "shutdown": lc.submit_vs_shutdown,
    "shutdown_twice": lc.shutdown_vs_shutdown,
    "purge_submit": lambda: lc.purge_vs("submit"),
    "purge_check": lambda: lc.purge_vs("check"),
    "purge_force": lambda: lc.purge_vs("force"),
    "close_add": lc.close_vs_add,
    "maybe_check": lc.maybe_vs_check,
    "abandon": lc.abandon_race,
    "submit_cancel": lc.submit_vs_cancel,
    "let_go_submit": lc.let_go_vs_submission,
    "cancel_for_key_expiry": lc.cancel_for_key_vs_expiry,
    "knock_check_force": lambda: lc.knock_vs_holder("check", True),
    "knock_cancel_force": lambda: lc.knock_vs_holder("cancel_for_key", True),
}


@given(which=st.sampled_from(sorted(BUILDS)), schedule=sc.priority_schedules())
def test_r38_r39_r40_r41_lifecycle_races_random_schedules(
    subject: sc.Impl, which: str, schedule: PriorityChooser
) -> None:
    sc.run_scenario(subject, BUILDS[which](), schedule)


@pytest.mark.parametrize("bound", [2, pytest.param(3, marks=slow)])
def test_r30_r38_a_rollback_racing_a_force_complete_never_takes_the_estimate_below_zero(
    subject: sc.Impl, bound: int
) -> None:
    sc.exhaust(subject, lc.rollback_vs_force_complete(), bound=bound)
