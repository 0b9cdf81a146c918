"""R46: the aio API is typed: mypy --strict (run on tests/) checks these assert_type calls.

At run time ``assert_type`` returns its argument; the test also runs the program, so
the inferred types are the types actually returned.
"""

from __future__ import annotations

import asyncio
from typing import assert_type

import pytest

from kpurgatory import optimized, reference
from kpurgatory.aio import AsyncPurgatory, DelayedOperation, Outcome, ReferenceDelayedOperation, run
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
        assert_type(task, asyncio.Task[Outcome])  # wait is a coroutine function
        assert_type(await task, Outcome)
        left = purgatory.cancel_for_key("topic")
        assert_type(left, list[Fetch])
        return outcome, fetch.answer, left


def test_r46_outcome_and_operation_types_are_inferred() -> None:
    outcome, answer, left = run(user_program(), ManualClock(0))
    assert outcome is Outcome.COMPLETED
    assert answer == "1/1"
    assert left == []


async def wrapped_program() -> None:
    bare = AsyncPurgatory("bare")  # the PEP 696 default: no annotation needed
    assert_type(bare, AsyncPurgatory[DelayedOperation])
    assert_type(bare.purgatory, optimized.DelayedOperationPurgatory[DelayedOperation])
    assert_type(bare.timer, optimized.SystemTimer)
    refs = AsyncPurgatory[ReferenceDelayedOperation]("refs", implementation="reference")
    assert_type(refs.purgatory, reference.DelayedOperationPurgatory[ReferenceDelayedOperation])
    assert_type(refs.timer, reference.SystemTimer)
    for purgatory, module in ((bare, optimized), (refs, reference)):
        wrapped, timer = purgatory.purgatory, purgatory.timer
        assert type(wrapped) is module.DelayedOperationPurgatory
        assert type(timer) is module.SystemTimer and timer is wrapped.timer
        for name in ("purgatory", "timer"):
            with pytest.raises(AttributeError, match=f"AsyncPurgatory.{name} is read-only"):
                setattr(purgatory, name, None)
        assert (purgatory.purgatory, purgatory.timer) == (wrapped, timer)
        purgatory.shutdown()


def test_r46_purgatory_and_timer_are_the_wrapped_ones_typed_and_read_only() -> None:
    """``purgatory`` and ``timer`` return the wrapped implementation's objects, typed
    by the operation type (checked by mypy on this file), and cannot be replaced."""
    run(wrapped_program(), ManualClock(0))
