"""Workload generators: determinism, the traffic model, and what each scenario stresses."""

from __future__ import annotations

import math
import statistics

import pytest

from kpurgatory.conformance.steps import (
    CancelForKey,
    CheckAndComplete,
    ClockAdvance,
    ForceComplete,
    Init,
    PurgatoryAdvance,
    Watch,
)
from kpurgatory.pipeline.cli import GRIDS, grid_rows
from kpurgatory.pipeline.replay import replay_stream, resolve_impl
from kpurgatory.workloads import (
    PRESETS,
    SCENARIOS,
    _Draw,
    grid,
    lognormal_from_percentiles,
    stream_rng,
    stream_steps,
)

REFERENCE = resolve_impl("reference")


def test_streams_are_deterministic_and_rows_differ() -> None:
    for scenario in SCENARIOS:
        first = stream_steps(scenario, "tiny", 3, 1, 50)
        assert first == stream_steps(scenario, "tiny", 3, 1, 50)
        assert first != stream_steps(scenario, "tiny", 3, 2, 50)
        assert first != stream_steps(scenario, "tiny", 4, 1, 50)


def test_every_stream_starts_with_init_and_ends_drained() -> None:
    for scenario in SCENARIOS:
        for preset, spec in PRESETS.items():
            steps = stream_steps(scenario, preset, 1, 0, 30)
            assert isinstance(steps[0], Init)
            assert steps[0].tick_ms == spec.tick_ms
            assert steps[0].wheel_size in spec.wheel_sizes
            assert sum(isinstance(s, Watch) for s in steps) == 30
            assert isinstance(steps[-1], PurgatoryAdvance)
            assert not any(isinstance(s, Init) for s in steps[1:])


def test_default_grid_has_a_million_operations() -> None:
    rows = grid_rows("default")
    assert sum(r.n_ops for r in rows) >= 1_000_000
    assert {r.scenario for r in rows} == set(SCENARIOS)
    assert {r.preset for r in rows} == set(PRESETS)
    assert len({(r.scenario, r.preset, r.seed, r.shard) for r in rows}) == len(rows)
    assert sum(r.n_ops for r in grid_rows("small")) < 10_000
    assert set(GRIDS) == {"default", "small"}


def test_lognormal_parameters_follow_the_proposal() -> None:
    mu, sigma = lognormal_from_percentiles(20, 60)
    assert mu == pytest.approx(math.log(20))
    assert sigma == pytest.approx((math.log(60) - math.log(20)) / 0.674490)
    draw = _Draw(stream_rng("x", "y", 1, 0))
    samples = sorted(draw.lognormal_ms(20, 60) for _ in range(20_000))
    assert 18 <= statistics.median(samples) <= 21  # truncation to whole ms lowers it a bit
    assert 55 <= samples[int(0.75 * len(samples))] <= 62
    with pytest.raises(ValueError, match="p50"):
        lognormal_from_percentiles(60, 20)


def test_exponential_arrivals_keep_the_mean_rate() -> None:
    draw = _Draw(stream_rng("x", "y", 2, 0))
    gaps = [draw.exponential(0.5) for _ in range(20_000)]
    assert statistics.fmean(gaps) == pytest.approx(2.0, rel=0.05)


def _fractions(scenario: str, preset: str = "kafka") -> dict[str, float]:
    result = replay_stream(stream_steps(scenario, preset, 1, 0, 400), REFERENCE, REFERENCE)
    outcomes = [o.outcome for o in result.outcomes_a]
    return {k: outcomes.count(k) / len(outcomes) for k in ("completed", "expired", "pending")}


def test_scenarios_have_their_documented_character() -> None:
    assert _fractions("produce_acks_all")["completed"] > 0.95
    assert _fractions("fetch_long_poll")["expired"] > 0.5
    assert 0.05 < _fractions("join_group")["expired"] < 0.3
    steps = stream_steps("join_group", "kafka", 1, 0, 200)
    checks = [s for s in steps if isinstance(s, CheckAndComplete)]
    assert len(checks) < 200 / 3  # one check completes a whole group
    mixed = stream_steps("mixed_cancel", "kafka", 1, 0, 400)
    assert sum(isinstance(s, CancelForKey) for s in mixed) >= 5
    assert sum(isinstance(s, ForceComplete) for s in mixed) >= 2


def test_long_timeouts_and_adversarial_reach_deep_levels_and_corners() -> None:
    deep = replay_stream(stream_steps("long_timeouts", "tiny", 1, 0, 200), REFERENCE, REFERENCE)
    assert deep.counters["wheel_levels"] >= 8
    assert deep.counters["cascades"] > deep.counters["timed_ops"]
    steps = stream_steps("adversarial", "kafka", 1, 0, 400)
    watches = [s for s in steps if isinstance(s, Watch)]
    assert any(s.delay_ms >= 2**31 for s in watches)
    assert any(s.delay_ms <= 0 for s in watches)
    assert any(s.ready_on_try == 2 for s in watches)
    assert any(len(set(s.keys)) < len(s.keys) for s in watches)
    assert any(isinstance(s, ClockAdvance) for s in steps)
    assert any(isinstance(s, PurgatoryAdvance) and s.ms == 0 for s in steps)


def test_bad_rows_are_refused_with_the_argument_named() -> None:
    with pytest.raises(ValueError, match="scenario"):
        stream_steps("nope", "kafka", 1, 0, 5)
    with pytest.raises(ValueError, match="preset"):
        stream_steps("join_group", "nope", 1, 0, 5)
    with pytest.raises(ValueError, match="n_ops"):
        stream_steps("join_group", "kafka", 1, 0, 0)
    with pytest.raises(ValueError, match="shards"):
        grid(shards=0)
    with pytest.raises(ValueError, match="grid"):
        grid_rows("huge")
