"""Races between purgatory callers, each a small program run under the controlled scheduler.

A scenario builds a fresh world (manual clock, inline executor, timer, purgatory,
operations) inside ``instrumented(scheduler)``, spawns two to four threads that race,
and returns a check that judges the finished run. ``run_scenario`` runs one schedule;
the tests feed it schedules from Hypothesis and from the exhaustive explorer.

The operations are ``ScheduledOperation``s: ``try_complete`` reads the attribute
``ready`` and then passes a ``checkpoint`` before acting on what it read, so the
scheduler can switch threads between "condition evaluated" and "completed", which is
exactly the window of KAFKA-6653. An "event" (``ready := True``) is likewise its own
schedule step, so it can happen between any two steps of the other threads.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from kpurgatory import InlineExecutor, ManualClock, sync
from tests.concurrency.lockset import LocksetViolationError, holds
from tests.concurrency.scheduler import (
    Chooser,
    Exploration,
    ListChooser,
    PriorityChooser,
    RunResult,
    SchedCondition,
    SchedFlag,
    SchedLock,
    Scheduler,
    attribute_names,
    checkpoint,
    explore,
    instrumented,
    label_primitives,
)
from tests.support import NextDue

DELAY_MS = 10
"""Delay of the operations that may expire (expiry = ``advance_clock(DELAY_MS)``)."""

LONG_DELAY_MS = 1_000_000
"""Delay of operations that must complete without expiring."""


@dataclass(frozen=True)
class Impl:
    """The classes a scenario builds: an implementation package, or a mutant of it."""

    name: str
    operation: Any
    purgatory: Any
    timer: Any
    task: Any


def implementation(name: str) -> Impl:
    """The classes of ``kpurgatory.<name>``."""
    module = importlib.import_module(f"kpurgatory.{name}")
    return Impl(
        name,
        module.DelayedOperation,
        module.DelayedOperationPurgatory,
        module.SystemTimer,
        module.TimerTask,
    )


@functools.cache
def scheduled_operation(base: Any) -> type[Any]:
    """A subclass of the ``DelayedOperation`` class ``base`` for scheduled races.

    ``ready`` is the condition; ``log`` receives ``("complete", name)`` and
    ``("expire", name)``; ``try_complete`` passes a checkpoint between reading the
    condition and acting on it, and appends what it read to ``trace`` if a scenario set
    that attribute (a list).
    """

    class ScheduledOperation(base):  # type: ignore[misc]
        def __init__(
            self, delay_ms: int, name: str, log: list[tuple[str, str]], lock: Any = None
        ) -> None:
            super().__init__(delay_ms, lock)
            self.name = name
            self.log = log
            self.ready = False

        def try_complete(self) -> bool:
            inside = self.__dict__.setdefault("inside", set())
            me = threading.get_ident()
            inside.add(me)
            try:
                ready = self.ready
                trace = self.__dict__.get("trace")  # a scenario's own record of the tries
                if trace is not None:
                    trace.append(f"try_complete read ready={ready}")
                checkpoint(f"{self.name}.try_complete acts on ready={ready}")
                return bool(ready and self.force_complete())
            finally:
                inside.discard(me)

        def _no_overlap(self, callback: str) -> None:
            # R17: no callback while another thread is inside try_complete of this operation
            others = self.__dict__.get("inside", set()) - {threading.get_ident()}
            if others:
                self.log.append(("overlap", f"{self.name}.{callback} during try_complete"))

        def on_complete(self) -> None:
            # Every purgatory path and expiry complete under the lock; a user's bare
            # force_complete (the "force" threads) does not, and R17 promises nothing there.
            if holds(self.lock):
                self._no_overlap("on_complete")
            self.log.append(("complete", self.name))

        def on_expiration(self) -> None:
            self._no_overlap("on_expiration")
            if not holds(self.lock):  # R17: expiry runs on_expiration holding the lock
                self.log.append(("overlap", f"{self.name}.on_expiration without its lock"))
            self.log.append(("expire", self.name))

        def __repr__(self) -> str:
            return f"ScheduledOperation({self.name})"

    ScheduledOperation.__name__ = f"Scheduled{base.__name__}"
    return ScheduledOperation


@functools.cache
def counting_task(base: Any) -> type[Any]:
    """A ``TimerTask`` subclass of ``base`` that appends ``("ran", name)`` to a log."""

    class CountingTask(base):  # type: ignore[misc]
        def __init__(self, delay_ms: int, name: str, log: list[tuple[str, str]]) -> None:
            super().__init__(delay_ms)
            self.name = name
            self.log = log

        def run(self) -> None:
            self.log.append(("ran", self.name))

        def __repr__(self) -> str:
            return f"CountingTask({self.name})"

    return CountingTask


@dataclass
class World:
    """Everything one scheduled run touches."""

    impl: Impl
    sched: Scheduler
    clock: Any
    timer: Any
    purgatory: Any
    log: list[tuple[str, str]] = field(default_factory=list)

    def operation(self, name: str, delay_ms: int = DELAY_MS, lock: Any = None) -> Any:
        """A new scheduled operation (not yet submitted)."""
        op = scheduled_operation(self.impl.operation)(delay_ms, name, self.log, lock)
        label_primitives(op, name)
        return op

    def task(self, name: str, delay_ms: int) -> Any:
        """A new counting timer task."""
        return counting_task(self.impl.task)(delay_ms, name, self.log)

    def spawn_event(self, op: Any, then: Callable[[], object]) -> None:
        """Spawn thread ``event``: ``op.ready := True`` (its own schedule step), then ``then()``.

        The thread's result is what ``then`` returns.
        """

        def body() -> object:
            checkpoint("event: ready := True")
            op.ready = True
            return then()

        self.sched.spawn("event", body)

    def count(self, kind: str, name: str) -> int:
        """How often ``(kind, name)`` was logged."""
        return sum(1 for entry in self.log if entry == (kind, name))

    def close(self) -> None:
        """Shut the purgatory (and so the timer) down, from the test thread."""
        self.purgatory.shutdown()

    def purging(self, purge_interval: int = 0) -> Any:
        """Replace the purgatory by one on the same timer that purges on every
        ``advance_clock`` once anything completed (``purge_interval``, R30).

        A sharded purgatory gets two shards: a purge takes every shard lock in turn, and
        512 of them would make 1,024 switch points of each purge."""
        extra: dict[str, int] = {}
        if hasattr(self.impl.purgatory, "shards"):  # no signature on a mypyc-compiled class
            extra["shards"] = 2
        self.purgatory = self.impl.purgatory(
            "sched", timer=self.timer, reaper_enabled=False, purge_interval=purge_interval, **extra
        )
        label_primitives(self.purgatory, "purgatory")
        return self.purgatory


Check = Callable[[RunResult], None]
Build = Callable[[World], Check]


class EventClock(ManualClock):
    """A ``ManualClock`` whose ``wait`` really waits on the timer's condition, with no timeout.

    ``advance_clock`` on it blocks until ``next_due()`` reports something (a task
    scheduled, or the timer woken or closed); then time jumps to that due time, capped
    at the timeout, and the timer drains there. Since nothing ends the wait but a
    notify, a notify that ``add``, ``wakeup`` or ``close`` forgets (or sends before the
    waiter listens) leaves the waiter blocked forever, which the scheduler reports as a
    deadlock: this is how the schedule tests look for lost wake-ups (R7, R14).
    """

    def wait(self, condition: threading.Condition, timeout_ms: int, next_due: NextDue) -> int:
        """Block (condition held) until something is due-able, then jump to it."""
        now = self.now_ms()
        while True:
            due = next_due()
            if due is not None:
                self.advance(max(0, min(timeout_ms, due - now)))
                return self.now_ms()
            condition.wait()


def run_scenario(
    impl: Impl,
    build: Build,
    chooser: Chooser,
    *,
    max_steps: int = 3_000,
    lock_discipline: bool = True,
) -> None:
    """Run one schedule of the scenario ``build`` and apply its check.

    Raises ``ScheduleError`` (an ``AssertionError``) when the schedule deadlocks,
    livelocks, or breaks the scenario's property, the lockset checks
    (``lock_discipline``) or R17's no-overlap; the message shows the schedule.
    """
    sched = Scheduler(chooser, max_steps=max_steps)
    with instrumented(sched, lock_discipline=lock_discipline):
        clock = ManualClock(0)
        timer = impl.timer("sched", clock=clock, executor=InlineExecutor())
        purgatory = impl.purgatory("sched", timer=timer, reaper_enabled=False)
        label_primitives(timer, "timer")
        label_primitives(purgatory, "purgatory")
        world = World(impl, sched, clock, timer, purgatory)
        check = build(world)
        result = sched.run()
        check_discipline(sched, world, result)
        with contextlib.suppress(LocksetViolationError):  # recorded: reported just below
            check(result)
        check_discipline(sched, world, result)
        world.close()


def check_discipline(sched: Scheduler, world: World, result: RunResult) -> None:
    """The properties every scenario shares: the lockset checks saw no unguarded write,
    and no callback overlapped another thread's ``try_complete`` (R17)."""
    if sched.lockset is not None and sched.lockset.violations:
        raise result.fail("lock discipline: " + "; ".join(sched.lockset.violations[:3]))
    overlaps = [what for kind, what in world.log if kind == "overlap"]
    if overlaps:
        raise result.fail(f"R17 overlap: {overlaps}")


def _no_errors(result: RunResult, allowed: tuple[type[BaseException], ...] = ()) -> None:
    for name, error in result.errors.items():
        if not isinstance(error, allowed):
            raise result.fail(f"thread {name} raised {error!r}")


def _expect(result: RunResult, condition: bool, message: str) -> None:
    if not condition:
        raise result.fail(message)


def _completed_once(world: World, result: RunResult, op: Any, lost: str) -> None:
    """``op`` ended completed (else fail with ``lost``) and ran ``on_complete`` once."""
    _expect(result, op.is_completed, lost)
    _expect(result, world.count("complete", "op") == 1, f"on_complete ran {world.log}")


def _one_winner(world: World, result: RunResult, names: list[str]) -> int:
    """No thread raised; ``op`` completed once, by exactly one of the threads ``names``
    (a True result) or by its expiry; how often it expired (0 or 1)."""
    _no_errors(result)
    expired = world.count("expire", "op")
    winners = [n for n in names if result.results[n] is True] + ["expiry"] * expired
    _expect(result, world.count("complete", "op") == 1, f"on_complete ran {world.log}")
    _expect(result, len(winners) == 1, f"winners {winners}, log {world.log}")
    return expired


# -- property 1: force_complete exactly once ----------------------------------------------

COMPLETERS = ("force", "try", "check", "expire")
"""Ways to complete a submitted operation: ``force_complete``, ``safe_try_complete``,
``check_and_complete`` on its key, and expiry (``advance_clock`` past its due time)."""


def force_complete_race(kinds: Sequence[str]) -> Build:
    """R16/R17/R25: callers of ``kinds`` race to complete one submitted, ready operation.

    Exactly one wins (a True from force_complete/safe_try_complete, a count of 1 from
    check_and_complete, or on_expiration from the expiry); on_complete runs once,
    on_expiration at most once, only if expiry won, and after on_complete; the timer
    no longer holds the operation.
    """
    unknown = set(kinds) - set(COMPLETERS)
    if unknown:
        raise ValueError(f"kinds must be among {COMPLETERS}, got {sorted(unknown)}")

    def build(world: World) -> Check:
        op = world.operation("op")
        assert world.purgatory.try_complete_else_watch(op, ["k"]) is False
        op.ready = True
        bodies: dict[str, Callable[[], object]] = {
            "force": op.force_complete,
            "try": op.safe_try_complete,
            "check": lambda: world.purgatory.check_and_complete("k") == 1,
            "expire": lambda: world.purgatory.advance_clock(DELAY_MS),
        }
        names = [f"{kind}{index}" for index, kind in enumerate(kinds)]
        for name, kind in zip(names, kinds, strict=True):
            world.sched.spawn(name, bodies[kind])

        def check(result: RunResult) -> None:
            expired = _one_winner(world, result, names)
            if expired:
                _expect(result, world.log.index(("complete", "op")) == 0, "expire before complete")
            _expect(result, op.is_completed, "not completed")
            _expect(result, world.timer.size == 0, f"timer still holds {world.timer.size}")

        return check

    return build


def submit_race(event: bool, force: bool) -> Build:
    """R16/R22/R23: ``try_complete_else_watch`` of a delay-0 operation races completers.

    The submitter's timer add makes a delay-0 operation expire at once, so the
    operation always completes, exactly once: by one of the submitter's two tries, an
    event (``ready := True`` then ``check_and_complete``), a bare ``force_complete``,
    or expiry inside the submitter's add.
    """

    def build(world: World) -> Check:
        op = world.operation("op", delay_ms=0)
        world.sched.spawn("submit", lambda: world.purgatory.try_complete_else_watch(op, ["k"]))

        names = ["submit"]
        if event:
            world.spawn_event(op, lambda: world.purgatory.check_and_complete("k") == 1)
            names.append("event")
        if force:
            world.sched.spawn("force", op.force_complete)
            names.append("force")

        def check(result: RunResult) -> None:
            _one_winner(world, result, names)
            _expect(result, world.timer.size == 0, f"timer still holds {world.timer.size}")

        return check

    return build


# -- property 2: maybe_try_complete ---------------------------------------------------------


def maybe_try_complete_race(callers: int) -> Build:
    """R20: purgatory-style callers only; the condition becomes true during the race.

    ``callers`` threads call ``maybe_try_complete`` (condition false at first); an event
    thread sets the condition, then calls ``maybe_try_complete`` itself. Afterwards the
    operation is completed (no timeout was ever advanced), exactly one call returned
    True, and no thread ever waited for the lock: a failed try-lock never blocks.
    Waiting for the optimized operation's flag lock (``op._flags``: held only around a
    flag's test-and-set, which runs no user code, like the uninstrumented guard inside
    an ``AtomicFlag``) is not the blocking R20 forbids. The flag lock is recognised by
    identity, not by its printed name (a mypyc build cannot be labelled by attribute).
    """

    def build(world: World) -> Check:
        op = world.operation("op", delay_ms=LONG_DELAY_MS)
        assert world.purgatory.try_complete_else_watch(op, ["k"]) is False
        for index in range(callers):
            world.sched.spawn(f"caller{index}", op.maybe_try_complete)

        world.spawn_event(op, op.maybe_try_complete)

        def check(result: RunResult) -> None:
            _no_errors(result)
            _completed_once(world, result, op, "completion lost: operation still pending")
            trues = [name for name, value in result.results.items() if value is True]
            _expect(result, len(trues) == 1, f"maybe_try_complete returned True in {trues}")
            flags = getattr(op, "_flags", None)
            allowed = {f"acquire {flags.name}"} if isinstance(flags, SchedLock) else set()
            blocked = [name for name, labels in result.blocked_on.items() if labels - allowed]
            _expect(result, not blocked, f"threads {blocked} blocked on a lock")

        return check

    return build


def foreign_lock_holder(via: str, shared_with_operation: bool) -> Build:
    """KAFKA-8334: the operation's lock is held by code outside ``maybe_try_complete``.

    One thread holds the operation's lock for unrelated work (``shared_with_operation``:
    it is in ``maybe_try_complete`` of *another* operation sharing the lock, Kafka's
    group lock; otherwise it just holds the lock). The event thread sets the condition
    and then, ``via="maybe"``, calls ``maybe_try_complete`` (the completion can be
    lost: a documented limitation, R20), or, ``via="check"``, the purgatory's
    ``check_and_complete`` (blocking ``safe_try_complete``: never lost).
    """
    if via not in ("maybe", "check"):
        raise ValueError(f"via must be 'maybe' or 'check', got {via!r}")

    def build(world: World) -> Check:
        shared = world.sched.lock("group_lock")
        op = world.operation("op", delay_ms=LONG_DELAY_MS, lock=shared)
        assert world.purgatory.try_complete_else_watch(op, ["k"]) is False
        if shared_with_operation:
            other = world.operation("other", delay_ms=LONG_DELAY_MS, lock=shared)
            world.sched.spawn("holder", other.maybe_try_complete)
        else:

            def hold() -> None:
                with shared:
                    checkpoint("holder: unrelated work under the lock")

            world.sched.spawn("holder", hold)

        if via == "maybe":
            world.spawn_event(op, op.maybe_try_complete)
        else:
            world.spawn_event(op, lambda: world.purgatory.check_and_complete("k"))

        def check(result: RunResult) -> None:
            _no_errors(result)
            _completed_once(world, result, op, "completion lost: operation still pending")

        return check

    return build


# -- property 3: try_complete_else_watch vs check_and_complete --------------------------------


def watch_vs_event(event_key: str, event_first_try: bool = False) -> Build:
    """R22/R25: an event on any watched key, at any point of the watch sequence, is seen.

    The submitter runs ``try_complete_else_watch(op, ["a", "b"])``; the event thread
    sets the condition and calls ``check_and_complete(event_key)``. Whatever the
    interleaving, the operation ends completed, once, without expiring, and the timer
    does not hold it.
    """

    def build(world: World) -> Check:
        op = world.operation("op", delay_ms=LONG_DELAY_MS)
        world.sched.spawn("submit", lambda: world.purgatory.try_complete_else_watch(op, ["a", "b"]))

        world.spawn_event(op, lambda: world.purgatory.check_and_complete(event_key))

        def check(result: RunResult) -> None:
            _no_errors(result)
            _completed_once(world, result, op, "event missed: operation still pending")
            _expect(result, world.count("expire", "op") == 0, "expired")
            won = int(result.results["submit"] is True) + int(result.results["event"] == 1)
            _expect(result, won == 1, f"results {result.results}")
            _expect(result, world.timer.size == 0, f"timer still holds {world.timer.size}")

        return check

    return build


# -- property 4: cancel, add, cancel_for_key, shutdown races ----------------------------------


def cancel_vs_expiry() -> Build:
    """R9/R11/R17: ``cancel`` of a timed operation races its expiry.

    Either the expiry won (on_complete then on_expiration, once each) or the cancel
    did (no callback, the operation pending and out of the timer); never both, never
    twice, and the timer is empty afterwards.
    """

    def build(world: World) -> Check:
        op = world.operation("op")
        assert world.purgatory.try_complete_else_watch(op, ["k"]) is False
        # the timer-level cancel (R9); op.cancel() on a submitted op is abandon (R40)
        world.sched.spawn("cancel", lambda: world.impl.task.cancel(op))
        world.sched.spawn("expire", lambda: world.timer.advance_clock(DELAY_MS))

        def check(result: RunResult) -> None:
            _no_errors(result)
            expired = world.count("expire", "op")
            completed = world.count("complete", "op")
            _expect(result, expired == completed <= 1, f"log {world.log}")
            _expect(result, op.is_completed == bool(expired), "completed without expiring")
            _expect(result, result.results["expire"] is bool(expired), "advance_clock result")
            _expect(result, world.timer.size == 0, f"timer still holds {world.timer.size}")

        return check

    return build


def add_vs_advance(adders: int) -> Build:
    """R3/R5/R11/R12: ``add`` races ``advance_clock``; nothing is lost or run twice.

    Task ``t<i>`` has delay ``i * 5`` ms and the advancer moves the clock by 5 ms.
    After the race the test advances far enough: every task has run exactly once,
    and the timer is empty.
    """

    def build(world: World) -> Check:
        tasks = [world.task(f"t{index}", index * 5) for index in range(adders)]
        for index, task in enumerate(tasks):
            world.sched.spawn(f"add{index}", functools.partial(world.timer.add, task))
        world.sched.spawn("advance", lambda: world.timer.advance_clock(5))

        def check(result: RunResult) -> None:
            _no_errors(result)
            _expect(result, all(world.count("ran", t.name) <= 1 for t in tasks), f"{world.log}")
            world.timer.advance_clock(5 * (adders + 1))
            counts = [world.count("ran", t.name) for t in tasks]
            _expect(result, counts == [1] * adders, f"runs per task {counts}")
            _expect(result, world.timer.size == 0, f"timer still holds {world.timer.size}")

        return check

    return build


def cancel_for_key_vs_completion(event_key: str) -> Build:
    """R25/R29: ``cancel_for_key("a")`` races an event checked on ``event_key``.

    The operation (watched on a and b, timed) completes at most once during the race;
    if it did not, it is still watched on b, and a later ``check_and_complete("b")``
    completes it: never lost, never completed twice, never expired.
    """

    def build(world: World) -> Check:
        op = world.operation("op")
        assert world.purgatory.try_complete_else_watch(op, ["a", "b"]) is False
        world.sched.spawn("cancel", lambda: world.purgatory.cancel_for_key("a"))

        world.spawn_event(op, lambda: world.purgatory.check_and_complete(event_key))

        def check(result: RunResult) -> None:
            _no_errors(result)
            _expect(result, world.count("complete", "op") <= 1, f"log {world.log}")
            cancelled = result.results["cancel"]
            _expect(result, cancelled in ([], [op]), f"cancel_for_key returned {cancelled}")
            _expect(result, world.timer.size == 0 or not cancelled, "cancelled yet timed")
            world.purgatory.check_and_complete("b")
            world.purgatory.advance_clock(DELAY_MS)
            _expect(result, world.count("complete", "op") == 1, f"lost or doubled: {world.log}")
            _expect(result, world.count("expire", "op") == 0, f"expired: {world.log}")
            _expect(result, world.timer.size == 0, f"timer still holds {world.timer.size}")

        return check

    return build


def shutdown_vs_everything(reaper: bool = True) -> Build:
    """R32/R37: ``shutdown`` races a submission, an event and (``reaper``) a reaper step.

    No deadlock; only ``RuntimeError`` (the purgatory or timer is shut) may escape;
    each operation completes at most once and expires only after completing; the
    watched, ready operation is completed exactly once (check_and_complete works
    after shutdown, and expiry may beat it).
    """

    def build(world: World) -> Check:
        watched = world.operation("watched")
        assert world.purgatory.try_complete_else_watch(watched, ["k"]) is False
        fresh = world.operation("fresh")
        world.sched.spawn("shutdown", world.purgatory.shutdown)
        world.sched.spawn("submit", lambda: world.purgatory.try_complete_else_watch(fresh, ["k"]))

        world.spawn_event(watched, lambda: world.purgatory.check_and_complete("k"))
        if reaper:
            world.sched.spawn("reaper", lambda: world.purgatory.advance_clock(DELAY_MS))

        def check(result: RunResult) -> None:
            _no_errors(result, (RuntimeError,))
            for name in ("watched", "fresh"):
                completed = world.count("complete", name)
                expired = world.count("expire", name)
                _expect(result, completed <= 1 and expired <= completed, f"{name}: {world.log}")
            _expect(result, world.count("complete", "watched") == 1, f"lost: {world.log}")
            _expect(result, world.timer.closed, "timer not closed after shutdown")

        return check

    return build


# -- waits on the timer's condition: no lost wake-up (R7, R14) ---------------------------------


def blocked_advance(add: bool, wake: bool, close: bool) -> Build:
    """R7/R14: ``advance_clock(100)`` waits on an ``EventClock`` while others add, wake, close.

    The scenario's own timer reads an ``EventClock``. The waiter blocks until notified;
    ``add`` (a task
    due in 10 ms), ``wakeup`` and ``close`` must each reach it whatever the
    interleaving, or the schedule deadlocks. Afterwards: the task ran at most once, and
    is never lost (without ``close`` it ran or is still scheduled, as ``wakeup`` ends the
    wait at the current reading); with ``add`` alone the waiter drained it at exactly
    10 ms; the waiter returned True iff it handed the task over; time never passed the
    timeout.
    """

    def build(world: World) -> Check:
        clock = EventClock()
        timer = world.impl.timer("event", clock=clock, executor=InlineExecutor())
        label_primitives(timer, "timer")
        task = world.task("t", 10)
        world.sched.spawn("waiter", lambda: timer.advance_clock(100))
        if add:
            world.sched.spawn("add", lambda: timer.add(task))
        if wake:
            world.sched.spawn("wake", timer.wakeup)
        if close:
            world.sched.spawn("close", timer.close)

        def check(result: RunResult) -> None:
            _no_errors(result, (RuntimeError,) if close else ())
            ran = world.count("ran", "t")
            _expect(result, ran <= 1, f"ran {ran} times")
            _expect(result, result.results["waiter"] is bool(ran), f"results {result.results}")
            _expect(result, clock.now_ms() <= 100, f"clock at {clock.now_ms()}")
            if add and not close:
                _expect(result, ran == 1 or timer.size == 1, "task lost")
                if not wake:
                    _expect(result, ran == 1 and clock.now_ms() == 10, "not drained at 10")
            timer.close()

        return check

    return build


# -- coverage of the instrumentation -----------------------------------------------------------

_REAL_PRIMITIVES: tuple[type[Any], ...] = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    sync.AtomicFlag,
)


def uninstrumented_primitives(impl: Impl) -> list[str]:
    """Locks, conditions and flags of ``impl``'s objects that bypass ``kpurgatory.sync``.

    Builds a timer, a purgatory and a submitted operation inside ``instrumented`` and
    walks their attributes (two levels deep, through lists and dict values). A real
    primitive found there would let a managed thread block outside the scheduler, so
    the schedule tests would not cover that implementation's real interleavings.
    """
    sched = Scheduler(ListChooser([]))
    found: list[str] = []
    with instrumented(sched, lock_discipline=False):
        clock = ManualClock(0)
        timer = impl.timer("probe", clock=clock, executor=InlineExecutor())
        purgatory = impl.purgatory("probe", timer=timer, reaper_enabled=False)
        world = World(impl, sched, clock, timer, purgatory)
        op = world.operation("op")
        purgatory.try_complete_else_watch(op, ["k"])
        for root, obj in (("timer", timer), ("purgatory", purgatory), ("operation", op)):
            _walk(obj, root, 3, found, set())
        world.close()
    return sorted(set(found))


def _attributes(obj: object) -> list[tuple[str, object]]:
    pairs = []
    for name in attribute_names(obj):
        try:
            pairs.append((name, getattr(obj, name)))
        except AttributeError:
            continue
    return pairs


def _walk(obj: object, path: str, depth: int, found: list[str], seen: set[int]) -> None:
    if id(obj) in seen or isinstance(obj, (ManualClock, InlineExecutor, threading.Event)):
        return
    seen.add(id(obj))
    instrumented_kinds = (SchedLock, SchedFlag, SchedCondition)
    if isinstance(obj, _REAL_PRIMITIVES) and not isinstance(obj, instrumented_kinds):
        found.append(f"{path} ({type(obj).__name__})")
        return
    if depth == 0 or isinstance(obj, (str, bytes, int, float, type)) or callable(obj):
        return
    if isinstance(obj, (list, tuple)):
        children: list[tuple[str, object]] = [(f"[{i}]", v) for i, v in enumerate(obj[:4])]
    elif isinstance(obj, dict):
        children = [(f"[{k!r}]", v) for k, v in list(obj.items())[:4]]
    elif type(obj).__module__.startswith("kpurgatory.") or "Scheduled" in type(obj).__name__:
        children = [(f".{n}", v) for n, v in _attributes(obj)]
    else:
        return
    for suffix, child in children:
        _walk(child, path + suffix, depth - 1, found, seen)


def priority_schedules() -> st.SearchStrategy[PriorityChooser]:
    """Hypothesis strategy for PCT schedules: thread priorities and up to 3 demotions."""
    return st.builds(
        PriorityChooser,
        st.lists(st.integers(0, 4), max_size=5),
        st.lists(st.integers(1, 60), max_size=3),
    )


def exhaust(
    impl: Impl,
    build: Build,
    bound: int | None,
    max_runs: int = 6_000,
    *,
    lock_discipline: bool = True,
) -> Exploration:
    """Every schedule of ``build`` within ``bound`` preemptions must pass, and all must run.

    Raises the first failing schedule; fails if ``max_runs`` did not cover them all.
    """
    found = explore(
        lambda chooser: run_scenario(impl, build, chooser, lock_discipline=lock_discipline),
        preemption_bound=bound,
        max_runs=max_runs,
    )
    if found.failure is not None:
        raise found.failure
    assert found.complete, f"enumeration capped: {found.describe()}"
    return found
