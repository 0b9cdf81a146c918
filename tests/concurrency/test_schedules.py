"""Races between purgatory callers on the real implementations, under controlled schedules.

Each property runs two ways: exhaustively (every interleaving within a preemption
bound, asserting the enumeration completed) and under Hypothesis (random PCT
schedules that shrink to a short, printed schedule). Both run on every implementation
package whose synchronization goes through ``kpurgatory.sync``; one that bypasses it
is skipped with the list of primitives to route (the ``subject`` fixture, in this
folder's conftest). Deeper bounds are marked ``slow`` (see docs/verification.md).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.concurrency import scenarios as sc
from tests.concurrency.scheduler import PriorityChooser

slow = pytest.mark.slow

PAIRS = list(itertools.combinations_with_replacement(sc.COMPLETERS, 2))
TRIPLES = [
    *itertools.combinations(sc.COMPLETERS, 3),
    ("force", "force", "force"),
    ("check", "check", "expire"),
]
"""Every set of three distinct completers, plus two with repeats; all 20 run under slow."""

# -- property 1: force_complete exactly once (R16, R17, R25) --------------------------------------


@pytest.mark.parametrize("kinds", PAIRS, ids="+".join)
def test_r16_two_completers_exactly_one_wins_exhaustive(
    subject: sc.Impl, kinds: tuple[str, ...]
) -> None:
    sc.exhaust(subject, sc.force_complete_race(kinds), bound=2)


@slow
@pytest.mark.parametrize("kinds", PAIRS, ids="+".join)
def test_r16_two_completers_three_preemptions_exhaustive(
    subject: sc.Impl, kinds: tuple[str, ...]
) -> None:
    sc.exhaust(subject, sc.force_complete_race(kinds), bound=3, max_runs=20_000)


@pytest.mark.parametrize("kinds", TRIPLES, ids="+".join)
def test_r16_three_completers_exactly_one_wins_exhaustive(
    subject: sc.Impl, kinds: tuple[str, ...]
) -> None:
    sc.exhaust(subject, sc.force_complete_race(kinds), bound=1)


@slow
@pytest.mark.parametrize(
    "kinds", list(itertools.combinations_with_replacement(sc.COMPLETERS, 3)), ids="+".join
)
def test_r16_three_completers_two_preemptions_exhaustive(
    subject: sc.Impl, kinds: tuple[str, ...]
) -> None:
    sc.exhaust(subject, sc.force_complete_race(kinds), bound=2, max_runs=50_000)


@slow
def test_r16_all_four_completers_exhaustive(subject: sc.Impl) -> None:
    sc.exhaust(subject, sc.force_complete_race(sc.COMPLETERS), bound=1)


@given(
    kinds=st.lists(st.sampled_from(sc.COMPLETERS), min_size=2, max_size=4),
    schedule=sc.priority_schedules(),
)
def test_r16_r17_completers_race_random_schedules(
    subject: sc.Impl, kinds: list[str], schedule: PriorityChooser
) -> None:
    sc.run_scenario(subject, sc.force_complete_race(kinds), schedule)


@pytest.mark.parametrize(
    ("event", "force", "bound"),
    [(True, False, 2), (False, True, 2), (True, True, 1), pytest.param(True, True, 2, marks=slow)],
)
def test_r22_r23_submission_races_completers_exhaustive(
    subject: sc.Impl, event: bool, force: bool, bound: int
) -> None:
    sc.exhaust(subject, sc.submit_race(event, force), bound=bound)


@given(event=st.booleans(), force=st.booleans(), schedule=sc.priority_schedules())
def test_r22_r23_submission_races_completers_random_schedules(
    subject: sc.Impl, event: bool, force: bool, schedule: PriorityChooser
) -> None:
    sc.run_scenario(subject, sc.submit_race(event, force), schedule)


# -- property 2: maybe_try_complete never loses a purgatory caller's knock (R20) -----------------


@pytest.mark.parametrize(
    ("callers", "bound"),
    [(1, 2), (2, 1), pytest.param(1, 4, marks=slow), pytest.param(2, 2, marks=slow)],
)
def test_r20_maybe_try_complete_completes_without_timeout_and_never_blocks_exhaustive(
    subject: sc.Impl, callers: int, bound: int
) -> None:
    sc.exhaust(subject, sc.maybe_try_complete_race(callers), bound=bound, max_runs=20_000)


@given(callers=st.integers(1, 3), schedule=sc.priority_schedules())
def test_r20_maybe_try_complete_random_schedules(
    subject: sc.Impl, callers: int, schedule: PriorityChooser
) -> None:
    sc.run_scenario(subject, sc.maybe_try_complete_race(callers), schedule)


# -- property 3: an event during try_complete_else_watch is never missed (R22, R25) -------------


@pytest.mark.parametrize(
    ("key", "bound"),
    [("a", 2), ("b", 2), pytest.param("a", 3, marks=slow), pytest.param("b", 3, marks=slow)],
)
def test_r22_r25_event_during_watch_is_never_missed_exhaustive(
    subject: sc.Impl, key: str, bound: int
) -> None:
    sc.exhaust(subject, sc.watch_vs_event(key), bound=bound)


@given(key=st.sampled_from(["a", "b"]), schedule=sc.priority_schedules())
def test_r22_r25_event_during_watch_random_schedules(
    subject: sc.Impl, key: str, schedule: PriorityChooser
) -> None:
    sc.run_scenario(subject, sc.watch_vs_event(key), schedule)


# -- property 4: cancel, add, cancel_for_key, shutdown races (R9, R11, R29, R32, R37) -----------


@pytest.mark.parametrize("bound", [2, pytest.param(None, marks=slow)])
def test_r9_r11_cancel_racing_expiry_all_interleavings(subject: sc.Impl, bound: int | None) -> None:
    """Within two preemptions in the quick tier; every interleaving under ``slow``."""
    found = sc.exhaust(subject, sc.cancel_vs_expiry(), bound=bound)
    assert found.runs > 10


@pytest.mark.parametrize(
    ("adders", "bound"), [(2, 2), pytest.param(2, 3, marks=slow), pytest.param(3, 1, marks=slow)]
)
def test_r3_r5_add_racing_advance_clock_exhaustive(
    subject: sc.Impl, adders: int, bound: int
) -> None:
    sc.exhaust(subject, sc.add_vs_advance(adders), bound=bound)


@pytest.mark.parametrize(
    ("key", "bound"),
    [("a", 2), ("b", 2), pytest.param("a", 3, marks=slow), pytest.param("b", 3, marks=slow)],
)
def test_r29_cancel_for_key_racing_completion_exhaustive(
    subject: sc.Impl, key: str, bound: int
) -> None:
    sc.exhaust(subject, sc.cancel_for_key_vs_completion(key), bound=bound)


@pytest.mark.parametrize(
    ("reaper", "bound"),
    [(False, 1), pytest.param(True, 1, marks=slow), pytest.param(False, 2, marks=slow)],
)
def test_r32_r37_shutdown_racing_everything_exhaustive(
    subject: sc.Impl, reaper: bool, bound: int
) -> None:
    sc.exhaust(subject, sc.shutdown_vs_everything(reaper), bound=bound, max_runs=30_000)


@given(
    which=st.sampled_from(["shutdown", "add", "cancel_for_key_a", "cancel_for_key_b"]),
    schedule=sc.priority_schedules(),
)
def test_r29_r32_races_random_schedules(
    subject: sc.Impl, which: str, schedule: PriorityChooser
) -> None:
    builds = {
        "shutdown": sc.shutdown_vs_everything(),
        "add": sc.add_vs_advance(3),
        "cancel_for_key_a": sc.cancel_for_key_vs_completion("a"),
        "cancel_for_key_b": sc.cancel_for_key_vs_completion("b"),
    }
    sc.run_scenario(subject, builds[which], schedule)


# -- waits on the timer's condition: no lost wake-up (R7, R14) ---------------------------------


@pytest.mark.parametrize(
    ("add", "wake", "close", "bound"),
    [
        (True, False, False, None),
        (False, True, False, None),
        (False, False, True, None),
        (True, True, False, None),
        (True, False, True, None),
        (False, True, True, None),
        (True, True, True, 1),
        pytest.param(True, True, True, 2, marks=slow),
    ],
)
def test_r7_r14_waiting_advance_clock_is_always_woken_exhaustive(
    subject: sc.Impl, add: bool, wake: bool, close: bool, bound: int | None
) -> None:
    sc.exhaust(subject, sc.blocked_advance(add, wake, close), bound=bound, max_runs=20_000)


@given(add=st.booleans(), wake=st.booleans(), close=st.booleans(), schedule=sc.priority_schedules())
def test_r7_r14_waiting_advance_clock_random_schedules(
    subject: sc.Impl, add: bool, wake: bool, close: bool, schedule: PriorityChooser
) -> None:
    if add or wake or close:  # with no event at all the waiter rightly waits forever
        sc.run_scenario(subject, sc.blocked_advance(add, wake, close), schedule)
