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
    assert figures["max_ms"] >= 0 and figures["beats"] >= 1
