"""Hypothesis properties of the pure arithmetic (spec, and the optimized wheel's helpers).

Each property runs twice: with Hypothesis's default (random) backend in the normal
suite, and with the CrossHair backend (hypothesis-crosshair: inputs come from
symbolic execution, so branch conditions guide the search) in the separate, bounded
``crosshair`` job: ``pytest -m crosshair tests/contracts`` (excluded by default).
The properties restate the contracts of kpurgatory/spec/arithmetic.py as executable
checks (R1, R2, R3) and tie the optimized helpers to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpurgatory.optimized import wheel as ow
from kpurgatory.spec import arithmetic as ar
from tests.contracts import diff_pairs

CROSSHAIR_EXAMPLES = 40
"""Examples per property under the CrossHair backend (each is a symbolic path)."""

ms = st.integers(-(10**12), 10**12)
ticks = st.integers(1, 10**4)
sizes = st.integers(2, 512)


@dataclass(frozen=True)
class Property:
    """A named property: strategies for its arguments and the check itself."""

    name: str
    strategies: tuple[st.SearchStrategy[Any], ...]
    check: Callable[..., None]

    def run(self, backend: str, max_examples: int | None = None) -> None:
        """Run the property under ``backend`` ("hypothesis" or "crosshair")."""
        chosen = settings(
            backend=backend,
            database=None,
            deadline=None,
            max_examples=max_examples or settings().max_examples,
            suppress_health_check=list(HealthCheck),
        )
        chosen(given(*self.strategies)(self.check))()


def _round_down(value: int, tick: int) -> None:
    """R1: floor to a multiple of the tick, for negative readings too."""
    down = ar.round_down(value, tick)
    assert down % tick == 0 and down <= value < down + tick
    assert ar.due_time(value, tick) == down


def _next_current_time(current: int, now: int, tick: int) -> None:
    """R2: never backwards, tick-aligned, and equal to the wheel's own rule."""
    current = ar.round_down(current, tick)
    after = ar.next_current_time(current, now, tick)
    assert after >= current and after % tick == 0 and after <= max(current, now)
    assert after == ow.advanced_time(current, now, tick)


def _slot_and_bucket(due: int, tick: int, size: int) -> None:
    """The slot is in range and the bucket starts at the due time's tick boundary."""
    slot = ar.slot_of(due, tick, size)
    assert 0 <= slot < size
    assert slot == ow.slot_index(ow.virtual_bucket_id(due, tick), size)
    start = ar.bucket_start(due, tick)
    assert start == ow.bucket_expiration(ow.virtual_bucket_id(due, tick), tick)
    assert start <= due < start + tick


def _due_now(due: int, current: int, tick: int) -> None:
    """R3: for tick-aligned times, "due at once" is Kafka's per-level expired test."""
    due, current = ar.round_down(due, tick), ar.round_down(current, tick)
    assert ar.is_due(due, current) == ow.expired_at_level(due, current, tick)


def _overflow(current: int, tick: int, size: int) -> None:
    """The overflow wheel: tick = the span below, start = current time rounded to it."""
    current = ar.round_down(current, tick)
    span = ar.overflow_tick(tick, size)
    assert span == ow.wheel_interval(tick, size) == ar.level_tick(tick, size, 1)
    start = ar.overflow_start(current, tick, size)
    assert start % span == 0 and start <= current < start + span


def _deadline_level(ahead: int, current: int, tick: int, size: int) -> None:
    """The level is the lowest whose window holds the due time; -1 iff due at once."""
    current = ar.round_down(current, tick)
    due = ar.round_down(current + ahead, tick)
    level = ar.deadline_level(due, current, tick, size)
    assert (level == -1) == ar.is_due(due, current)
    if level >= 0:
        assert ar.level_holds(due, current, tick, size, level)
        assert all(not ar.level_holds(due, current, tick, size, lower) for lower in range(level))


PROPERTIES = [
    Property("round_down", (ms, ticks), _round_down),
    Property("next_current_time", (ms, ms, ticks), _next_current_time),
    Property("slot_and_bucket", (ms, ticks, sizes), _slot_and_bucket),
    Property("due_now", (ms, ms, ticks), _due_now),
    Property("overflow", (ms, ticks, sizes), _overflow),
    Property(
        "deadline_level",
        (st.integers(-(10**6), 10**9), ms, st.integers(1, 100), st.integers(2, 64)),
        _deadline_level,
    ),
]
IDS = [p.name for p in PROPERTIES]


@pytest.mark.parametrize("prop", PROPERTIES, ids=IDS)
def test_r1_r2_r3_arithmetic_property(prop: Property) -> None:
    prop.run("hypothesis")


@pytest.mark.crosshair
@pytest.mark.parametrize("prop", PROPERTIES, ids=IDS)
def test_r1_r2_r3_arithmetic_property_under_crosshair_backend(prop: Property) -> None:
    prop.run("crosshair", CROSSHAIR_EXAMPLES)


@given(
    ahead=st.integers(-50, 2_000),
    current=st.integers(-990, 1_000),  # rounded down by a tick <= 8: stays in the domain
    tick=st.integers(1, 8),
    size=st.integers(2, 4),
)
def test_real_wheel_places_every_due_time_where_the_spec_says(
    ahead: int, current: int, tick: int, size: int
) -> None:
    """The optimized ``TimingWheel.add`` puts an entry in the level, slot and bucket
    ``deadline_level`` / ``slot_of`` / ``bucket_start`` name (random side of the
    ``crosshair diffbehavior`` pair ``spec_placement``/``opt_placement``)."""
    current = ar.round_down(current, tick)
    due = ar.round_down(current + ahead, tick)
    expected = diff_pairs.spec_placement(due, current, tick, size)
    assert expected is not None
    assert diff_pairs.opt_placement(due, current, tick, size) == expected


@pytest.mark.crosshair
def test_crosshair_backend_is_live_and_finds_a_needle() -> None:
    """The backend really is symbolic: it finds the one slot start that random testing
    would not (a property wrong only for due == 7_777_777 * 9 on a 9 ms tick)."""

    def wrong_only_at_the_needle(due: int) -> None:
        assert ar.bucket_start(due, 9) != 7_777_777 * 9 or due % 9 != 0

    run = settings(backend="crosshair", database=None, deadline=None, max_examples=100)
    with pytest.raises(AssertionError):
        run(given(st.integers())(wrong_only_at_the_needle))()
