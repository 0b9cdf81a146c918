"""Fixture for the schedule tests: the implementation under test, if it is instrumentable."""

from __future__ import annotations

import pytest

from tests.concurrency import scenarios as sc
from tests.support import implementation_names


@pytest.fixture(scope="module", params=implementation_names())
def subject(request: pytest.FixtureRequest) -> sc.Impl:
    """The implementation under test; skipped (naming the primitives) if any of its locks,
    conditions or flags bypass ``kpurgatory.sync``, since the scheduler cannot see them."""
    impl = sc.implementation(request.param)
    missing = sc.uninstrumented_primitives(impl)
    if missing:
        pytest.skip(f"{impl.name} bypasses kpurgatory.sync for: {', '.join(missing)}")
    return impl
