"""Upstream Kafka's known differences from this spec, as data (the "Kafka:" notes of docs/spec.md).

Each ``KnownDifference`` names one place where Apache Kafka's own timer and purgatory
(2.7 to 4.0; the Java ``server-common`` classes) behave differently from the rules, and
says, in terms of the conformance kit's observations, how a run of a port that follows
Kafka there may differ from the reference:

- ``shows_on``: the step kinds on which the difference first shows;
- ``fields``: the observation fields that may then differ on such a step;
- ``later``: the fields that may differ on every later step of the same run once it has
  shown (its consequences: a count that stays higher, a task that runs later);
- ``when``: the circumstance in which it can show at all, one of ``CONDITIONS`` (so a
  broad difference such as "calls after shutdown" is never used to excuse a step
  before any shutdown).

Field names are ``result``, ``raised``, ``events``, ``tries``, ``state`` (all of it) or
``state.<name>`` (one state field). ``kpurgatory conformance --allow kafka`` (or a list
of ids) accepts exactly these differences and reports each accepted one separately
(``kpurgatory.conformance.differences``). docs/spec.md has the prose, under each rule's
**Kafka** note; ``tests/conformance/test_known_differences.py`` keeps the two in step.

Nothing here decides anything at run time: this module is data, like ``rules``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONDITIONS",
    "KAFKA",
    "KNOWN_DIFFERENCES",
    "OBSERVATION_FIELDS",
    "KnownDifference",
    "known_difference",
    "resolve",
]

OBSERVATION_FIELDS: frozenset[str] = frozenset(
    {"result", "raised", "events", "tries", "state"}
    | {
        f"state.{name}"
        for name in (
            "clock_ms",
            "timer_sizes",
            "watched",
            "num_delayed",
            "watched_keys",
            "num_purged",
            "estimated_total_operations",
        )
    }
)
"""The names a difference may use in ``fields`` and ``later``."""


CONDITIONS: dict[str, str] = {
    "always": "any step of the kinds in shows_on",
    "negative_ms": "the step's ms (a timeout) is negative",
    "after_shutdown": "a shutdown step came earlier in the run (the timer is closed)",
    "repeated_watch": "the step watches an operation label the run watched before",
    "duplicate_key": "the step's keys name a key twice",
    "negative_time": "the run's init has a negative clock_ms or start_ms",
    "nested_add": "the run has a task whose on_run adds a task",
}
"""When a difference can show (``KnownDifference.when``); the kit evaluates these."""


@dataclass(frozen=True)
class KnownDifference:
    """One documented way upstream Kafka differs from a rule (see the module docstring)."""

    id: str
    rule: str
    summary: str
    kafka: str
    shows_on: frozenset[str]
    fields: frozenset[str]
    later: frozenset[str] = frozenset()
    when: str = "always"


_LAZY_PURGE_FIELDS = frozenset(
    {
        "state.watched",
        "state.watched_keys",
        "state.num_purged",
        "state.estimated_total_operations",
    }
)

KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "kafka-stale-current-time",
        "R2",
        "the current time moves only to a dequeued bucket's expiration",
        "The lowest wheel's currentTime moves only when advanceClock dequeues a bucket, "
        "to that bucket's expiration; after an idle spell add judges 'already expired' "
        "against an old time, so a task due at once here is bucketed and runs at the "
        "next advanceClock.",
        frozenset({"add", "watch"}),
        frozenset({"events", "state.timer_sizes", "state.num_delayed"}),
        frozenset({"events", "result", "state.timer_sizes", "state.num_delayed"}),
    ),
    KnownDifference(
        "kafka-flush-current-time",
        "R2",
        "during a flush the current time is the flushed bucket's expiration",
        "A task that adds another while its bucket is flushed (an inline executor) sees "
        "currentTime = that bucket's expiration, not the drain reading: the new task is "
        "bucketed and runs later in the same advanceClock, as a unit of its own.",
        frozenset({"advance", "purgatory_advance"}),
        frozenset({"events", "result", "state.timer_sizes", "state.num_delayed"}),
        when="nested_add",
    ),
    KnownDifference(
        "kafka-advance-result",
        "R8",
        "advanceClock is true iff it dequeued a bucket",
        "SystemTimer.advanceClock returns true iff it dequeued a bucket, even if every "
        "entry in it was cancelled or only moved to a finer wheel.",
        frozenset({"advance"}),
        frozenset({"result"}),
    ),
    KnownDifference(
        "kafka-negative-timeout",
        "R8",
        "advanceClock with a negative timeout does not raise",
        "advanceClock(timeoutMs < 0) polls the delay queue without waiting: it drains "
        "what is due at the current reading and returns; the purgatory's advanceClock "
        "then runs its purge check. Here it raises ValueError (R35).",
        frozenset({"advance", "purgatory_advance"}),
        frozenset({"raised", "result", "events", "state"}),
        frozenset({"events", "result", "state"}),
        when="negative_ms",
    ),
    KnownDifference(
        "kafka-after-close",
        "R14",
        "a closed timer still schedules and advances",
        "close() only shuts the executor down: add still links the task into the wheel "
        "and advanceClock still moves the clock and dequeues buckets; a due task then "
        "fails with RejectedExecutionException out of advanceClock (reported as "
        "RuntimeError), stranding the rest of its bucket.",
        frozenset({"add", "watch", "advance", "purgatory_advance"}),
        frozenset({"raised", "result", "events", "state"}),
        frozenset({"raised", "result", "events", "state"}),
        when="after_shutdown",
    ),
    KnownDifference(
        "kafka-duplicate-keys",
        "R24",
        "a duplicate watch key watches the operation twice",
        "tryCompleteElseWatch appends the operation once per occurrence of a key, so it "
        "sits twice in that key's list: watched counts it twice, checkAndComplete tries "
        "it twice, and a purge unlinks both.",
        frozenset({"watch"}),
        frozenset({"state.watched"}),
        frozenset({"state.watched", "state.num_purged", "tries"}),
        when="duplicate_key",
    ),
    KnownDifference(
        "kafka-after-shutdown",
        "R32",
        "a shut-down purgatory still watches, times and advances",
        "shutdown() stops the reaper and closes the timer, but tryCompleteElseWatch "
        "still tries, watches and times the operation, and advanceClock still runs "
        "(see kafka-after-close for the closed timer underneath). Here both raise "
        "RuntimeError.",
        frozenset({"watch", "purgatory_advance"}),
        frozenset({"raised", "result", "events", "tries", "state"}),
        frozenset({"events", "tries", "result", "state"}),
        when="after_shutdown",
    ),
    KnownDifference(
        "kafka-resubmission",
        "R34",
        "a second submission of an operation is not refused",
        "Kafka does not check that an operation is submitted once: a second "
        "tryCompleteElseWatch tries it again, watches it again and counts it again in "
        "the purge estimate. Here it raises ValueError.",
        frozenset({"watch"}),
        frozenset({"raised", "result", "events", "tries", "state"}),
        frozenset(
            {"tries", "state.watched", "state.num_purged", "state.estimated_total_operations"}
        ),
        when="repeated_watch",
    ),
    KnownDifference(
        "kafka-truncating-division",
        "R1",
        "negative clock readings are divided with truncation",
        "Java's / and % truncate toward zero, so with a negative clock reading the "
        "start time, due times and bucket slots round up instead of down: tasks run "
        "early or late, or an index goes negative (ArrayIndexOutOfBoundsException: a "
        "crash, which this difference never excuses). kpurgatory uses floor division (R1).",
        frozenset({"init", "add", "watch", "advance", "purgatory_advance"}),
        frozenset({"raised", "result", "events", "state"}),
        frozenset({"raised", "result", "events", "tries", "state"}),
        when="negative_time",
    ),
    KnownDifference(
        "kafka-early-expiry",
        "R60",
        "on a real clock an operation may expire up to 1 ms before its timeout",
        "Time.hiResClockMs() truncates and SystemTimer.add counts the expiration from it, "
        "so on a real clock a task can be handed over up to 1 ms before its delay has "
        "passed. The kit drives a manual clock, whose readings are exact, so this never "
        "shows in a run; it is listed so that every documented difference has an id.",
        frozenset(),
        frozenset(),
    ),
    KnownDifference(
        "kafka-lazy-purge",
        "R61",
        "finished operations stay linked until their keys are checked or a purge runs",
        "Kafka unlinks a finished operation only through checkAndComplete on each of its "
        "keys or the reaper's purge every purgeInterval completions, so a purgatory whose "
        "operations have all finished still lists them: watched, watched_keys, num_purged "
        "and the estimate differ from the step on which the last unfinished one finished.",
        frozenset(
            {
                "watch",
                "check_and_complete",
                "force_complete",
                "cancel",
                "cancel_for_key",
                "advance",
                "purgatory_advance",
            }
        ),
        _LAZY_PURGE_FIELDS,
        _LAZY_PURGE_FIELDS,
    ),
)
"""Every known difference, in rule order; ids are stable (ports cite them)."""

KAFKA = "kafka"
"""The ``--allow`` group name that stands for every known difference of upstream Kafka."""


def known_difference(ident: str) -> KnownDifference:
    """The difference with this id; ``KeyError`` naming the known ids otherwise."""
    for difference in KNOWN_DIFFERENCES:
        if difference.id == ident:
            return difference
    raise KeyError(
        f"unknown known difference {ident!r}; known: {[d.id for d in KNOWN_DIFFERENCES]}"
    )


def resolve(names: str) -> tuple[KnownDifference, ...]:
    """The differences named by ``names``: ``kafka`` (all of them) or comma-separated ids.

    ``ValueError`` naming the unknown id. The result keeps catalog order, no repeats.
    """
    wanted: set[str] = set()
    for name in (part.strip() for part in names.split(",")):
        if not name:
            continue
        if name == KAFKA:
            wanted.update(d.id for d in KNOWN_DIFFERENCES)
            continue
        try:
            wanted.add(known_difference(name).id)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
    if not wanted:
        raise ValueError("--allow needs 'kafka' or at least one known difference id")
    return tuple(d for d in KNOWN_DIFFERENCES if d.id in wanted)
