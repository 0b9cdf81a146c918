"""The Kafka model where two documented differences meet, as upstream Kafka's classes behave.

Found by running the kit on Kafka's own classes (conformance/examples/java-kafka): each
sequence below is one the search shrank to, with what Kafka's classes answered. With
``--allow kafka`` the kit compares a port with ``kafka_model`` (every difference on), so
the model must answer the same, and with a difference off it must still answer as the
spec says.
"""

from __future__ import annotations

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
