"""The asyncio cost benchmark does the work it claims (its figures are never asserted)."""

from __future__ import annotations

import pytest

from kpurgatory.bench import aiocost


@pytest.mark.parametrize("mechanism", aiocost.MECHANISMS)
@pytest.mark.parametrize("outcome", ["completed", "expired"])
def test_every_mechanism_waits_and_answers(mechanism: str, outcome: str) -> None:
    """Each round checks its results itself (all answered, or all expired)."""
    assert aiocost.cpu_per_wait(mechanism, 50, outcome, rounds=1) > 0


@pytest.mark.parametrize("mechanism", aiocost.MECHANISMS)
def test_memory_per_pending_wait_counts_something(mechanism: str) -> None:
    size, objects = aiocost.memory_per_wait(mechanism, 200)
    assert size > 0 and objects >= 1


def test_heartbeat_lag_records_beats() -> None:
    figures = aiocost.heartbeat_lag("aio wait", 200, 0.05, offset_s=0.2)
    assert figures["beats"] >= 1 and figures["max_ms"] >= figures["p99_ms"] >= 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="outcome"):
        aiocost.cpu_per_wait("aio wait", 1, "late", rounds=1)
    with pytest.raises(ValueError, match="mechanism"):
        aiocost.cpu_per_wait("heap", 1, "completed", rounds=1)


@pytest.mark.parametrize("mechanism", ["future+call_at", "aio wait"])
def test_lag_after_a_pause_waits_for_every_expiry(mechanism: str) -> None:
    figures = aiocost.lag_after_pause(mechanism, 100, max_hand_overs=8, due_s=0.2)
    assert figures["max_cpu_between_beats_ms"] >= 0
    assert figures["max_ms"] >= 0 and figures["beats"] >= 1


def test_the_pyperf_group_times_every_mechanism_and_outcome() -> None:
    """``kpurgatory bench`` asks the CPU question through pyperf: 4 mechanisms x 2
    outcomes, each a time function of (loops, mechanism, outcome, waits)."""
    from kpurgatory.bench import suite

    found = suite.benchmarks("quick", "asyncio-wait")
    assert sorted(meta["design"] for *_, meta in found) == sorted(
        f"{m}|{o}" for m in aiocost.MECHANISMS for o in aiocost.OUTCOMES
    )
    _name, function, arguments, _meta = found[0]
    assert function(1, arguments[0], arguments[1], 50) > 0
    with pytest.raises(ValueError, match="outcome"):
        aiocost.wait_cpu_time(1, "aio wait", "late", 1)


def test_a_failed_child_is_recorded_not_raised() -> None:
    """A set-up slower than its offset (here none at all) gives a row with its error,
    so one failed mechanism does not lose the rest of a long run."""
    row = aiocost._run_child("lag", "aio wait", 2000, ["--seconds=0.01", "--offset-s=0"])
    assert row["what"] == "lag" and row["error"].startswith("RuntimeError: setting up 2000")
