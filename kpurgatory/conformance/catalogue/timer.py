"""The hand-written vectors of the timer: due times, hand-overs, cancels, the wheel's levels.

Each run is a short step list whose comments give the arithmetic its steps rely on;
docs/spec.md states the rules they check.
"""

from __future__ import annotations

from kpurgatory.conformance.catalogue.run import RuleRun
from kpurgatory.steps import Add, Advance, Cancel, ClockAdvance, Init, NextDueTime, Step

__all__ = ["TIMER_RUNS"]


def _r1_due_time() -> list[Step]:
    return [
        Init(tick_ms=10, wheel_size=4, start_ms=0, clock_ms=3),
        Add("d5", 5),  # expiration 8 -> due 0 <= current 0: handed over inside add (R3)
        Add("d7", 7),  # expiration 10 -> due 10
        Add("d16", 16),  # expiration 19 -> due 10: may run 9 ms before its expiration
        Add("d17", 17),  # expiration 20 -> due 20
        Advance(6),  # now 9: nothing due yet (R4)
        Advance(1),  # now 10: d7 and d16 (same due: a multiset, R6)
        Advance(9),  # now 19: nothing
        Advance(1),  # now 20: d17
    ]


def _r2_r3_current_time() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, start_ms=0, clock_ms=0),
        ClockAdvance(50),  # the clock moves, the timer's current time stays 0 (R2)
        Add("late", -10),  # due 40: passed on the clock, but after current time: waits (R3)
        Add("now", -50),  # due 0 <= current 0: handed over at once
        Advance(0),  # drains at 50: "late" runs; current time becomes 50
        Add("zero", 0),  # due 50 <= 50: at once
        Add("one", 1),  # due 51: scheduled
        Advance(1),
    ]


def _r6_order() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=1, wheel_size=2, start_ms=0, clock_ms=0)]
    for delay in (9, 3, 27, 1, 3, 81, 9, 2):
        steps.append(Add(f"t{len(steps)}-{delay}", delay))
    steps += [Advance(5), Advance(100)]
    return steps


def _r8_result() -> list[Step]:
    return [
        Init(tick_ms=2, wheel_size=3),
        Advance(10),  # nothing scheduled: False
        Add("a", 3),  # due 12
        Add("b", 4),  # due 14
        Cancel("b"),
        Advance(1),  # now 11: False
        Advance(1),  # now 12: a runs: True
        Advance(5),  # b was cancelled: False
    ]


def _r9_r10_cancel_readd() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=3, timers=("main", "other")),
        Add("a", 10),
        Cancel("a"),
        Cancel("a"),  # idempotent (R9)
        Add("a", 10),  # re-adding a cancelled task schedules it again (R10)
        Advance(4),
        Add("a", 10, timer="other"),  # moves it: main drops, other grows (R10)
        Advance(10),  # main drains at 14: a is no longer there
        Advance(0, timer="other"),  # other drains at 14: a (due 14) runs
        Cancel("a"),  # a task that is not scheduled: no-op
        Add("a", 10, timer="other"),  # a task that already ran is scheduled again
        Advance(10, timer="other"),
    ]


def _r11_cancel_before_turn() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Add("first", 3, on_run=(Cancel("second"), Add("third", 0))),
        Add("second", 5),
        Add("fourth", 6, on_run=(Add("second", 5),)),
        Advance(10),  # first runs (third at once, nested), second skipped, fourth re-adds second
        Advance(4),
        Advance(1),
    ]


def _r44_next_due_time() -> list[Step]:
    return [
        Init(tick_ms=5, wheel_size=2, timers=("main", "other")),
        NextDueTime(),  # null: nothing scheduled
        Add("late", 400),
        Add("soon", 12),
        NextDueTime(),  # 10: floor(12, 5), below the overflow level holding late
        Cancel("soon"),
        NextDueTime(),  # 400: past the emptied bucket, into the overflow level
        Add("late", 400, "other"),  # moved
        NextDueTime(),  # null
        NextDueTime("other"),  # 400
        Advance(399, "other"),
        NextDueTime("other"),  # 400: a drain before it hands nothing over
        Advance(1, "other"),
        NextDueTime("other"),  # null
    ]


def _wheel_windows() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=2, wheel_size=3, start_ms=1, clock_ms=1)]
    for move in (0, 5, 13, 4):  # place tasks at every level's window edges from here
        steps.append(Advance(move))
        for span in (6, 18, 54):  # interval of levels 0, 1, 2 (tick 2, wheel 3)
            for jitter in (-2, -1, 0, 1, 2):
                steps.append(Add(f"a{len(steps)}-{span + jitter}", span + jitter))
    for move in (1, 1, 2, 3, 5, 8, 13, 21, 34, 55):
        steps.append(Advance(move))
    return steps


def _deep_levels() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=1, wheel_size=2, start_ms=0, clock_ms=0)]
    for delay in (1, 2, 3, 4, 7, 8, 15, 16, 31, 33, 64, 1000, 1023, 1024, 4096):
        steps.append(Add(f"d{delay}", delay))
    for step_ms in (1, 1, 2, 4, 8, 16, 32, 64, 1000, 3000, 100):
        steps.append(Advance(step_ms))
    return steps


def _r07_letting_time_pass() -> list[Step]:
    return [
        Init(tick_ms=2, wheel_size=4, start_ms=0, clock_ms=0, timers=("main", "aux")),
        Add("m5", 5),  # due 4 on main
        Add("a9", 9, "aux"),  # due 8 on aux
        ClockAdvance(7),  # the shared clock moves; nothing drains (R7: only advance_clock)
        NextDueTime(),
        Advance(0),  # drains main at 7: m5 runs
        Advance(0, "aux"),  # aux drains at 7 too: a9 (due 8) waits
        Advance(1, "aux"),  # the clock moves by exactly 1 to 8: a9 runs
        Add("m3", 3),  # now 8: due 10
        Advance(1),  # 9: nothing
        Advance(1),  # 10: m3
        Advance(0),  # again at 10: nothing
    ]


def _r12_size() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=3, timers=("main", "other")),
        Add("now", 0),  # handed over inside add: never counted
        Add("a", 2),
        Add("b", 7),  # a level up
        Add("c", 40),  # two levels up
        Add("a", 2),  # a re-add replaces: still 3
        Add("b", 7, "other"),  # moves: main 2, other 1
        Cancel("c"),
        Cancel("c"),
        Advance(2),  # a drains
        Advance(10, "other"),  # b drains
        Add("c", 40),
        Advance(100),
    ]


def _timer_inputs() -> list[Step]:
    return [
        Init(tick_ms=5, wheel_size=2, start_ms=3, clock_ms=3),
        Advance(-1),  # ValueError (R8, R35), the clock and the timer unchanged
        ClockAdvance(-1),  # ValueError
        Add("neg", -100),  # any delay is accepted; due at once (R3)
        Add("zero", 0),  # expiration 3, due 0: at once
        Add("far", 1 << 40),
        Add("tick", 2),  # expiration 5, due 5: waits
        NextDueTime(),
        Advance(-5),  # ValueError again, nothing drained
        Advance(2),
        NextDueTime(),
        Advance(1 << 40),
    ]


def _idle_drains() -> list[Step]:
    return [
        Init(tick_ms=3, wheel_size=4, start_ms=0, clock_ms=0),
        Advance(3),  # nothing scheduled: the current time still moves to 3 (R2)
        Add("at-once", 0),  # due 3 <= 3: handed over inside add (R3)
        Advance(2),  # 5: less than a tick, the current time stays 3
        Add("next", 0),  # due 3: at once
        Add("one", 1),  # expiration 6, due 6: waits
        Advance(1),  # 6: one runs
        Advance(6),  # 12: idle, two ticks
        Add("late", -1),  # due 9: at once
        Add("edge", 2),  # expiration 14, due 12: at once
    ]


def _idle_upper_levels() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=2, start_ms=0, clock_ms=0),
        Add("far", 1000),  # builds levels up to a tick of 512
        Cancel("far"),  # its bucket stays queued, due at 512
        Advance(100),  # nothing due: every level's time moves to 100, not the lowest alone
        Add("x", 3),  # due 103: one level up from 100, not in a bucket already expired
        Advance(1),
        Advance(2),  # 103: x runs
        Advance(500),
    ]


def _bucket_shapes() -> list[Step]:
    """Shapes published timer ports got wrong: several tasks in one bucket at each level,
    a cancel of a task in a bucket of each level, adds right after the clock moved with
    no drain, and due times on either side of every bucket's rounding."""
    steps: list[Step] = [Init(tick_ms=2, wheel_size=4, start_ms=1, clock_ms=1)]
    for span in (3, 9, 37, 131):  # levels 0 to 3 (intervals 8, 32, 128)
        for jitter in (0, 1, 1, 2):
            steps.append(Add(f"s{span}+{jitter}-{len(steps)}", span + jitter))
    for label in ("s9+1-7", "s37+0-9", "s131+2-16"):
        steps.append(Cancel(label))
    steps += [Advance(5), ClockAdvance(30)]
    for delay in (1, 2, 3, 7, 8, 9, 31, 32, 33):
        steps.append(Add(f"late{delay}", delay))
    steps.append(NextDueTime())
    for move in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89):
        steps.append(Advance(move))
    return steps


def _r01_negative_clock() -> list[Step]:
    # Floor division below zero: -23 rounds down to -25 (Java's truncation gives -20).
    return [
        Init(tick_ms=5, wheel_size=4, start_ms=-23, clock_ms=-23),
        Add("a", 6),  # expires at -17: due round_down(-17, 5) = -20 (truncation: -15)
        Add("b", 9),  # -14: due -15 (truncation: -10)
        Add("c", 21),  # -2: due -5 on the overflow level (truncation: 0)
        Add("d", 25),  # 2: due 0, across zero
        Add("now", 1),  # -22: due -25, the current time: handed over at once (R3)
        NextDueTime(),  # -20
        Advance(3),  # -20: a runs
        Advance(4),  # -16: nothing (b is due at -15)
        Advance(1),  # -15: b runs
        NextDueTime(),  # -5
        Advance(9),  # -6: nothing
        Advance(1),  # -5: c runs
        Advance(5),  # 0: d runs
    ]


# A table: its entries share a shape deliberately.
TIMER_RUNS: tuple[RuleRun, ...] = (
    RuleRun(
        "r01-due-time",
        "Due time is the expiration rounded down to the tick.",
        ("R1", "R3", "R4"),
        _r1_due_time,
    ),
    RuleRun(
        "r02-current-time",
        "Current time moves only in advance_clock, to the drain reading before the hand-over; "
        "add judges due-at-once against it.",
        ("R2", "R3", "R12"),
        _r2_r3_current_time,
    ),
    RuleRun(
        "r06-hand-over-order",
        "One drain hands over in non-decreasing due order.",
        ("R5", "R6"),
        _r6_order,
    ),
    RuleRun(
        "r08-advance-result",
        "advance_clock returns True iff it handed something over.",
        ("R8", "R9"),
        _r8_result,
    ),
    RuleRun(
        "r09-cancel-readd",
        "Cancel is idempotent; re-adding moves a task, also across timers.",
        ("R9", "R10", "R12"),
        _r9_r10_cancel_readd,
    ),
    RuleRun(
        "r11-cancel-before-turn",
        "A task cancelled or re-added by an earlier task in the same "
        "drain is not handed over; adds during a hand-over follow R3 against the drain reading.",
        ("R2", "R6", "R11"),
        _r11_cancel_before_turn,
    ),
    RuleRun(
        "r44-next-due-time",
        "next_due_time: the least scheduled due time, past emptied buckets and levels.",
        ("R44", "R1", "R9", "R10"),
        _r44_next_due_time,
    ),
    RuleRun(
        "wheel-windows",
        "Tasks one and two ticks either side of every level's window edge, from an unaligned "
        "start and after moves that leave the levels mid-window.",
        ("R1", "R4", "R5", "R6", "R2"),
        _wheel_windows,
    ),
    RuleRun(
        "deep-levels",
        "Delays across many overflow levels of a 2-bucket wheel.",
        ("R1", "R4", "R5", "R6"),
        _deep_levels,
    ),
    RuleRun(
        "r07-letting-time-pass",
        "advance_clock moves the shared clock by exactly its timeout and drains at the new "
        "reading; a clock move alone drains nothing; each timer drains only when advanced.",
        ("R7", "R2", "R4", "R5", "R44"),
        _r07_letting_time_pass,
    ),
    RuleRun(
        "r12-size",
        "size counts scheduled tasks: not those handed over inside add; a re-add replaces, a "
        "move to another timer moves the count, cancel and drain remove.",
        ("R12", "R3", "R9", "R10"),
        _r12_size,
    ),
    RuleRun(
        "timer-inputs",
        "The timer's inputs alone: negative timeouts and clock moves raise ValueError and "
        "change nothing; any delay is accepted, a negative one is due at once.",
        ("R35", "R8", "R3", "R1", "R44"),
        _timer_inputs,
    ),
    RuleRun(
        "idle-drains",
        "A drain with nothing due still moves the current time to the reading, by whole "
        "ticks: a task due at the new current time is handed over inside add.",
        ("R2", "R3", "R8"),
        _idle_drains,
    ),
    RuleRun(
        "idle-upper-levels",
        "A drain with nothing due moves the time of every wheel level, so a task added "
        "after it is placed against the current time, never in a bucket already expired.",
        ("R2", "R4", "R5"),
        _idle_upper_levels,
    ),
    RuleRun(
        "bucket-shapes",
        "Several tasks per bucket at every level, cancels in buckets of every level, adds "
        "right after the clock moved without a drain, due times either side of a rounding.",
        ("R1", "R2", "R4", "R5", "R6", "R9", "R12", "R44"),
        _bucket_shapes,
    ),
    RuleRun(
        "r01-negative-clock",
        "Negative clock readings round down (floor), on every level and across zero; a "
        "port whose division truncates toward zero runs these tasks late.",
        ("R1", "R2", "R3", "R44"),
        _r01_negative_clock,
    ),
)
