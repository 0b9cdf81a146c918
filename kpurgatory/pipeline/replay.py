"""Differential replay of one stream, in plain Python (no Spark): the pipeline's unit of work.

``replay_stream`` runs a step stream through two implementations side by side with the
conformance driver, in virtual time (ManualClock, InlineExecutor), and returns:

- one ``OpOutcome`` per operation and implementation: completed or expired (or still
  pending at the end), at what virtual time, by which call (``via``);
- the first step at which the two runs' observations disagree
  (``kpurgatory.conformance.driver.compare_observations``), if any;
- cost counters for the stream, from the reference side's observations fed into
  ``kpurgatory.pipeline.costs`` (Kafka's bucket delay queue vs a per-request heap), plus
  peaks of pending and watched operations and purge counts.

The Spark job calls this inside its executors; ``kpurgatory replay``
(``kpurgatory.pipeline.reproduce``) calls it locally to reproduce a counterexample;
the tests compare the two row for row.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from kpurgatory.conformance.driver import (
    PUBLIC_API,
    Driver,
    State,
    compare_observations,
    state_difference,
)
from kpurgatory.conformance.observation import Compact, compact, to_observation
from kpurgatory.conformance.steps import (
    Advance,
    CancelForKey,
    ClockAdvance,
    Init,
    PurgatoryAdvance,
    Step,
    Watch,
)
from kpurgatory.pipeline.costs import HeapModel, WheelModel

__all__ = [
    "COUNTER_NAMES",
    "IMPL_COUNTER_NAMES",
    "Compare",
    "OpOutcome",
    "Side",
    "SideStopped",
    "StreamReplay",
    "compact",
    "exact",
    "replay_sides",
    "replay_stream",
    "resolve_impl",
]

COUNTER_NAMES: tuple[str, ...] = (
    "steps",
    "ops",
    "timed_ops",
    "bucket_offers",
    "bucket_polls",
    "empty_bucket_polls",
    "cascades",
    "fired",
    "due_at_once",
    "peak_bucket_queue",
    "bucket_queue_cost",
    "wheel_levels",
    "heap_offers",
    "heap_polls",
    "peak_heap",
    "heap_cost",
    "peak_pending",
    "peak_watched",
    "purges",
    "purged_ops",
    "model_mismatches",
)
"""The per-stream cost counters, in column order (all integers)."""

IMPL_COUNTER_NAMES: tuple[str, ...] = ("bucket_offers", "bucket_polls", "cascades")
"""Counters read from the second implementation's timer if it exposes ``stats`` (a mapping)."""


def resolve_impl(name: str) -> ModuleType:
    """The implementation package called ``name``: ``reference``, ``optimized``, or a module path.

    ``ValueError`` (naming ``name``) if it cannot be imported or lacks the public API.
    """
    module_name = f"kpurgatory.{name}" if name in ("reference", "optimized") else name
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"impl {name!r}: want reference, optimized or the module path of a package "
            f"exporting {', '.join(PUBLIC_API)} (e.g. mypkg.port); cannot import "
            f"{module_name}: {exc}"
        ) from None
    for attr in PUBLIC_API:
        if not hasattr(module, attr):
            raise ValueError(f"impl {name!r}: {module_name} does not export {attr}")
    return module


@dataclass(frozen=True)
class OpOutcome:
    """What happened to one operation in one implementation's run."""

    op: str
    arrival_ms: int
    delay_ms: int
    outcome: str  # "completed", "expired" or "pending"
    at_ms: int | None
    via: str | None
    level: int | None  # wheel level it was first placed at (-1: due at once; None: not timed)
    cascades: int


@dataclass
class StreamReplay:
    """The result of ``replay_stream``."""

    outcomes_a: list[OpOutcome]
    outcomes_b: list[OpOutcome]
    divergence: tuple[int, str] | None
    counters: dict[str, int]
    impl_counters: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    stopped: bool = False  # side b stopped answering at the divergence (``SideStopped``)

    @property
    def agreed_steps(self) -> int:
        """Steps whose observations agreed before the first divergence (all if none)."""
        steps = self.counters.get("steps", 0)
        return steps if self.divergence is None else min(self.divergence[0], steps)


class SideStopped(Exception):  # noqa: N818 - a state, not an error of the caller
    """Raised by a side's ``execute`` that can give no observation (a port's adapter that
    exited, hung or wrote garbage); the message says why. The stream stops there."""


class Side(Protocol):
    """One implementation under replay, as the kit's ``Driver`` is one:
    ``execute_compact`` returns each step's ``Compact`` observation; ``state_compact()``
    the state now (only called when final states are compared); ``purgatory`` is read
    on side a (its exact purge count)."""

    @property
    def purgatory(self) -> Any: ...

    def execute_compact(self, step: Step) -> Compact: ...

    def state_compact(self) -> tuple[Any, ...]: ...

    def close(self) -> None: ...


Compare = Callable[[Step, Compact, Compact], str | None]
"""Judges one step: None if side b's observation agrees with side a's, else why not.
Called for every step, in order (a judge may keep facts about the run)."""


def exact(step: Step, obs_a: Compact, obs_b: Compact) -> str | None:
    """The kit's comparison (``compare_observations``), on the tuples first."""
    if obs_a == obs_b:
        return None
    return compare_observations(to_observation(obs_a), to_observation(obs_b))


class _Outcomes:
    """Tracks each operation's outcome from one run's observations."""

    def __init__(self) -> None:
        self.ops: dict[str, list[Any]] = {}

    def observe(self, step: Step, obs: Compact, clock: int) -> None:
        ops = self.ops
        if type(step) is Watch and step.operation not in ops:
            ops[step.operation] = [clock, step.delay_ms, "pending", None, None]
        for kind, label, at_ms, via, _, _ in obs[2]:
            record = ops.get(label)
            if record is not None:
                if kind == "completed":
                    record[2:5] = ["completed", at_ms, via]
                elif kind == "expired":
                    record[2] = "expired"

    def rows(self, model: WheelModel) -> list[OpOutcome]:
        return [
            OpOutcome(
                label,
                arrival,
                delay,
                outcome,
                at,
                via,
                model.first_level.get(label),
                model.cascades_of.get(label, 0),
            )
            for label, (arrival, delay, outcome, at, via) in self.ops.items()
        ]


def _expired_labels(obs: Compact) -> set[str]:
    return {event[1] for event in obs[2] if event[0] == "expired"}


def replay_stream(
    steps: Sequence[Step],
    impl_a: ModuleType,
    impl_b: ModuleType,
    *,
    state_every: int = 32,
) -> StreamReplay:
    """Run ``steps`` on ``impl_a`` (the expectation, normally the reference) and ``impl_b``.

    Both sides' full states are read and compared after every ``state_every``-th step
    and at the end (reading ``watched`` costs O(keys) on the reference and O(shards) on
    the optimized purgatory); results, events and try counts after every step. So
    ``peak_watched`` is sampled every ``state_every`` steps; the purge count is exact
    (``num_purged`` after every step) and ``peak_pending`` too (from the wheel model).
    Returns outcomes for both, the first divergence and the cost counters.

    Each side is the kit's ``Driver``; the replay compares its ``Compact`` observations
    (tuples) and builds the kit's objects only for a pair that differs, for the kit's
    ``compare_observations`` to judge (hand-overs with the same due time may come in
    another order, R6).
    """
    if not steps or not isinstance(steps[0], Init):
        raise ValueError("steps must start with an init step")
    side_a = Driver(impl_a, state_every=state_every)
    side_b = Driver(impl_b, state_every=state_every)
    return replay_sides(steps, side_a, side_b)


def replay_sides(
    steps: Sequence[Step],
    side_a: Side,
    side_b: Side,
    compare: Compare = exact,
    *,
    compare_final: bool = True,
) -> StreamReplay:
    """``replay_stream`` on two given sides (closed at the end), judged by ``compare``.

    ``compare_final``: also compare both sides' states after the last step (a side that
    answers the state with every step, like a port's adapter, needs no final read). A
    ``SideStopped`` from side b ends the stream there, as its divergence.
    """
    if not steps or not isinstance(steps[0], Init):
        raise ValueError("steps must start with an init step")
    started = time.perf_counter()
    init = steps[0]
    costs = _CostModels(init)
    outcomes_a, outcomes_b = _Outcomes(), _Outcomes()
    divergence: tuple[int, str] | None = None
    clock = init.clock_ms
    execute_a, execute_b = side_a.execute_compact, side_b.execute_compact
    observe_a, observe_b, follow = outcomes_a.observe, outcomes_b.observe, costs.follow
    stopped = False
    try:
        for index, step in enumerate(steps):
            obs_a = execute_a(step)
            try:
                obs_b = execute_b(step)
            except SideStopped as exc:
                if divergence is None:
                    divergence = (index, f"step {index} {step.STEP}: {exc}")
                stopped = True
                break
            message = compare(step, obs_a, obs_b)
            if message is not None and divergence is None:
                divergence = (index, f"step {index} {step.STEP}: {message}")
            kind = type(step)
            ok_a = obs_a[1] is None
            if ok_a and kind in _CLOCK_MOVES:
                clock += step.ms  # type: ignore[union-attr]
            observe_a(step, obs_a, clock)
            observe_b(step, obs_b, clock)
            follow(step, kind, obs_a, ok_a, clock, side_a.purgatory.num_purged)
        if divergence is None and compare_final:
            divergence = _final_divergence(side_a, side_b, len(steps))
        impl_counters = _impl_counters(side_b)
    finally:
        side_a.close()
        side_b.close()
    return StreamReplay(
        outcomes_a.rows(costs.model),
        outcomes_b.rows(costs.model),
        divergence,
        costs.counters(len(steps), len(outcomes_a.ops)),
        impl_counters,
        time.perf_counter() - started,
        stopped,
    )


def _final_divergence(side_a: Side, side_b: Side, steps: int) -> tuple[int, str] | None:
    """The divergence of the two sides' states after the last of ``steps``, if any."""
    final_a, final_b = side_a.state_compact(), side_b.state_compact()
    if final_a == final_b:
        return None
    return steps, "final state: " + state_difference(State(*final_a), State(*final_b))


class _CostModels:
    """The cost models of one stream (Kafka's wheel, a per-request heap) and its peak
    and purge counts, fed from the reference side's observations step by step."""

    __slots__ = ("heap", "last_purged", "mismatches", "model", "peak_watched", "purges", "timed")

    def __init__(self, init: Init) -> None:
        self.model = WheelModel(init.tick_ms, init.wheel_size, init.start_ms)
        self.heap = HeapModel()
        self.mismatches = self.purges = self.peak_watched = self.timed = self.last_purged = 0

    def follow(
        self, step: Step, kind: type, obs_a: Compact, ok_a: bool, clock: int, purged: int
    ) -> None:
        """Feed one step's side-a observation ``obs_a`` (``ok_a``: it raised nothing) at
        virtual time ``clock``; ``purged``: side a's ``num_purged`` after the step."""
        model = self.model
        if kind is Watch and ok_a and obs_a[0] is False:
            assert isinstance(step, Watch)
            expiration = clock + step.delay_ms
            self.timed += 1
            self.heap.offer(clock, expiration)
            placed = model.add(step.operation, expiration)
            if placed == (step.operation in _expired_labels(obs_a)):
                self.mismatches += 1
        for event in obs_a[2]:
            if event[0] == "completed" and event[3] != "expiry":
                model.cancel(event[1])
        if kind is CancelForKey and ok_a:
            for label in obs_a[0]:
                model.cancel(label)
        if ok_a and kind in _DRAINS:
            fired = set(model.drain(clock))
            self.mismatches += len(fired ^ _expired_labels(obs_a))
        state_a = obs_a[4]
        if state_a is not None and state_a[2] > self.peak_watched:
            self.peak_watched = state_a[2]
        if purged > self.last_purged:  # num_purged is O(1) and exact
            self.purges += 1
            self.last_purged = purged

    def counters(self, steps: int, ops: int) -> dict[str, int]:
        """The stream's cost counters (``COUNTER_NAMES``) once every step was fed."""
        model = self.model
        heap_offers, heap_polls, peak_heap, heap_cost = self.heap.finish()
        return {
            "steps": steps,
            "ops": ops,
            "timed_ops": self.timed,
            "bucket_offers": model.bucket_offers,
            "bucket_polls": model.bucket_polls,
            "empty_bucket_polls": model.empty_polls,
            "cascades": model.cascades,
            "fired": model.fired,
            "due_at_once": model.due_at_once,
            "peak_bucket_queue": model.peak_queue,
            "bucket_queue_cost": model.queue_cost,
            "wheel_levels": len(model.levels),
            "heap_offers": heap_offers,
            "heap_polls": heap_polls,
            "peak_heap": peak_heap,
            "heap_cost": heap_cost,
            "peak_pending": model.peak_pending,
            "peak_watched": self.peak_watched,
            "purges": self.purges,
            "purged_ops": self.last_purged,
            "model_mismatches": self.mismatches,
        }


_CLOCK_MOVES: frozenset[type] = frozenset({Advance, ClockAdvance, PurgatoryAdvance})
_DRAINS: frozenset[type] = frozenset({Advance, PurgatoryAdvance})


def _impl_counters(side: Side) -> dict[str, int]:
    """Counters the implementation's timer exposes as ``stats`` (a mapping), if any."""
    stats = getattr(getattr(side.purgatory, "timer", None), "stats", None)
    if callable(stats):
        stats = stats()
    if not isinstance(stats, Mapping):
        return {}
    return {name: int(stats[name]) for name in IMPL_COUNTER_NAMES if name in stats}
