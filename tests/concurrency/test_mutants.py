"""The schedule tests have teeth: each known-wrong variant is caught, by the exhaustive
explorer and by Hypothesis; and KAFKA-8334 is pinned down as a documented limitation.

The mutants (tests/concurrency/mutants.py) are the bugs Kafka's history records in
these paths. A mutant counts as caught when a schedule makes the same property check
that passes on the real code fail, or deadlock.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.concurrency import scenarios as sc
from tests.concurrency.mutants import mutant
from tests.concurrency.scheduler import (
    ListChooser,
    PriorityChooser,
    ScheduleError,
    explore,
)

CATCHES: list[tuple[str, str, Callable[[], sc.Build], int, str]] = [
    # mutant, id, scenario, preemption bound, what the failure says
    ("plain_try_lock", "KAFKA-6653", lambda: sc.maybe_try_complete_race(1), 2, "completion lost"),
    (
        "non_atomic_completed",
        "double-complete",
        lambda: sc.force_complete_race(("force", "check")),
        2,
        "on_complete ran",
    ),
    (
        "run_without_cas",
        "expiry-without-cas",
        lambda: sc.force_complete_race(("force", "expire")),
        2,
        "on_complete ran",
    ),
    ("watch_after_check", "lost-event", lambda: sc.watch_vs_event("a"), 2, "event missed"),
    ("locked_check", "KAFKA-3994", lambda: sc.watch_vs_event("a"), 2, "deadlock"),
    ("silent_add", "lost-wakeup", lambda: sc.blocked_advance(True, False, False), 2, "deadlock"),
]
IDS = [f"{name}-{tag}" for name, tag, *_ in CATCHES]


@pytest.mark.parametrize(("name", "tag", "scenario", "bound", "says"), CATCHES, ids=IDS)
def test_mutant_is_caught_by_exhaustive_schedules(
    name: str, tag: str, scenario: Callable[[], sc.Build], bound: int, says: str
) -> None:
    found = explore(
        lambda chooser: sc.run_scenario(mutant(name), scenario(), chooser),
        preemption_bound=bound,
        max_runs=5_000,
    )
    assert isinstance(found.failure, ScheduleError), f"{name} not caught: {found.describe()}"
    assert says in str(found.failure)
    print(f"\n{name} ({tag}) caught after {found.runs} schedules:\n{found.failure}")


@pytest.mark.parametrize(("name", "tag", "scenario", "bound", "says"), CATCHES, ids=IDS)
def test_mutant_is_caught_by_hypothesis_and_shrunk(
    name: str, tag: str, scenario: Callable[[], sc.Build], bound: int, says: str
) -> None:
    impl = mutant(name)

    @settings(
        max_examples=1_500,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(schedule=sc.priority_schedules())
    def property_holds(schedule: PriorityChooser) -> None:
        sc.run_scenario(impl, scenario(), schedule)

    with pytest.raises(ScheduleError) as failure:
        property_holds()
    assert says in str(failure.value)
    assert "schedule:" in str(failure.value)
    print(f"\n{name} ({tag}), shrunk by Hypothesis:\n{failure.value}")


def test_the_same_scenarios_pass_on_the_reference() -> None:
    """Control: every catching scenario passes on the unmutated reference."""
    reference = sc.implementation("reference")
    for _, _, scenario, bound, _ in CATCHES:
        sc.exhaust(reference, scenario(), bound=bound)


def test_printed_schedule_replays_the_kafka_6653_lost_completion() -> None:
    """The choice list printed with a failure replays it exactly; the real code survives it."""
    found = explore(
        lambda chooser: sc.run_scenario(
            mutant("plain_try_lock"), sc.maybe_try_complete_race(1), chooser
        ),
        preemption_bound=2,
        max_runs=1_000,
    )
    assert isinstance(found.failure, ScheduleError)
    choices = found.failure.choices
    with pytest.raises(ScheduleError, match="completion lost") as replayed:
        sc.run_scenario(
            mutant("plain_try_lock"), sc.maybe_try_complete_race(1), ListChooser(choices)
        )
    assert replayed.value.trace == found.failure.trace
    sc.run_scenario(
        sc.implementation("reference"), sc.maybe_try_complete_race(1), ListChooser(choices)
    )


# -- KAFKA-8334: a documented limitation of maybe_try_complete (R20) ------------------------------


@pytest.mark.parametrize("shared_with_operation", [False, True], ids=["plain-holder", "group-lock"])
def test_r20_kafka_8334_maybe_try_complete_loses_completion_to_a_foreign_holder(
    subject: sc.Impl, shared_with_operation: bool
) -> None:
    """Limitation (R20): if the lock is held by code not in this operation's
    ``maybe_try_complete`` (unrelated work, or another operation sharing the lock),
    nobody sees the pending flag and the completion waits for the timeout."""
    found = explore(
        lambda chooser: sc.run_scenario(
            subject, sc.foreign_lock_holder("maybe", shared_with_operation), chooser
        ),
        preemption_bound=2,
        max_runs=2_000,
    )
    assert isinstance(found.failure, ScheduleError)
    assert "completion lost" in str(found.failure)


@pytest.mark.parametrize("shared_with_operation", [False, True], ids=["plain-holder", "group-lock"])
def test_r20_r25_kafka_8334_purgatory_path_never_loses_it(
    subject: sc.Impl, shared_with_operation: bool
) -> None:
    """What the purgatory does about it (R20, R25): ``check_and_complete`` takes the lock
    blocking (``safe_try_complete``), so the same race never loses the completion."""
    sc.exhaust(subject, sc.foreign_lock_holder("check", shared_with_operation), bound=2)
