"""What the purgatory rule tests share: a purgatory with the reaper off, an operation that
keeps it busy, a clock with a hook at its next reading, a key that reports its hashes.
The ``ops`` and ``purg`` fixtures are in ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from kpurgatory import InlineExecutor, ManualClock
from tests.support import Recorder, operation_class

WAIT_S = 5.0
"""Upper bound for joining a helper thread; a healthy run needs milliseconds."""


class HookClock(ManualClock):
    """A ManualClock that calls ``hook`` (once) at its next reading.

    Lets a test act at the exact moment a timer reads the clock inside ``add``, i.e.
    between the purgatory's second ``try_complete`` and its timer step (R22).
    """

    def __init__(self, start_ms: int = 0) -> None:
        super().__init__(start_ms)
        self.hook: Callable[[], None] | None = None

    def now_ms(self) -> int:
        """Run and disarm the hook, then read the clock."""
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().now_ms()


class SpyKey:
    """A watch key that reports every hash to ``on_hash`` (the purgatory must hash to watch)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.on_hash: Callable[[], None] = lambda: None

    def __hash__(self) -> int:
        self.on_hash()
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpyKey) and other.name == self.name

    def __repr__(self) -> str:
        return f"SpyKey({self.name!r})"


def make_purgatory(
    impl: ModuleType,
    clock: ManualClock,
    *,
    purge_interval: int = 1000,
    timer_enabled: bool = True,
    name: str = "p",
) -> Any:
    """A purgatory of ``impl`` on an inline timer reading ``clock``, reaper off."""
    timer = impl.SystemTimer(name, clock=clock, executor=InlineExecutor())
    return impl.DelayedOperationPurgatory(
        name,
        timer,
        purge_interval=purge_interval,
        reaper_enabled=False,
        timer_enabled=timer_enabled,
    )


def keep_busy(purg: Any, impl: ModuleType, recorder: Recorder) -> Any:
    """Submit one operation that never completes on key "busy" (delay 10**6), so the
    purgatory is never idle and finished operations linger as R23-R30 describe (R61
    unlinks them all once nothing is unfinished). It adds 1 to watched, watched_keys,
    num_delayed and the estimate."""
    keeper = operation_class(impl)(10**6, "busy", recorder)
    assert purg.try_complete_else_watch(keeper, ["busy"]) is False
    return keeper
