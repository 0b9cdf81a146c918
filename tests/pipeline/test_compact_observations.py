"""The replay's compact observations are the kit's observations, and a wrong one is caught.

The pipeline replays with the kit's ``Driver`` and compares its ``Compact`` form (plain
tuples, ``execute_compact``); the kit's ``Observation`` objects are built from the same
record only when a pair differs. For every scenario and preset, on both implementations
and on a mutant, the two forms of each step turn into each other and into the JSON the
vectors carry. Two planted driver bugs (a wrong cause of completion, a lost try count)
make the committed vectors fail, so a driver that observes wrongly cannot pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kpurgatory.conformance.driver import Compact, Driver, Observation, StepError, first_divergence
from kpurgatory.conformance.observation import compact, to_observation
from kpurgatory.conformance.steps import Add, Init, SetReady, Step, Watch
from kpurgatory.conformance.vectors import conformance_root, load_vector, vector_steps
from kpurgatory.pipeline.replay import resolve_impl
from kpurgatory.workloads import PRESETS, SCENARIOS, stream_steps

IMPLS = ("reference", "optimized", "tests.pipeline.mutants")


@pytest.mark.parametrize("impl_name", IMPLS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_compact_observations_are_the_kits_on_every_preset(scenario: str, impl_name: str) -> None:
    impl = resolve_impl(impl_name)
    for preset in sorted(PRESETS):
        steps = stream_steps(scenario, preset, 2, 1, 60)
        for every in (1, 7):
            tuples, objects = Driver(impl, state_every=every), Driver(impl, state_every=every)
            try:
                for step in steps:
                    observed, expected = tuples.execute_compact(step), objects.execute(step)
                    assert to_observation(observed) == expected, (preset, every, step)
                    assert compact(expected) == observed, (preset, every, step)
                    assert Observation.from_json(expected.to_json()) == expected
                assert tuples.state_compact() == objects.state().as_tuple()
            finally:
                tuples.close()
                objects.close()


class WrongCauseDriver(Driver):
    """Planted bug: a completion is recorded with the outermost call as its cause."""

    def _record(self, kind: str, label: str, via: str | None) -> None:
        outer = self._via[1] if kind == "completed" and len(self._via) > 1 else via
        super()._record(kind, label, outer)


class LostTryDriver(Driver):
    """Planted bug: a step's try counts are reported without the last operation tried."""

    def execute_compact(self, step: Step) -> Compact:
        result, raised, events, tries, state = super().execute_compact(step)
        return result, raised, events, tries[:-1], state


def committed_vectors() -> list[dict[str, Any]]:
    paths = sorted(Path(conformance_root(), "vectors").glob("*.json"))
    return [load_vector(path) for path in paths]


@pytest.mark.parametrize("planted", [WrongCauseDriver, LostTryDriver])
def test_a_driver_that_observes_wrongly_fails_the_committed_vectors(planted: type[Driver]) -> None:
    impl = resolve_impl("reference")
    failed = []
    for vector in committed_vectors():
        steps, expected = vector_steps(vector)
        driver = planted(impl)
        try:
            actual = [driver.execute(step) for step in steps]
        finally:
            driver.close()
        if first_divergence(steps, expected, actual) is not None:
            failed.append(vector["name"])
    assert failed


def test_steps_that_do_not_fit_the_run_raise_step_error_in_either_form() -> None:
    impl = resolve_impl("reference")
    cases: list[list[Step]] = [
        [SetReady("x")],  # before init
        [Init(), SetReady("nobody")],  # unknown label
        [Init(), Init()],  # a second init
        [Init(), Watch("w", 5, ("k",)), Watch("w", 6, ("k",))],  # a changed re-watch
        [Init(), Add("t", 5, timer="other")],  # an undeclared timer
    ]
    for steps in cases:
        for compact_form in (False, True):
            driver = Driver(impl)
            with pytest.raises(StepError):
                for step in steps:
                    driver.execute_compact(step) if compact_form else driver.execute(step)
            driver.close()


def test_bad_state_every_names_the_argument() -> None:
    impl = resolve_impl("reference")
    with pytest.raises(ValueError, match="state_every"):
        Driver(impl, state_every=0)
    with pytest.raises(TypeError, match="state_every"):
        Driver(impl, state_every=True)
