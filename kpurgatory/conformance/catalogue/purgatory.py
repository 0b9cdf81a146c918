"""The hand-written vectors of the purgatory: watches, keys, completion, purge, shutdown.

Each run is a short step list whose comments give the arithmetic its steps rely on;
docs/spec.md states the rules they check.
"""

from __future__ import annotations

from kpurgatory.conformance.catalogue.run import RuleRun
from kpurgatory.steps import (
    Add,
    Advance,
    Cancel,
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    NextDueTime,
    PurgatoryAdvance,
    SetReady,
    Shutdown,
    Step,
    Watch,
)

__all__ = ["PURGATORY_RUNS"]


def _r16_r17_force_and_expiry() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=3),
        Watch("op", 20, ("k",)),
        ForceComplete("op"),  # wins: cancels the timer entry, on_complete (R16)
        ForceComplete("op"),  # False
        Watch("exp", 5, ("k", "j")),
        Advance(5),  # exp expires: completed(via expiry) then expired (R17)
        ForceComplete("exp"),
        CheckAndComplete("k"),  # both completed already: unlinked, not counted (R25)
        CheckAndComplete("j"),
    ]


def _r22_r23_watch() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("first-try", 10, ("a", "b"), ready=True),  # never watched, counted or timed
        Watch("second-try", 10, ("a", "b"), ready_on_try=2),  # watched and counted, not timed
        Watch("pending", 10, ("a", "b", "c")),
        Watch("third-try", 10, ("c",), ready_on_try=3),
        CheckAndComplete("c"),  # third-try completes on its third try; pending stays
        CheckAndComplete("a"),  # unlinks second-try (completed), tries pending
        Advance(10),
    ]


def _r24_keys() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("dup", 10, ("k", "k", 7, "k", 7)),  # watched once per distinct key
        Watch("int-vs-str", 10, (7, "7")),
        CheckAndComplete("7"),
        SetReady("int-vs-str"),
        CheckAndComplete(7),
        Watch("empty", 10, ()),  # ValueError (R36)
    ]


def _r25_r26_check() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("x", 50, ("p",)),
        Watch("y", 50, ("p", "q")),
        Watch("z", 50, ("p",)),
        CheckAndComplete("missing"),  # 0; never creates a key
        SetReady("x"),
        SetReady("z"),
        CheckAndComplete("p"),  # 2 (x and z), y stays
        SetReady("y"),
        CheckAndComplete("q"),  # 1: y completes; q dropped; y still linked on p
        CheckAndComplete("p"),  # 0: y unlinked but not counted; p dropped (R26)
    ]


def _r29_cancel_for_key() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("a", 30, ("k", "m")),
        Watch("b", 30, ("k",)),
        Watch("c", 30, ("k",), ready_on_try=2),
        CancelForKey("k"),  # [a, b, c], c completed included; a and b leave the timer
        CancelForKey("k"),  # []
        Advance(40),  # nothing expires
        SetReady("a"),
        CheckAndComplete("m"),  # a is still watched on m (R29)
    ]


def _r30_purge() -> list[Step]:
    steps: list[Step] = [Init(tick_ms=1, wheel_size=4, purge_interval=2)]
    for index in range(5):
        steps.append(Watch(f"op{index}", 100, ("k", f"own{index}")))
    steps += [
        ForceComplete("op0"),
        ForceComplete("op1"),
        PurgatoryAdvance(1),  # estimate 5 - delayed 3 = 2: not > 2, no purge
        ForceComplete("op2"),
        PurgatoryAdvance(1),  # 5 - 2 = 3 > 2: estimate := 2, purge op0..op2
        PurgatoryAdvance(200),  # op3, op4 expire; 2 - 0 = 2: no purge
        Watch("op5", 1, ("k",)),
        PurgatoryAdvance(1),  # 3 - 0 > 2: purge
    ]
    return steps


def _r32_r33_r34() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timer_enabled=False),
        Watch("op", 5, ("k",)),
        Watch("op", 5, ("k",)),  # second submission: ValueError (R34)
        Advance(100),  # timer_enabled=False: never expires (R33)
        SetReady("op"),
        CheckAndComplete("k"),
        Shutdown(),
        Shutdown(),  # idempotent
        Watch("late", 5, ("k",)),  # RuntimeError (R32)
        PurgatoryAdvance(1),  # RuntimeError
    ]


def _r35_inputs() -> list[Step]:
    return [
        Init(tick_ms=5, wheel_size=2),
        Advance(-1),  # ValueError
        ClockAdvance(-1),  # ValueError
        PurgatoryAdvance(-5),  # ValueError
        Add("neg", -100),  # any delay is accepted; due at once
        Watch("negop", -3, ("k",)),  # due at once: expires inside the watch
    ]


def _r40_cancel_submitted() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, purge_interval=0),
        Watch("op", 20, ("k", "m")),
        Watch("other", 20, ("k",)),
        Cancel("op"),  # an abandon (R40): off both lists and the timer; the estimate stays
        Cancel("op"),  # abandoned already: nothing changes
        CheckAndComplete("k"),  # tries other only
        SetReady("op"),
        CheckAndComplete("m"),  # m's list was dropped with op: 0, no try
        PurgatoryAdvance(1),  # estimate 2 - delayed 1 > 0: purge check resets it to 1
        Advance(30),  # op never expires; other does
    ]


def _r14_closed_timer() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Add("t", 10),
        Watch("op", 20, ("k",)),
        Add("u", 5, "aux"),
        Shutdown(),  # closes main: its tasks stay counted and scheduled, never run (R14)
        NextDueTime(),  # 10, still
        Advance(50),  # False; the clock does not move (R14)
        Advance(-1),  # a negative timeout is a ValueError, closed or not (R8)
        PurgatoryAdvance(-1),  # ValueError before the shutdown's RuntimeError (R35)
        PurgatoryAdvance(1),  # RuntimeError (R32)
        Cancel("t"),  # still works on a closed timer: main's size drops
        Add("t", 10),  # RuntimeError: a closed timer schedules nothing
        Advance(5, "aux"),  # the other timer is open: u runs
        NextDueTime(),  # 20 (op)
    ]


def _r22_error_precedence() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("op", 20, ("k",)),
        Watch("op", 20, ("k",)),  # ValueError: a resubmission (R34)
        Shutdown(),
        Watch("empty", 20, ()),  # ValueError: empty keys come first (R36)
        Watch("late", 20, ("k",)),  # RuntimeError: shut down (R32)
        Watch("op", 20, ("k",)),  # RuntimeError: the shutdown before the resubmission
        CheckAndComplete("k"),  # still works after shutdown
        CancelForKey("k"),
    ]


def _on_run_stops_at_exception() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Watch("op", 50, ("k",)),
        Watch("op2", 50, ("k",)),
        Add("quiet", 3),
        Add(
            "worker",
            5,
            "aux",
            on_run=(
                Cancel("worker"),  # unscheduling itself changes nothing in its own run
                ForceComplete("op"),  # recorded in worker's unit, with worker's due time
                Add("quiet", 3),  # RuntimeError (main is closed): the run ends here
                ForceComplete("op2"),  # never happens
            ),
        ),
        Shutdown(),
        Advance(5, "aux"),  # worker runs: op completes, op2 does not
        CheckAndComplete("k"),  # op unlinked, not counted; op2 tried once
    ]


def _repeated_watch() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("op", 50, ("k",), ready_on_try=3),  # two tries: pending
        Watch("op", 50, ("k",), ready_on_try=3),  # ValueError (R34): no try, no reset
        CheckAndComplete("k"),  # the third try: completes
        Watch("op", 50, ("k",), ready_on_try=3),  # ValueError still
    ]


# A table: its entries share a shape deliberately.
PURGATORY_RUNS: tuple[RuleRun, ...] = (
    RuleRun(
        "r16-force-and-expiry",
        "force_complete exactly once; expiry completes then expires.",
        ("R16", "R17", "R25"),
        _r16_r17_force_and_expiry,
    ),
    RuleRun(
        "r22-watch-sequence",
        "try_complete_else_watch: first try, second try, pending.",
        ("R22", "R23", "R25"),
        _r22_r23_watch,
    ),
    RuleRun(
        "r24-keys",
        "Watch keys are deduplicated; 7 and '7' differ; empty keys raise.",
        ("R24", "R36"),
        _r24_keys,
    ),
    RuleRun(
        "r25-check-and-complete",
        "check_and_complete counts only what it completed; empty lists are dropped.",
        ("R25", "R26", "R27"),
        _r25_r26_check,
    ),
    RuleRun(
        "r29-cancel-for-key",
        "cancel_for_key returns the watchers and cancels their timers.",
        ("R29", "R28"),
        _r29_cancel_for_key,
    ),
    RuleRun(
        "r30-purge",
        "Purge when estimate - num_delayed > purge_interval, strictly.",
        ("R30", "R27", "R28"),
        _r30_purge,
    ),
    RuleRun(
        "r32-shutdown-timer-disabled-resubmit",
        "timer_enabled=False, one submission per operation, shutdown.",
        ("R32", "R33", "R34"),
        _r32_r33_r34,
    ),
    RuleRun(
        "r35-inputs",
        "Negative advances raise ValueError; negative delays are due at once.",
        ("R35", "R3"),
        _r35_inputs,
    ),
    RuleRun(
        "r40-cancel-submitted",
        "cancel() on a submitted operation abandons it: it leaves its watcher lists and "
        "the timer, never completes or expires, and the purge estimate stays.",
        ("R40", "R9", "R26", "R27", "R28", "R30"),
        _r40_cancel_submitted,
    ),
    RuleRun(
        "r14-closed-timer",
        "A closed timer keeps its tasks in size and next_due_time, moves no clock and "
        "schedules nothing; a negative timeout is a ValueError even there.",
        ("R14", "R12", "R44", "R8", "R35", "R32"),
        _r14_closed_timer,
    ),
    RuleRun(
        "r22-error-precedence",
        "try_complete_else_watch's errors in order: empty keys, then shut down, then "
        "resubmission; check_and_complete and cancel_for_key still work after shutdown.",
        ("R36", "R32", "R34", "R29"),
        _r22_error_precedence,
    ),
    RuleRun(
        "on-run-stops-at-exception",
        "A task's run is one call: a step of its on_run that raises ends the run, the later "
        "steps do not happen; the unit's events keep the due time of its hand-over.",
        ("R14", "R16", "R25"),
        _on_run_stops_at_exception,
    ),
    RuleRun(
        "repeated-watch",
        "A repeated watch submits the same operation again: refused, and it resets nothing "
        "(the try count goes on).",
        ("R34", "R22", "R23", "R25"),
        _repeated_watch,
    ),
)
