"""The Kafka model where two documented differences meet, as upstream Kafka's classes behave.

Found by running the kit on Kafka's own classes (conformance/examples/java-kafka): each
sequence below is one the search shrank to, with what Kafka's classes answered. With
``--allow kafka`` the kit compares a port with ``kafka_model`` (every difference on), so
the model must answer the same, and with a difference off it must still answer as the
spec says.
"""

from __future__ import annotations

import json

from kpurgatory.conformance.driver import run_steps
from kpurgatory.conformance.kafka_model import kafka_model
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    CancelForKey,
    Init,
    PurgatoryAdvance,
    Shutdown,
    Step,
    Watch,
)
from kpurgatory.spec.known_differences import KNOWN_DIFFERENCES
from kpurgatory.steps import steps_from_json

ALL = frozenset(difference.id for difference in KNOWN_DIFFERENCES)
INIT = Init(tick_ms=1, wheel_size=2, purge_interval=0)


def observe(on: frozenset[str], steps: list[Step]) -> list[dict[str, object]]:
    return [observation.to_json() for observation in run_steps(kafka_model(on), steps)]


def test_a_negative_timeout_after_shutdown_neither_raises_in_kafka() -> None:
    """kafka-after-shutdown with kafka-negative-timeout: the purgatory's advanceClock(-1)
    after shutdown polls the closed timer's queue and runs the purge check."""
    steps: list[Step] = [INIT, Shutdown(), PurgatoryAdvance(-1)]
    assert observe(ALL, steps)[2]["raised"] is None
    assert observe(ALL - {"kafka-negative-timeout"}, steps)[2]["raised"] == "ValueError"
    assert observe(ALL - {"kafka-after-shutdown"}, steps)[2]["raised"] == "RuntimeError"


def test_a_task_due_at_once_on_a_closed_timer_is_refused_by_its_executor() -> None:
    """kafka-after-close: add on a closed SystemTimer submits a task due at once to the shut-
    down executor (RejectedExecutionException out of add) and links a later one."""
    steps: list[Step] = [INIT, Shutdown(), Add("t0", 0), Add("t1", 1)]
    answers = observe(ALL, steps)
    assert answers[2]["raised"] == "RuntimeError"
    assert answers[3]["raised"] is None
    assert answers[3]["state"]["timer_sizes"] == {"main": 1}  # type: ignore[index]
    assert observe(ALL - {"kafka-after-close"}, steps)[3]["raised"] == "RuntimeError"


def test_a_resubmission_after_cancel_for_key_is_timed_again() -> None:
    """kafka-resubmission: cancelForKey only cancels the timer entry; a later
    tryCompleteElseWatch of the same operation adds it to the timer again."""
    watch = Watch("op0", 2, ("a",))
    steps: list[Step] = [INIT, watch, watch, CancelForKey("a"), watch]
    state = observe(ALL, steps)[4]["state"]
    assert state["timer_sizes"] == {"main": 1} and state["num_delayed"] == 1  # type: ignore[index]
    assert observe(ALL - {"kafka-resubmission"}, steps)[4]["raised"] == "ValueError"


def test_a_flush_that_raises_on_a_closed_timer_strands_the_rest_of_its_bucket() -> None:
    """kafka-after-close: the first due task of a bucket fails with RejectedExecutionException
    out of advanceClock; the rest of that bucket stays linked and counted, and is never
    flushed (the bucket has left the delay queue)."""
    steps: list[Step] = [INIT, Add("t0", 2), Shutdown(), Add("t1", 2), Advance(2), Advance(5)]
    answers = observe(ALL, steps)
    assert answers[4]["raised"] == "RuntimeError"
    assert answers[4]["state"]["timer_sizes"] == {"main": 1}  # type: ignore[index]
    assert answers[5]["raised"] is None and answers[5]["events"] == []
    assert answers[5]["state"]["timer_sizes"] == {"main": 1}  # type: ignore[index]


def test_a_flush_that_raises_strands_the_rest_of_an_overflow_bucket() -> None:
    """The same in an overflow bucket: t2 (due at once by the drain reading) and t3 (not
    yet due) share a bucket of the third level; its flush fails on t2 and strands t3, so
    the next advance hands nothing over and raises nothing (search seed 2 on Kafka)."""
    start = 1 << 40
    steps: list[Step] = [
        Init(tick_ms=10, wheel_size=2, start_ms=start, clock_ms=start, purge_interval=0),
        Advance(11),
        Advance(1),
        Advance(2),
        Advance(14),
        Shutdown(),
        Add("t2", 0),
        Add("t3", 6),
        Advance(1),
        PurgatoryAdvance(5),
    ]
    answers = observe(ALL, steps)
    assert [answer["raised"] for answer in answers[6:]] == [None, None, "RuntimeError", None]
    assert answers[9]["state"]["timer_sizes"] == {"main": 1}  # type: ignore[index]


def test_an_operation_refused_by_a_closed_timer_stays_watched() -> None:
    """kafka-after-shutdown with kafka-after-close: tryCompleteElseWatch after shutdown
    watches the operation and counts it, then the closed timer's executor refuses it (due
    at once): RuntimeError, and nothing is undone (search seed 8 on Kafka)."""
    steps: list[Step] = [
        INIT,
        Shutdown(),
        PurgatoryAdvance(1),
        Watch("op0", -(1 << 40), ("a",)),
    ]
    answer = observe(ALL, steps)[3]
    assert answer["raised"] == "RuntimeError"
    state = answer["state"]
    assert (state["watched"], state["watched_keys"], state["estimated_total_operations"]) == (  # type: ignore[index]
        1,
        1,
        1,
    )
    assert observe(ALL - {"kafka-after-close"}, steps)[3]["state"]["watched"] == 0  # type: ignore[index]


def _sequence(*lines: str) -> list[Step]:
    return steps_from_json([json.loads(line) for line in lines])


def _ran(answer: dict[str, object]) -> list[object]:
    return [event["task"] for event in answer["events"]]  # type: ignore[attr-defined]


def test_a_drain_hands_buckets_over_one_at_a_time() -> None:
    """kafka-flush-current-time: Kafka's advanceClock moves the wheels to one bucket's
    expiration, flushes it, then polls the next. Task a (bucket 1) re-adds b, due at the
    drain reading 6, and cancels it: with the wheels at 1, b went to a second-level bucket
    of expiration 4, which the drain then dequeues empty, so the current time ends at 4,
    not 6, and a later delay-0 add is scheduled, not run (Kafka's classes with an inline
    executor; a model that dequeued every bucket before handing any over said 6)."""
    steps = _sequence(
        '{"step": "init", "tick_ms": 1, "wheel_size": 4}',
        '{"step": "add", "task": "b", "delay_ms": 0}',
        '{"step": "add", "task": "a", "delay_ms": 1, "on_run": ['
        '{"step": "add", "task": "b", "delay_ms": 0}, {"step": "cancel", "task": "b"}]}',
        '{"step": "add", "task": "c", "delay_ms": 3}',
        '{"step": "advance", "ms": 6}',
        '{"step": "add", "task": "d", "delay_ms": 0}',
        '{"step": "advance", "ms": 0}',
    )
    answers = observe(ALL, steps)
    assert _ran(answers[4]) == ["a", "c"]
    assert _ran(answers[5]) == [] and answers[5]["state"]["timer_sizes"] == {"main": 1}  # type: ignore[index]
    assert _ran(answers[6]) == ["d"] and answers[6]["result"] is True
    assert _ran(observe(ALL - {"kafka-stale-current-time"}, steps)[5]) == ["d"]


def test_a_nested_advance_makes_the_next_bucket_due_in_the_same_drain() -> None:
    """kafka-flush-current-time: Kafka polls each next bucket at the clock's reading then.
    t32's run schedules t0 (bucket 60) and advances timer aux, which moves the clock from
    58 to 60; the drain of main then dequeues bucket 60 (t0 goes to a finer bucket), so
    the wheels stand at 60 and a delay-0 add at 60 runs at once (Kafka's classes with an
    inline executor, and the Kafka-like port, on search seed 1, shrunk; a model that
    polled at the drain's first reading kept the wheels at 40 and scheduled t33)."""
    steps = _sequence(
        '{"step": "init", "tick_ms": 10, "wheel_size": 2, "purge_interval": 0, '
        '"timers": ["main", "aux"]}',
        '{"step": "clock_advance", "ms": 38}',
        '{"step": "add", "task": "t32", "delay_ms": 10, "timer": "main", "on_run": ['
        '{"step": "add", "task": "t0", "delay_ms": 12, "timer": "main"}, '
        '{"step": "advance", "ms": 2, "timer": "aux"}]}',
        '{"step": "advance", "ms": 20, "timer": "main"}',
        '{"step": "add", "task": "t33", "delay_ms": 0, "timer": "main"}',
    )
    answers = observe(ALL, steps)
    assert _ran(answers[3]) == ["t32"] and answers[3]["state"]["clock_ms"] == 60  # type: ignore[index]
    assert _ran(answers[4]) == ["t33"]
    assert answers[4]["state"]["timer_sizes"] == {"main": 1, "aux": 0}  # type: ignore[index]


def test_a_cascaded_task_joins_the_end_of_its_bucket() -> None:
    """t1 (re-added by t2's run while the wheels were behind) sits in a second-level bucket
    and cascades into the bucket of t6, after it: t6 runs first and cancels it (search seed
    3 on Kafka's classes with an inline executor, shrunk)."""
    steps = _sequence(
        '{"step": "init", "tick_ms": 3, "wheel_size": 3, "purge_interval": 0}',
        '{"step": "clock_advance", "ms": 1}',
        '{"step": "advance", "ms": 3}',
        '{"step": "clock_advance", "ms": 1}',
        '{"step": "add", "task": "t1", "delay_ms": 6}',
        '{"step": "add", "task": "t2", "delay_ms": 6, "on_run": [{"step": "cancel", "task": "t1"}, '
        '{"step": "add", "task": "t1", "delay_ms": 6}]}',
        '{"step": "advance", "ms": 10}',
        '{"step": "add", "task": "t3", "delay_ms": 0}',
        '{"step": "advance", "ms": 0}',
        '{"step": "add", "task": "t6", "delay_ms": 6, "on_run": ['
        '{"step": "cancel", "task": "t1"}]}',
        '{"step": "clock_advance", "ms": 9}',
        '{"step": "advance", "ms": 0}',
    )
    assert _ran(observe(ALL, steps)[11]) == ["t6"]


def test_buckets_of_one_expiration_come_out_in_javas_heap_order() -> None:
    """Two buckets expire at 24, t7's on the second level (queued first) and t15's on the
    first: Java's PriorityQueue gives t15's first, which cancels t7 (search seed 3 on
    Kafka's classes with an inline executor, shrunk; a first-in-first-out tie ran t7)."""
    steps = _sequence(
        '{"step": "init", "tick_ms": 2, "wheel_size": 4, "purge_interval": 0}',
        '{"step": "clock_advance", "ms": 1}',
        '{"step": "add", "task": "t0", "delay_ms": 0}',
        '{"step": "add", "task": "t1", "delay_ms": 0}',
        '{"step": "advance", "ms": 4}',
        '{"step": "clock_advance", "ms": 2}',
        '{"step": "add", "task": "t8", "delay_ms": 2, "on_run": ['
        '{"step": "add", "task": "t7", "delay_ms": 6}, {"step": "cancel", "task": "t0"}]}',
        '{"step": "clock_advance", "ms": 6}',
        '{"step": "add", "task": "t13", "delay_ms": 0, "on_run": ['
        '{"step": "cancel", "task": "t1"}, {"step": "add", "task": "t0", "delay_ms": 0}]}',
        '{"step": "advance", "ms": 6}',
        '{"step": "add", "task": "t15", "delay_ms": 6, "on_run": ['
        '{"step": "cancel", "task": "t7"}]}',
        '{"step": "clock_advance", "ms": 1}',
        '{"step": "add", "task": "t16", "delay_ms": 0}',
        '{"step": "clock_advance", "ms": 13}',
        '{"step": "add", "task": "t20", "delay_ms": 0}',
        '{"step": "advance", "ms": 2}',
    )
    assert _ran(observe(ALL, steps)[15]) == ["t16", "t15", "t20"]


def test_an_upper_level_rounded_toward_zero_can_be_past_a_task() -> None:
    """kafka-truncating-division: with the wheels at -5 (tick 1, 4 slots) a task due at -1
    overflows the first level; the second, created at -5 rounded toward zero (-4), finds
    it already expired, so Kafka runs it inside add. The spec schedules it."""
    steps = _sequence(
        '{"step": "init", "tick_ms": 1, "wheel_size": 4, "start_ms": -5, "clock_ms": -5}',
        '{"step": "add", "task": "a", "delay_ms": 4}',
    )
    assert _ran(observe(ALL, steps)[1]) == ["a"]
    answer = observe(ALL - {"kafka-truncating-division"}, steps)[1]
    assert _ran(answer) == [] and answer["state"]["timer_sizes"] == {"main": 1}  # type: ignore[index]
