"""What the committed vectors cover for a port: timer-only vectors, negative clocks, rule tags.

- a port of the timer alone (``--timer-only``) gets at least 30 vectors;
- a negative clock reading has a vector, and a port whose division truncates toward
  zero (the kit's model of Kafka with ``kafka-truncating-division``, R1) fails it;
- the timer vectors are generated (``kpurgatory.conformance.timer_streams``) and the
  committed ones are current;
- each vector's rule tags name the rule a port that misses it breaks: a port without
  R61's let-go at idle (planted in the Python port) fails vectors whose tags all name
  R61, the first one included.
"""

from __future__ import annotations

from pathlib import Path

from kpurgatory import optimized
from kpurgatory.conformance.adapter import DEFAULT_VECTORS_DIR, step_kinds, vector_paths
from kpurgatory.conformance.differences import Judge
from kpurgatory.conformance.driver import DriverSide, compare_observations, run_steps
from kpurgatory.conformance.kafka_model import kafka_model
from kpurgatory.conformance.steps import TIMER_STEP_KINDS
from kpurgatory.conformance.vectors import load_vector, timer_vectors, vector_steps
from tests.conformance.ports.catalog import PortBug, _edit, planted
from tests.support import needs_python_source

VECTOR_FILES = vector_paths([DEFAULT_VECTORS_DIR])

NO_LET_GO = PortBug(
    "no-let-go",
    "purge",
    "The purgatory never lets finished operations go when none is left unfinished (R61).",
    (
        _edit(
            "no-let-go",
            "kpurgatory.optimized.purgatory",
            "DelayedOperationPurgatory._idle",
            "        if self._unfinished or not self._purge_when_idle:\n",
            "        if True:\n",
        ),
    ),
)
"""A port that follows a checklist without R61: finished operations linger until a purge."""


def _timer_only(path: Path) -> bool:
    steps, _ = vector_steps(load_vector(path))
    return set().union(*map(step_kinds, steps)) <= TIMER_STEP_KINDS


def test_a_timer_only_port_gets_at_least_thirty_vectors() -> None:
    assert sum(_timer_only(path) for path in VECTOR_FILES) >= 30


def test_the_committed_timer_vectors_are_current() -> None:
    vectors = timer_vectors()
    assert len(vectors) >= 12
    for vector in vectors:
        assert load_vector(DEFAULT_VECTORS_DIR / f"{vector['name']}.json") == vector


def test_a_port_with_truncating_division_fails_the_negative_clock_vector() -> None:
    path = DEFAULT_VECTORS_DIR / "r01-negative-clock.json"
    assert _timer_only(path)
    steps, expected = vector_steps(load_vector(path))
    assert steps[0].clock_ms < 0  # type: ignore[union-attr]
    truncating = run_steps(kafka_model(frozenset({"kafka-truncating-division"})), steps)
    assert any(
        compare_observations(want, got) is not None
        for want, got in zip(expected, truncating, strict=True)
    )
    assert run_steps(optimized, steps) == expected


@needs_python_source()
def test_a_port_without_the_let_go_fails_vectors_whose_tags_name_r61() -> None:
    failed: list[tuple[str, list[str]]] = []
    with planted(NO_LET_GO):
        for path in VECTOR_FILES:
            vector = load_vector(path)
            steps, expected = vector_steps(vector)
            judge, side = Judge(()), DriverSide(optimized)
            try:
                for step, expect in zip(steps, expected, strict=True):
                    message, _ = judge.judge(step, expect, side.execute(step))
                    if message is not None:
                        failed.append((vector["name"], vector["rules"]))
                        break
            finally:
                side.close()
                judge.close()
    assert len(failed) >= 20, failed
    assert "R61" in failed[0][1], failed[0]  # the first failure the report shows
    untagged = [name for name, rules in failed if "R61" not in rules]
    assert not untagged, untagged
