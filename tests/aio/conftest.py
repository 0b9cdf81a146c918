"""Fixtures of the aio tests: the implementation an ``AsyncPurgatory`` wraps."""

from __future__ import annotations

import pytest

from kpurgatory.aio import PurgatoryImplementation
from tests.aio.support import IMPLEMENTATIONS, AioCase


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> str:
    """``"optimized"`` or ``"reference"``: every aio rule test runs on both."""
    name: str = request.param
    return name


@pytest.fixture
def aio(implementation: PurgatoryImplementation) -> AioCase:
    """A fresh clock, log and operation class of ``implementation`` (``AioCase``)."""
    return AioCase(implementation)
