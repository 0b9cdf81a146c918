"""The four ways an asyncio task waits for an event with a deadline, behind one API.

``future+call_at`` (a ``Future`` and a ``loop.call_at`` that resolves it, cancelled when
the event wins), ``timeout_at`` (``asyncio.timeout_at`` around the ``Future``), ``aio
wait`` (``await purgatory.wait(op, [key])``) and ``aio submit`` (``purgatory.submit``, no
task per wait): what ``kpurgatory.bench.aiocost`` measures side by side.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kpurgatory.aio import AsyncPurgatory, DelayedOperation

__all__ = ["MECHANISMS", "QuietOperation", "Waits", "expire"]

MECHANISMS: tuple[str, ...] = ("future+call_at", "timeout_at", "aio wait", "aio submit")


class QuietOperation(DelayedOperation):
    """An operation whose completion and expiry do nothing: its waiter gets the outcome.
    A subclass says only when it can complete (``try_complete``)."""

    __slots__ = ()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class _Answer(QuietOperation):
    """A wait for one event: completes once ``ready`` is set (the event came)."""

    __slots__ = ("ready",)

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()


def expire(future: asyncio.Future[bool]) -> None:
    """The ``call_at`` callback of a ``Future`` wait: no event came in time (False)."""
    if not future.done():
        future.set_result(False)


class Waits:
    """Waits of one mechanism on the running loop: ``start`` one, ``answer`` its event,
    ``close`` (shut the purgatory of an aio mechanism down)."""

    def __init__(self, mechanism: str, max_hand_overs: int | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, not {mechanism!r}")
        self.mechanism = mechanism
        self.loop = asyncio.get_running_loop()
        self.futures: dict[int, asyncio.Future[bool]] = {}
        self.operations: dict[int, _Answer] = {}
        self.purgatory: AsyncPurgatory[Any] | None = None
        if mechanism.startswith("aio"):
            self.purgatory = (
                AsyncPurgatory("bench")
                if max_hand_overs is None
                else AsyncPurgatory("bench", max_hand_overs=max_hand_overs)
            )

    async def _future_call_at(self, key: int, delay_ms: int) -> bool:
        future = self.futures[key] = self.loop.create_future()
        handle = self.loop.call_at(self.loop.time() + delay_ms / 1000, expire, future)
        try:
            answered: bool = await future
            return answered
        finally:
            handle.cancel()
            del self.futures[key]

    async def _timeout_at(self, key: int, delay_ms: int) -> bool:
        future = self.futures[key] = self.loop.create_future()
        try:
            async with asyncio.timeout_at(self.loop.time() + delay_ms / 1000):
                answered: bool = await future
                return answered
        except TimeoutError:
            return False
        finally:
            del self.futures[key]

    def start(self, key: int, delay_ms: int) -> asyncio.Future[Any]:
        """Start one wait; return what to gather."""
        mechanism = self.mechanism
        if mechanism == "future+call_at":
            return self.loop.create_task(self._future_call_at(key, delay_ms))
        if mechanism == "timeout_at":
            return self.loop.create_task(self._timeout_at(key, delay_ms))
        purgatory = self.purgatory
        assert purgatory is not None
        operation = self.operations[key] = _Answer(delay_ms)
        if mechanism == "aio wait":
            return self.loop.create_task(purgatory.wait(operation, (key,)))
        return purgatory.submit(operation, (key,))

    def answer(self, key: int) -> None:
        """The event for ``key`` comes (a no-op if its wait is over)."""
        if self.purgatory is None:
            future = self.futures.get(key)
            if future is not None and not future.done():
                future.set_result(True)
            return
        operation = self.operations.pop(key, None)
        if operation is not None:
            operation.ready = True
            self.purgatory.check_and_complete(key)

    def close(self) -> None:
        if self.purgatory is not None:
            self.purgatory.shutdown()
