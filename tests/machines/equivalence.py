"""Equivalence machines: drive two implementations in step and compare everything observable.

``TimerEquivalence`` and ``PurgatoryEquivalence`` are Hypothesis ``RuleBasedStateMachine``
classes; ``make_timer_machine(ref_pkg, other_pkg)`` and ``make_purgatory_machine(ref_pkg,
other_pkg)`` bind one to two packages (an ``EquivalencePair``, in a subclass per pair).
Each side of a machine is one implementation package (``kpurgatory.reference``,
``kpurgatory.optimized``, a mypyc build, or any object exporting the same four names:
``SystemTimer``, ``TimerTask``, ``DelayedOperation``, ``DelayedOperationPurgatory``) on
its own ``ManualClock`` and ``InlineExecutor``, so both sides are fully deterministic
and every call can be replayed on both. After every step the machines compare return
values, raised exception types, the tasks handed over (with due time, clock reading, timer
and nesting), sizes and counters, and run the optional ``_check()`` representation
invariant of each side.

Where the spec leaves a choice open, the comparison is canonical instead of literal: the
order among tasks with the same due time is unspecified (R6), so hand-overs are compared
as a multiset per due time; everything else is compared in order. The machines also check
a few spec rules directly on both sides (never early R4, never late R5, hand-over order R6,
size R12), so a bug shared by both implementations is caught too.

The machines take the packages from their pair because the same machines compare the
reference against the optimized package, a compiled build and external ports; the seeded
mutants in ``tests/mutants`` are judged by these machines as well.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, cast

from hypothesis import event, target
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from kpurgatory.clock import ManualClock
from kpurgatory.executors import InlineExecutor
from tests.support import task_class

__all__ = [
    "ADVANCE_KINDS",
    "DELAY_KINDS",
    "KEY_POOL",
    "NEXT_TASK",
    "EquivalencePair",
    "MachineStats",
    "PurgatoryEquivalence",
    "TimerEquivalence",
    "advance_amount",
    "delay_from",
    "make_purgatory_machine",
    "make_timer_machine",
    "wheel_level",
]

ImplPackage = Any
"""An implementation package: any object exporting the four public names of the API."""

MAX_MAGNITUDE = 1 << 50
"""Delays and advances are clamped to +-2**50 ms (~35,000 years): beyond every level the
machines aim at, and still inside a signed 64-bit range for compiled builds."""

YEARS_MS = 30_000_000_000
"""About 0.95 years in milliseconds: the "years" delay and the huge clock jump."""

DELAY_KINDS = (
    "negative",
    "zero",
    "within_tick",
    "span",
    "span",
    "span",
    "span_edge",
    "random",
    "years",
)
"""How a delay is shaped; ``span`` kinds are repeated to weight multi-level delays."""

ADVANCE_KINDS = (
    "zero",
    "one",
    "tick",
    "span",
    "span",
    "span_edge",
    "random",
    "to_due",
    "to_due",
    "step_down",
    "step_down",
    "huge",
)
"""How an ``advance_clock`` amount is shaped (``to_due`` lands on or beside a due time)."""

_MISSING_DUE = -(1 << 80)
"""Stands for "no due time known" in logs: a run the model did not expect (compared as is)."""


def _clamp(value: int) -> int:
    return max(-MAX_MAGNITUDE, min(MAX_MAGNITUDE, value))


def _jitter_ms(jitter: int, tick: int) -> int:
    """Map a small jitter code to an offset: -2 -> -tick, -1 -> -1, 0, 1 -> +1, 2 -> +tick."""
    return {-2: -tick, -1: -1, 0: 0, 1: 1, 2: tick}[jitter]


def delay_from(
    kind: str, level: int, mult: int, jitter: int, raw: int, tick: int, wheel: int
) -> int:
    """A task delay of shape ``kind`` for a wheel of ``tick`` x ``wheel`` (pure, for replays).

    ``span`` is ``mult`` spans of wheel level ``level`` (``tick * wheel**level``) plus a
    jitter of +-1 ms or +-1 tick, so delays land exactly on and beside the boundaries
    where a task moves up a level; ``span_edge`` is the last millisecond of a level's
    range. ``years`` is ~3e10 ms. The result is clamped to +-2**50.
    """
    span = tick * int(wheel**level)
    times = 1 + mult % (wheel + 1)
    offset = _jitter_ms(jitter, tick)
    if kind == "negative":
        return _clamp(-(span * times) + offset)
    if kind == "zero":
        return 0
    if kind == "within_tick":
        return raw % tick
    if kind == "span":
        return _clamp(span * times + offset)
    if kind == "span_edge":
        return _clamp(span * wheel - 1 + offset)
    if kind == "random":
        return _clamp(raw % (tick * wheel**4 + 1))
    if kind == "years":
        return YEARS_MS + offset
    raise ValueError(f"kind must be one of {sorted(set(DELAY_KINDS))}, got {kind!r}")


def advance_amount(
    kind: str,
    level: int,
    mult: int,
    jitter: int,
    raw: int,
    tick: int,
    wheel: int,
    next_due: int | None,
    now: int,
) -> int:
    """A non-negative ``advance_clock`` amount of shape ``kind`` (pure, for replays).

    ``span`` moves by exact multiples of a level's span (``tick * wheel**level``);
    ``to_due`` moves to ``next_due`` (a scheduled due time picked by the machine) or one
    millisecond before or after it; ``step_down`` moves just far enough for a task due at
    ``next_due`` to drop one wheel level (so repeated steps cascade it level by level);
    ``huge`` jumps ~3e10 ms.
    """
    span = tick * int(wheel**level)
    times = 1 + mult % (wheel + 1)
    if kind == "zero":
        return 0
    if kind == "one":
        return 1
    if kind == "tick":
        return tick
    if kind == "span":
        return min(MAX_MAGNITUDE, span * times)
    if kind == "span_edge":
        return max(0, min(MAX_MAGNITUDE, span * times + _jitter_ms(jitter, tick)))
    if kind == "random":
        return raw % (tick * wheel**3 + 1)
    if kind == "to_due":
        if next_due is None:
            return raw % (tick * wheel + 1)
        return max(0, min(MAX_MAGNITUDE, next_due - now + max(-1, min(1, jitter))))
    if kind == "step_down":
        if next_due is None or next_due <= now:
            return tick
        remaining = next_due - now
        level = wheel_level(next_due, now, tick, wheel)
        return max(1, remaining - (tick * int(wheel**level) - tick))
    if kind == "huge":
        return YEARS_MS + raw % (tick * wheel + 1)
    raise ValueError(f"kind must be one of {sorted(set(ADVANCE_KINDS))}, got {kind!r}")


def wheel_level(due: int, current_time: int, tick: int, wheel: int) -> int:
    """The hierarchical-wheel level a task with ``due`` lands on when added at ``current_time``.

    Level 0 covers due times less than ``tick * wheel`` ahead, level ``k`` less than
    ``tick * wheel**(k + 1)`` ahead (Kafka's layout, up to the rounding of each overflow
    wheel's current time). Implementation-independent: used to measure how deep the
    generated runs go, not to judge an implementation.
    """
    level = 0
    span = tick * wheel
    while due - current_time >= span:
        span *= wheel
        level += 1
    return level


@dataclass
class MachineStats:
    """What the generated runs reached, summed over the examples of one test run.

    ``drained_levels[k]`` counts examples in which at least one task added at wheel level
    ``>= k`` was later handed over by ``advance_clock`` (it cascaded all the way down);
    ``scheduled_levels[k]`` counts examples that scheduled a task at level ``>= k``;
    ``cascade_levels[k]`` counts examples in which a task handed over by ``advance_clock``
    had lived at ``>= k`` distinct levels (measured after each advance of its timer), i.e.
    it really cascaded down level by level rather than in one jump.
    """

    examples: int = 0
    steps: int = 0
    scheduled_levels: Counter[int] = field(default_factory=Counter)
    drained_levels: Counter[int] = field(default_factory=Counter)
    cascade_levels: Counter[int] = field(default_factory=Counter)
    max_level_drained: int = -1
    max_levels_created: int = 0
    counters: Counter[str] = field(default_factory=Counter)

    def record_example(self, max_scheduled: int, max_drained: int, max_cascade: int) -> None:
        """Fold one finished example's deepest scheduled and drained levels in."""
        self.examples += 1
        for levels in range(1, max_cascade + 1):
            self.cascade_levels[levels] += 1
        for level in range(max_scheduled + 1):
            self.scheduled_levels[level] += 1
        for level in range(max_drained + 1):
            self.drained_levels[level] += 1
        self.max_level_drained = max(self.max_level_drained, max_drained)

    def summary(self) -> str:
        """One line per measure, for reports and ``-s`` runs."""
        return (
            f"examples={self.examples} steps={self.steps} "
            f"scheduled>=level:{dict(sorted(self.scheduled_levels.items()))} "
            f"drained>=level:{dict(sorted(self.drained_levels.items()))} "
            f"cascaded_through>=levels:{dict(sorted(self.cascade_levels.items()))} "
            f"max_drained={self.max_level_drained} "
            f"max_levels_created={self.max_levels_created} "
            f"counters={dict(sorted(self.counters.items()))}"
        )


@dataclass(frozen=True)
class EquivalencePair:
    """What one machine class compares: the reference package and the other one, where
    the statistics go (or None), how many tasks or operations a run creates at most, and
    whether ``_check()`` runs after every step."""

    ref_pkg: ImplPackage
    other_pkg: ImplPackage
    stats: MachineStats | None
    limit: int
    run_checks: bool

    @property
    def ref_name(self) -> str:
        """The reference package's name, for messages."""
        return _pkg_name(self.ref_pkg)

    @property
    def other_name(self) -> str:
        """The other package's name, for messages."""
        return _pkg_name(self.other_pkg)


M = TypeVar("M", bound=RuleBasedStateMachine)


def _bound(machine: type[M], pair: EquivalencePair) -> type[M]:
    """A subclass of ``machine`` bound to ``pair``, named after the two packages (a class
    per pair: Hypothesis's ``seed`` and settings decorators mark the class they get)."""
    short = f"{pair.ref_name.rsplit('.', 1)[-1]}-{pair.other_name.rsplit('.', 1)[-1]}"
    name = f"{machine.__name__}[{short}]"
    return cast("type[M]", type(name, (machine,), {"pair": pair, "__qualname__": name}))


def _outcome(call: Callable[[], object]) -> tuple[str, object]:
    """Run ``call``; ("ok", result) or ("raise", exception type name)."""
    try:
        return ("ok", call())
    except Exception as exc:  # compared between sides; both must raise the same type
        return ("raise", type(exc).__name__)


def _pkg_name(pkg: ImplPackage) -> str:
    """How reports name an implementation package: its ``__name__``, else its repr."""
    return str(getattr(pkg, "__name__", repr(pkg)))


def _run_on_sides(
    sides: list[Any], action: Callable[[Any], object]
) -> tuple[list[tuple[str, object]], list[list[Any]]]:
    """Run ``action`` on each side with a fresh ``side.log``; the outcomes and the logs."""
    outcomes: list[tuple[str, object]] = []
    logs: list[list[Any]] = []
    for side in sides:
        side.log = []
        outcomes.append(_outcome(functools.partial(action, side)))
        logs.append(side.log)
    return outcomes, logs


def _run_check(obj: object, what: str) -> None:
    """Call ``obj._check()`` if the implementation has it (optimized structures do)."""
    check = getattr(obj, "_check", None)
    if check is not None:
        try:
            check()
        except AssertionError as exc:
            raise AssertionError(f"{what}._check() failed: {exc}") from exc


# ---------------------------------------------------------------------------------------
# the timer machine
# ---------------------------------------------------------------------------------------

NEXT_TASK = "<next>"
"""Agent target meaning "the next task due after the agent in its timer"."""

TimerLogEntry = tuple[str, int, int, str, tuple[Any, ...]]
"""(label, due, clock reading at run, timer it was scheduled in, nested runs)."""


class _TimerSide:
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
        self.name = _pkg_name(pkg)
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
            timer_name, due = "?", _MISSING_DUE
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


def _canonical_timer_log(log: list[TimerLogEntry]) -> list[tuple[Any, ...]]:
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
        members.append((label, tuple(_canonical_timer_log(list(children)))))
    if current_key is not None:
        groups.append((current_key, tuple(sorted(members))))
    return groups


class TimerEquivalence(RuleBasedStateMachine):
    """Reference and other timer in step; see ``make_timer_machine``."""

    pair: ClassVar[EquivalencePair]
    """The two packages and the run's settings (bound by ``make_timer_machine``)."""

    tasks = Bundle("tasks")

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[_TimerSide] = []
        self.tick = 1
        self.wheel = 2
        self.count = 0
        self.levels: dict[str, int] = {}
        self.max_scheduled = -1
        self.max_drained = -1
        self.visited: dict[str, set[int]] = {}
        self.max_cascade = 0

    # -- set-up ------------------------------------------------------------------

    @initialize(
        tick=st.one_of(st.just(1), st.integers(1, 10), st.sampled_from([7, 100, 1000])),
        wheel=st.one_of(
            st.integers(2, 4),
            st.integers(2, 4),
            st.integers(5, 20),
            st.sampled_from([32, 64, 512]),
        ),
        clock_start=st.one_of(
            st.just(0),
            st.integers(-10_000, 10_000),
            st.just(1_700_000_000_123),
        ),
        start_a=st.one_of(st.none(), st.none(), st.none(), st.integers(-50, 50)),
        # B ahead of the clock (a task moved from A to B is due there at once), or so
        # far ahead that only "years" delays are scheduled in B
        start_b=st.one_of(
            st.none(),
            st.none(),
            st.integers(-50, 50),
            st.integers(1, 5_000),
            st.just(50_000_000),
        ),
    )
    def set_up(
        self,
        tick: int,
        wheel: int,
        clock_start: int,
        start_a: int | None,
        start_b: int | None,
    ) -> None:
        """Build both sides; ``start_*`` offsets give a start_ms apart from the clock (R2)."""
        self.tick, self.wheel = tick, wheel
        starts = {
            "A": None if start_a is None else clock_start + start_a,
            "B": None if start_b is None else clock_start + start_b,
        }
        self.sides = [
            _TimerSide(pkg, tick, wheel, clock_start, starts)
            for pkg in (self.pair.ref_pkg, self.pair.other_pkg)
        ]
        self._compare_state("set_up")

    def teardown(self) -> None:
        """Close every timer; report how deep this example went."""
        for side in self.sides:
            side.close()
        if self.sides:
            event(f"timer: deepest level drained {min(self.max_drained, 6)}")
            event(f"timer: deepest level scheduled {min(self.max_scheduled, 8)}")
            event(f"timer: most levels cascaded through {min(self.max_cascade, 6)}")
            target(float(self.max_cascade), label="most levels cascaded through")
            if self.pair.stats is not None:
                self.pair.stats.record_example(
                    self.max_scheduled, self.max_drained, self.max_cascade
                )

    # -- the comparison ------------------------------------------------------------

    def _step(self, what: str, action: Callable[[_TimerSide], object]) -> object:
        """Run ``action`` on each side and compare outcome, runs and state."""
        if self.pair.stats is not None:
            self.pair.stats.steps += 1
        outcomes, logs = _run_on_sides(self.sides, action)
        ref_out, other_out = outcomes
        assert ref_out == other_out, (
            f"{what}: {self.pair.ref_name} -> {ref_out}, {self.pair.other_name} -> {other_out}"
        )
        canon = [_canonical_timer_log(log) for log in logs]
        assert canon[0] == canon[1], (
            f"{what}: hand-over differs\n  {self.pair.ref_name}: {logs[0]}"
            f"\n  {self.pair.other_name}: {logs[1]}"
        )
        for side, log in zip(self.sides, logs, strict=True):
            self._check_spec(what, side, log)
        self._compare_state(what)
        return ref_out[1]

    def _check_spec(self, what: str, side: _TimerSide, log: list[TimerLogEntry]) -> None:
        """Rules checked on each side on its own: R4 never early, R6 order, no stray run."""
        assert not side.unexpected_runs, (
            f"{what}: {side.name} ran tasks that were not scheduled: {side.unexpected_runs}"
        )
        dues = [due for _, due, _, _, _ in log]
        assert dues == sorted(dues), f"{what}: {side.name} handed over out of due order (R6): {log}"
        for label, due, now, timer_name, _ in log:
            timer = side.timers.get(timer_name)
            if timer is not None:  # due at the reading (drained) or at once (R3)
                assert due <= max(now, timer.current_time), (
                    f"{what}: {side.name} ran {label} early (R4): due {due} at reading {now}"
                )

    def _compare_state(self, what: str) -> None:
        ref, other = self.sides
        assert ref.sizes() == other.sizes(), (
            f"{what}: size differs: {self.pair.ref_name} {ref.sizes()} "
            f"vs {self.pair.other_name} {other.sizes()}"
        )
        for side in self.sides:
            assert side.sizes() == side.model_sizes(), (
                f"{what}: {side.name} size {side.sizes()} but "
                f"scheduled tasks {side.model_sizes()} (R12)"
            )
        for side in self.sides:
            next_dues = side.next_due_times()
            assert next_dues == side.model_next_due_times(), (
                f"{what}: {side.name} next_due_time {next_dues} but scheduled tasks "
                f"give {side.model_next_due_times()} (R44)"
            )
        assert ref.next_due_times() == other.next_due_times(), (
            f"{what}: next_due_time differs: {self.pair.ref_name} {ref.next_due_times()} vs "
            f"{self.pair.other_name} {other.next_due_times()} (R44)"
        )
        for name in ref.timers:
            ref_ct = ref.timers[name].current_time
            other_ct = other.timers[name].current_time
            assert ref_ct == other_ct, (
                f"{what}: timer {name} current_time {self.pair.ref_name} {ref_ct} vs "
                f"{self.pair.other_name} {other_ct} (R2)"
            )
        for side in self.sides:
            for name, timer in side.timers.items():
                if self.pair.run_checks:
                    _run_check(timer, f"{side.name} timer {name}")
                levels = getattr(timer, "levels", None)
                if self.pair.stats is not None and isinstance(levels, int):
                    self.pair.stats.max_levels_created = max(
                        self.pair.stats.max_levels_created, levels
                    )

    # -- rules ---------------------------------------------------------------------

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=tasks,
        kind=st.sampled_from(DELAY_KINDS),
        level=st.integers(0, 7),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 40),
        timer_name=st.sampled_from(["A", "A", "B"]),
    )
    def new_task(
        self, kind: str, level: int, mult: int, jitter: int, raw: int, timer_name: str
    ) -> str:
        """Create a task pair with a drawn delay and add it (R1, R3)."""
        delay = delay_from(kind, level, mult, jitter, raw, self.tick, self.wheel)
        label = f"t{self.count}"
        self.count += 1
        for side in self.sides:
            side.new_task(label, delay)
        self._add(label, timer_name)
        return label

    def _add(self, label: str, timer_name: str) -> None:
        ref = self.sides[0]
        due = ref.due_of(label)
        current = ref.timers[timer_name].current_time
        if due > current:
            level = wheel_level(due, current, self.tick, self.wheel)
            self.levels[label] = level
            self.visited[label] = {level}
            self.max_scheduled = max(self.max_scheduled, level)
        else:
            self.levels.pop(label, None)
            self.visited.pop(label, None)
        self._step(f"add({label} -> {timer_name})", lambda side: side.add(label, timer_name))

    @rule(label=tasks, timer_name=st.sampled_from(["A", "B"]))
    def add(self, label: str, timer_name: str) -> None:
        """Re-add a task: scheduled (replace), cancelled, run, or in the other timer (R10)."""
        self._add(label, timer_name)

    @precondition(
        lambda self: (
            bool(self.sides) and any(name == "A" for name, _ in self.sides[0].scheduled.values())
        )
    )
    @rule(pick=st.integers(0, 1 << 16))
    def move_scheduled(self, pick: int) -> None:
        """Move a task scheduled in A to B (R10); due there at once when B is ahead."""
        in_a = sorted(label for label, (name, _) in self.sides[0].scheduled.items() if name == "A")
        self._add(in_a[pick % len(in_a)], "B")

    @rule(label=tasks)
    def cancel(self, label: str) -> None:
        """Cancel a task, scheduled or not (R9)."""
        self._step(f"cancel({label})", lambda side: side.cancel(label))

    @rule(
        timer_name=st.sampled_from(["A", "A", "A", "B"]),
        kind=st.sampled_from(ADVANCE_KINDS),
        level=st.integers(0, 7),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 40),
        pick=st.integers(0, 1 << 16),
    )
    def advance(
        self,
        timer_name: str,
        kind: str,
        level: int,
        mult: int,
        jitter: int,
        raw: int,
        pick: int,
    ) -> None:
        """advance_clock on one timer by a drawn amount; compare result and runs (R4-R8)."""
        ref = self.sides[0]
        dues = sorted(due for name, due in ref.scheduled.values() if name == timer_name)
        if not dues:
            next_due = None
        elif kind == "step_down" or pick % 3 == 0:
            next_due = dues[0]  # the next task to drain: step it down level by level
        else:
            next_due = dues[pick % len(dues)]
        amount = advance_amount(
            kind,
            level,
            mult,
            jitter,
            raw,
            self.tick,
            self.wheel,
            next_due,
            ref.clock.now_ms(),
        )
        self._advance(timer_name, amount)

    @rule(
        timer_name=st.sampled_from(["A", "A", "B"]),
        pick=st.integers(0, 1 << 16),
        times=st.integers(1, 64),
    )
    def cascade(self, timer_name: str, pick: int, times: int) -> None:
        """Up to ``times`` ``step_down`` advances toward one scheduled task: each drops
        it one wheel level (draining whatever is due earlier on the way), so it
        cascades level by level down to its hand-over."""
        ref = self.sides[0]
        labels = sorted(
            (due, label) for label, (name, due) in ref.scheduled.items() if name == timer_name
        )
        if not labels:
            return
        chosen = labels[pick % len(labels)][1]
        for _ in range(times):
            where = ref.scheduled.get(chosen)
            if where is None or where[0] != timer_name:
                return
            amount = advance_amount(
                "step_down", 0, 0, 0, 0, self.tick, self.wheel, where[1], ref.clock.now_ms()
            )
            self._advance(timer_name, amount)

    def _advance(self, timer_name: str, amount: int) -> None:
        """One compared advance_clock, then R5 (never late) on each side, then self.pair.stats."""
        ref = self.sides[0]
        before = {label for label, (name, _) in ref.scheduled.items() if name == timer_name}
        self._step(
            f"advance({timer_name}, {amount})",
            lambda side: side.timers[timer_name].advance_clock(amount),
        )
        now = ref.clock.now_ms()
        for side in self.sides:
            late = [
                label
                for label, (name, due) in side.scheduled.items()
                if name == timer_name and due <= now and label in before
            ]
            assert not late, (
                f"advance({timer_name}, {amount}): "
                f"{side.name} left due tasks scheduled (R5): {late}"
            )
        drained = [
            self.levels[label]
            for label, _, _, name, _ in ref.log
            if name == timer_name and label in self.levels and label in before
        ]
        if drained:
            self.max_drained = max(self.max_drained, max(drained))
        for label, _, _, name, _ in ref.log:
            if name == timer_name and label in before and label in self.visited:
                self.max_cascade = max(self.max_cascade, len(self.visited.pop(label)))
        current = ref.timers[timer_name].current_time
        for label, (name, due) in ref.scheduled.items():
            if name == timer_name and label in self.visited:
                self.visited[label].add(wheel_level(due, current, self.tick, self.wheel))

    @rule(
        kind=st.sampled_from(["one", "tick", "span", "random", "huge"]),
        level=st.integers(0, 5),
        mult=st.integers(0, 64),
        raw=st.integers(0, 1 << 40),
    )
    def clock_advance(self, kind: str, level: int, mult: int, raw: int) -> None:
        """Move both clocks without draining: due tasks wait for advance_clock (R2, R3)."""
        amount = advance_amount(kind, level, mult, 0, raw, self.tick, self.wheel, None, 0)
        self._step(f"clock.advance({amount})", lambda side: side.clock.advance(amount))

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=tasks,
        kind=st.sampled_from(DELAY_KINDS),
        level=st.integers(0, 4),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 40),
        victim=tasks,
        next_task=st.booleans(),
        action=st.sampled_from(["cancel", "readd", "move"]),
    )
    def new_agent(
        self,
        kind: str,
        level: int,
        mult: int,
        jitter: int,
        raw: int,
        victim: str,
        next_task: bool,
        action: str,
    ) -> str:
        """The one task that acts on another when it runs (R11); added to timer A.

        Its target is ``victim``, or with ``next_task`` whichever task is due next
        after it in its timer when it runs.
        """
        delay = delay_from(kind, level, mult, jitter, raw, self.tick, self.wheel)
        label = f"agent{self.count}"
        self.count += 1
        for side in self.sides:
            side.new_task(label, delay)
            side.agent = label
            side.agent_action = (action, NEXT_TASK if next_task else victim)
        self._add(label, "A")
        return label

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=tasks,
        timer_name=st.sampled_from(["A", "B"]),
        action=st.sampled_from(["cancel", "readd", "move"]),
        level=st.integers(0, 4),
        gap=st.sampled_from(["one", "tick", "ticks", "span"]),
    )
    def race(self, timer_name: str, action: str, level: int, gap: str) -> MultipleResults[str]:
        """R11 head-on: a new agent and a task due just after it, then one advance that
        drains both; the agent cancels, re-adds or moves that task before its turn.

        The new agent replaces the old one (which becomes an ordinary task), so there
        is still only one agent at a time.
        """
        delay = self.tick * int(self.wheel**level)
        after = {
            "one": 1,
            "tick": self.tick,
            "ticks": 2 * self.tick,
            "span": self.tick * self.wheel,
        }[gap]
        agent, victim = f"agent{self.count}", f"t{self.count + 1}"
        self.count += 2
        for side in self.sides:
            side.new_task(agent, delay)
            side.new_task(victim, delay + after)
            side.agent = agent
            side.agent_action = (action, NEXT_TASK)
        self._add(agent, timer_name)
        self._add(victim, timer_name)
        self._advance(timer_name, delay + after + self.tick)
        return multiple(agent, victim)

    @precondition(lambda self: self.sides and self.sides[0].agent is not None)
    @rule(
        victim=tasks,
        next_task=st.booleans(),
        action=st.sampled_from(["cancel", "readd", "move"]),
    )
    def retarget_agent(self, victim: str, next_task: bool, action: str) -> None:
        """Point the agent at another task (or the next one due) or action."""
        if victim == self.sides[0].agent and not next_task:
            return
        for side in self.sides:
            side.agent_action = (action, NEXT_TASK if next_task else victim)

    @invariant()
    def same_schedule(self) -> None:
        """Both sides agree on which tasks are scheduled where, with which due time."""
        if self.sides:
            ref, other = self.sides
            assert ref.scheduled == other.scheduled, (
                f"scheduled tasks differ: {self.pair.ref_name} {ref.scheduled} vs "
                f"{self.pair.other_name} {other.scheduled}"
            )


def make_timer_machine(
    ref_pkg: ImplPackage,
    other_pkg: ImplPackage,
    *,
    stats: MachineStats | None = None,
    max_tasks: int = 40,
    run_checks: bool = True,
) -> type[RuleBasedStateMachine]:
    """A machine that drives ``ref_pkg`` and ``other_pkg`` timers in step (R1-R12).

    Each side has a ``ManualClock`` and two inline-executor timers A and B on it, with
    ``tick_ms``, ``wheel_size`` and start time drawn by ``@initialize`` (tiny wheels of 2
    to 4 often, so cheap runs reach 3+ overflow levels). Rules add tasks with delays from
    negative through several wheel levels to years, cancel, re-add, move between timers,
    advance a timer by 0, 1, exact wheel spans, up to or beside a due time and by huge
    jumps, move the clock directly, and set up one "agent" task that cancels, re-adds or
    moves another task when it runs (R11). After every step both sides must agree on the
    call's outcome, the canonical hand-over log, each timer's ``size`` and
    ``current_time``, and pass ``_check()`` (unless ``run_checks`` is False, which
    measures what the behavioural comparison alone catches). ``stats`` (optional)
    collects how deep the runs went.
    """
    pair = EquivalencePair(ref_pkg, other_pkg, stats, max_tasks, run_checks)
    return _bound(TimerEquivalence, pair)


# ---------------------------------------------------------------------------------------
# the purgatory machine
# ---------------------------------------------------------------------------------------

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
            self, delay_ms: int, name: str, side: _PurgatorySide, ready_on_try: int
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


class _PurgatorySide:
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
        self.name = _pkg_name(pkg)
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
            result = _outcome(lambda: self.submit(child, delay, [key], 0))
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


def _canonical_expiries(log: list[PurgatoryLogEntry], due: dict[str, int]) -> list[tuple[Any, ...]]:
    """Consecutive events grouped by the operation's due time, sorted within a group."""
    groups: list[tuple[Any, ...]] = []
    current: int | None = None
    members: list[PurgatoryLogEntry] = []
    for entry in log:
        key = due.get(entry[0], _MISSING_DUE)
        if key != current and members:
            groups.append((current, tuple(sorted(members))))
            members = []
        current = key
        members.append(entry)
    if members:
        groups.append((current, tuple(sorted(members))))
    return groups


class PurgatoryEquivalence(RuleBasedStateMachine):
    """Reference and other purgatory in step; see ``make_purgatory_machine``."""

    pair: ClassVar[EquivalencePair]
    """The two packages and the run's settings (bound by ``make_purgatory_machine``)."""

    operations = Bundle("operations")

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[_PurgatorySide] = []
        self.tick = 1
        self.wheel = 2
        self.count = 0
        self.keys_of: dict[str, list[Hashable]] = {}
        self.missing: dict[str, list[Hashable]] = {}  # keys still needed before ready
        self.due: dict[str, int] = {}

    @initialize(
        tick=st.one_of(st.just(1), st.integers(1, 5)),
        wheel=st.one_of(st.integers(2, 4), st.integers(2, 20)),
        clock_start=st.one_of(st.just(0), st.integers(-1000, 1000)),
        purge_interval=st.integers(0, 5),
        timer_enabled=st.sampled_from([True, True, True, False]),
        shards=st.sampled_from([None, 1, 2, 3, 8]),
    )
    def set_up(
        self,
        tick: int,
        wheel: int,
        clock_start: int,
        purge_interval: int,
        timer_enabled: bool,
        shards: int | None,
    ) -> None:
        """Build both purgatories (R33 when timer_enabled is False).

        ``shards`` is passed only to an implementation whose purgatory accepts it
        (the optimized one's keyword extension; None keeps its default of 512): few
        shards put many keys in one shard and make each step cheaper.
        """
        self.tick, self.wheel = tick, wheel
        self.sides = [
            _PurgatorySide(pkg, tick, wheel, clock_start, purge_interval, timer_enabled, shards)
            for pkg in (self.pair.ref_pkg, self.pair.other_pkg)
        ]
        self._compare_state("set_up")

    def teardown(self) -> None:
        """Shut both purgatories down."""
        for side in self.sides:
            side.close()
        if self.sides and self.pair.stats is not None:
            self.pair.stats.examples += 1

    def _step(
        self, what: str, action: Callable[[_PurgatorySide], object], *, expiries: bool = False
    ) -> object:
        """Run ``action`` on each side, compare outcome, events and state."""
        if self.pair.stats is not None:
            self.pair.stats.steps += 1
        outcomes, logs = _run_on_sides(self.sides, action)
        assert outcomes[0] == outcomes[1], (
            f"{what}: {self.pair.ref_name} -> {outcomes[0]}, "
            f"{self.pair.other_name} -> {outcomes[1]}"
        )
        if expiries:
            same = _canonical_expiries(logs[0], self.due) == _canonical_expiries(logs[1], self.due)
        else:
            same = logs[0] == logs[1]
        assert same, (
            f"{what}: events differ\n  {self.pair.ref_name}: {logs[0]}"
            f"\n  {self.pair.other_name}: {logs[1]}"
        )
        for side, log in zip(self.sides, logs, strict=True):
            self._check_spec(what, side, log, expiries)
        if self.pair.stats is not None:
            for kind in ("complete", "expire"):
                self.pair.stats.counters[kind] += sum(1 for entry in logs[0] if entry[1] == kind)
        self._adopt_children()
        self._compare_state(what)
        return outcomes[0][1]

    def _adopt_children(self) -> None:
        """Register operations a reentrant completion submitted (keys, due time)."""
        spawned = [side.spawned for side in self.sides]
        assert spawned[0] == spawned[1], f"spawned operations differ: {spawned}"
        for child, due, key in spawned[0]:
            self.keys_of[child] = [key]
            self.missing[child] = [key]
            self.due[child] = due
            if self.pair.stats is not None:
                self.pair.stats.counters["reentrant"] += 1
        for side in self.sides:
            side.spawned = []

    def _check_spec(
        self, what: str, side: _PurgatorySide, log: list[PurgatoryLogEntry], expiries: bool
    ) -> None:
        """R17 on each side: an expiry directly follows that operation's completion;
        R6: expiries in non-decreasing due order."""
        for index, (op_name, kind, _, _) in enumerate(log):
            if kind == "expire":
                assert index > 0 and log[index - 1][:2] == (op_name, "complete"), (
                    f"{what}: {side.name} expired {op_name} without completing it first "
                    f"(R17): {log}"
                )
        if expiries:
            dues = [self.due.get(op_name, _MISSING_DUE) for op_name, _, _, _ in log]
            assert dues == sorted(dues), f"{what}: {side.name} expired out of due order (R6): {log}"

    def _compare_state(self, what: str) -> None:
        ref, other = self.sides
        ref_counters, other_counters = ref.counters(), other.counters()
        assert ref_counters == other_counters, (
            f"{what}: counters differ: {self.pair.ref_name} {ref_counters} vs "
            f"{self.pair.other_name} {other_counters}"
        )
        ref_ops, other_ops = ref.op_states(), other.op_states()
        assert ref_ops == other_ops, (
            f"{what}: operations (completed, abandoned, try_complete calls) differ:\n"
            f"  {self.pair.ref_name}: {ref_ops}\n  {self.pair.other_name}: {other_ops}"
        )
        assert ref.timer.current_time == other.timer.current_time, (
            f"{what}: current_time {ref.timer.current_time} vs {other.timer.current_time}"
        )
        assert ref.timer.next_due_time == other.timer.next_due_time, (
            f"{what}: next_due_time {ref.timer.next_due_time} vs {other.timer.next_due_time} (R44)"
        )
        if self.pair.run_checks:
            for side in self.sides:
                _run_check(side.timer, f"{side.name} timer")
                _run_check(side.purgatory, f"{side.name} purgatory")

    # -- rules ---------------------------------------------------------------------

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=operations,
        kind=st.sampled_from(DELAY_KINDS),
        level=st.integers(0, 5),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 30),
        keys=st.lists(KEYS, min_size=1, max_size=4),
        ready_on_try=st.sampled_from([0, 0, 0, 1, 2, 3, -1, -2]),
        reentrant=st.sampled_from([False, False, False, True]),
        needs=st.lists(KEYS, max_size=2),
    )
    def submit(
        self,
        kind: str,
        level: int,
        mult: int,
        jitter: int,
        raw: int,
        keys: list[Hashable],
        ready_on_try: int,
        reentrant: bool,
        needs: list[Hashable],
    ) -> str:
        """try_complete_else_watch on one or many keys (R22-R24, R33).

        ``ready_on_try``: 0 never by itself, 1 ready at submission (first try), 2 on the
        second try (completed inside the call, stays watched), 3 on the next try; -1 and
        -2: the first or second try raises, and the call must leave no trace (R38).
        ``needs``: the keys whose events make it ready (default: its first watch key);
        a needed key it does not watch makes it ready without a check on that key.
        """
        delay = delay_from(kind, level, mult, jitter, raw, self.tick, self.wheel)
        return self._submit(delay, keys, ready_on_try, reentrant, needs)

    @precondition(lambda self: self.count < self.pair.limit)
    @rule(
        target=operations,
        other=operations,
        extra=st.lists(KEYS, max_size=2),
        level=st.integers(0, 3),
        ready_on_try=st.sampled_from([0, 0, 1, 2, 3]),
        reentrant=st.sampled_from([False, False, True]),
        needs=st.lists(KEYS, max_size=2),
    )
    def submit_alongside(
        self,
        other: str,
        extra: list[Hashable],
        level: int,
        ready_on_try: int,
        reentrant: bool,
        needs: list[Hashable],
    ) -> str:
        """Submit an operation watching the keys of ``other`` (plus ``extra``): watcher
        lists with several operations, of which an event completes only some (R25)."""
        delay = self.tick * int(self.wheel**level) + 1
        keys = [*self.keys_of[other], *extra]
        return self._submit(delay, keys, ready_on_try, reentrant, needs)

    def _submit(
        self,
        delay: int,
        keys: list[Hashable],
        ready_on_try: int,
        reentrant: bool,
        needs: list[Hashable],
    ) -> str:
        name = f"op{self.count}"
        self.count += 1
        self.keys_of[name] = list(keys)
        self.missing[name] = list(needs) if needs else list(keys[:1])
        ref = self.sides[0]
        self.due[name] = (ref.clock.now_ms() + delay) // self.tick * self.tick
        if reentrant and ref.reactor is None:
            # One reentrant operation at a time: two could race on the same key in an
            # order the spec leaves open (same-due expiries, R6). It reacts on the key
            # whose event completes it, i.e. inside check_and_complete on that key.
            self.missing[name] = list(keys[:1])
            for side in self.sides:
                side.reactor = (name, keys[0])
        self._step(
            f"try_complete_else_watch({name}, {keys})",
            lambda side: side.submit(name, delay, keys, ready_on_try),
        )
        return name

    @rule(op=operations, keys=st.lists(KEYS, min_size=1, max_size=2))
    def resubmit(self, op: str, keys: list[Hashable]) -> None:
        """A second submission raises ValueError and changes nothing (R34)."""
        self._step(
            f"try_complete_else_watch({op}) again",
            lambda side: side.purgatory.try_complete_else_watch(side.ops[op], list(keys)),
        )

    @rule(key=KEYS)
    def keyed_event(self, key: Hashable) -> None:
        """Record an event on ``key``, then check_and_complete(key) (R25).

        An operation becomes ready once every key it needs has had an event, so an
        event completes some of the operations watching its key and not others.
        """
        self._event(key)

    @rule(op=operations)
    def event_for(self, op: str) -> None:
        """An event on a key ``op`` still needs (or its first watch key): aims events
        at keys that pending operations watch, the reentrant one's included."""
        missing = self.missing.get(op)
        self._event(missing[0] if missing else self.keys_of[op][0])

    def _event(self, key: Hashable) -> None:
        for name in list(self.missing):
            missing = self.missing[name]
            if key in missing:
                missing[:] = [other for other in missing if other != key]
                if not missing:
                    del self.missing[name]
                    for side in self.sides:
                        side.ops[name].ready = True
        count = self._step(f"event({key!r})", lambda side: side.purgatory.check_and_complete(key))
        event(f"purgatory: event completed {min(count, 3) if isinstance(count, int) else count}")

    @rule(key=KEYS)
    def check_and_complete(self, key: Hashable) -> None:
        """check_and_complete with no new readiness: counts only what it completes (R25)."""
        self._step(
            f"check_and_complete({key!r})", lambda side: side.purgatory.check_and_complete(key)
        )

    @rule(op=operations)
    def set_ready(self, op: str) -> None:
        """Make an operation completable without telling the purgatory."""
        for side in self.sides:
            side.ops[op].ready = True

    @rule(op=operations)
    def force_complete(self, op: str) -> None:
        """A direct force_complete from outside the purgatory (R16)."""
        self._step(f"force_complete({op})", lambda side: side.ops[op].force_complete())

    @rule(op=operations)
    def safe_try_complete(self, op: str) -> None:
        """safe_try_complete skips try_complete on a completed operation (R18)."""
        self._step(f"safe_try_complete({op})", lambda side: side.ops[op].safe_try_complete())

    @rule(op=operations)
    def cancel_timer_entry(self, op: str) -> None:
        """op.cancel(): abandon if submitted (R40), else the timer-level cancel (R9)."""
        self._step(f"cancel({op})", lambda side: side.ops[op].cancel())

    @rule(op=operations)
    def abandon(self, op: str) -> None:
        """purgatory.abandon: True once for a pending op; unwatched, untimed (R40)."""
        self._step(f"abandon({op})", lambda side: side.purgatory.abandon(side.ops[op]))

    @rule(key=KEYS)
    def cancel_for_key(self, key: Hashable) -> None:
        """cancel_for_key returns the watchers in watch order (R29)."""
        self._step(
            f"cancel_for_key({key!r})",
            lambda side: [op.name for op in side.purgatory.cancel_for_key(key)],
        )

    @rule(
        kind=st.sampled_from(ADVANCE_KINDS),
        level=st.integers(0, 5),
        mult=st.integers(0, 64),
        jitter=st.integers(-2, 2),
        raw=st.integers(0, 1 << 30),
        pick=st.integers(0, 1 << 16),
    )
    def advance_clock(
        self, kind: str, level: int, mult: int, jitter: int, raw: int, pick: int
    ) -> None:
        """Purgatory advance_clock: expiries in due order, then the purge rule (R17, R30)."""
        ref = self.sides[0]
        pending = sorted(
            self.due[name]
            for name, op in ref.ops.items()
            if not op.is_completed and name in self.due
        )
        next_due = pending[pick % len(pending)] if pending else None
        amount = advance_amount(
            kind,
            level,
            mult,
            jitter,
            raw,
            self.tick,
            self.wheel,
            next_due,
            ref.clock.now_ms(),
        )
        purged_before = ref.purgatory.num_purged
        self._step(
            f"advance_clock({amount})",
            lambda side: side.purgatory.advance_clock(amount),
            expiries=True,
        )
        if ref.purgatory.num_purged > purged_before:
            event("purgatory: a purge removed operations")
            if self.pair.stats is not None:
                self.pair.stats.counters["purges"] += 1

    @rule(kind=st.sampled_from(["one", "tick", "random"]), raw=st.integers(0, 1 << 20))
    def clock_advance(self, kind: str, raw: int) -> None:
        """Move both clocks without draining."""
        amount = advance_amount(kind, 0, 0, 0, raw, self.tick, self.wheel, None, 0)
        self._step(f"clock.advance({amount})", lambda side: side.clock.advance(amount))


def make_purgatory_machine(
    ref_pkg: ImplPackage,
    other_pkg: ImplPackage,
    *,
    stats: MachineStats | None = None,
    max_operations: int = 40,
    run_checks: bool = True,
) -> type[RuleBasedStateMachine]:
    """A machine that drives ``ref_pkg`` and ``other_pkg`` purgatories in step (R16-R34).

    Each side: a purgatory (reaper off, ``purge_interval`` 0..5, ``timer_enabled`` drawn,
    False now and then) on a manual-clock inline timer. Operations complete when their
    ``ready`` flag is set: at submission (completed on the first try), on the second try
    (between the two tries of ``try_complete_else_watch``), on a later try, or by a keyed
    ``event`` that marks every operation interested in the key ready and then runs
    ``check_and_complete(key)``. Other rules: check_and_complete without an event,
    force_complete, safe_try_complete, cancel of the timer entry, cancel_for_key, a
    second submission (R34), advance_clock (purges included) and bare clock moves. After
    every step both sides must agree on the return value or exception, the completion and
    expiry events in order (same-due expiries as a multiset), every counter, and each
    operation's completed flag and number of try_complete calls, and pass ``_check()``
    (unless ``run_checks`` is False). One operation per run may be reentrant: its
    ``on_complete`` calls ``cancel_for_key`` and submits a fresh operation (R37).
    """
    pair = EquivalencePair(ref_pkg, other_pkg, stats, max_operations, run_checks)
    return _bound(PurgatoryEquivalence, pair)
