"""A mutant whose ``check_and_complete`` miscounts (returns one more than it completed).

Outcomes (who completed, when, how) are unchanged, so the per-operation join cannot see
it; only the step-by-step comparison of results (R25) does. Base: the optimized package
when present, else the reference.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from tests.support import implementation_names, load

_base: Any = load("optimized" if "optimized" in implementation_names() else "reference")

SystemTimer = _base.SystemTimer
TimerTask = _base.TimerTask
DelayedOperation = _base.DelayedOperation


class DelayedOperationPurgatory(_base.DelayedOperationPurgatory):  # type: ignore[misc]
    """The base purgatory, counting one too many when it completes anything (mutant)."""

    def check_and_complete(self, key: Hashable) -> int:
        completed: int = super().check_and_complete(key)
        return completed + 1 if completed else 0
