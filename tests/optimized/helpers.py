"""Helpers for the optimized package's unit tests: tasks, timers, and where an entry sits."""

from __future__ import annotations

from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.optimized import SystemTimer, TimerTask


class Task(TimerTask):
    """A timer task that appends its name to a shared log when it runs."""

    def __init__(self, delay_ms: int, name: str, log: list[str]) -> None:
        super().__init__(delay_ms)
        self.name = name
        self.log = log

    def run(self) -> None:
        self.log.append(self.name)

    def __repr__(self) -> str:
        return f"Task({self.name!r}, delay_ms={self.delay_ms})"


def manual_timer(tick_ms: int = 1, wheel_size: int = 20, start_ms: int = 0) -> SystemTimer:
    """A timer on a ManualClock reading ``start_ms`` with an InlineExecutor."""
    return SystemTimer(
        "unit",
        tick_ms,
        wheel_size,
        clock=ManualClock(start_ms),
        executor=InlineExecutor(),
    )


def locate(timer: SystemTimer, task: TimerTask) -> tuple[int, int] | None:
    """(level, bucket expiration) of ``task``'s entry, levels numbered from 1; None if unlinked."""
    for level, wheel in enumerate(timer._wheel.levels(), start=1):
        for bucket in wheel.buckets:
            if any(entry is task for entry in bucket.entries()):
                assert bucket.expiration is not None
                return level, bucket.expiration
    return None


def assert_check_fails(structure: Any, match: str) -> None:
    """``structure._check()`` finds the corruption: an AssertionError matching ``match``."""
    with pytest.raises(AssertionError, match=match):
        structure._check()
