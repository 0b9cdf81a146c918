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
``state.<name>`` (one state field). These describe where each difference shows, for
people and for the catalogue's own tests; ``kpurgatory conformance --allow kafka`` (or
a list of ids) does not mask those fields: it compares a port with the reference that
*behaves* like Kafka in each allowed respect (``kpurgatory.conformance.kafka_model``,
``kpurgatory.conformance.differences``) and reports each accepted difference separately.
docs/spec.md has the prose, under each rule's **Kafka** note;
``tests/conformance/test_known_differences.py`` keeps the two in step.

Nothing here decides anything at run time: this module is data, like ``rules``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONDITIONS",
    "KAFKA",
    "KAFKA_NOTES_NOT_OBSERVED",
    "KNOWN_DIFFERENCES",
    "OBSERVATION_FIELDS",
    "KafkaNote",
    "KnownDifference",
    "known_difference",
    "resolve",
]

_WHOLE: frozenset[str] = frozenset({"result", "raised", "events", "tries", "state"})
"""Every field of an observation, ``state`` whole."""

OBSERVATION_FIELDS: frozenset[str] = frozenset(
    _WHOLE
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
    "on_run": "the run has a task whose on_run performs steps",
    "cancel_watched": "the step cancels (directly or from an on_run) an operation label "
    "the run watched",
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

# A table: its entries share a shape deliberately.
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
        # later: a task or operation that here ran at once is still scheduled there, so
        # it runs later (events, results), an operation left pending is tried, completed,
        # cancelled and purged by later calls (tries, result, every state field)
        _WHOLE - {"raised"},
    ),
    KnownDifference(
        "kafka-flush-current-time",
        "R2",
        "during a flush the current time is the flushed bucket's expiration",
        "advanceClock flushes one bucket at a time, the wheels moved to that bucket's "
        "expiration, its tasks in the bucket's order (a task cascaded from a coarser level "
        "joins the end of its new bucket). A task that adds another while its bucket is "
        "flushed (an inline executor) sees currentTime = that bucket's expiration, not the "
        "drain reading: the new task is bucketed and runs later in the same advanceClock, "
        "as a unit of its own; a task that cancels another due at the same time cancels it "
        "only if its own bucket comes first.",
        frozenset({"advance", "purgatory_advance"}),
        frozenset({"events", "result", "state.timer_sizes", "state.num_delayed"}),
        when="on_run",
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
        _WHOLE - {"tries"},
        # later: what that drain handed over (or did not) and the purge it ran change what
        # later calls find: tries, results, events, state
        _WHOLE - {"raised"},
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
        _WHOLE - {"tries"},
        # later: what the closed timer still ran (a task's on_run included) changes what
        # later calls find, tries too
        _WHOLE,
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
        # later: tries twice per check, counted and purged twice, returned twice by
        # cancel_for_key (result)
        frozenset({"state.watched", "state.num_purged", "tries", "result"}),
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
        _WHOLE,
        _WHOLE - {"raised"},
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
        _WHOLE,
        # later: the operation is watched, timed and counted once more, so everything it
        # takes part in may differ (cancel_for_key's list, timer sizes, its expiry, ...)
        _WHOLE - {"raised"},
        when="repeated_watch",
    ),
    KnownDifference(
        "kafka-cancel-keeps-watch",
        "R40",
        "cancel() on a watched operation leaves it in its watcher lists",
        "Kafka has no abandon: cancel() on a submitted operation only removes its timer "
        "entry, so it stays in every watcher list (watched, watched_keys), a later "
        "checkAndComplete tries it and may complete it, forceComplete can still complete "
        "it, cancelForKey returns it and a purge leaves it.",
        frozenset({"cancel", "add", "advance", "purgatory_advance"}),  # or a task's on_run
        frozenset({"state.watched", "state.watched_keys"}),
        _WHOLE - {"raised"},
        when="cancel_watched",
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
        _WHOLE - {"tries"},
        _WHOLE,
        when="negative_time",
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


@dataclass(frozen=True)
class KafkaNote:
    """A **Kafka** note of docs/spec.md that no conformance run can observe, and why."""

    id: str
    rule: str
    summary: str
    why_not_observed: str


KAFKA_NOTES_NOT_OBSERVED: tuple[KafkaNote, ...] = (
    KafkaNote(
        "kafka-timed-poll",
        "R7",
        "advanceClock waits on the delay queue in real time",
        "the adapter over Kafka's classes moves a manual Time and calls advanceClock(0), "
        "which is the manual-clock behaviour the kit drives (porting.md)",
    ),
    KafkaNote(
        "kafka-entry-unlinks",
        "R10",
        "a re-add unlinks the old entry through TimerTaskEntry's constructor",
        "the same behaviour by another route",
    ),
    KafkaNote(
        "kafka-mock-timer-size",
        "R12",
        "MockTimer.size also counts cancelled entries",
        "SystemTimer.size, which an adapter reads, counts the same set; MockTimer is "
        "Kafka's test double, not a timer a port copies",
    ),
    KafkaNote(
        "kafka-dropped-task-exceptions",
        "R13",
        "exceptions inside the executor's Future are silently dropped",
        "the kit never observes a task's exception (docs/vectors.md, on_run)",
    ),
    KafkaNote(
        "kafka-no-next-due-time",
        "R44",
        "no public next due time; the delay queue's head is a bucket expiration",
        "an adapter computes next_due_time from the wheel's entries (porting.md); using "
        "the delay queue's head instead is a port bug the vectors catch",
    ),
    KafkaNote(
        "kafka-expiry-without-lock",
        "R17",
        "2.7 to 4.0 run expiry without the operation's lock (KAFKA-19312)",
        "a race between threads: no sequential run shows it; the threads mode does, and "
        "under --allow kafka sends purgatory_advance only in its clean-up",
    ),
    KafkaNote(
        "kafka-early-expiry",
        "R60",
        "on a real clock an operation may expire up to 1 ms before its timeout",
        "the kit drives a manual clock, whose readings are exact; tests/test_realtime.py "
        "measures the rule against time.monotonic",
    ),
    KafkaNote(
        "kafka-purge-races-expiry",
        "R30",
        "the purge check runs while the executor thread may still be expiring what the "
        "same advanceClock handed over, so it can leave those operations watched",
        "a race between threads; the kit's runs are single-threaded (an adapter over "
        "Kafka's executor waits for it to go idle before answering)",
    ),
    KafkaNote(
        "kafka-inline-nested-drain",
        "R74",
        "run inline, a task that advances its own timer hangs: inside add on a read lock "
        "never upgraded, inside a flush in a re-add loop",
        "Kafka's executor is another thread and never meets it; an adapter running Kafka's "
        "classes inline declares nested_advance absent, and without it the kit reports "
        "the hang",
    ),
    KafkaNote(
        "kafka-sweep-sees-later-watches",
        "R75",
        "checkAndComplete walks a ConcurrentLinkedQueue, whose weakly consistent iterator "
        "may also try (and count) operations watched on the key after the sweep began",
        "a race between threads: no sequential run shows it; the threads mode does, and "
        "under --allow kafka accepts such a sweep",
    ),
    KafkaNote(
        "kafka-cancel-for-key-race",
        "R29",
        "cancelForKey cancels timer entries without the operation's lock",
        "a race between threads: no sequential run shows it; the threads mode does, and "
        "under --allow kafka sends no cancel_for_key",
    ),
)
"""The **Kafka** notes that describe no difference a run can show; with the known
differences they make every note's id (docs/spec.md names one in each note)."""

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
