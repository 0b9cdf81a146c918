"""Wheel placement, cascades and overflow creation, on Kafka's worked examples (R1-R6)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpurgatory.optimized.wheel import (
    advanced_time,
    bucket_expiration,
    expired_at_level,
    fits_level,
    slot_index,
    virtual_bucket_id,
    wheel_interval,
)
from kpurgatory.spec.arithmetic import due_time, expiration_ms, is_due, round_down
from tests.optimized.helpers import Task, locate, manual_timer


def test_kafka_example_two_cascades_tick_1_wheel_3() -> None:
    """R4/R5: tick 1, wheel 3 (levels of 3, 9, 27, 81 ms): a task due at 26 starts on
    level 3 in bucket 18, cascades to level 2 bucket 24, then to level 1 bucket 26, and
    runs at 26; a task due at 27 sits on level 4 in bucket 27 and runs without cascading."""
    log: list[str] = []
    with manual_timer(1, 3) as timer:
        t26, t27 = Task(26, "t26", log), Task(27, "t27", log)
        timer.add(t26)
        timer.add(t27)
        assert timer.levels == 4
        assert locate(timer, t26) == (3, 18)
        assert locate(timer, t27) == (4, 27)
        path = [locate(timer, t26)]
        for _ in range(26):
            timer.advance_clock(1)
            timer._check()
            where = locate(timer, t26)
            if where is not None and where != path[-1]:
                path.append(where)
            if timer.clock.now_ms() < 26:
                assert log == []
        assert path == [(3, 18), (2, 24), (1, 26)]  # two cascades
        assert log == ["t26"]
        assert locate(timer, t27) == (4, 27)  # never moved
        assert timer.advance_clock(1) is True
        assert log == ["t26", "t27"]
        assert timer.size == 0


def test_kafka_example_jump_straight_to_26_cascades_in_one_drain() -> None:
    """R5/R6: one advance_clock(26) dequeues buckets 18, 24 and 26 in turn and runs the task."""
    log: list[str] = []
    with manual_timer(1, 3) as timer:
        timer.add(Task(26, "t26", log))
        assert timer.advance_clock(26) is True
        assert log == ["t26"]
        assert timer.current_time == 26
        timer._check()


@pytest.mark.parametrize(
    ("delay", "where"),
    [
        (1, (1, 1)),
        (5, (1, 5)),
        (19, (1, 19)),
        (20, (2, 20)),
        (25, (2, 20)),
        (399, (2, 380)),
        (401, (3, 400)),
        (8000, (4, 8000)),
    ],
)
def test_kafka_example_placement_tick_1_wheel_20(delay: int, where: tuple[int, int]) -> None:
    """R1: Kafka's default shape (levels 20 ms, 400 ms, 8 s, 160 s): level and bucket."""
    log: list[str] = []
    with manual_timer(1, 20) as timer:
        task = Task(delay, "t", log)
        timer.add(task)
        assert locate(timer, task) == where
        timer._check()
        assert timer.advance_clock(delay - 1) is False
        assert timer.advance_clock(1) is True
        assert log == ["t"]


def test_delay_zero_is_due_at_once_and_never_linked() -> None:
    """R3/R12: due time <= current time: handed over inside add, never counted."""
    log: list[str] = []
    with manual_timer(1, 20) as timer:
        timer.add(Task(0, "now", log))
        assert log == ["now"] and timer.size == 0 and timer.levels == 1


def test_overflow_wheels_are_created_on_demand_with_the_lower_interval_as_tick() -> None:
    with manual_timer(2, 4) as timer:
        assert timer.levels == 1
        timer.add(Task(7, "l1", []))
        assert timer.levels == 1
        timer.add(Task(8, "l2", []))  # 8 >= 0 + interval 8
        assert timer.levels == 2
        timer.add(Task(10_000, "far", []))
        ticks = [wheel.tick_ms for wheel in timer._wheel.levels()]
        assert ticks == [2, 8, 32, 128, 512, 2048, 8192]
        timer._check()


def test_overflow_wheel_starts_at_the_lower_current_time_rounded_down() -> None:
    """An overflow wheel created late starts at the lower wheel's current time, rounded."""
    with manual_timer(1, 3) as timer:
        timer.advance_clock(7)
        assert timer.current_time == 7
        task = Task(5, "t", [])  # due 12: level 2 (7 + 3 <= 12 < 7 + 9)
        timer.add(task)
        level2 = timer._wheel.overflow
        assert level2 is not None
        assert level2.current_time == 6  # 7 rounded down to the tick 3
        assert locate(timer, task) == (2, 12)
        timer._check()


def test_tick_larger_than_one_rounds_due_times_down() -> None:
    """R1: tick 10: delay 25 is due at 20, in the bucket of slot 2."""
    log: list[str] = []
    with manual_timer(10, 4, start_ms=3) as timer:
        assert timer.current_time == 0
        task = Task(25, "t", log)  # expires at 28, due 20
        timer.add(task)
        assert locate(timer, task) == (1, 20)
        timer.advance_clock(16)  # clock 19
        assert log == []
        timer.advance_clock(1)  # clock 20
        assert log == ["t"]


def test_negative_clock_readings_use_floor_rounding() -> None:
    """R1/R2: start at -7 with tick 5: current time -10; a delay 4 task is due at -5."""
    log: list[str] = []
    with manual_timer(5, 3, start_ms=-7) as timer:
        assert timer.current_time == -10
        task = Task(4, "t", log)  # expires at -3, due -5
        timer.add(task)
        assert locate(timer, task) == (1, -5)
        timer._check()
        assert timer.advance_clock(1) is False  # clock -6
        assert timer.advance_clock(1) is True  # clock -5
        assert log == ["t"]
        assert timer.current_time == -5


def test_bucket_expiration_minus_one_is_queued() -> None:
    """Kafka's -1 'no expiration' would clash with a real slot start on negative clocks."""
    log: list[str] = []
    with manual_timer(1, 4, start_ms=-3) as timer:
        task = Task(2, "t", log)  # due -1
        timer.add(task)
        assert locate(timer, task) == (1, -1)
        timer._check()
        timer.advance_clock(2)
        assert log == ["t"]


def test_current_time_follows_the_drain_reading_and_keeps_buckets_in_window() -> None:
    """R2: after an idle jump the current time is the reading rounded down; long delays
    then land on the level their distance from *now* calls for."""
    with manual_timer(1, 3) as timer:
        assert timer.advance_clock(100) is False
        assert timer.current_time == 100
        task = Task(2, "t", [])
        timer.add(task)
        assert locate(timer, task) == (1, 102)
        timer._check()


# -- the pure helpers: their contracts as properties -----------------------------------------

ticks = st.integers(min_value=1, max_value=1000)
times = st.integers(min_value=-(10**12), max_value=10**12)


@given(due=times, tick=ticks, size=st.integers(min_value=2, max_value=64))
def test_helpers_place_a_due_time_in_its_slot(due: int, tick: int, size: int) -> None:
    vid = virtual_bucket_id(due, tick)
    start = bucket_expiration(vid, tick)
    assert start <= due < start + tick
    assert start == round_down(due, tick)
    slot = slot_index(vid, size)
    assert 0 <= slot < size and (vid - slot) % size == 0
    assert wheel_interval(tick, size) == tick * size


@given(current_ticks=times, tick=ticks, time_ms=times)
def test_advanced_time_is_max_of_current_and_rounded_reading(
    current_ticks: int, tick: int, time_ms: int
) -> None:
    current = round_down(current_ticks, tick)
    moved = advanced_time(current, time_ms, tick)
    assert moved == max(current, round_down(time_ms, tick))
    assert moved % tick == 0


@given(due_ticks=times, current_ticks=times, tick=ticks)
def test_expired_at_level_is_is_due_on_tick_multiples(
    due_ticks: int, current_ticks: int, tick: int
) -> None:
    """R3: on the lowest wheel Kafka's ``e < c + tick`` test is exactly ``due <= c``."""
    due, current = round_down(due_ticks, tick), round_down(current_ticks, tick)
    assert expired_at_level(due, current, tick) == (due <= current)
    assert fits_level(due, current, tick) == (due < current + tick)


@given(
    start=times,
    delay=st.integers(min_value=-(10**6), max_value=10**9),
    tick=st.integers(min_value=1, max_value=50),
    size=st.integers(min_value=2, max_value=16),
)
def test_add_places_tasks_where_the_helpers_say(
    start: int, delay: int, tick: int, size: int
) -> None:
    """R1/R3: the hand-over decision, level, slot and bucket expiration ``SystemTimer.add``
    produces (through ``TimingWheel.add``) are the ones the arithmetic helpers (the
    definitions, with their contracts) compute."""
    log: list[str] = []
    with manual_timer(tick, size, start) as timer:
        task = Task(delay, "t", log)
        timer.add(task)
        timer._check()
        due = due_time(expiration_ms(start, delay), tick)
        if is_due(due, timer.current_time):
            assert log == ["t"] and locate(timer, task) is None
            return
        assert log == []
        for level, wheel in enumerate(timer._wheel.levels(), start=1):
            assert not expired_at_level(due, wheel.current_time, wheel.tick_ms)
            if fits_level(due, wheel.current_time, wheel.interval):
                vid = virtual_bucket_id(due, wheel.tick_ms)
                expected = bucket_expiration(vid, wheel.tick_ms)
                assert locate(timer, task) == (level, expected)
                bucket = wheel.buckets[slot_index(vid, size)]
                assert bucket.entries() == [task]
                return
        raise AssertionError(f"no level's window holds due time {due}")
