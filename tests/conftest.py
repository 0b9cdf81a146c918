"""Fixtures: the implementation under test, and manual-clock timers and purgatories.

``impl`` is parametrized over every implementation present, so each test that takes
it runs once per implementation. Hypothesis profiles: ``ci`` (default, quick) and
``deep`` (select with ``HYPOTHESIS_PROFILE=deep`` for a nightly-style run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from kpurgatory import InlineExecutor, ManualClock
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


@pytest.fixture
def timer(impl: ModuleType, clock: ManualClock) -> Iterator[Any]:
    """A manual-clock, inline-executor timer with Kafka's defaults (tick 1, wheel 20)."""
    with impl.SystemTimer("test", clock=clock, executor=InlineExecutor()) as made:
        yield made


@pytest.fixture
def purgatory(impl: ModuleType, clock: ManualClock) -> Iterator[Any]:
    """A purgatory on a manual-clock inline timer, reaper off, purge_interval 1000."""
    made = impl.DelayedOperationPurgatory(
        "test",
        timer=impl.SystemTimer("test", clock=clock, executor=InlineExecutor()),
        reaper_enabled=False,
    )
    with made:
        yield made
