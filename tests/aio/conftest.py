"""Fixtures of the aio tests: the implementation an ``AsyncPurgatory`` wraps."""

from __future__ import annotations

import pytest

from tests.aio.support import IMPLEMENTATIONS


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> str:
    """``"optimized"`` or ``"reference"``: every aio rule test runs on both."""
    name: str = request.param
    return name
