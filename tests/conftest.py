"""Fixtures: the implementation under test, a manual clock and recorder, and for the
purgatory rule tests a purgatory (``purg``) and an operation factory (``ops``).

``impl`` is parametrized over every implementation present, so each test that takes
it runs once per implementation. Hypothesis profiles: ``ci`` (default, quick) and
``deep`` (select with ``HYPOTHESIS_PROFILE=deep`` for a nightly-style run).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from kpurgatory import ManualClock
from tests.purgatory_support import make_purgatory
from tests.support import Recorder, implementation_names, load, operation_class

settings.register_profile(
    "ci",
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep", settings.get_profile("ci"), max_examples=2000, stateful_step_count=200
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(params=implementation_names())
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The implementation package under test (reference, optimized, ...)."""
    return load(request.param)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def recorder(clock: ManualClock) -> Recorder:
    return Recorder(clock)


@pytest.fixture
def ops(impl: ModuleType, recorder: Recorder) -> Callable[..., Any]:
    """Factory: ``ops(delay_ms, name)`` builds a FlagOperation of ``impl`` on the recorder."""

    def build(delay_ms: int, name: str, lock: Any = None) -> Any:
        return operation_class(impl)(delay_ms, name, recorder, lock)

    return build


@pytest.fixture
def purg(impl: ModuleType, clock: ManualClock) -> Iterator[Any]:
    """A purgatory with purge_interval 1000 (no purge in these small tests)."""
    with make_purgatory(impl, clock) as made:
        yield made
