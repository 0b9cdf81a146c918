"""A typed asyncio user program: what mypy --strict and pyright --strict must accept and flag.

Checked by tests/typing/test_user_program.py (mypy) and tests/typing/test_pyright.py
(pyright), both run from outside the repository, and by the project's own
``mypy --strict kpurgatory tests``. Each deliberate mistake carries two comments: a
type-ignore naming mypy's error code and a pyright ignore naming pyright's rule. Under
``--strict`` mypy reports an ignore that suppresses nothing, and the pyright test turns
on ``reportUnnecessaryTypeIgnoreComment``: a mistake either checker stops flagging
fails the check. Never run: only type-checked.
"""

from __future__ import annotations

import asyncio
from typing import assert_type

from kpurgatory import optimized, reference
from kpurgatory.aio import (
    AsyncPurgatory,
    DelayedOperation,
    Outcome,
    ReferenceDelayedOperation,
    Waiter,
)


class Poll(DelayedOperation):
    """A user's awaitable operation (the aio ``DelayedOperation``'s constructor)."""

    def try_complete(self) -> bool:
        return self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class RefPoll(ReferenceDelayedOperation):
    """The same on the reference implementation."""

    def try_complete(self) -> bool:
        return self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


async def correct_use() -> None:
    """Well-typed calls: no error, and the types are kpurgatory's (never Any)."""
    # A bare purgatory holds any aio DelayedOperation (the PEP 696 default).
    bare = AsyncPurgatory("bare")
    assert_type(bare, AsyncPurgatory[DelayedOperation])
    assert_type(await bare.wait(Poll(10), ["k"]), Outcome)
    assert_type(bare.purgatory, optimized.DelayedOperationPurgatory[DelayedOperation])
    assert_type(bare.timer, optimized.SystemTimer)
    assert_type(bare.purgatory.watched, int)
    assert_type(bare.waiting, int)

    polls: AsyncPurgatory[Poll] = AsyncPurgatory("polls", tick_ms=1, purge_interval=100)
    waiter = polls.submit(Poll(100), ["k"])
    assert_type(waiter, Waiter)
    assert_type(await waiter, Outcome)
    assert_type(polls.check_and_complete("k"), int)
    assert_type(polls.cancel_for_key("k"), list[Poll])
    assert_type(polls.try_complete_else_watch(Poll(5), ["k"]), bool)
    assert_type(polls.abandon(Poll(5)), bool)
    assert_type(polls.purgatory, optimized.DelayedOperationPurgatory[Poll])
    assert_type(polls.loop, asyncio.AbstractEventLoop)

    refs = AsyncPurgatory[RefPoll]("refs", implementation="reference")
    assert_type(refs.purgatory, reference.DelayedOperationPurgatory[RefPoll])
    assert_type(refs.timer, reference.SystemTimer)
    assert_type(await refs.wait(RefPoll(10), ["k"]), Outcome)
    async with AsyncPurgatory[Poll]("scoped") as scoped:
        assert_type(scoped, AsyncPurgatory[Poll])


async def mistakes() -> None:
    """Each line is wrong; both checkers must flag it (the run-time checks would too)."""
    polls: AsyncPurgatory[Poll] = AsyncPurgatory("polls")
    Poll("500")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    AsyncPurgatory(7)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    AsyncPurgatory("p", tick_ms="1")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    AsyncPurgatory("p", implementation="fast")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    await polls.wait(RefPoll(1), ["k"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    polls.submit(object(), ["k"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    polls.try_complete_else_watch(object(), ["k"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    _ = polls.purgatory.wathced  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    polls.timer.advance_clock("1")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    polls.purgatory = polls.purgatory  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]
    polls.waiting.append(1)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
