"""Equivalence machines: drive two implementations in step and compare everything observable.

``TimerEquivalence`` (``tests.machines.timer_equivalence``) and ``PurgatoryEquivalence``
(``tests.machines.purgatory_equivalence``) are Hypothesis ``RuleBasedStateMachine``
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

This module holds what both share: the pair, the run statistics, the delay and advance
kinds, and running a step on every side. Each side (one package's clock, timers or
purgatory, and its log) is in ``tests.machines.equivalence_sides``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from hypothesis.stateful import RuleBasedStateMachine

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

MISSING_DUE = -(1 << 80)
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
        return pkg_name(self.ref_pkg)

    @property
    def other_name(self) -> str:
        """The other package's name, for messages."""
        return pkg_name(self.other_pkg)


M = TypeVar("M", bound=RuleBasedStateMachine)


def bound_to(machine: type[M], pair: EquivalencePair) -> type[M]:
    """A subclass of ``machine`` bound to ``pair``, named after the two packages (a class
    per pair: Hypothesis's ``seed`` and settings decorators mark the class they get), in
    the machine's module (a witness resolves its steps' names there)."""
    short = f"{pair.ref_name.rsplit('.', 1)[-1]}-{pair.other_name.rsplit('.', 1)[-1]}"
    name = f"{machine.__name__}[{short}]"
    namespace = {"pair": pair, "__qualname__": name, "__module__": machine.__module__}
    return cast("type[M]", type(name, (machine,), namespace))


def call_outcome(call: Callable[[], object]) -> tuple[str, object]:
    """Run ``call``; ("ok", result) or ("raise", exception type name)."""
    try:
        return ("ok", call())
    except Exception as exc:  # compared between sides; both must raise the same type
        return ("raise", type(exc).__name__)


def pkg_name(pkg: ImplPackage) -> str:
    """How reports name an implementation package: its ``__name__``, else its repr."""
    return str(getattr(pkg, "__name__", repr(pkg)))


def run_on_sides(
    sides: list[Any], action: Callable[[Any], object]
) -> tuple[list[tuple[str, object]], list[list[Any]]]:
    """Run ``action`` on each side with a fresh ``side.log``; the outcomes and the logs."""
    outcomes: list[tuple[str, object]] = []
    logs: list[list[Any]] = []
    for side in sides:
        side.log = []
        outcomes.append(call_outcome(functools.partial(action, side)))
        logs.append(side.log)
    return outcomes, logs


def run_check(obj: object, what: str) -> None:
    """Call ``obj._check()`` if the implementation has it (optimized structures do)."""
    check = getattr(obj, "_check", None)
    if check is not None:
        try:
            check()
        except AssertionError as exc:
            raise AssertionError(f"{what}._check() failed: {exc}") from exc
