"""Fixtures: the implementation under test, and manual-clock timers and purgatories.

``impl`` is parametrized over every implementation present, so each test that takes
it runs once per implementation. Hypothesis profiles: ``ci`` (default, quick) and
``deep`` (select with ``HYPOTHESIS_PROFILE=deep`` for a nightly-style run).
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

from kpurgatory import ManualClock
from tests.support import Recorder, implementation_names, load

settings.register_profile(
    "ci",
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep",
    max_examples=2000,
    stateful_step_count=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
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
