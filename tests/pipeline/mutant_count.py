"""A mutant whose ``check_and_complete`` miscounts (returns one more than it completed).

Outcomes (who completed, when, how) are unchanged, so the per-operation join cannot see
it; only the step-by-step comparison of results (R25) does. Base: the optimized package
when present, else the reference.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Hashable
from typing import Any

_BASE_NAME = (
    "kpurgatory.optimized"
    if importlib.util.find_spec("kpurgatory.optimized") is not None
    else "kpurgatory.reference"
)
_base: Any = importlib.import_module(_BASE_NAME)

SystemTimer = _base.SystemTimer
TimerTask = _base.TimerTask
DelayedOperation = _base.DelayedOperation


class DelayedOperationPurgatory(_base.DelayedOperationPurgatory):  # type: ignore[misc]
    """The base purgatory, counting one too many when it completes anything (mutant)."""

    def check_and_complete(self, key: Hashable) -> int:
        completed: int = super().check_and_complete(key)
        return completed + 1 if completed else 0
