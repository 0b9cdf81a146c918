"""Workloads: the scenario x preset x seed x shard grid, and each row's step stream.

Every grid row names a *stream*: ``(scenario, preset, seed, shard, n_ops)``. The stream
expands deterministically from those values (``stream_steps``) into a list of steps of
the conformance step language (``kpurgatory.conformance.steps``), so the Spark job, the
local ``kpurgatory replay`` command and the vector exporter all see the same calls.

It lives at the top of the package, not in ``kpurgatory.pipeline``, because both the
pipeline and the conformance kit (``kpurgatory.conformance.vectors``) use it, and the kit
must not depend on the Spark package (tests/test_layering.py enforces the direction).

Traffic follows the Purgatory Redesign Proposal's benchmark model (TestPurgatoryPerformance):
exponential inter-arrival times at a given rate, with the fractional part carried so the
mean rate is kept; a completion latency drawn from a log-normal given its 50th and 75th
percentiles (mu = ln(p50), sigma = (ln(p75) - mu) / 0.674490), truncated to whole ms. An
operation whose latency is below its timeout becomes ready at arrival + latency, and a
``check_and_complete`` on one of its keys then completes it; the others expire.

Randomness: one ``random.Random`` per stream, seeded from a SHA-256 of the row, and only
``Random.random()`` is used (its Mersenne Twister sequence is stable across CPython
versions; the distributions are computed here, not by ``random``'s helpers), so a row
gives the same stream on every machine and Python 3.x.

Scenarios (each a small generator below): ``produce_acks_all``, ``fetch_long_poll``,
``join_group``, ``mixed_cancel``, ``long_timeouts``, ``adversarial``. Presets: ``tiny``
(wheel of 2 to 4 buckets: reaches deep overflow levels), ``kafka`` (tick 1 ms, wheel 20),
``tick5`` and ``tick10_tiny`` (tick > 1, unaligned start).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kpurgatory.steps import (
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    Key,
    PurgatoryAdvance,
    SetReady,
    Step,
    Watch,
)

__all__ = [
    "GENERATOR_VERSION",
    "PRESETS",
    "SCENARIOS",
    "GridRow",
    "Preset",
    "grid",
    "lognormal_from_percentiles",
    "stream_rng",
    "stream_steps",
]

GENERATOR_VERSION = "1"
"""Bumped whenever a generator changes the streams it produces for the same row."""

Z75 = 0.674490
"""The 75th percentile of the standard normal distribution."""


@dataclass(frozen=True)
class Preset:
    """Timer and purgatory parameters of a stream (the ``init`` step)."""

    name: str
    tick_ms: int
    wheel_sizes: tuple[int, ...]
    start_ms: int
    purge_interval: int
    description: str

    def init(self, seed: int) -> Init:
        """The ``init`` step for ``seed`` (the wheel size cycles through ``wheel_sizes``)."""
        wheel = self.wheel_sizes[seed % len(self.wheel_sizes)]
        return Init(
            tick_ms=self.tick_ms,
            wheel_size=wheel,
            start_ms=self.start_ms,
            clock_ms=self.start_ms,
            purge_interval=self.purge_interval,
        )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("tiny", 1, (2, 3, 4), 0, 10, "tick 1 ms, 2-4 buckets: deep overflow levels"),
        Preset("kafka", 1, (20,), 0, 1000, "Kafka's defaults: tick 1 ms, 20 buckets"),
        Preset("tick5", 5, (8,), 1_000_003, 100, "tick 5 ms, 8 buckets, unaligned start"),
        Preset("tick10_tiny", 10, (3,), 7, 25, "tick 10 ms, 3 buckets, unaligned start"),
    )
}
"""The presets by name."""


@dataclass(frozen=True)
class GridRow:
    """One stream of the grid."""

    scenario: str
    preset: str
    seed: int
    shard: int
    n_ops: int


def grid(
    scenarios: Sequence[str] | None = None,
    presets: Sequence[str] | None = None,
    seeds: Sequence[int] = (1,),
    shards: int = 1,
    n_ops: int = 2000,
) -> list[GridRow]:
    """Every combination of scenario, preset, seed and shard, with ``n_ops`` operations each.

    ``ValueError`` for an unknown scenario or preset, ``shards < 1`` or ``n_ops < 1``.
    """
    scenario_names = list(SCENARIOS) if scenarios is None else list(scenarios)
    preset_names = list(PRESETS) if presets is None else list(presets)
    for name in scenario_names:
        if name not in SCENARIOS:
            raise ValueError(f"scenarios: unknown scenario {name!r}; known: {sorted(SCENARIOS)}")
    for name in preset_names:
        if name not in PRESETS:
            raise ValueError(f"presets: unknown preset {name!r}; known: {sorted(PRESETS)}")
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    if n_ops < 1:
        raise ValueError(f"n_ops must be >= 1, got {n_ops}")
    return [
        GridRow(scenario, preset, seed, shard, n_ops)
        for scenario in scenario_names
        for preset in preset_names
        for seed in seeds
        for shard in range(shards)
    ]


def stream_rng(scenario: str, preset: str, seed: int, shard: int) -> random.Random:
    """The stream's random source, seeded from a SHA-256 of the row (stable everywhere)."""
    digest = hashlib.sha256(f"{scenario}/{preset}/{seed}/{shard}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def lognormal_from_percentiles(p50: float, p75: float) -> tuple[float, float]:
    """``(mu, sigma)`` of the log-normal whose median is ``p50`` and 75th percentile ``p75``."""
    if not 0 < p50 < p75:
        raise ValueError(f"need 0 < p50 < p75, got p50={p50}, p75={p75}")
    mu = math.log(p50)
    return mu, (math.log(p75) - mu) / Z75


class _Draw:
    """The distributions the generators use, all from ``Random.random()``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def uniform(self) -> float:
        return self.rng.random()

    def below(self, n: int) -> int:
        """An int in ``[0, n)``."""
        return min(int(self.rng.random() * n), n - 1)

    def between(self, low: int, high: int) -> int:
        """An int in ``[low, high]``."""
        return low + self.below(high - low + 1)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def exponential(self, rate_per_ms: float) -> float:
        """An exponential inter-arrival time in ms: ``-ln(1 - U) / rate``."""
        return -math.log(1.0 - self.rng.random()) / rate_per_ms

    def normal(self) -> float:
        """A standard normal draw (Box-Muller, one value per pair of uniforms)."""
        u1 = 1.0 - self.rng.random()  # in (0, 1]
        u2 = self.rng.random()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    def lognormal_ms(self, p50: float, p75: float) -> int:
        """A completion latency in whole ms (truncated, as TestPurgatoryPerformance does)."""
        mu, sigma = lognormal_from_percentiles(p50, p75)
        return int(math.exp(mu + sigma * self.normal()))


class _Arrivals:
    """Poisson arrivals in whole ms; the fractional remainder is carried (mean rate kept)."""

    def __init__(self, draw: _Draw, rate_per_ms: float, start_ms: int) -> None:
        self.draw = draw
        self.rate = rate_per_ms
        self.time = float(start_ms)

    def next(self) -> int:
        self.time += self.draw.exponential(self.rate)
        return int(self.time)


@dataclass(order=True)
class _Action:
    """A timed action of the timeline; ``seq`` keeps insertion order among equal times."""

    time: int
    seq: int
    steps: tuple[Step, ...] = field(compare=False)
    jump: bool = field(default=False, compare=False)


class _Timeline:
    """Turns timed actions into steps, letting time pass with ``purgatory_advance``.

    Between two action times the generator emits one ``purgatory_advance(gap)`` (the
    timer drains everything due, then the purge check runs). The due time of every
    operation that is not scheduled to complete is an action time too (for half of the
    adversarial ones), so drains happen where a reaper on a real clock would wake and an
    expiry is observed exactly when it is due. A ``jump`` action moves the
    clock with ``clock_advance`` instead, without draining (R2/R3 corner cases). At the
    end one advance drains everything still scheduled.
    """

    def __init__(self, init: Init) -> None:
        self.init = init
        self.actions: list[_Action] = []
        self.seq = 0
        self.max_deadline = init.clock_ms

    def at(self, time: int, *steps: Step, jump: bool = False) -> None:
        self.seq += 1
        heapq.heappush(self.actions, _Action(time, self.seq, steps, jump))

    def watch(self, time: int, step: Watch, *, drain_at_due: bool = True) -> None:
        """Submit ``step`` at ``time``; with ``drain_at_due`` also let time pass to its due
        time (a reaper on a real clock wakes at the earliest due time, R7), so an expiry
        is observed exactly when it is due, and a late or early one shows."""
        deadline = time + step.delay_ms
        self.max_deadline = max(self.max_deadline, deadline)
        self.at(time, step)
        due = deadline - deadline % self.init.tick_ms
        if drain_at_due and due > time:
            self.at(due)

    def steps(self) -> list[Step]:
        out: list[Step] = [self.init]
        now = self.init.clock_ms
        while self.actions:
            action = heapq.heappop(self.actions)
            if action.time > now:
                gap = action.time - now
                out.append(ClockAdvance(gap) if action.jump else PurgatoryAdvance(gap))
                now = action.time
            out.extend(action.steps)
        final = max(self.max_deadline - now, 0) + self.init.tick_ms
        out.append(PurgatoryAdvance(final))
        return out


def _op(index: int) -> str:
    return f"op{index}"


def _timed_request(
    line: _Timeline,
    draw: _Draw,
    arrival: int,
    step: Watch,
    p50: float,
    p75: float,
) -> None:
    """Watch ``step`` at ``arrival`` and complete it later if its latency beats its timeout.

    The latency is log-normal (``p50``, ``p75``). A request that will complete becomes
    ready at ``arrival + latency`` and a ``check_and_complete`` on one of its keys
    completes it; one that will not gets a drain at its due time instead.
    """
    latency = draw.lognormal_ms(p50, p75)
    completes = latency < step.delay_ms
    line.watch(arrival, step, drain_at_due=not completes)
    if completes:
        key = step.keys[draw.below(len(step.keys))]
        line.at(arrival + latency, SetReady(step.operation), CheckAndComplete(key))


# ---- the scenarios ---------------------------------------------------------------------


def _produce_acks_all(draw: _Draw, init: Init, n_ops: int) -> list[Step]:
    """acks=all produce: most complete well before the timeout; several partitions each.

    Rate 0.5 requests/ms, timeout 1000 ms, latency p50 20 / p75 60 ms (the proposal's
    low-timeout case), 1-3 partition keys out of 16 (duplicates possible). The replica
    fetch that completes a request calls ``check_and_complete`` on one of its partitions.
    """
    line = _Timeline(init)
    arrivals = _Arrivals(draw, 0.5, init.clock_ms)
    for index in range(n_ops):
        t = arrivals.next()
        keys = tuple(f"p{draw.below(16)}" for _ in range(draw.between(1, 3)))
        label = _op(index)
        _timed_request(line, draw, t, Watch(label, 1000, keys), 20, 60)
    return line.steps()


def _fetch_long_poll(draw: _Draw, init: Init, n_ops: int) -> list[Step]:
    """Long-poll fetches: most expire (data rarely arrives within max.wait 500 ms).

    Rate 0.2 requests/ms, timeout 500 ms, latency p50 800 / p75 2000 ms (about 64 %
    expire), 1-2 integer partition keys out of 8.
    """
    line = _Timeline(init)
    arrivals = _Arrivals(draw, 0.2, init.clock_ms)
    for index in range(n_ops):
        t = arrivals.next()
        keys = tuple(draw.below(8) for _ in range(draw.between(1, 2)))
        label = _op(index)
        _timed_request(line, draw, t, Watch(label, 500, keys), 800, 2000)
    return line.steps()


def _join_group(draw: _Draw, init: Init, n_ops: int) -> list[Step]:
    """Group joins: many operations on one key, completed together by one call.

    Groups of 3-12 members arrive at 0.3 members/ms, each watching ``group-<g>`` with the
    rebalance timeout 300 ms. About 10 % of members never become ready (they expire).
    The group completes at the last arrival plus a log-normal delay (p50 5 / p75 20 ms):
    every ready member is marked ready, then one ``check_and_complete`` completes them.
    """
    line = _Timeline(init)
    arrivals = _Arrivals(draw, 0.3, init.clock_ms)
    index = 0
    group = 0
    while index < n_ops:
        size = min(draw.between(3, 12), n_ops - index)
        key = f"group-{group}"
        members: list[str] = []
        last = 0
        for _ in range(size):
            last = arrivals.next()
            label = _op(index)
            index += 1
            line.watch(last, Watch(label, 300, (key,)))
            if not draw.chance(0.1):
                members.append(label)
        done = last + draw.lognormal_ms(5, 20)
        line.at(done, *(SetReady(m) for m in members), CheckAndComplete(key))
        group += 1
    return line.steps()


def _mixed_cancel(draw: _Draw, init: Init, n_ops: int) -> list[Step]:
    """Produce-like traffic on 4 hot keys plus ``cancel_for_key`` storms and force completes.

    Rate 0.5/ms, timeout 400 ms, latency p50 30 / p75 120 ms, 1-2 of keys ``h0``-``h3`` plus
    an own key. Every ~25 arrivals a storm cancels one hot key (its operations leave the
    timer and that key, R29, but stay on their other keys); ~2 % are force-completed.
    """
    line = _Timeline(init)
    arrivals = _Arrivals(draw, 0.5, init.clock_ms)
    for index in range(n_ops):
        t = arrivals.next()
        label = _op(index)
        keys = (*(f"h{draw.below(4)}" for _ in range(draw.between(1, 2))), f"own{index}")
        _timed_request(line, draw, t, Watch(label, 400, keys), 30, 120)
        if draw.chance(0.04):
            line.at(t + draw.below(50), CancelForKey(f"h{draw.below(4)}"))
        if draw.chance(0.02):
            line.at(t + draw.below(300), ForceComplete(label))
    return line.steps()


def _long_timeouts(draw: _Draw, init: Init, n_ops: int) -> list[Step]:
    """Deadlines several overflow levels up: timeouts log-uniform in [1 s, 500 s].

    Sparse arrivals (0.002/ms) keep the pending set small; latency p50 50 s / p75 200 s,
    so about half complete, often after cascading down several levels.
    """
    line = _Timeline(init)
    arrivals = _Arrivals(draw, 0.002, init.clock_ms)
    for index in range(n_ops):
        t = arrivals.next()
        timeout = int(math.exp(math.log(1000) + draw.uniform() * math.log(500)))
        label = _op(index)
        keys: tuple[Key, ...] = (f"k{draw.below(32)}",)
        _timed_request(line, draw, t, Watch(label, timeout, keys), 50_000, 200_000)
    return line.steps()


def _adversarial(draw: _Draw, init: Init, n_ops: int) -> list[Step]:
    """Edge cases on purpose, in random episodes of about 10 operations.

    - exact multiples of wheel spans (``tick * wheel^level``, level 0-5), +/- one tick;
    - bursts: many operations arriving on the same tick with the same deadline;
    - clock jumps: ``clock_advance`` (no drain), then arrivals, then ``purgatory_advance(0)``
      (R2/R3: due on the clock but after the timer's current time);
    - huge delays (2^31, 2^40), zero and negative delays (due at once, expire in ``watch``);
    - operations ready on their first or second try, duplicate keys, ``force_complete``,
      ``cancel_for_key`` and ``check_and_complete`` on keys nobody watches.
    """
    tick, wheel = init.tick_ms, init.wheel_size
    line = _Timeline(init)
    t = init.clock_ms
    index = 0
    while index < n_ops:
        episode = draw.below(5)
        t += draw.below(3 * tick * wheel) + 1
        count = min(draw.between(4, 16), n_ops - index)
        jump = draw.between(1, tick * wheel**2)
        if episode == 3:  # the clock jumps (no drain) just before this episode's arrivals
            t += 2 * tick * wheel + jump
            line.at(t, jump=True)
        for _ in range(count):
            label = _op(index)
            index += 1
            key: Key = f"a{draw.below(6)}"
            keys: tuple[Key, ...] = (key, key) if draw.chance(0.2) else (key, draw.below(3))
            if episode == 0:  # wheel-span multiples
                level = draw.below(6)
                delay = tick * wheel**level * draw.between(1, wheel) + tick * draw.between(-1, 1)
                arrival = t + draw.below(tick * wheel)
            elif episode == 1:  # burst on one tick
                delay = tick * draw.between(1, 3 * wheel)
                arrival = t
            elif episode == 2:  # huge, zero and negative delays
                delay = (2**31, 2**40 + 7, 0, -draw.between(1, 5 * tick), tick - 1)[draw.below(5)]
                arrival = t + draw.below(tick * 4)
            elif episode == 3:  # due on the clock, after the stale current time (R3)
                delay = draw.between(-jump, tick * wheel)
                arrival = t
            else:
                delay = draw.between(1, tick * wheel**3)
                arrival = t + draw.below(2 * tick * wheel)
            ready = draw.chance(0.1)
            ready_on_try = 2 if not ready and draw.chance(0.15) else None
            watch = Watch(label, delay, keys, ready, ready_on_try)
            line.watch(arrival, watch, drain_at_due=draw.chance(0.5))
            if draw.chance(0.4) and delay > 0:
                line.at(arrival + draw.below(delay + tick), SetReady(label), CheckAndComplete(key))
            elif draw.chance(0.1):
                line.at(arrival + draw.below(tick * wheel), ForceComplete(label))
        if episode == 3:
            line.at(t, PurgatoryAdvance(0))
        if episode == 4:
            line.at(t + draw.below(tick * wheel), CancelForKey(f"a{draw.below(6)}"))
            line.at(t + draw.below(tick * wheel), CheckAndComplete("nobody"))
    return line.steps()


SCENARIOS: dict[str, Callable[[_Draw, Init, int], list[Step]]] = {
    "produce_acks_all": _produce_acks_all,
    "fetch_long_poll": _fetch_long_poll,
    "join_group": _join_group,
    "mixed_cancel": _mixed_cancel,
    "long_timeouts": _long_timeouts,
    "adversarial": _adversarial,
}
"""The scenario generators by name (each documents its traffic in its docstring)."""


def stream_steps(scenario: str, preset: str, seed: int, shard: int, n_ops: int) -> list[Step]:
    """The step stream of one grid row: ``init`` first, then the scenario's traffic.

    Deterministic in its arguments. ``ValueError`` for an unknown scenario or preset or
    ``n_ops < 1``.
    """
    generator = SCENARIOS.get(scenario)
    if generator is None:
        raise ValueError(f"scenario: unknown scenario {scenario!r}; known: {sorted(SCENARIOS)}")
    chosen = PRESETS.get(preset)
    if chosen is None:
        raise ValueError(f"preset: unknown preset {preset!r}; known: {sorted(PRESETS)}")
    if n_ops < 1:
        raise ValueError(f"n_ops must be >= 1, got {n_ops}")
    draw = _Draw(stream_rng(scenario, preset, seed, shard))
    return generator(draw, chosen.init(seed), n_ops)
