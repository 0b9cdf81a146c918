"""Shared pieces of the aio tests: a recording operation for both implementations, and
helpers to run the loop's tasks a step at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from kpurgatory.aio import (
    AsyncPurgatory,
    DelayedOperation,
    Outcome,
    PurgatoryImplementation,
    ReferenceDelayedOperation,
    run,
)
from kpurgatory.clock import ManualClock

IMPLEMENTATIONS: tuple[PurgatoryImplementation, ...] = ("optimized", "reference")
"""The values of ``AsyncPurgatory[Any](implementation=...)``."""

OPERATION_BASES: dict[str, type[Any]] = {
    "optimized": DelayedOperation,
    "reference": ReferenceDelayedOperation,
}

Event = tuple[str, str, int]
"""(what happened: "complete" / "expire", operation name, clock reading)."""


def recording_operation(implementation: str) -> type[Any]:
    """A test operation of ``implementation``: completes once ``ready`` is set.

    Appends ``("complete", name, now)`` in ``on_complete`` and ``("expire", name, now)``
    in ``on_expiration`` to ``log``; ``action`` (if any) runs at the end of
    ``on_complete``, ``blocker`` (if any) at the start of ``try_complete``.
    """
    base = OPERATION_BASES[implementation]

    class RecordingOperation(base):  # type: ignore[misc, valid-type]
        def __init__(
            self,
            delay_ms: int,
            name: str,
            log: list[Event],
            clock: ManualClock | Any,
            *,
            ready: bool = False,
            action: Callable[[], None] | None = None,
            blocker: Callable[[], None] | None = None,
        ) -> None:
            super().__init__(delay_ms)
            self.name, self.log, self.clock, self.ready = name, log, clock, ready
            self.action, self.blocker = action, blocker
            self.tries = 0

        def try_complete(self) -> bool:
            self.tries += 1
            if self.blocker is not None:
                self.blocker()
            if self.ready:
                return bool(self.force_complete())
            return False

        def on_complete(self) -> None:
            self.log.append(("complete", self.name, self.clock.now_ms()))
            if self.action is not None:
                self.action()

        def on_expiration(self) -> None:
            self.log.append(("expire", self.name, self.clock.now_ms()))

        def __repr__(self) -> str:
            return f"RecordingOperation({self.name!r})"

    return RecordingOperation


def fresh(implementation: str) -> tuple[ManualClock, list[Event], type[Any]]:
    """What most aio tests start from: a manual clock at 0, an empty event log, and the
    recording operation class of ``implementation``."""
    return ManualClock(0), [], recording_operation(implementation)


T = TypeVar("T")


class AioCase:
    """``fresh``'s clock, log and operation class (``clock``, ``log``, ``op_class``) with
    two shortcuts: ``op`` makes an operation that logs to ``log`` on ``clock``, and ``run``
    runs a test body on a purgatory ``"p"`` of ``implementation`` on ``clock``'s loop."""

    def __init__(self, implementation: PurgatoryImplementation) -> None:
        self.implementation = implementation
        self.clock, self.log, self.op_class = fresh(implementation)

    def op(self, delay_ms: int, name: str, **options: Any) -> Any:
        """A recording operation (``recording_operation``'s options) on ``log``."""
        return self.op_class(delay_ms, name, self.log, self.clock, **options)

    def run(self, body: Callable[[AsyncPurgatory[Any]], Awaitable[T]]) -> T:
        """``body(purgatory)`` inside ``async with AsyncPurgatory("p")``; its result."""

        async def main() -> T:
            async with AsyncPurgatory[Any]("p", implementation=self.implementation) as purgatory:
                return await body(purgatory)

        return run(main(), self.clock)


class OffsetClock:
    """A user's own clock: a ManualClock's reading plus a fixed offset (neither a
    ManualClock nor a MonotonicClock, so the driver maps it through both readings)."""

    def __init__(self, inner: ManualClock, offset: int) -> None:
        self._inner, self._offset = inner, offset

    def now_ms(self) -> int:
        return self._inner.now_ms() + self._offset

    def wait(self, condition: Any, timeout_ms: int, next_due: Any) -> int:
        return self.now_ms()


class NoTimer:
    """A timer with nothing scheduled (the driver does not re-arm after a firing)."""

    next_due_time = None
    drain_pending = False


class BoomError(Exception):
    """What a failing on_complete raises."""


def spawn(coro: Any) -> asyncio.Task[Outcome]:
    """A task of ``coro`` on the running loop."""
    task: asyncio.Task[Outcome] = asyncio.get_running_loop().create_task(coro)
    return task


async def settle() -> None:
    """Let every ready callback and task step run (no virtual time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


def assert_bound_is_checked(
    implementation: PurgatoryImplementation, argument: str, fraction: float, default: int
) -> None:
    """R35 for a bound ``argument`` of ``AsyncPurgatory``: 0 and ``fraction`` raise a clear
    error naming it, and no purgatory is built; left out, the driver takes ``default``."""

    zero: dict[str, Any] = {argument: 0}
    fractional: dict[str, Any] = {argument: fraction}

    async def main() -> None:
        with pytest.raises(ValueError, match=f"{argument} must be >= 1"):
            AsyncPurgatory("bad", implementation=implementation, **zero)
        with pytest.raises(TypeError, match=argument):
            AsyncPurgatory("bad", implementation=implementation, **fractional)
        purgatory: AsyncPurgatory[Any] = AsyncPurgatory("good", implementation=implementation)
        assert getattr(purgatory.driver, argument) == default
        assert repr(purgatory.driver) == "LoopTimerDriver(armed_due=None)"
        purgatory.shutdown()

    run(main())
