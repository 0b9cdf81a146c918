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

The Spark job calls this inside its executors; ``kpurgatory replay`` calls it locally to
reproduce a counterexample; the tests compare the two row for row.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from kpurgatory.conformance.driver import (
    PUBLIC_API,
    Driver,
    Observation,
    compare_observations,
    state_difference,
)
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
    "OpOutcome",
    "StreamReplay",
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


class _Outcomes:
    """Tracks each operation's outcome from one run's observations."""

    def __init__(self) -> None:
        self.ops: dict[str, list[Any]] = {}

    def observe(self, step: Step, obs: Observation, clock: int) -> None:
        if isinstance(step, Watch) and step.operation not in self.ops:
            self.ops[step.operation] = [clock, step.delay_ms, "pending", None, None]
        for recorded in obs.events:
            event = recorded.event
            if event.kind == "completed":
                record = self.ops.get(event.operation)
                if record is not None:
                    record[2:5] = ["completed", event.at_ms, event.via]
            elif event.kind == "expired":
                record = self.ops.get(event.operation)
                if record is not None:
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


def _expired_labels(obs: Observation) -> set[str]:
    return {r.event.operation for r in obs.events if r.event.kind == "expired"}


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
    """
    if not steps or not isinstance(steps[0], Init):
        raise ValueError("steps must start with an init step")
    started = time.perf_counter()
    init = steps[0]
    driver_a = Driver(impl_a, state_every=state_every)
    driver_b = Driver(impl_b, state_every=state_every)
    model = WheelModel(init.tick_ms, init.wheel_size, init.start_ms)
    heap = HeapModel()
    outcomes_a, outcomes_b = _Outcomes(), _Outcomes()
    divergence: tuple[int, str] | None = None
    clock = init.clock_ms
    mismatches = purges = peak_watched = timed = 0
    last_purged = 0
    try:
        for index, step in enumerate(steps):
            obs_a = driver_a.execute(step)
            obs_b = driver_b.execute(step)
            if divergence is None:
                message = compare_observations(obs_a, obs_b)
                if message is not None:
                    divergence = (index, f"step {index} {step.STEP}: {message}")
            if obs_a.raised is None and isinstance(step, Advance | ClockAdvance | PurgatoryAdvance):
                clock += step.ms
            outcomes_a.observe(step, obs_a, clock)
            outcomes_b.observe(step, obs_b, clock)
            # -- the cost models follow the reference side's observations
            if isinstance(step, Watch) and obs_a.raised is None and obs_a.result is False:
                expiration = clock + step.delay_ms
                timed += 1
                heap.offer(clock, expiration)
                placed = model.add(step.operation, expiration)
                if placed == (step.operation in _expired_labels(obs_a)):
                    mismatches += 1
            for recorded in obs_a.events:
                event = recorded.event
                if event.kind == "completed" and event.via != "expiry":
                    model.cancel(event.operation)
            if isinstance(step, CancelForKey) and obs_a.raised is None:
                for label in obs_a.result:
                    model.cancel(label)
            if isinstance(step, Advance | PurgatoryAdvance) and obs_a.raised is None:
                fired = set(model.drain(clock))
                mismatches += len(fired ^ _expired_labels(obs_a))
            if obs_a.state is not None:
                peak_watched = max(peak_watched, obs_a.state.watched)
            purged = driver_a.purgatory.num_purged  # O(1): exact purge count
            if purged > last_purged:
                purges += 1
                last_purged = purged
        if divergence is None:
            final_a, final_b = driver_a.state(), driver_b.state()
            if final_a != final_b:
                divergence = (len(steps), "final state: " + state_difference(final_a, final_b))
        impl_counters = _impl_counters(driver_b)
    finally:
        driver_a.close()
        driver_b.close()
    heap_offers, heap_polls, peak_heap, heap_cost = heap.finish()
    counters = {
        "steps": len(steps),
        "ops": len(outcomes_a.ops),
        "timed_ops": timed,
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
        "peak_watched": peak_watched,
        "purges": purges,
        "purged_ops": last_purged,
        "model_mismatches": mismatches,
    }
    return StreamReplay(
        outcomes_a.rows(model),
        outcomes_b.rows(model),
        divergence,
        counters,
        impl_counters,
        time.perf_counter() - started,
    )


def _impl_counters(driver: Driver) -> dict[str, int]:
    """Counters the implementation's timer exposes as ``stats`` (a mapping), if any."""
    stats = getattr(driver.purgatory.timer, "stats", None)
    if callable(stats):
        stats = stats()
    if not isinstance(stats, Mapping):
        return {}
    return {name: int(stats[name]) for name in IMPL_COUNTER_NAMES if name in stats}
