"""Mutant implementations the pipeline must catch (the detection tests plug them in).

Each module-level name mirrors the public API of an implementation package, so this
module can be passed as ``impl`` anywhere (``resolve_impl("tests.pipeline.mutants")``).
The base is the optimized package when present, else the reference.

- ``SystemTimer`` drains one tick late: its clock wrapper (``LaggingClock``, shared with
  the broken conformance adapter) reports the drain reading one tick early, so tasks due
  at the true reading wait for the next ``advance_clock`` (a violation of R5 that shifts
  expirations to a later virtual time).
"""

from __future__ import annotations

from typing import Any

from tests.conformance.broken_adapter import LaggingClock
from tests.support import implementation_names, load

_base: Any = load("optimized" if "optimized" in implementation_names() else "reference")

TimerTask = _base.TimerTask
DelayedOperation = _base.DelayedOperation
DelayedOperationPurgatory = _base.DelayedOperationPurgatory


class SystemTimer(_base.SystemTimer):  # type: ignore[misc]
    """The base timer, draining one tick late (mutant)."""

    def __init__(
        self,
        executor_name: str,
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int | None = None,
        *,
        clock: Any = None,
        executor: Any = None,
    ) -> None:
        late = None if clock is None else LaggingClock(clock, tick_ms)
        super().__init__(
            executor_name, tick_ms, wheel_size, start_ms, clock=late, executor=executor
        )
