"""One side of an equivalence machine: an implementation package's clock, timers or
purgatory, and the log of what it handed over, in a canonical form to compare.

``TimerSide`` (two timers A and B on one ``ManualClock``, recording tasks, the "agent"
task's reactions, R11) serves ``tests.machines.timer_equivalence``; ``PurgatorySide``
(a purgatory on a manual-clock inline timer, operations completed by a ``ready`` flag,
one perhaps re-entrant, R37) serves ``tests.machines.purgatory_equivalence``. Same-due
hand-overs are compared as a multiset (R6): ``canonical_timer_log`` and
``canonical_expiries`` sort within a due time only.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Hashable
from typing import Any

from hypothesis import strategies as st

from kpurgatory.clock import ManualClock
from kpurgatory.executors import InlineExecutor
from tests.machines.equivalence import MISSING_DUE, ImplPackage, call_outcome, pkg_name
from tests.support import task_class

NEXT_TASK = "<next>"
"""Agent target meaning "the next task due after the agent in its timer"."""

TimerLogEntry = tuple[str, int, int, str, tuple[Any, ...]]
"""(label, due, clock reading at run, timer it was scheduled in, nested runs)."""


class TimerSide:
    """One implementation's world: a manual clock, timers A and B on it, and the tasks.

    The tasks are ``tests.support`` recording tasks whose recorder is the side itself:
    each run calls ``ran(label)``.

    ``scheduled`` is the side's own model of where each task is scheduled and its due
    time; it is updated by the side's adds, cancels and runs only, so comparing the two
    sides compares what each implementation did.
    """

    def __init__(
        self,
        pkg: ImplPackage,
        tick: int,
        wheel: int,
        clock_start: int,
        starts: dict[str, int | None],
    ) -> None:
        self.pkg = pkg
        self.name = pkg_name(pkg)
        self.tick = tick
        self.clock = ManualClock(clock_start)
        self.timers: dict[str, Any] = {
            name: pkg.SystemTimer(
                f"eq-{name}", tick, wheel, start, clock=self.clock, executor=InlineExecutor()
            )
            for name, start in starts.items()
        }
        self.tasks: dict[str, Any] = {}
        self.scheduled: dict[str, tuple[str, int]] = {}
        self.log: list[TimerLogEntry] = []
        self.unexpected_runs: list[str] = []
        self.agent: str | None = None
        self.agent_action: tuple[str, str] | None = None  # (action, target label)

    def new_task(self, label: str, delay: int) -> None:
        self.tasks[label] = task_class(self.pkg)(delay, label, self)

    def due_of(self, label: str) -> int:
        delay: int = self.tasks[label].delay_ms
        return (self.clock.now_ms() + delay) // self.tick * self.tick

    def add(self, label: str, timer_name: str) -> None:
        self.scheduled[label] = (timer_name, self.due_of(label))
        self.timers[timer_name].add(self.tasks[label])

    def cancel(self, label: str) -> None:
        self.scheduled.pop(label, None)
        self.tasks[label].cancel()

    def ran(self, label: str) -> None:
        """A task reports its run: log it with its due time and timer, act if it is the agent."""
        where = self.scheduled.pop(label, None)
        if where is None:
            self.unexpected_runs.append(label)
            timer_name, due = "?", MISSING_DUE
        else:
            timer_name, due = where
        now = self.clock.now_ms()
        children: tuple[Any, ...] = ()
        if label == self.agent and self.agent_action is not None:
            children = self._act(due, timer_name)
        self.log.append((label, due, now, timer_name, children))

    def _act(self, own_due: int, own_timer: str) -> tuple[Any, ...]:
        """The agent's action on its target, only if the target is due strictly later.

        Restricting the target to a later due time keeps the outcome independent of the
        unspecified order among same-due tasks (R6), while still exercising R11 (a task
        cancelled or re-added before its turn in the same hand-over is not handed over).
        The target ``NEXT_TASK`` means the task of the agent's timer due soonest after
        the agent (ties broken by label), the one most likely to share its hand-over.
        """
        assert self.agent_action is not None
        action, target_label = self.agent_action
        if target_label == NEXT_TASK:
            later = sorted(
                (due, label)
                for label, (timer_name, due) in self.scheduled.items()
                if timer_name == own_timer and due > own_due
            )
            if not later:
                return ()
            target_label = later[0][1]
        where = self.scheduled.get(target_label)
        if where is None or where[1] <= own_due:
            return ()
        outer, self.log = self.log, []
        try:
            if action == "cancel":
                self.cancel(target_label)
            elif action == "readd":
                self.add(target_label, where[0])
            else:  # move to the other timer
                self.add(target_label, "B" if where[0] == "A" else "A")
            return tuple(self.log)
        finally:
            self.log = outer

    def sizes(self) -> dict[str, int]:
        return {name: timer.size for name, timer in self.timers.items()}

    def model_sizes(self) -> dict[str, int]:
        counts = Counter(timer_name for timer_name, _ in self.scheduled.values())
        return {name: counts.get(name, 0) for name in self.timers}

    def next_due_times(self) -> dict[str, int | None]:
        return {name: timer.next_due_time for name, timer in self.timers.items()}

    def model_next_due_times(self) -> dict[str, int | None]:
        return {
            name: min(
                (due for timer_name, due in self.scheduled.values() if timer_name == name),
                default=None,
            )
            for name in self.timers
        }

    def close(self) -> None:
        for timer in self.timers.values():
            timer.close()


def canonical_timer_log(log: list[TimerLogEntry]) -> list[tuple[Any, ...]]:
    """Consecutive runs grouped by (due, reading, timer), each group sorted (R6: same-due
    order is unspecified); nested runs are canonicalized recursively."""
    groups: list[tuple[Any, ...]] = []
    current_key: tuple[int, int, str] | None = None
    members: list[tuple[Any, ...]] = []
    for label, due, now, timer_name, children in log:
        key = (due, now, timer_name)
        if key != current_key and current_key is not None:
            groups.append((current_key, tuple(sorted(members))))
            members = []
        current_key = key
        members.append((label, tuple(canonical_timer_log(list(children)))))
    if current_key is not None:
        groups.append((current_key, tuple(sorted(members))))
    return groups


KEY_POOL: tuple[Hashable, ...] = (0, 1, 2, 512, -1, -2, True, "k", ("t", 3))
"""Watch keys: -1 and -2 share a hash in CPython, 0 and 512 share a shard of 512,
``True == 1`` (the same key, R24), plus a str and a tuple."""

KEYS = st.one_of(st.sampled_from(KEY_POOL[:3]), st.sampled_from(KEY_POOL))
"""A watch key: half the time one of three common keys, so operations share keys."""

PurgatoryLogEntry = tuple[str, str, int, tuple[Any, ...]]
"""(operation name, "complete" or "expire", clock reading, what its reaction did)."""


@functools.cache
def _operation_class(pkg: ImplPackage) -> type[Any]:
    """A ``DelayedOperation`` of ``pkg`` completed by a ``ready`` flag, recording callbacks.

    ``ready_on_try`` (if set) flips ``ready`` on that try_complete call, so an operation
    can become completable between the two tries of ``try_complete_else_watch`` (R22).
    A negative ``ready_on_try`` makes every try_complete from call ``-ready_on_try`` on
    raise: the submission fails before (-1) or after (-2) watching, and must leave no
    trace (R38); it never succeeds, so the machine's bookkeeping stays that of one call.
    """

    class EquivalenceOperation(pkg.DelayedOperation):  # type: ignore[misc]
        def __init__(
            self, delay_ms: int, name: str, side: PurgatorySide, ready_on_try: int
        ) -> None:
            super().__init__(delay_ms)
            self.name = name
            self.side = side
            self.ready = ready_on_try == 1
            self.ready_on_try = ready_on_try
            self.try_calls = 0

        def try_complete(self) -> bool:
            self.try_calls += 1
            if 0 < -self.ready_on_try <= self.try_calls:
                raise LookupError(f"{self.name}: planned failure (R38)")
            if self.ready_on_try > 0 and self.try_calls >= self.ready_on_try:
                self.ready = True
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            now = self.side.clock.now_ms()
            self.side.log.append((self.name, "complete", now, self.side.react(self.name)))

        def on_expiration(self) -> None:
            self.side.log.append((self.name, "expire", self.side.clock.now_ms(), ()))

        def __repr__(self) -> str:
            return f"EquivalenceOperation({self.name!r}, delay_ms={self.delay_ms})"

    return EquivalenceOperation


_PURGATORY_COUNTERS = (
    "watched",
    "num_delayed",
    "watched_keys",
    "num_purged",
    "estimated_total_operations",
    "num_completed",
)
"""The purgatory properties compared after every step (R26-R30)."""


def _parameters(callable_: Any) -> frozenset[str]:
    """Names of the parameters ``callable_`` accepts (empty if it has no signature)."""
    try:
        return frozenset(inspect.signature(callable_).parameters)
    except (TypeError, ValueError):
        return frozenset()


class PurgatorySide:
    """One implementation's purgatory on a manual clock and inline-executor timer."""

    def __init__(
        self,
        pkg: ImplPackage,
        tick: int,
        wheel: int,
        clock_start: int,
        purge_interval: int,
        timer_enabled: bool,
        shards: int | None,
    ) -> None:
        self.pkg = pkg
        self.name = pkg_name(pkg)
        self.tick = tick
        self.clock = ManualClock(clock_start)
        self.timer = pkg.SystemTimer(
            "eq-purgatory", tick, wheel, clock=self.clock, executor=InlineExecutor()
        )
        extra: dict[str, int] = {}
        if shards is not None and "shards" in _parameters(pkg.DelayedOperationPurgatory):
            extra["shards"] = shards
        self.purgatory = pkg.DelayedOperationPurgatory(
            "eq",
            timer=self.timer,
            purge_interval=purge_interval,
            reaper_enabled=False,
            timer_enabled=timer_enabled,
            **extra,
        )
        self.ops: dict[str, Any] = {}
        self.log: list[PurgatoryLogEntry] = []
        self.reactor: tuple[str, Hashable] | None = None  # (operation name, key)
        self.spawned: list[tuple[str, int, Hashable]] = []  # (child, due, key), not yet adopted

    def submit(self, name: str, delay: int, keys: list[Hashable], ready_on_try: int) -> bool:
        op = _operation_class(self.pkg)(delay, name, self, ready_on_try)
        self.ops[name] = op
        result: bool = self.purgatory.try_complete_else_watch(op, list(keys))
        return result

    def react(self, name: str) -> tuple[Any, ...]:
        """The reentrant operation's completion: call back into the purgatory (R37).

        ``cancel_for_key`` on its key, then submit a fresh operation watching that key
        (with the parent's delay), all from inside ``on_complete``, which may run inside
        ``check_and_complete`` on the same key, inside a timer hand-over, or inside the
        operation's own ``try_complete_else_watch``. Exercises R26's "drop a list only
        if it is still the mapped one" and snapshot iteration. Returns what it did.
        """
        if self.reactor is None or self.reactor[0] != name:
            return ()
        key = self.reactor[1]
        self.reactor = None  # once
        outer, self.log = self.log, []
        try:
            cancelled = [op.name for op in self.purgatory.cancel_for_key(key)]
            child = f"{name}.child"
            delay: int = self.ops[name].delay_ms
            due = (self.clock.now_ms() + delay) // self.tick * self.tick
            self.spawned.append((child, due, key))
            result = call_outcome(lambda: self.submit(child, delay, [key], 0))
            return (tuple(cancelled), result, tuple(self.log))
        finally:
            self.log = outer

    def counters(self) -> dict[str, int]:
        return {name: getattr(self.purgatory, name) for name in _PURGATORY_COUNTERS}

    def op_states(self) -> dict[str, tuple[bool, bool, int]]:
        return {
            name: (op.is_completed, op.is_abandoned, op.try_calls) for name, op in self.ops.items()
        }

    def close(self) -> None:
        self.purgatory.shutdown()


def canonical_expiries(log: list[PurgatoryLogEntry], due: dict[str, int]) -> list[tuple[Any, ...]]:
    """Consecutive events grouped by the operation's due time, sorted within a group."""
    groups: list[tuple[Any, ...]] = []
    current: int | None = None
    members: list[PurgatoryLogEntry] = []
    for entry in log:
        key = due.get(entry[0], MISSING_DUE)
        if key != current and members:
            groups.append((current, tuple(sorted(members))))
            members = []
        current = key
        members.append(entry)
    if members:
        groups.append((current, tuple(sorted(members))))
    return groups
