"""Long-poll on one event loop: ``kpurgatory.aio`` against a plain-asyncio version.

The pattern: ``waits`` handler tasks on ``keys`` keys (in process, no sockets), each
waiting for an event on its key with a timeout; events come for 90 % of the keys, the
other waits time out. Three ways to run it, each a pyperf ``bench_time_func``
returning process CPU seconds from the first task created to the last one finished:

- ``aio``: ``await purgatory.wait(operation, [key])`` on an ``AsyncPurgatory``, events
  through ``check_and_complete``;
- ``plain``: what a user writes without a purgatory: a future per wait, a
  ``loop.call_later`` for its timeout and a dict of waiting futures per key;
- ``harness``: the same tasks and event loop, the handler returning at once: what the
  pattern costs without any waiting. Library-only CPU = approach - harness.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable

from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome

__all__ = ["APPROACHES", "ANSWERED", "long_poll_time"]

APPROACHES: tuple[str, ...] = ("aio", "plain", "harness")

ANSWERED = 0.9
"""Share of the keys that get an event (so of the waits answered by one)."""


class _Poll(DelayedOperation):
    """A wait for a version above 0 on ``key`` (the event source is a list of versions)."""

    __slots__ = ("key", "versions")

    def __init__(self, delay_ms: int, versions: list[int], key: int) -> None:
        super().__init__(delay_ms)
        self.versions, self.key = versions, key

    def try_complete(self) -> bool:
        return self.versions[self.key] > 0 and self.force_complete()

    def on_complete(self) -> None:
        return None

    def on_expiration(self) -> None:
        return None


def _settle(future: asyncio.Future[bool], answered: bool) -> None:
    if not future.done():
        future.set_result(answered)


async def _pattern(approach: str, waits: int, keys: int, timeout_ms: int) -> float:
    loop = asyncio.get_running_loop()
    versions = [0] * keys
    handler: Callable[[int], Awaitable[object]]
    notify: Callable[[int], object]
    close: Callable[[], object] = _nothing
    if approach == "aio":
        purgatory: AsyncPurgatory[_Poll] = AsyncPurgatory("long-poll", loop=loop)

        async def aio_handler(key: int) -> object:
            return await purgatory.wait(_Poll(timeout_ms, versions, key), (key,))

        handler, notify, close = aio_handler, purgatory.check_and_complete, purgatory.shutdown
    elif approach == "plain":
        waiting: dict[int, list[asyncio.Future[bool]]] = {}

        async def plain_handler(key: int) -> object:
            future = loop.create_future()
            timer = loop.call_later(timeout_ms / 1000, _settle, future, False)
            waiting.setdefault(key, []).append(future)
            try:
                return await future
            finally:
                timer.cancel()

        def plain_notify(key: int) -> None:
            for future in waiting.pop(key, ()):
                _settle(future, True)

        handler, notify = plain_handler, plain_notify
    elif approach == "harness":

        async def harness_handler(key: int) -> object:
            return versions[key]

        handler, notify = harness_handler, _nothing
    else:
        raise ValueError(f"approach must be one of {APPROACHES}, got {approach!r}")
    gc.collect()
    started = time.process_time()
    tasks = [loop.create_task(handler(index % keys)) for index in range(waits)]
    await asyncio.sleep(0)  # every handler starts waiting
    for key in range(int(keys * ANSWERED)):
        versions[key] += 1
        notify(key)
    await asyncio.wait(tasks)
    elapsed = time.process_time() - started
    close()
    if approach != "harness":  # every wait on an answered key was answered, the rest expired
        answered = sum(task.result() in (True, Outcome.COMPLETED) for task in tasks)
        expected = sum(index % keys < int(keys * ANSWERED) for index in range(waits))
        if answered != expected:
            raise RuntimeError(f"{approach}: {answered} waits answered, expected {expected}")
    return elapsed


def _nothing(*_: object) -> None:
    return None


def long_poll_time(loops: int, approach: str, waits: int, keys: int, timeout_ms: int) -> float:
    """CPU seconds of ``loops`` runs of the pattern, each on a fresh event loop."""
    if waits < 1 or keys < 1 or timeout_ms < 0:
        raise ValueError(
            f"need waits, keys >= 1 and timeout_ms >= 0: {waits}, {keys}, {timeout_ms}"
        )
    total = 0.0
    for _ in range(loops):
        total += asyncio.run(_pattern(approach, waits, keys, timeout_ms))
    return total
