"""The rule catalog: every behaviour the implementations promise, numbered.

docs/spec.md explains each rule in prose with Kafka's behaviour beside it; tests cite
rules by id (``R7``), and a meta-test checks that every rule here is cited by at least
one test and described in docs/spec.md. Rule ids are stable: a rule that changes
meaning gets a new id.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "SPEC_VERSION", "Rule", "rule"]

SPEC_VERSION = "1.0"
"""Version of these semantics; conformance vectors record it."""


@dataclass(frozen=True)
class Rule:
    """One numbered rule: its id, area, short title and normative text."""

    id: str
    area: str
    title: str
    text: str


RULES: tuple[Rule, ...] = (
    # ---- time ------------------------------------------------------------------------
    Rule(
        "R1",
        "timer",
        "Expiration and due time",
        "A task added when the clock reads t expires at t + delay_ms. Its due time is that "
        "expiration rounded down (floor) to a multiple of tick_ms. A task never runs before "
        "its due time, and may run up to tick_ms - 1 ms before its expiration.",
    ),
    Rule(
        "R2",
        "timer",
        "Current time",
        "The timer's current time starts at start_ms (default: the clock reading at "
        "construction) rounded down to the tick. In every advance_clock, once the due tasks "
        "have left the schedule and before the first is handed over, it becomes "
        "max(current time, round_down(now)), where now is the reading at which that call "
        "drained; so a task added during the hand-over is judged against the drain reading. "
        "Nothing else moves it. (Kafka moves it only to the expiration of a bucket it "
        "dequeues, so it can be stale; this rule is deterministic and identical on every "
        "implementation.)",
    ),
    Rule(
        "R3",
        "timer",
        "Due at once",
        "add hands the task over within the add call iff its due time is at or before the "
        "current time. Otherwise the task is scheduled and size grows by one. In particular a "
        "task whose due time has passed on the clock but lies after the current time waits for "
        "the next advance_clock.",
    ),
    Rule(
        "R4",
        "timer",
        "Never early",
        "A scheduled task leaves the schedule only in an advance_clock whose drain reading now "
        "is at or after its due time.",
    ),
    Rule(
        "R5",
        "timer",
        "Never late",
        "When advance_clock returns, every task that was scheduled with a due time at or before "
        "its drain reading has left the schedule, and has been handed over unless R11 applies.",
    ),
    Rule(
        "R6",
        "timer",
        "Hand-over order",
        "The tasks that leave the schedule in one advance_clock are handed over in "
        "non-decreasing due time. The order among tasks with the same due time is unspecified "
        "(tests compare those as multisets). Tasks added while the hand-over is under way are "
        "judged by R3 on their own.",
    ),
    Rule(
        "R7",
        "timer",
        "Letting time pass",
        "On a ManualClock, advance_clock(t) moves the clock forward by exactly t and then "
        "drains at the new reading; it never sleeps. On a real clock it waits until the "
        "earliest due time or until t ms have passed, whichever is first (an add with an "
        "earlier due time, wakeup or close end the wait early), then drains at a fresh reading.",
    ),
    Rule(
        "R8",
        "timer",
        "advance_clock result",
        "advance_clock returns True iff it handed over at least one task. (Kafka's SystemTimer "
        "returns True iff it dequeued a bucket, which the reference cannot observe.) "
        "timeout_ms < 0 is a ValueError.",
    ),
    Rule(
        "R9",
        "timer",
        "Cancel",
        "cancel is idempotent, removes the task from size at once, and is a no-op on a task "
        "that is not scheduled. It does not stop a run already handed over to the executor.",
    ),
    Rule(
        "R10",
        "timer",
        "Re-add",
        "Adding a task that is scheduled (in this timer or another) replaces the old schedule: "
        "the old timer's size drops, the expiration is recomputed from the new clock reading. "
        "Adding a cancelled task, or one that already ran, schedules it again.",
    ),
    Rule(
        "R11",
        "timer",
        "Cancelled before its turn",
        "A task that has left the schedule in an advance_clock is handed over when its turn "
        "in that call's hand-over comes, unless it was cancelled or re-added in between (e.g. "
        "by a task handed over before it on an InlineExecutor); then it is not handed over by "
        "this call.",
    ),
    Rule(
        "R12",
        "timer",
        "Size",
        "size is the number of tasks scheduled in the timer: added, not yet due-drained, not "
        "cancelled, not moved elsewhere. Tasks handed over at once by add are never counted.",
    ),
    Rule(
        "R13",
        "timer",
        "Task exceptions",
        "An exception raised by a task's run is logged (logger 'kpurgatory...', with the task's "
        "repr) and swallowed; it never stops the timer, the reaper or other tasks.",
    ),
    Rule(
        "R14",
        "timer",
        "Close",
        "close is idempotent; scheduled tasks never run after it; a blocked advance_clock "
        "returns False; advance_clock on a closed timer returns False at once; add raises "
        "RuntimeError. An executor the timer created is shut down (it still runs what was "
        "already handed over, but close does not wait for that, R39); a caller's executor is "
        "left running. SystemTimer is a context manager that closes on exit.",
    ),
    Rule(
        "R15",
        "timer",
        "Defaults",
        "SystemTimer(name) reads a MonotonicClock (milliseconds of time.monotonic_ns) and runs "
        "tasks on one worker thread named executor-<name>; tick_ms defaults to 1 and "
        "wheel_size to 20.",
    ),
    # ---- operations ------------------------------------------------------------------
    Rule(
        "R16",
        "operation",
        "force_complete exactly once",
        "force_complete sets the completed flag by compare-and-set; the single caller that "
        "succeeds cancels the operation's timer entry, then calls on_complete, then returns "
        "True. All other calls return False and do nothing. If on_complete raises, the "
        "operation stays completed and the exception propagates to that caller.",
    ),
    Rule(
        "R17",
        "operation",
        "Expiry",
        "run (the timer callback) holds the operation's lock and calls force_complete; iff that "
        "returns True it then calls on_expiration. So on_complete precedes on_expiration, "
        "on_expiration runs at most once and only if expiry won, and on_complete never "
        "overlaps a try_complete under the same lock (Kafka 4.1, KAFKA-19312).",
    ),
    Rule(
        "R18",
        "operation",
        "safe_try_complete",
        "safe_try_complete holds the lock; if the operation is already completed it returns "
        "False without calling try_complete (Kafka 4.0), otherwise it returns try_complete().",
    ),
    Rule(
        "R19",
        "operation",
        "safe_try_complete_or_else",
        "safe_try_complete_or_else(f) holds the lock throughout: if try_complete() is True it "
        "returns True without calling f; otherwise it calls f() once and returns a second "
        "try_complete().",
    ),
    Rule(
        "R20",
        "operation",
        "maybe_try_complete",
        "maybe_try_complete never blocks: it runs Kafka 1.1-2.6's try-lock loop with the "
        "pending flag, so at least one try_complete starts after each call began, provided the "
        "lock holder is itself in maybe_try_complete or in a blocking path of the operation "
        "(R41). A lock held by any other code loses the retry (KAFKA-8334). It returns True iff "
        "a try_complete run by this call returned True. The purgatory does not use it: both "
        "of its paths take the lock blocking (R22, R25).",
    ),
    Rule(
        "R21",
        "operation",
        "Operation lock",
        "An operation's lock defaults to a fresh re-entrant lock; a caller may supply one, "
        "shared by several operations. The purgatory takes an operation's lock before any "
        "purgatory or timer lock, never after, and never calls try_complete while holding a "
        "purgatory or timer lock (KAFKA-3994).",
    ),
    # ---- purgatory -------------------------------------------------------------------
    Rule(
        "R22",
        "purgatory",
        "try_complete_else_watch sequence",
        "Holding the operation's lock: try_complete; if False, for each distinct watch key in "
        "first-occurrence order, stop if the operation is completed, else append it to that "
        "key's watcher list; add one to the purge estimate; try_complete again; if the "
        "operation is still not completed, add it to the timer (if timer_enabled), and cancel "
        "that entry if it was completed meanwhile. All of it holds the operation's lock, the "
        "timer add included.",
    ),
    Rule(
        "R23",
        "purgatory",
        "try_complete_else_watch result",
        "try_complete_else_watch returns True iff one of its own try_complete calls completed "
        "the operation. An operation completed on the first try is never watched, counted or "
        "timed; one completed on the second try stays in the watcher lists until "
        "check_and_complete or a purge removes it.",
    ),
    Rule(
        "R24",
        "purgatory",
        "Watch keys",
        "watch_keys is taken in first-occurrence order with duplicates dropped, so an "
        "operation is watched at most once per key. Keys are compared by hash and equality.",
    ),
    Rule(
        "R25",
        "purgatory",
        "check_and_complete",
        "check_and_complete(key) visits the operations watched on key in watch order; an "
        "operation already completed is unlinked and not counted; otherwise safe_try_complete "
        "runs, and if it returns True the operation is unlinked and counted. It returns the "
        "count (only operations this call completed) and never creates a key.",
    ),
    Rule(
        "R26",
        "purgatory",
        "Empty watcher lists",
        "A key whose watcher list becomes empty is dropped, whether by check_and_complete or "
        "by a purge; it is created again by the next watch.",
    ),
    Rule(
        "R27",
        "purgatory",
        "watched",
        "watched is the number of (key, operation) pairs in watcher lists, including completed "
        "operations not yet unlinked.",
    ),
    Rule(
        "R28",
        "purgatory",
        "num_delayed",
        "num_delayed is the timer's size: pending operations in the timer (plus any other task "
        "scheduled in a shared timer). It drops as soon as an operation completes, because "
        "force_complete cancels the timer entry.",
    ),
    Rule(
        "R29",
        "purgatory",
        "cancel_for_key",
        "cancel_for_key(key) removes the key's watcher list, cancels each operation's timer "
        "entry (no on_complete, no on_expiration), and returns those operations in watch order, "
        "completed ones included. They stay on their other keys; the purge estimate is "
        "unchanged. An unknown key returns an empty list. Each entry is cancelled under the "
        "operation's lock, so when cancel_for_key returns none of the returned operations is "
        "in the timer, even one whose submission was under way.",
    ),
    Rule(
        "R30",
        "purgatory",
        "Purge",
        "After the timer step of every purgatory advance_clock (and every reaper step): if "
        "estimate - num_delayed > purge_interval (strictly), first set estimate := num_delayed, "
        "then unlink every completed operation from every watcher list, dropping lists that "
        "become empty.",
    ),
    Rule(
        "R31",
        "purgatory",
        "Reaper",
        "With reaper_enabled, a thread named ExpirationReaper-<broker_id>-<purgatory_name> "
        "repeats advance_clock(200) and the purge check until shutdown, which wakes it "
        "promptly. An exception in a step is logged and the reaper carries on. A reaper on a "
        "ManualClock is refused with ValueError.",
    ),
    Rule(
        "R32",
        "purgatory",
        "Shutdown",
        "shutdown is idempotent: it stops the reaper and closes the timer (the purgatory "
        "owns it). Pending operations are neither completed nor expired. Afterwards "
        "try_complete_else_watch and advance_clock raise RuntimeError. The purgatory is a "
        "context manager that shuts down on exit (and then waits as await_termination, R39).",
    ),
    Rule(
        "R33",
        "purgatory",
        "timer_enabled",
        "With timer_enabled=False, operations are never added to the timer, so they never "
        "expire and num_delayed does not count them.",
    ),
    Rule(
        "R34",
        "purgatory",
        "One submission per operation",
        "An operation may be passed to try_complete_else_watch once in its life (in any "
        "purgatory); a second call raises ValueError and changes nothing.",
    ),
    # ---- inputs ----------------------------------------------------------------------
    Rule(
        "R35",
        "inputs",
        "Numeric and type arguments",
        "tick_ms < 1, wheel_size < 2, purge_interval < 0, timeout_ms < 0 and ManualClock "
        "advance by < 0 raise ValueError; a non-int where an int is expected (bool included), "
        "a non-str name, a non-bool flag, a task or timer of the wrong kind raise TypeError. "
        "Every message names the argument.",
    ),
    Rule(
        "R36",
        "inputs",
        "Keys",
        "Empty watch_keys raises ValueError; an unhashable key, a non-iterable watch_keys, or "
        "a single str/bytes passed as watch_keys raises TypeError.",
    ),
    Rule(
        "R37",
        "concurrency",
        "Thread safety",
        "Every public method may be called from any thread. Lock order is operation lock, then "
        "purgatory (shard) lock, then timer lock; tasks are handed over with no timer lock "
        "held, so an InlineExecutor may run a task that calls back into the timer or "
        "purgatory.",
    ),
    Rule(
        "R38",
        "purgatory",
        "A failed call leaves no trace",
        "A public call that raises leaves no trace. A try_complete_else_watch that raises "
        "(a bad argument, a shutdown or a closed timer during the call, an exception from "
        "try_complete) leaves no watch, no estimate, no submission claim and no timer entry: "
        "the operation may be submitted again, and check_and_complete never completes it "
        "meanwhile. The one exception is an operation that completed during the call (its "
        "on_complete ran): it stays completed and submitted.",
    ),
    Rule(
        "R39",
        "concurrency",
        "Shutdown and close do not wait for running tasks",
        "close and shutdown never wait for a task already handed over (on the executor or on "
        "the reaper), which may need a lock their caller holds (Kafka's close does not wait "
        "either). shutdown returns once the purgatory refuses new calls, its timer is closed and "
        "its reaper starts no further step; a concurrent shutdown returns only then too. "
        "await_termination(timeout) waits for the reaper and the timer's own executor and "
        "returns whether they finished (False before shutdown/close, or from those threads). "
        "Leaving a with block is shutdown (or close) followed by await_termination().",
    ),
    Rule(
        "R40",
        "purgatory",
        "Abandon",
        "abandon(operation) gives up on an operation submitted to this purgatory: holding its "
        "lock, it marks the operation finished without on_complete or on_expiration, cancels "
        "its timer entry and unlinks it from every key it is watched on; nothing completes or "
        "expires it later. It returns True iff this call abandoned a pending operation (False "
        "if it had completed, expired or been abandoned). cancel() on a submitted operation "
        "is abandon; on one never submitted it is TimerTask.cancel. is_abandoned is then True "
        "and is_completed False. An operation never submitted to this purgatory raises "
        "ValueError.",
    ),
    Rule(
        "R41",
        "operation",
        "Blocking paths honour the pending flag",
        "safe_try_complete and safe_try_complete_or_else (and so check_and_complete and "
        "try_complete_else_watch) clear the try-complete pending flag before try_complete and, "
        "after releasing the lock, make one more attempt if a maybe_try_complete set it "
        "meanwhile; so a maybe_try_complete that finds the lock held by a blocking path never "
        "loses its completion (the KAFKA-8334 shape).",
    ),
    Rule(
        "R42",
        "timer",
        "Unbounded timeouts",
        "advance_clock accepts any int timeout_ms >= 0 on every clock, however large (Kafka "
        "callers pass Long.MAX_VALUE): a real clock waits in slices of at most "
        "threading.TIMEOUT_MAX seconds, and a wake-up (add, wakeup, close) still ends the "
        "wait at once.",
    ),
    Rule(
        "R43",
        "inputs",
        "Subclasses of TimerTask and DelayedOperation",
        "A task's delay is the delay_ms given to its constructor, and every timer schedules "
        "with that value: a subclass that redefines delay_ms is refused with TypeError when "
        "the class is created. A class that leaves run (TimerTask) or try_complete, "
        "on_complete, on_expiration (DelayedOperation) unimplemented cannot be instantiated "
        "(TypeError naming the methods), in every build; calling an abstract method "
        "explicitly raises NotImplementedError.",
    ),
    # ---- next due time ---------------------------------------------------------------
    Rule(
        "R44",
        "timer",
        "Next due time",
        "next_due_time is the least due time of the tasks scheduled in the timer (those "
        "size counts, R12), or None when none is. It changes only through add, cancel, "
        "advance_clock and moves between timers. An advance_clock whose drain reading is "
        "before it hands nothing over; one whose reading is at or after it takes at least "
        "that task out of the schedule (R4, R5).",
    ),
    # ---- asyncio ---------------------------------------------------------------------
    Rule(
        "R45",
        "aio",
        "Loop-driven timer",
        "An AsyncPurgatory starts no thread. Its timer runs due tasks inline and is advanced "
        "on the event loop by one loop.call_at handle armed for the timer's next_due_time: "
        "armed earlier when an operation due earlier is submitted, re-armed after each "
        "firing, absent when nothing is scheduled. A firing runs advance_clock(0) on the "
        "loop thread: due operations expire there, never before their due time (R4), in due "
        "order (R6), then the purge runs if due (R30).",
    ),
    Rule(
        "R46",
        "aio",
        "Awaiting an operation",
        "outcome = await purgatory.wait(operation, keys): wait is a coroutine function; when "
        "its coroutine first runs it submits the operation as try_complete_else_watch does "
        "(R22) and then waits for the outcome: COMPLETED if it completed by its condition or "
        "a force_complete (at once included), EXPIRED if its expiry won (R17), ABANDONED if "
        "abandon or shutdown took it out; the outcome is set once on_complete has returned. "
        "Bad arguments raise as try_complete_else_watch does (R34-R36) and leave no trace; "
        "waiting twice on the same operation raises ValueError. submit(operation, keys) "
        "submits at the call and returns a Waiter, a plain asyncio.Future subclass of the "
        "outcome (awaitable, and accepted by asyncio.wait, wait_for, gather and shield).",
    ),
    Rule(
        "R47",
        "aio",
        "Cancelling a wait abandons",
        "The operation is abandoned (R40) exactly when the code waiting for it gives up: the "
        "Waiter is cancelled, or the task awaiting wait is (Task.cancel, a wait_for or "
        "asyncio.timeout expiry, a TaskGroup or gather cancelling it, a dropped client). The "
        "abandon happens inside that cancel() call: the operation leaves every watcher list "
        "and the timer (watched and num_delayed drop at once), never completes later, "
        "neither on_complete nor on_expiration runs, and the CancelledError propagates. An "
        "operation that finished before the cancellation landed stays finished. "
        "AsyncPurgatory.abandon and cancel() of a submitted operation abandon it too; its "
        "wait returns ABANDONED.",
    ),
    Rule(
        "R48",
        "aio",
        "Callback errors",
        "If on_complete raises anything (an Exception or any other BaseException, "
        "CancelledError included), the operation stays completed (R16), its waiter raises "
        "that same exception, and so does the completing call (check_and_complete, "
        "force_complete, wait itself when it completes at once), after its sweep (R53). On "
        "expiry an Exception is logged (R13) and the driver keeps driving the timer; another "
        "BaseException reaches the loop (its exception handler, or run_forever for "
        "KeyboardInterrupt and SystemExit) after the drain handed every due task over.",
    ),
    Rule(
        "R49",
        "aio",
        "Asyncio shutdown",
        "AsyncPurgatory.shutdown is idempotent and may be called from a callback running on "
        "the loop (try_complete, on_complete, on_expiration). It cancels the call_at handle "
        "for good, abandons every awaited operation still pending (each wait returns "
        "ABANDONED), then shuts the purgatory down (R32). An operation that completed "
        "during the call keeps its outcome; later waits raise RuntimeError. An operation is "
        "awaited from the start of its own submission, so a shutdown from its own "
        "try_complete (first try or R41's retry) abandons it too.",
    ),
    Rule(
        "R50",
        "aio",
        "Loop thread",
        "An AsyncPurgatory belongs to one loop. Its calls (wait, submit, "
        "try_complete_else_watch, check_and_complete, cancel_for_key, abandon) are made on "
        "that loop, in the thread running it: from anywhere else (another thread, another "
        "loop, no running loop) they raise RuntimeError (R59). try_complete, on_complete and "
        "on_expiration run on the thread that completes the operation: the loop thread for "
        "those calls and for expiry, so they must not block (a blocking callback stalls the "
        "loop; operations due meanwhile expire late, in due order). A completion made by "
        "another thread through the wrapped purgatory reaches its waiter through "
        "call_soon_threadsafe; if the loop is closed it is dropped (the operation still "
        "completes). shutdown also works from a thread with no running loop once the loop "
        "has stopped or closed, and then counts none of the abandoned operations in "
        "waiting; from a second running loop it is refused with a RuntimeError saying so.",
    ),
    Rule(
        "R51",
        "aio",
        "Virtual time",
        "On a VirtualTimeLoop, loop.time() is the ManualClock's reading in seconds, and "
        "when nothing is ready the clock jumps to the loop's next timer (whole ms, rounded "
        "up) instead of blocking. An AsyncPurgatory on it observes the same completions, "
        "expiries and counters as a DelayedOperationPurgatory on a ManualClock advanced to "
        "the same readings, except that an expiry happens at its due time, in a loop "
        "callback, rather than inside the advance_clock call that passes it.",
    ),
    # ---- user code that fails ---------------------------------------------------------
    Rule(
        "R52",
        "failures",
        "Callbacks that raise",
        "Any user code the library calls may raise an Exception or any other BaseException "
        "(KeyboardInterrupt, SystemExit, CancelledError): try_complete, on_complete, "
        "on_expiration, a task's run, a supplied lock, clock or executor, a key's __hash__ "
        "or __eq__. try_complete raising leaves the operation as it was (pending, watched as "
        "before) unless it completed meanwhile. on_complete raising leaves the operation "
        "completed (R16) and the error reaches the completing call. A task's run (an "
        "expiry) raising an Exception is logged and swallowed (R13); any other "
        "BaseException is logged and re-raised out of the hand-over: from advance_clock "
        "after its drain (R53), or into the executor's future on an executor thread. A "
        "reaper step that raises anything is logged and the reaper carries on (R31).",
    ),
    Rule(
        "R53",
        "failures",
        "Sweeps finish, then raise",
        "A call that runs user code for several operations or tasks (check_and_complete, "
        "the hand-over of an advance_clock drain, cancel_for_key's knock attempts, "
        "AsyncPurgatory.shutdown's abandons) handles every one of them even when some raise, "
        "so nothing it collected is lost and every waiter is settled. Then it raises: one "
        "error as it is; several as one BaseExceptionGroup (an ExceptionGroup when all are "
        "Exceptions) holding them in the order raised. A task whose hand-over failed "
        "(its executor's submit raised) is named in a note on that error. An operation "
        "whose on_complete raised in check_and_complete is unlinked from that key but not "
        "counted; a purgatory advance_clock whose drain raised skips its purge check.",
    ),
    Rule(
        "R54",
        "failures",
        "No trace on every path",
        "R38 holds on every path of a submission, the R41 retry included: if the retry's "
        "try_complete raises and the operation did not complete, the submission is rolled "
        "back (unwatched, estimate lowered, timer entry cancelled, claim released). A "
        "supplied clock, executor or lock that raises before the call changed anything, and "
        "a key whose __hash__ or __eq__ raises when the call first reads its keys, fail the "
        "call with no trace. Outside this promise: a lock whose release raises after the "
        "work under it, and a key that hashes or compares once and raises later in the same "
        "call (Python's dict-key contract broken): the error propagates, nothing more.",
    ),
    Rule(
        "R55",
        "failures",
        "cancel_for_key honours a knock",
        "cancel_for_key holds each operation's lock while it cancels its timer entry; a "
        "maybe_try_complete that finds that lock held leaves its attempt to it, as to the "
        "blocking paths of R41. After releasing the lock, if the pending flag is set and "
        "the operation is still pending and submitted here, cancel_for_key makes the "
        "attempt (safe_try_complete): an operation completed by it runs its callbacks in "
        "cancel_for_key's caller and is still returned. No knock is dropped.",
    ),
    Rule(
        "R56",
        "failures",
        "cancel never fails on a valid operation",
        "cancel() of a DelayedOperation is idempotent and never raises because of a race: "
        "on an operation submitted to a purgatory it abandons it there (R40); on one never "
        "submitted, or whose submission was rolled back (R38) before cancel took its lock, "
        "it is the plain task cancel (R9).",
    ),
    Rule(
        "R57",
        "aio",
        "Cancelled at any point",
        "Whatever point asyncio cancels the code waiting for an operation at, the operation "
        "is abandoned exactly when that code gives up, and never completes afterwards: "
        "cancelled before its first step, wait's coroutine never submitted the operation "
        "(nothing to abandon; it may be submitted later); cancelled while suspended (directly, "
        "through wait_for, asyncio.timeout, TaskGroup, gather, asyncio.wait's caller), it is "
        "abandoned in the cancel() call; a coroutine closed while suspended (GeneratorExit) "
        "abandons it too; under shield the inner wait goes on until the inner task itself is "
        "cancelled. Only public asyncio API is used.",
    ),
    Rule(
        "R58",
        "aio",
        "Every waiter settles",
        "Every Waiter ends with an outcome or an exception, never pending for good: when "
        "on_complete raises anything (R48), when purgatory.abandon(op) or op.cancel() is "
        "called on the wrapped purgatory of either implementation, and when the wrapped "
        "purgatory is shut down directly: the AsyncPurgatory then shuts itself down (its "
        "waiters get ABANDONED) and its driver stops arming the loop.",
    ),
    Rule(
        "R59",
        "aio",
        "Checks hold where the state is used",
        "Every thread or loop check holds where the state it guards is used, not only where "
        "it is read: an AsyncPurgatory call is allowed only while its loop runs in the "
        "calling thread, a fact a synchronous call cannot lose before it returns, so the "
        "driver's call_at and the waiter's set_result always run on the loop thread. A "
        "waiter told from another thread is settled through call_soon_threadsafe.",
    ),
    # ---- real clocks ---------------------------------------------------------------
    Rule(
        "R60",
        "timer",
        "Never early on a real clock",
        "A clock that truncates a finer real time offers deadline_base_ms(), its reading "
        "rounded up, and a timer counts a new task's expiration from it (from now_ms on a "
        "clock without it, such as ManualClock, which stays exact). Drains still read "
        "now_ms. So on MonotonicClock with tick_ms 1 no task or operation is handed over "
        "before delay_ms of real time has passed since the call that added it; with a "
        "coarser tick R1's allowance of up to tick_ms - 1 ms early remains. Kafka truncates "
        "(kafka-early-expiry): a task may run up to 1 ms early.",
    ),
    Rule(
        "R61",
        "purgatory",
        "Finished operations are let go",
        "The purgatory counts its unfinished operations: those that reached the watching "
        "step of R22 and have not completed, expired, been abandoned or been rolled back. "
        "When that count drops to zero (the winning force_complete of a watched operation, "
        "after its timer entry is cancelled and before on_complete; an abandon; a "
        "rollback), the purgatory at once unlinks every finished operation from every "
        "watcher list (dropping emptied lists, R26), sets the estimate to num_delayed and "
        "adds the pairs unlinked to num_purged, as a purge does (R30). So once every "
        "operation has finished, watched is 0 and the purgatory holds none of them. Kafka "
        "purges only every purge_interval completions (kafka-lazy-purge).",
    ),
    Rule(
        "R62",
        "aio",
        "One rule for misuse",
        "Every AsyncPurgatory call (wait, submit, try_complete_else_watch, "
        "check_and_complete, cancel_for_key, abandon) is refused the same way: "
        "RuntimeError when not made on the purgatory's loop in its thread (checked first), "
        "then RuntimeError naming the purgatory once it is shut down (by shutdown, its "
        "context manager, or the wrapped purgatory's own shutdown). Refused calls change "
        "nothing. shutdown itself is idempotent, and the read-only properties always "
        "answer. (The threaded purgatory keeps R32: there check_and_complete and "
        "cancel_for_key still work after shutdown.)",
    ),
    Rule(
        "R63",
        "lifecycle",
        "The operation lock is re-entrant",
        "An operation's lock must be re-entrant for the thread holding it: the library "
        "takes it again while holding it (an add handing a due task over inside the "
        "submission, callbacks calling back in). threading.Lock, Semaphore and "
        "BoundedSemaphore are refused with TypeError naming lock at construction.",
    ),
    Rule(
        "R64",
        "lifecycle",
        "Shutdown from a callback",
        "shutdown() from any callback returns once the purgatory is closed; the enclosing "
        "call then goes on as a call after shutdown: a drain hands nothing more over, an "
        "unfinished submission is rolled back and raises RuntimeError, sweeps finish.",
    ),
    Rule(
        "R65",
        "lifecycle",
        "An executor that refuses a task",
        "A submit that raises (RuntimeError included) while the timer is open is the "
        "call's error (R53, R54); only after the timer was closed is a refusal dropped.",
    ),
    Rule(
        "R66",
        "lifecycle",
        "cancel_for_key during a submission",
        "An operation that cancel_for_key returned is never added to the timer afterwards, "
        "also when cancel_for_key ran inside that operation's own submission.",
    ),
    Rule(
        "R67",
        "lifecycle",
        "Keys that fail during a purge",
        "A key whose hash or equality raises during a purge is skipped and logged; its "
        "list stays; the call that purged is unaffected (a non-Exception BaseException is "
        "re-raised after the call's own work, for force_complete after on_complete).",
    ),
    Rule(
        "R68",
        "lifecycle",
        "Lifecycle",
        "An operation is new, submitted, completed or abandoned; the ending transitions "
        "race through one compare-and-set and a reader never sees a mix. A purgatory is "
        "open, shutting down, closed.",
    ),
    Rule(
        "R69",
        "lifecycle",
        "Calls from callbacks",
        "For each place user code runs, the locks held and what a public call from there "
        "does (docs/spec.md's re-entrancy table).",
    ),
    Rule(
        "R70",
        "aio",
        "Bounded firings",
        "A firing of an AsyncPurgatory's driver runs at most max_hand_overs of the tasks "
        "its drain handed over (the expiries); if more are left, the driver re-arms at once "
        "with loop.call_soon and runs the next batch at that callback, so every callback "
        "ready on the loop before it (I/O, other timers) runs between two batches. The "
        "tasks of one drain run in the drain's order (R6), none before its due time (R4); "
        "no new drain starts until they have all run; a task that one of them adds due at "
        "once still runs inside its add (R3, R6). shutdown drops the tasks not run yet: "
        "nothing expires after it returns (R32, R49).",
    ),
)

_BY_ID = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with id ``rule_id`` (``KeyError`` if there is none)."""
    return _BY_ID[rule_id]
