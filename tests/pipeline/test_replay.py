"""Differential replay without Spark, the mutant it must catch, and ``kpurgatory replay``."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kpurgatory import reference
from kpurgatory.cli import main
from kpurgatory.conformance.driver import PUBLIC_API
from kpurgatory.pipeline.replay import replay_stream, resolve_impl
from kpurgatory.pipeline.reproduce import replay
from kpurgatory.pipeline.rows import replay_rows
from kpurgatory.workloads import PRESETS, SCENARIOS, stream_steps
from tests.support import implementation_names

REFERENCE = resolve_impl("reference")
MUTANT = "tests.pipeline.mutants"


@pytest.mark.parametrize("impl_name", implementation_names())
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_agrees_with_the_reference(scenario: str, impl_name: str) -> None:
    """R1-R34 as exercised by the workloads: no divergence, and the cost model matches."""
    for preset in PRESETS:
        steps = stream_steps(scenario, preset, 5, 0, 60)
        result = replay_stream(steps, REFERENCE, resolve_impl(impl_name), state_every=1)
        assert result.divergence is None
        assert result.outcomes_a == result.outcomes_b
        assert result.counters["model_mismatches"] == 0
        assert result.counters["ops"] == 60


def test_r5_a_timer_draining_one_tick_late_is_caught() -> None:
    steps = stream_steps("fetch_long_poll", "kafka", 1, 0, 40)
    result = replay_stream(steps, REFERENCE, resolve_impl(MUTANT))
    assert result.divergence is not None
    index, why = result.divergence
    assert steps[index].STEP == "purgatory_advance"
    assert "events differ" in why
    assert result.outcomes_a != result.outcomes_b


def test_outcomes_record_completion_expiry_and_time() -> None:
    result = replay_stream(stream_steps("fetch_long_poll", "kafka", 1, 0, 50), REFERENCE, REFERENCE)
    expired = [o for o in result.outcomes_a if o.outcome == "expired"]
    completed = [o for o in result.outcomes_a if o.outcome == "completed"]
    assert expired and completed
    for o in expired:  # R1: due time = deadline rounded down; drained exactly then (tick 1)
        assert o.at_ms == o.arrival_ms + o.delay_ms
        assert o.via == "expiry"
        assert o.level is not None and o.level >= 0
    for o in completed:
        assert o.via == "check_and_complete"
        assert o.at_ms is not None and o.arrival_ms <= o.at_ms < o.arrival_ms + o.delay_ms


def test_replay_rows_lay_out_both_tables() -> None:
    pair = ("reference", REFERENCE)
    columns = replay_rows([("join_group", "tiny", 1, 0, 20)], pair, pair)
    kinds = columns["kind"]
    assert kinds.count("outcome") == 40 and kinds.count("stream") == 1
    assert set(columns["side"]) == {"a", "b", None}
    stream_index = kinds.index("stream")
    assert columns["divergence_step"][stream_index] is None
    assert columns["ops"][stream_index] == 20


def test_resolve_impl_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"impl 'no\.such\.module'"):
        resolve_impl("no.such.module")
    with pytest.raises(ValueError, match="does not export"):
        resolve_impl("kpurgatory.clock")


def test_replay_command_reports_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["replay", "--scenario", "join_group", "--preset", "tiny", "--seed", "2", "--ops", "30"]
    )
    assert code == 0
    assert "no divergence" in capsys.readouterr().out


def test_replay_command_prints_the_first_divergence(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--scenario", "fetch_long_poll", "--preset", "kafka", "--seed", "1", "--ops", "40"]
    code = main(["replay", *args, "--impl", MUTANT])
    out = capsys.readouterr().out
    assert code == 1
    assert "FIRST DIVERGENCE at step" in out
    assert "expected (reference)" in out and f"actual   ({MUTANT})" in out
    status, lines = replay("fetch_long_poll", "kafka", 1, 0, 40, MUTANT, "reference")
    assert status == 1 and lines[1] in out


def test_run_command_refuses_an_unknown_implementation_before_spark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["pipeline", "run", "--grid", "small", "--impl-b", "no.such.module"]) == 2
    assert "kpurgatory pipeline run: impl 'no.such.module'" in capsys.readouterr().err


def test_vectors_command_writes_the_committed_vectors(tmp_path: Path) -> None:
    committed = Path(__file__).resolve().parents[2] / "conformance" / "vectors"
    code = main(["pipeline", "vectors", "--out", str(tmp_path), "--scenario", "join_group"])
    assert code == 0
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert "join_group-tiny-s1-n12.json" in written and "r30-purge.json" in written
    for name in written:
        assert (tmp_path / name).read_text() == (committed / name).read_text()


def test_r25_a_miscounting_check_and_complete_is_caught_by_the_step_comparison() -> None:
    steps = stream_steps("join_group", "kafka", 1, 0, 40)
    result = replay_stream(steps, REFERENCE, resolve_impl("tests.pipeline.mutant_count"))
    assert result.outcomes_a == result.outcomes_b  # invisible to the outcome join
    assert result.divergence is not None
    index, why = result.divergence
    assert steps[index].STEP == "check_and_complete"
    assert why.startswith(f"step {index} check_and_complete: result: expected")


class _OvercountingPurgatory(reference.DelayedOperationPurgatory[reference.DelayedOperation]):
    """Reports one purged operation too many once it has purged any (state only)."""

    @property
    def num_purged(self) -> int:
        purged = super().num_purged
        return purged + 1 if purged else 0


def test_a_state_difference_between_sampled_steps_is_caught_at_the_end() -> None:
    """States are read every ``state_every`` steps only; the final states are compared too."""
    mutant = types.ModuleType("overcounting_purges")
    vars(mutant).update(
        {name: getattr(reference, name) for name in PUBLIC_API},
        DelayedOperationPurgatory=_OvercountingPurgatory,
    )
    steps = stream_steps("produce_acks_all", "tiny", 1, 0, 60)
    result = replay_stream(steps, REFERENCE, mutant, state_every=len(steps) + 1)
    assert result.divergence is not None
    index, why = result.divergence
    assert index == len(steps)
    assert why == "final state: num_purged: expected 38, got 39"
