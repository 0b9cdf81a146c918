"""The pipeline's lean driver observes exactly what the conformance kit's driver observes.

``LeanDriver`` (kpurgatory/pipeline/lean_driver.py) is the replay's fast interpreter of
the workload steps; the kit's ``Driver`` is the definition of an observation. For every
scenario and preset, on both implementations and on a mutant, each step's compact
observation must equal the kit's observation in compact form, and turn back into it.
Two planted bugs in the lean driver (a wrong cause of completion, a lost try count) are
caught by the same check.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from kpurgatory.conformance.driver import Driver, Observation, StepError
from kpurgatory.conformance.steps import Add, Init, SetReady, Step, Watch
from kpurgatory.pipeline.lean_driver import LeanDriver, supports, to_observation
from kpurgatory.pipeline.replay import compact, resolve_impl
from kpurgatory.workloads import PRESETS, SCENARIOS, stream_steps

IMPLS = ("reference", "optimized", "tests.pipeline.mutants")


def first_mismatch(
    impl: ModuleType, steps: list[Step], lean_cls: type[LeanDriver] = LeanDriver, every: int = 1
) -> str | None:
    """The first step where ``lean_cls`` and the kit's driver observe differently, or None."""
    kit, lean = Driver(impl, state_every=every), lean_cls(impl, state_every=every)
    try:
        for index, step in enumerate(steps):
            expected, actual = kit.execute(step), lean.execute(step)
            if compact(expected) != actual or to_observation(actual) != expected:
                return f"step {index} {step}: kit {compact(expected)} lean {actual}"
        if compact_state(kit) != lean.state():
            return "final state"
    finally:
        kit.close()
        lean.close()
    return None


def compact_state(driver: Driver) -> tuple[Any, ...]:
    """The kit driver's state now, in the lean driver's form."""
    state = compact(Observation(None, None, (), (), driver.state()))[4]
    assert state is not None
    return tuple(state)


@pytest.mark.parametrize("impl_name", IMPLS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_lean_observations_equal_the_kits_on_every_preset(scenario: str, impl_name: str) -> None:
    impl = resolve_impl(impl_name)
    for preset in sorted(PRESETS):
        steps = stream_steps(scenario, preset, 2, 1, 60)
        assert supports(steps)
        for every in (1, 7):
            assert first_mismatch(impl, steps, every=every) is None, (preset, every)


class WrongCauseDriver(LeanDriver):
    """Planted bug: a completion is recorded with the outermost call as its cause."""

    def record(self, kind: str, label: str, via: str | None) -> None:
        super().record(
            kind, label, self.via[1] if kind == "completed" and len(self.via) > 1 else via
        )


class LostTryDriver(LeanDriver):
    """Planted bug: a step's try counts are reported without the last operation tried."""

    def execute(self, step: Step) -> Any:
        result, raised, events, tries, state = super().execute(step)
        return result, raised, events, tries[:-1], state


@pytest.mark.parametrize("planted", [WrongCauseDriver, LostTryDriver])
def test_a_lean_driver_that_observes_wrongly_is_caught(planted: type[LeanDriver]) -> None:
    impl = resolve_impl("reference")
    found = [
        first_mismatch(impl, stream_steps(scenario, "kafka", 1, 0, 60), planted)
        for scenario in sorted(SCENARIOS)
    ]
    assert any(found)


def test_steps_that_do_not_fit_the_run_raise_step_error_like_the_kit() -> None:
    impl = resolve_impl("reference")
    cases: list[list[Step]] = [
        [SetReady("x")],  # before init
        [Init(), SetReady("nobody")],  # unknown label
        [Init(), Init()],  # a second init
        [Init(), Watch("w", 5, ("k",)), Watch("w", 6, ("k",))],  # a changed re-watch
    ]
    for steps in cases:
        kit, lean = Driver(impl), LeanDriver(impl)
        with pytest.raises(StepError):
            for step in steps:
                kit.execute(step)
        with pytest.raises(StepError):
            for step in steps:
                lean.execute(step)


def test_a_step_kind_the_workloads_never_use_is_refused_and_replayed_by_the_kit() -> None:
    steps: list[Step] = [Init(), Add("t", 5)]
    assert not supports(steps)
    lean = LeanDriver(resolve_impl("reference"))
    lean.execute(steps[0])
    with pytest.raises(StepError, match="add"):
        lean.execute(steps[1])


def test_bad_state_every_names_the_argument() -> None:
    impl = resolve_impl("reference")
    with pytest.raises(ValueError, match="state_every"):
        LeanDriver(impl, state_every=0)
    with pytest.raises(TypeError, match="state_every"):
        LeanDriver(impl, state_every=True)
