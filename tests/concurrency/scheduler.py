"""A controlled scheduler: real threads that run one at a time, switching only where we say.

Every synchronization point of the code under test (lock acquire/release/try-acquire,
condition wait/notify, atomic-flag get/set/compare-and-set/get-and-set, each call on a
dict shared without a lock) goes through ``kpurgatory.sync``; inside
``instrumented(scheduler)`` those factories build the primitives below, which call
``Scheduler.yield_point`` before acting. A thread that reaches a yield point stops and
the scheduler picks which thread runs next, so exactly one managed thread runs at any
moment and a run is a deterministic function of the choices made. The choices come from a
``Chooser``:

* ``PriorityChooser``: a PCT schedule (thread priorities plus demotion points) drawn by
  Hypothesis, so a failing interleaving shrinks to a few demotions;
* ``ListChooser``: replays the list of choices printed with a failing schedule;
* ``explore``: enumerates every interleaving depth-first (optionally bounded by the
  number of preemptions, as in CHESS), replaying each one from scratch.

Because only one thread runs at a time and all shared state of the code under test is
accessed under an instrumented lock, through an instrumented flag or by single calls on
an instrumented shared dict, switching only at
these points covers every behaviour the real code can show (the classic reduction for
data-race-free programs); plain attribute reads the code does outside any lock would be
a data race, and ``checkpoint`` lets a test add a switch point where it wants one.

A schedule where no thread can move (every live thread waits on a lock or condition)
is a deadlock; a run longer than ``max_steps`` is a livelock; a running thread that
does not reach its next yield point within ``stuck_timeout`` seconds is stuck (blocked
on something uninstrumented). Each raises ``ScheduleError`` with the numbered trace
of the schedule. Every wait has a timeout and every managed thread is a daemon, so a
failing schedule never hangs the test process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpurgatory import sync
from kpurgatory.spec.protocols import AbstractLock
from tests.concurrency.lockset import Lockset
from tests.support import LockStatement

__all__ = [
    "Chooser",
    "Exploration",
    "ListChooser",
    "ManagedThread",
    "PriorityChooser",
    "RunResult",
    "SchedCondition",
    "SchedDict",
    "SchedFlag",
    "SchedLock",
    "ScheduleAborted",
    "ScheduleError",
    "Scheduler",
    "attribute_names",
    "checkpoint",
    "explore",
    "instrumented",
    "label_primitives",
]


class ScheduleError(AssertionError):
    """A schedule that deadlocked, ran too long, got stuck, or broke a property.

    ``kind`` is ``"deadlock"``, ``"livelock"``, ``"stuck"`` or ``"property"``;
    ``trace`` is the numbered list of steps taken; ``choices`` the chooser's answers.
    """

    def __init__(self, kind: str, message: str, trace: Sequence[str], choices: Sequence[int]):
        self.kind = kind
        self.trace = list(trace)
        self.choices = list(choices)
        super().__init__(f"{kind}: {message}\n{format_trace(self.trace, self.choices)}")


class ScheduleAborted(BaseException):
    """Raised inside managed threads when their run is abandoned (a BaseException, so the
    code under test, which catches ``Exception`` in places, does not swallow it)."""


def format_trace(trace: Sequence[str], choices: Sequence[int]) -> str:
    """The schedule as numbered lines, followed by the choice list that replays it."""
    lines = [f"  {index:3d}. {step}" for index, step in enumerate(trace, 1)]
    lines.append(f"  choices: {list(choices)}")
    return "schedule:\n" + "\n".join(lines)


class Chooser(Protocol):
    """Picks which of the enabled threads runs next.

    ``candidates`` are the thread indices (creation order) of the enabled threads; the
    first is the thread that just yielded when it can still run (so answering 0 means
    "no context switch"), the others follow in creation order. ``current_enabled``
    tells whether the first is that thread (any other answer is then a preemption).
    The answer is a position in ``candidates``; ``taken`` lists the answers so far.
    """

    @property
    def taken(self) -> list[int]: ...

    def choose(self, candidates: Sequence[int], current_enabled: bool) -> int: ...


class ListChooser:
    """Replays ``choices`` (each taken modulo the number of options), then always 0.

    Replays a schedule from the ``choices:`` line printed with every failure (any
    chooser's answers), so a failing interleaving can be pinned in a regression test.
    """

    def __init__(self, choices: Sequence[int]) -> None:
        self._choices = list(choices)
        self._next = 0
        self._taken: list[int] = []

    @property
    def taken(self) -> list[int]:
        """The answers given so far."""
        return self._taken

    def choose(self, candidates: Sequence[int], current_enabled: bool) -> int:
        """The next listed choice modulo the number of candidates; 0 once used up."""
        if self._next < len(self._choices):
            pick = self._choices[self._next] % len(candidates)
            self._next += 1
        else:
            pick = 0
        self._taken.append(pick)
        return pick


class PriorityChooser:
    """A PCT schedule (Burckhardt et al., 2010): thread priorities plus demotion points.

    Thread ``i`` starts with priority ``order[i]`` (0 when the list is shorter) and the
    enabled thread with the highest priority runs (on a tie: the running thread, then
    the lowest index).
    At the ``k``-th choice point, for each ``k`` in ``demotions``, the running thread
    drops below every other. A bug that needs ``d`` ordering constraints is hit with
    probability about 1/(threads * steps**(d-1)) per random schedule, so Hypothesis
    finds the two-switch races quickly; shrinking leaves the few demotion points that
    matter, which read as "at step k, stop the running thread".
    """

    def __init__(self, order: Sequence[int], demotions: Sequence[int]) -> None:
        self._order = list(order)
        self._demotions = set(demotions)
        self._priority: dict[int, int] = {}
        self._point = 0
        self._floor = min([0, *self._order]) - 1
        self._taken: list[int] = []

    @property
    def taken(self) -> list[int]:
        """The answers given so far."""
        return self._taken

    def _rank(self, thread: int) -> int:
        if thread not in self._priority:
            self._priority[thread] = self._order[thread] if thread < len(self._order) else 0
        return self._priority[thread]

    def choose(self, candidates: Sequence[int], current_enabled: bool) -> int:
        """The highest-priority candidate, after demoting the running thread if due."""
        self._point += 1
        if current_enabled and self._point in self._demotions:
            self._rank(candidates[0])
            self._priority[candidates[0]] = self._floor
            self._floor -= 1
        best = max(range(len(candidates)), key=lambda i: (self._rank(candidates[i]), -i))
        self._taken.append(best)
        return best


class _DfsChooser:
    """Follows ``prefix``, then chooses 0, recording every choice point it passes.

    With ``preemption_bound`` set, once that many preemptions happened the running
    thread keeps running while it can (not a choice point any more).
    """

    def __init__(self, prefix: list[int], preemption_bound: int | None) -> None:
        self._prefix = prefix
        self._bound = preemption_bound
        self._preemptions = 0
        self.points: list[tuple[int, int]] = []
        self._taken: list[int] = []

    @property
    def taken(self) -> list[int]:
        return self._taken

    def choose(self, candidates: Sequence[int], current_enabled: bool) -> int:
        options = len(candidates)
        if current_enabled and self._bound is not None and self._preemptions >= self._bound:
            pick = 0
        else:
            depth = len(self.points)
            pick = self._prefix[depth] if depth < len(self._prefix) else 0
            if pick >= options:
                raise RuntimeError(
                    f"replay diverged at choice point {depth}: {pick} >= {options} options; "
                    "the code under test is not deterministic under the scheduler"
                )
            self.points.append((pick, options))
            if current_enabled and pick != 0:
                self._preemptions += 1
        self._taken.append(pick)
        return pick

    def next_prefix(self) -> list[int] | None:
        """The prefix of the next schedule in depth-first order, or None when all are done."""
        for depth in range(len(self.points) - 1, -1, -1):
            pick, options = self.points[depth]
            if pick + 1 < options:
                return [p for p, _ in self.points[:depth]] + [pick + 1]
        return None


@dataclass
class _Pending:
    label: str
    enabled: Callable[[], bool]


def _always() -> bool:
    return True


@dataclass(eq=False)
class ManagedThread:
    """One thread under the scheduler: its body, outcome and bookkeeping."""

    name: str
    index: int
    body: Callable[[], object]
    go: threading.Event = field(default_factory=threading.Event)
    pending: _Pending | None = None
    done: bool = False
    result: object = None
    error: BaseException | None = None
    ever_blocked: bool = False
    blocked_on: set[str] = field(default_factory=set)
    thread: threading.Thread | None = None


@dataclass
class RunResult:
    """What a finished run produced: per-thread results and exceptions, and the trace."""

    results: dict[str, object]
    errors: dict[str, BaseException]
    ever_blocked: dict[str, bool]
    trace: list[str]
    choices: list[int]
    blocked_on: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per thread: the labels of the steps it ever had to wait for (e.g. ``acquire op.lock``)."""

    def fail(self, message: str) -> ScheduleError:
        """A property failure carrying this run's schedule."""
        return ScheduleError("property", message, self.trace, self.choices)


_local = threading.local()


def current_scheduler() -> Scheduler | None:
    """The scheduler managing the calling thread, or None for an unmanaged thread."""
    sched: Scheduler | None = getattr(_local, "scheduler", None)
    return sched


def checkpoint(label: str) -> None:
    """A switch point a test places in its own code (no-op outside a managed thread)."""
    sched = current_scheduler()
    if sched is not None:
        sched.yield_point(label)


class Scheduler:
    """Runs spawned threads one at a time, switching only at yield points.

    Use: create, build the objects under test inside ``instrumented(scheduler)``,
    ``spawn`` the threads, ``run``. Unmanaged threads (the test's main thread during
    set-up and checks) use the instrumented primitives directly, without yielding.
    """

    def __init__(
        self,
        chooser: Chooser,
        *,
        max_steps: int = 5_000,
        stuck_timeout: float = 10.0,
    ) -> None:
        self._chooser = chooser
        self._max_steps = max_steps
        self._stuck_timeout = stuck_timeout
        self._mutex = threading.Lock()
        self._threads: list[ManagedThread] = []
        self._finished = threading.Event()
        self._aborted = False
        self._failure: ScheduleError | None = None
        self._running: ManagedThread | None = None
        self._started = False
        self.trace: list[str] = []
        self._names = 0
        self.lockset: Lockset | None = None
        """The lock-discipline checks attached by ``instrumented`` (None outside it)."""

    # -- primitives ------------------------------------------------------------------

    def lock(self, name: str | None = None, *, reentrant: bool = True) -> SchedLock:
        """A new instrumented lock (re-entrant like ``threading.RLock`` by default)."""
        return SchedLock(self, name or self._fresh_name("lock"), reentrant=reentrant)

    def flag(self, value: bool = False, name: str | None = None) -> SchedFlag:
        """A new instrumented atomic flag."""
        return SchedFlag(self, value, name or self._fresh_name("flag"))

    def shared_dict(self, name: str | None = None) -> SchedDict:
        """A new dict shared without a lock whose calls are yield points."""
        return SchedDict(self, name or self._fresh_name("dict"))

    def condition(self, lock: AbstractLock) -> SchedCondition:
        """A new instrumented condition over an instrumented ``lock``."""
        if not isinstance(lock, SchedLock):
            raise TypeError(f"lock must be a SchedLock, not {type(lock).__name__}")
        return SchedCondition(self, lock, self._fresh_name("cond"))

    def _fresh_name(self, kind: str) -> str:
        self._names += 1
        return f"{kind}#{self._names}"

    # -- threads ---------------------------------------------------------------------

    def spawn(self, name: str, body: Callable[[], object]) -> ManagedThread:
        """Register a thread to start at ``run``; its first step is ``start``."""
        if self._started:
            raise RuntimeError("spawn() after run()")
        managed = ManagedThread(name, len(self._threads), body)
        managed.pending = _Pending("start", _always)
        self._threads.append(managed)
        return managed

    def managed(self) -> ManagedThread | None:
        """The managed thread record of the calling thread, if it is one of ours."""
        me: ManagedThread | None = getattr(_local, "managed", None)
        if me is None or current_scheduler() is not self:
            return None
        return me

    def run(self, total_timeout: float = 30.0) -> RunResult:
        """Start every spawned thread and drive the schedule to its end.

        Raises ``ScheduleError`` on deadlock, livelock or a stuck thread.
        """
        if self._started:
            raise RuntimeError("run() called twice")
        self._started = True
        for managed in self._threads:
            thread = threading.Thread(
                target=self._thread_main, args=(managed,), name=managed.name, daemon=True
            )
            managed.thread = thread
            thread.start()
        with self._mutex:
            first = self._decide(None)
        if first is not None:
            first.go.set()
        if not self._finished.wait(total_timeout):
            with self._mutex:
                running = self._running.name if self._running else "?"
                self._fail(
                    "stuck",
                    f"thread {running} did not reach a yield point within {total_timeout} s "
                    "(blocked on an uninstrumented primitive, or looping)",
                )
        for managed in self._threads:
            assert managed.thread is not None
            managed.thread.join(self._stuck_timeout)
        if self._failure is not None:
            raise self._failure
        return RunResult(
            results={t.name: t.result for t in self._threads},
            errors={t.name: t.error for t in self._threads if t.error is not None},
            ever_blocked={t.name: t.ever_blocked for t in self._threads},
            trace=list(self.trace),
            choices=list(self._chooser.taken),
            blocked_on={t.name: frozenset(t.blocked_on) for t in self._threads},
        )

    def _thread_main(self, managed: ManagedThread) -> None:
        _local.scheduler = self
        _local.managed = managed
        try:
            self._wait_turn(managed)
            managed.result = managed.body()
        except ScheduleAborted:
            pass
        except BaseException as exc:  # the outcome of the body, judged by the test
            managed.error = exc
        finally:
            with self._mutex:
                managed.done = True
                managed.pending = None
                following = self._decide(None)
            if following is not None:
                following.go.set()

    def _wait_turn(self, managed: ManagedThread) -> None:
        if not managed.go.wait(self._stuck_timeout + 60.0):
            with self._mutex:
                self._fail("stuck", f"thread {managed.name} waited for its turn too long")
            raise ScheduleAborted
        managed.go.clear()
        if self._aborted:
            raise ScheduleAborted

    # -- switching -------------------------------------------------------------------

    def yield_point(self, label: str, enabled: Callable[[], bool] = _always) -> None:
        """Stop the calling managed thread before ``label`` until the scheduler picks it.

        ``enabled`` says whether the step can happen now (False for acquiring a lock
        another thread holds). Returns at once for an unmanaged thread.
        """
        me = self.managed()
        if me is None:
            return
        with self._mutex:
            if self._aborted:
                raise ScheduleAborted
            me.pending = _Pending(label, enabled)
            following = self._decide(me)
        if following is me:
            return
        if following is not None:
            following.go.set()
        self._wait_turn(me)

    def _decide(self, current: ManagedThread | None) -> ManagedThread | None:
        """Pick the next thread (called with the mutex held); None if none or finished."""
        if self._aborted:
            return None
        live = [t for t in self._threads if not t.done]
        if not live:
            self._running = None
            self._finished.set()
            return None
        runnable: list[ManagedThread] = []
        for thread in live:
            assert thread.pending is not None
            if thread.pending.enabled():
                runnable.append(thread)
            else:
                thread.ever_blocked = True
                thread.blocked_on.add(thread.pending.label)
        if not runnable:
            waits = ", ".join(f"{t.name} waits to {t.pending.label}" for t in live if t.pending)
            self._fail("deadlock", f"no thread can move: {waits}")
            return None
        if len(self.trace) >= self._max_steps:
            self._fail("livelock", f"more than {self._max_steps} steps")
            return None
        current_enabled = current is not None and current in runnable
        options = [current] if current_enabled and current is not None else []
        options += [t for t in runnable if t is not current]
        try:
            candidates = [t.index for t in options]
            pick = self._chooser.choose(candidates, current_enabled) if len(options) > 1 else 0
        except RuntimeError as exc:
            self._fail("replay", str(exc))
            return None
        chosen = options[pick]
        assert chosen.pending is not None
        self.trace.append(f"{chosen.name}: {chosen.pending.label}")
        chosen.pending = None
        self._running = chosen
        return chosen

    def _fail(self, kind: str, message: str) -> None:
        if self._failure is None:
            self._failure = ScheduleError(kind, message, self.trace, self._chooser.taken)
        self._aborted = True
        for thread in self._threads:
            thread.go.set()
        self._finished.set()


# -- instrumented primitives -----------------------------------------------------------


class SchedLock(LockStatement):
    """A lock whose acquire, try-acquire and release are scheduler yield points.

    Re-entrant by default (the code under test uses re-entrant locks throughout); a
    blocking acquire is enabled only when the lock is free or held by the caller.
    """

    def __init__(self, sched: Scheduler, name: str, *, reentrant: bool = True) -> None:
        self._sched = sched
        self.name = name
        self._reentrant = reentrant
        self._owner: int | None = None
        self._count = 0

    def _free_for(self, ident: int) -> bool:
        return self._owner is None or (self._reentrant and self._owner == ident)

    def _take(self, ident: int) -> None:
        self._owner = ident
        self._count += 1

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Blocking: wait (as a schedule step) until free, then take it. Else try once."""
        ident = threading.get_ident()
        if not blocking:
            self._sched.yield_point(f"try_acquire {self.name}")
            if self._free_for(ident):
                self._take(ident)
                return True
            return False
        self._sched.yield_point(f"acquire {self.name}", lambda: self._free_for(ident))
        if not self._free_for(ident):
            raise RuntimeError(
                f"unmanaged thread would block on {self.name}, held by a managed thread"
            )
        self._take(ident)
        return True

    def release(self) -> None:
        """Release one level of ownership (a yield point first)."""
        self._sched.yield_point(f"release {self.name}")
        if self._owner != threading.get_ident():
            raise RuntimeError(f"release of {self.name} by a thread that does not own it")
        self._count -= 1
        if self._count == 0:
            self._owner = None

    def _is_owned(self) -> bool:
        return self._owner == threading.get_ident()

    def _release_all(self) -> int:
        """Release every level (for a condition wait); returns the count to restore."""
        self._sched.yield_point(f"release {self.name} (wait)")
        count = self._count
        self._owner = None
        self._count = 0
        return count

    def _restore(self, count: int) -> None:
        ident = threading.get_ident()
        self._sched.yield_point(f"reacquire {self.name}", lambda: self._owner is None)
        if self._owner is not None:
            raise RuntimeError(f"unmanaged thread would block on {self.name}")
        self._owner = ident
        self._count = count

    @property
    def held(self) -> bool:
        """Whether any thread holds the lock (for checks after a run)."""
        return self._owner is not None

    def __repr__(self) -> str:
        return f"SchedLock({self.name})"


class SchedFlag(sync.AtomicFlag):
    """An ``AtomicFlag`` whose every access is a scheduler yield point."""

    __slots__ = ("_sched", "name")

    def __init__(self, sched: Scheduler, value: bool, name: str) -> None:
        super().__init__(value)
        self._sched = sched
        self.name = name

    def get(self) -> bool:
        """The value, read after a yield point."""
        self._sched.yield_point(f"get {self.name}")
        return self._value

    def set(self, value: bool) -> None:
        """Store ``value`` after a yield point."""
        self._sched.yield_point(f"set {self.name} := {value}")
        self._value = value

    def compare_and_set(self, expect: bool, update: bool) -> bool:
        """Atomic compare-and-set (one step)."""
        self._sched.yield_point(f"cas {self.name} {expect}->{update}")
        if self._value is not expect:
            return False
        self._value = update
        return True

    def get_and_set(self, value: bool) -> bool:
        """Atomic get-and-set (one step)."""
        self._sched.yield_point(f"get_and_set {self.name} := {value}")
        previous = self._value
        self._value = value
        return previous

    def __repr__(self) -> str:
        return f"SchedFlag({self.name}={self._value})"


class SchedDict(dict[Any, Any]):
    """A dict shared without a lock (``sync.new_shared_dict``) whose every single call is
    a yield point: the scheduler may switch threads between two calls of one thread, as
    the interpreter may. Each call itself stays atomic (one step), as a ``dict``'s is."""

    def __init__(self, sched: Scheduler, name: str) -> None:
        super().__init__()
        self._sched = sched
        self.name = name

    def _step(self, what: str) -> None:
        self._sched.yield_point(f"{what} {self.name}")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._step("store into")
        super().__setitem__(key, value)

    def __contains__(self, key: object) -> bool:
        self._step("look up in")
        return super().__contains__(key)

    def __len__(self) -> int:
        self._step("count")
        return super().__len__()

    def pop(self, key: Any, *default: Any) -> Any:
        self._step("pop from")
        return super().pop(key, *default)

    def popitem(self) -> tuple[Any, Any]:
        self._step("popitem from")
        return super().popitem()

    def clear(self) -> None:
        self._step("clear")
        super().clear()

    def __repr__(self) -> str:
        return f"SchedDict({self.name}, {dict(self)!r})"


class SchedCondition(threading.Condition):
    """A condition variable over a ``SchedLock`` whose wait and notify are yield points.

    ``wait(timeout)`` releases the lock, then waits as a schedule step that is enabled
    once notified or, when a timeout is given, at any time (the timeout may fire at
    any point of the schedule), then re-acquires the lock.
    """

    def __init__(self, sched: Scheduler, lock: SchedLock, name: str) -> None:
        held: Any = lock
        super().__init__(held)
        self._sched = sched
        self._slock = lock
        self.name = name
        self._sleepers: dict[int, bool] = {}

    def wait(self, timeout: float | None = None) -> bool:
        """Release, wait to be notified (or time out), re-acquire; True iff notified."""
        ident = threading.get_ident()
        if not self._slock._is_owned():
            raise RuntimeError(f"wait on {self.name} without holding its lock")
        if self._sched.managed() is None and timeout is None:
            raise RuntimeError(f"unmanaged thread would wait forever on {self.name}")
        count = self._slock._release_all()
        self._sleepers[ident] = False
        try:
            self._sched.yield_point(
                f"wait {self.name}" + ("" if timeout is None else f" (timeout {timeout})"),
                lambda: self._sleepers.get(ident, True) or timeout is not None,
            )
            notified = self._sleepers.get(ident, False)
        finally:
            self._sleepers.pop(ident, None)
        self._slock._restore(count)
        return notified

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        """Not used by the code under test; refuse rather than model it loosely."""
        raise NotImplementedError("SchedCondition.wait_for is not modelled")

    def notify(self, n: int = 1) -> None:
        """Wake up to ``n`` waiters (a yield point first)."""
        self._sched.yield_point(f"notify {self.name}")
        if not self._slock._is_owned():
            raise RuntimeError(f"notify on {self.name} without holding its lock")
        for ident in [i for i, woken in self._sleepers.items() if not woken][:n]:
            self._sleepers[ident] = True

    def notify_all(self) -> None:
        """Wake every waiter (a yield point first)."""
        self.notify(len(self._sleepers))

    def __repr__(self) -> str:
        return f"SchedCondition({self.name})"


# -- installing the instrumentation ------------------------------------------------------


@contextmanager
def instrumented(sched: Scheduler, *, lock_discipline: bool = True) -> Iterator[None]:
    """Make ``kpurgatory.sync`` build instrumented primitives, and instrument module locks.

    With ``lock_discipline`` (the default) the lockset checks of
    ``tests.concurrency.lockset`` are attached too (``sched.lockset``): every write of
    guarded state asserts that the writing thread holds its lock.

    Inside the block every lock, flag and condition the implementations create is the
    scheduler's. The reference timer's process-wide state lock is a module attribute
    created at import, so it is rebound here for the block's duration (objects built
    in the block must also be finished in it). Module-level locks of other
    implementation packages listed in ``MODULE_LOCKS`` are rebound the same way.
    """
    import importlib

    rebound: list[tuple[Any, str, object]] = []
    for module_name, attribute in MODULE_LOCKS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, attribute):
            rebound.append((module, attribute, getattr(module, attribute)))
            setattr(module, attribute, sched.lock(attribute.strip("_").lower()))
    lockset = Lockset()
    try:
        with (
            sync.override(
                lock=sched.lock,
                flag=lambda value: sched.flag(value),
                condition=sched.condition,
                shared_dict=sched.shared_dict,
            ),
            lockset.installed() if lock_discipline else nullcontext(),
        ):
            sched.lockset = lockset if lock_discipline else None
            yield
    finally:
        for module, attribute, original in rebound:
            setattr(module, attribute, original)


MODULE_LOCKS: list[tuple[str, str]] = [
    ("kpurgatory.reference.timer", "_STATE_LOCK"),
    ("kpurgatory.optimized.timer", "_TIMER_LOCK"),
    ("kpurgatory.optimized.operation", "_FLAGS_LOCK"),
]
"""(module, attribute) of process-wide locks created at import through ``sync.new_lock``."""


def attribute_names(obj: object) -> list[str]:
    """The names of ``obj``'s instance attributes, each once: its ``__dict__`` keys and the
    ``__slots__`` along its class hierarchy."""
    names: list[str] = list(getattr(obj, "__dict__", {}))
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else list(slots))
    return list(dict.fromkeys(names))


def label_primitives(obj: object, prefix: str) -> None:
    """Name the instrumented primitives held in ``obj``'s attributes ``<prefix>.<attr>``.

    Makes printed schedules readable (``cas op1._completed False->True``).
    """
    for attribute in attribute_names(obj):
        value = getattr(obj, attribute, None)
        if isinstance(value, (SchedLock, SchedFlag, SchedCondition, SchedDict)):
            if not value.name.startswith(("lock#", "flag#", "cond#", "dict#")):
                continue  # already named (e.g. a lock shared by two operations)
            value.name = f"{prefix}.{attribute.lstrip('_')}"


# -- exploring ---------------------------------------------------------------------------


@dataclass
class Exploration:
    """The outcome of ``explore``: how many schedules ran, whether that was all of them
    (within the preemption bound), and the first failure found, if any."""

    runs: int
    complete: bool
    failure: AssertionError | None
    choices: list[int]

    def describe(self) -> str:
        """One line for reports."""
        state = "complete" if self.complete else "capped"
        found = "no failure" if self.failure is None else f"failure at choices {self.choices}"
        return f"{self.runs} schedules ({state}), {found}"


def explore(
    run_one: Callable[[Chooser], None],
    *,
    preemption_bound: int | None,
    max_runs: int,
) -> Exploration:
    """Run ``run_one`` under every schedule, depth-first, until one fails or all are done.

    ``run_one(chooser)`` builds a fresh scenario, runs it under a ``Scheduler`` using
    ``chooser`` and raises ``AssertionError`` (``ScheduleError`` included) when the
    schedule breaks a property. ``preemption_bound`` limits how often a thread that
    could go on is switched away from (None: no limit, every interleaving);
    ``max_runs`` caps the enumeration (``complete`` is False if the cap was hit).
    """
    prefix: list[int] = []
    runs = 0
    while runs < max_runs:
        chooser = _DfsChooser(prefix, preemption_bound)
        runs += 1
        try:
            run_one(chooser)
        except AssertionError as exc:
            return Exploration(runs, False, exc, list(chooser.taken))
        following = chooser.next_prefix()
        if following is None:
            return Exploration(runs, True, None, [])
        prefix = following
    return Exploration(runs, False, None, [])
