"""R46: the aio API is typed: mypy --strict (run on tests/) checks these assert_type calls.

At run time ``assert_type`` returns its argument; the test also runs the program, so
the inferred types are the types actually returned.
"""

from __future__ import annotations

import asyncio
from typing import assert_type

from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome, run
from kpurgatory.clock import ManualClock


class Fetch(DelayedOperation):
    """A user's operation: completes when ``available`` reaches ``wanted``."""

    def __init__(self, delay_ms: int, wanted: int) -> None:
        super().__init__(delay_ms)
        self.wanted = wanted
        self.available = 0
        self.answer: str | None = None

    def try_complete(self) -> bool:
        return self.available >= self.wanted and self.force_complete()

    def on_complete(self) -> None:
        self.answer = f"{self.available}/{self.wanted}"

    def on_expiration(self) -> None:
        pass


async def user_program() -> tuple[Outcome, str | None, list[Fetch]]:
    async with AsyncPurgatory[Fetch]("fetch") as purgatory:
        assert_type(purgatory, AsyncPurgatory[Fetch])
        fetch = Fetch(100, wanted=1)
        fetch.available = 1
        outcome = await purgatory.wait(fetch, ["topic"])
        assert_type(outcome, Outcome)
        task = asyncio.get_running_loop().create_task(purgatory.wait(Fetch(10, 1), ["t"]))
        assert_type(task, asyncio.Task[Outcome])  # the Waiter is typed as a coroutine too
        assert_type(await task, Outcome)
        left = purgatory.cancel_for_key("topic")
        assert_type(left, list[Fetch])
        return outcome, fetch.answer, left


def test_r46_outcome_and_operation_types_are_inferred() -> None:
    outcome, answer, left = run(user_program(), ManualClock(0))
    assert outcome is Outcome.COMPLETED
    assert answer == "1/1"
    assert left == []
