"""The hand-written vectors of calls back in: user code that calls the library (R63-R69).

A task's ``on_run`` and an operation's ``on_try``, ``on_complete`` and ``on_expiration``
perform steps from inside the library's call (docs/vectors.md, "Callbacks"). Each run
here covers one row of R69's table, or one of the rules R63-R68 it leads to, with the
observations a port can make of it: a port whose operation lock is not re-entrant hangs
in them (the kit names the callback and R63), a port that goes on after a shutdown from
a callback, or times an operation ``cancel_for_key`` took out during its submission,
fails them. The comments give what each step shows.
"""

from __future__ import annotations

from kpurgatory.conformance.catalogue.run import RuleRun
from kpurgatory.steps import (
    Add,
    Advance,
    Cancel,
    CancelForKey,
    CheckAndComplete,
    Close,
    ExecutorShutdown,
    ForceComplete,
    Init,
    PurgatoryAdvance,
    SetReady,
    Shutdown,
    Step,
    Watch,
)

__all__ = ["REENTRANT_RUNS", "TIMER_REENTRANT_RUNS"]


def _r63_reentrant_lock() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("other", 10, ("k",)),
        # its try sweeps its own key: the sweep tries it again, nested, under its lock
        Watch("sweeper", 10, ("k",), on_try=(CheckAndComplete("k"),)),
        SetReady("other"),
        CheckAndComplete("k"),  # sweeper's try sweeps k again: other completes in there
        # completes itself from its own try (the usual pattern), under its lock
        Watch("self-complete", 10, ("j",), on_try=(ForceComplete("self-complete"),)),
        Watch("self-abandon", 10, ("j",), on_try=(Cancel("self-abandon"),)),  # R40
        Advance(20),  # sweeper expires; self-abandon never does
        Watch("due", 0, ("k",)),  # due at once: the timer runs it inside its own submission
    ]


def _r69_try_complete_calls() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4, timers=("main", "aux")),
        Add("early", 2, "aux"),
        Watch("target", 30, ("t",)),
        Watch(
            "caller",
            20,
            ("c",),
            ready_on_try=3,
            on_try=(
                Advance(3, "aux"),  # a nested drain of another timer: early runs
                SetReady("target"),
                CheckAndComplete("t"),  # another key's sweep: target completes in there
                Watch("spawned", 40, ("s",)),  # a submission from a callback (once)
            ),
        ),
        CheckAndComplete("c"),  # the third try: caller completes; spawned is resubmitted
        Advance(40),
    ]


def _r69_on_complete_calls() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("neighbour", 30, ("k",)),
        Watch(
            "done",
            10,
            ("k", "j"),
            on_complete=(
                CancelForKey("j"),  # done is completed, out of the timer and uncounted
                CheckAndComplete("k"),  # tries neighbour only
                ForceComplete("neighbour"),
                Watch("after", 5, ("k",)),
                Advance(5),  # a nested drain: after expires in there
            ),
        ),
        ForceComplete("done"),  # a plain force_complete: on_complete runs without the lock
        Advance(40),
    ]


def _r69_on_expiration_calls() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("later", 12, ("k",)),
        Watch(
            "expiring",
            5,
            ("k",),
            on_expiration=(
                Advance(7),  # a nested drain of what is due by then: later expires in there
                Watch("fresh", 3, ("k",)),
                CheckAndComplete("k"),
            ),
        ),
        Advance(5),
        Advance(5),
    ]


def _r64_shutdown_from_callbacks() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=8, timers=("main", "aux")),
        Watch("pending", 10, ("k",)),
        Add("first", 1, "aux", on_run=(Shutdown(),)),  # the purgatory's timer is main
        Add("second", 2),  # main: unrun once main is closed
        Advance(3, "aux"),  # first shuts down: main closes, second stays unrun
        Advance(3),  # closed: False, the clock does not move (R14)
        CheckAndComplete("k"),  # still works after shutdown (R32)
    ]


def _r64_shutdown_in_submission() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("before", 10, ("k",)),
        # its first try shuts the purgatory down: the unfinished submission is refused,
        # rolled back (R38) and raises RuntimeError
        Watch("stopper", 10, ("k",), ready_on_try=3, on_try=(Shutdown(),)),
        CheckAndComplete("k"),
        CancelForKey("k"),
    ]


def _r64_shutdown_from_on_complete() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("keeps", 10, ("k",)),
        Watch("closer", 5, ("k",), on_complete=(Shutdown(), Watch("refused", 5, ("k",)))),
        Advance(5),  # closer expires, shuts down from on_complete; its expiration still runs
        Advance(10),  # closed: False
        CheckAndComplete("k"),
    ]


def _r64_close_from_a_task() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=8),
        Add("closer", 1, on_run=(Close(),)),
        Add("next", 2),
        Add("last", 3),
        Advance(4),  # closer runs and closes the timer: next and last stay unrun
        Advance(1),  # closed: False, the clock does not move
        Add("late", 1),  # RuntimeError: a closed timer schedules nothing
    ]


def _r66_cancel_for_key_in_submission() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        # the second try of its submission (watched by then) cancels its own key: the
        # submission does not time it afterwards; it stays watched on j
        Watch("self-cancel", 10, ("k", "j"), on_try=(CancelForKey("k"),)),
        Advance(20),  # never expires: no timer entry
        SetReady("self-cancel"),
        CheckAndComplete("j"),  # still watched on j: completes there
    ]


def _r68_lifecycle_from_callbacks() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        # completed, then its on_complete abandons it: final, nothing changes
        Watch("completed", 10, ("k",), ready=True, on_complete=(Cancel("completed"),)),
        # abandoned from its own try, then completed from the same try: final, False
        Watch(
            "abandoned",
            10,
            ("k",),
            ready_on_try=2,
            on_try=(Cancel("abandoned"), ForceComplete("abandoned")),
        ),
        CheckAndComplete("k"),
        PurgatoryAdvance(20),
    ]


def _r75_sweep_after_cancel_for_key() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        # completes on the sweep's try; its on_complete cancels the key being swept
        Watch("canceller", 10, ("k",), ready_on_try=3, on_complete=(CancelForKey("k"),)),
        Watch("stays", 10, ("k",)),
        Watch("ready", 10, ("k", "j")),
        SetReady("ready"),
        CheckAndComplete("k"),  # 2: the sweep still tries stays and ready (R75)
        CheckAndComplete("j"),  # ready is done: 0
        Advance(20),  # nothing expires: cancel_for_key took stays out of the timer
    ]


def _r65_executor_refusal() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=8, timers=("main", "aux")),
        Add("refused", 2),
        Add("other", 2, "aux"),
        ExecutorShutdown(),  # main's executor refuses from now on; main stays open
        Advance(3),  # the refusal is the drain's error: RuntimeError, refused stays unrun
        Add("at-once", -1),  # handed over inside add and refused: RuntimeError, not timed
        Advance(1, "aux"),  # aux's executor still runs its tasks
        Close(),
        Add("after-close", 5, "aux"),
        Advance(10),  # closed: False, nothing is handed over, nothing raised
    ]


def _r65_refusal_in_submission() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=4),
        Watch("timed", 10, ("k",)),
        ExecutorShutdown(),
        # due at once: handed over in its submission and refused, so the submission is
        # rolled back (R38) and raises RuntimeError
        Watch("refused", 0, ("k",)),
        CheckAndComplete("k"),  # tries timed only
        Advance(10),  # timed is due: refused too, RuntimeError; it stays unexpired
        CancelForKey("k"),
    ]


def _nested_drain_from_a_task() -> list[Step]:
    return [
        Init(tick_ms=1, wheel_size=8),
        Add("outer", 1, on_run=(Advance(1),)),  # a nested drain at reading 2 + 1 = 3
        Add("batch", 2),
        Add("inner", 3),
        Advance(2),  # outer runs at 2 and drains to 3: batch and inner run in there
    ]


# A table: its entries share a shape deliberately.
TIMER_REENTRANT_RUNS: tuple[RuleRun, ...] = (
    RuleRun(
        "r64-close-from-a-task",
        "A task that closes its timer from its run: the drain hands no further task over, "
        "the closed timer moves no clock and schedules nothing.",
        ("R64", "R14", "R69"),
        _r64_close_from_a_task,
    ),
    RuleRun(
        "r65-executor-refusal",
        "An executor that refuses a task: while the timer is open the refusal is the "
        "drain's or the add's error and the task stays unrun; another timer's executor "
        "is unaffected; a closed timer hands nothing over.",
        ("R65", "R53", "R14"),
        _r65_executor_refusal,
    ),
    RuleRun(
        "r69-nested-drain-from-a-task",
        "advance_clock from a task's run is a nested drain of what is due by then and not "
        "taken out already; the rest of the outer drain's batch is handed over after it.",
        ("R74", "R69", "R7"),
        _nested_drain_from_a_task,
    ),
)
"""The runs a port of the timer alone can answer."""

REENTRANT_RUNS: tuple[RuleRun, ...] = (
    RuleRun(
        "r63-reentrant-lock",
        "The library takes an operation's lock again while holding it: an operation due "
        "at once runs inside its own submission, a try_complete sweeps its own key, "
        "completes and abandons its own operation.",
        ("R63", "R69", "R40", "R22"),
        _r63_reentrant_lock,
    ),
    RuleRun(
        "r69-try-complete-calls",
        "try_complete calls back in: a nested drain, another key's sweep, a submission.",
        ("R69", "R63", "R25"),
        _r69_try_complete_calls,
    ),
    RuleRun(
        "r69-on-complete-calls",
        "on_complete calls back in: the operation is completed, out of the timer and "
        "uncounted before it runs; sweeps, a submission and a nested drain from there.",
        ("R69", "R61", "R16", "R29"),
        _r69_on_complete_calls,
    ),
    RuleRun(
        "r69-on-expiration-calls",
        "on_expiration calls back in: a nested drain of what is due by then, a "
        "submission and a sweep.",
        ("R69", "R17", "R7"),
        _r69_on_expiration_calls,
    ),
    RuleRun(
        "r64-shutdown-from-a-task",
        "A task that shuts the purgatory down from its run: the purgatory's timer closes "
        "and hands nothing more over; check_and_complete still works.",
        ("R64", "R32", "R14"),
        _r64_shutdown_from_callbacks,
    ),
    RuleRun(
        "r64-shutdown-in-submission",
        "shutdown from the try_complete of a submission: the unfinished submission is "
        "refused, rolled back and raises RuntimeError.",
        ("R64", "R38", "R32"),
        _r64_shutdown_in_submission,
    ),
    RuleRun(
        "r64-shutdown-from-on-complete",
        "shutdown from an expiring operation's on_complete: its on_expiration still runs, "
        "later submissions are refused and the timer is closed.",
        ("R64", "R17", "R32"),
        _r64_shutdown_from_on_complete,
    ),
    RuleRun(
        "r65-refusal-in-submission",
        "An executor that refuses an operation due at once: its submission is rolled back "
        "and raises; a drain's refused expiry is the drain's error.",
        ("R65", "R38", "R54"),
        _r65_refusal_in_submission,
    ),
    RuleRun(
        "r66-cancel-for-key-in-submission",
        "cancel_for_key from a submission's try_complete returns the operation, which the "
        "submission then leaves untimed; it stays watched on its other keys.",
        ("R66", "R29", "R23"),
        _r66_cancel_for_key_in_submission,
    ),
    RuleRun(
        "r75-sweep-after-cancel-for-key",
        "A sweep tries the list it took: cancel_for_key of the swept key from a callback "
        "inside the sweep does not stop it trying the operations it returned.",
        ("R75", "R29", "R25"),
        _r75_sweep_after_cancel_for_key,
    ),
    RuleRun(
        "r68-lifecycle-from-callbacks",
        "Completed and abandoned are final, also when the operation's own callbacks try "
        "to end it again.",
        ("R68", "R40", "R16"),
        _r68_lifecycle_from_callbacks,
    ),
)
"""The runs that need the purgatory."""
