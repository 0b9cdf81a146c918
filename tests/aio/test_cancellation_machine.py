"""The asyncio cancellation machine: waits cancelled at every point the loop offers (R47, R57).

A Hypothesis ``RuleBasedStateMachine`` drives an ``AsyncPurgatory`` of one implementation
on a ``VirtualTimeLoop``, one loop step at a time. Its rules start tasks that await
``wait`` through a composition (bare, ``wait_for``, ``asyncio.timeout``, ``shield``,
``gather``, a ``TaskGroup``) or hold a ``submit`` future, cancel any of them at whatever
point they are at (before their first step included), let single loop iterations or
virtual milliseconds pass, publish events on keys, and make ``on_complete`` raise
(an ``Exception`` or a ``CancelledError``). Every callback and every give-up is stamped
with one global sequence number, and after every rule the machine checks:

- an operation whose waiting code gave up before it finished never completes afterwards
  (its ``on_complete`` stamp, if any, precedes the give-up stamp), and it was either
  abandoned or never submitted (cancelled before the first step);
- ``on_complete`` and ``on_expiration`` each ran at most once, never after an abandon;
- ``waiting`` counts exactly the submitted operations with a waiter not finished;
- a finished operation's waiter is done (no waiter pending once its operation ended);
- at teardown every task ends, ``shutdown`` settles everything, ``num_delayed`` and
  ``waiting`` are 0.

What it cannot see: threads (everything here is on the loop thread; the threaded
races are the schedule tests' job), and real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, VirtualTimeLoop
from kpurgatory.clock import ManualClock
from tests.aio.support import OPERATION_BASES

COMPOSITIONS = (
    "task",
    "bare",
    "wait_for",
    "timeout",
    "shield",
    "gather",
    "task_group",
    "future",
)
"""How the waiting code awaits: ``task`` is ``create_task(purgatory.wait(...))`` itself,
``future`` holds ``submit``'s future, the others wrap ``wait`` in a coroutine of their own."""
KEYS = ("k0", "k1", "k2")


class CallbackError(Exception):
    """What a failing on_complete raises (besides CancelledError)."""


@dataclass
class Tracked:
    """One operation of the machine, what was done to it, and when (sequence stamps)."""

    operation: Any
    composition: str
    keys: tuple[str, ...]
    task: asyncio.Future[Any] | None = None
    waiter: asyncio.Future[Any] | None = None
    completed_at: int | None = None
    expired_at: int | None = None
    gave_up_at: int | None = None
    finished_before_give_up: bool = False
    callbacks: list[str] = field(default_factory=list)


@functools.cache
def operation_class(implementation: str) -> type[Any]:
    """An awaitable operation of ``implementation`` that records callbacks, each stamped
    by ``stamp`` (the machine's sequence)."""
    base = OPERATION_BASES[implementation]

    class MachineOperation(base):  # type: ignore[misc,valid-type]
        def __init__(self, delay_ms: int, stamp: Callable[[], int]) -> None:
            super().__init__(delay_ms)
            self.stamp = stamp
            self.ready = False
            self.fail_with: BaseException | None = None
            self.tracked: Tracked | None = None

        def try_complete(self) -> bool:
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            assert self.tracked is not None
            self.tracked.callbacks.append("complete")
            self.tracked.completed_at = self.stamp()
            if self.fail_with is not None:
                raise self.fail_with

        def on_expiration(self) -> None:
            assert self.tracked is not None
            self.tracked.callbacks.append("expire")
            self.tracked.expired_at = self.stamp()

    return MachineOperation


class CancellationMachine(RuleBasedStateMachine):
    """The cancellation machine on the wrapped implementation ``implementation``."""

    implementation: ClassVar[PurgatoryImplementation] = "optimized"

    def __init__(self) -> None:
        super().__init__()
        self.counter = itertools.count(1)
        self.clock = ManualClock(0)
        self.loop = VirtualTimeLoop(self.clock)
        self.purgatory: AsyncPurgatory[Any] = self._on_loop(self._build())
        self.op_class = operation_class(self.implementation)
        self.tracked: list[Tracked] = []

    async def _build(self) -> AsyncPurgatory[Any]:
        return AsyncPurgatory[Any]("machine", implementation=self.implementation)

    def _on_loop(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _call(self, call: Callable[[], Any]) -> Any:
        """Run a synchronous purgatory call on the loop (its thread, loop running)."""

        async def inside() -> Any:
            return call()

        return self._on_loop(inside())

    # -- the waiting code, one composition each --------------------------------

    async def _waiting_code(self, item: Tracked, timeout_ms: int) -> Outcome:
        wait = self.purgatory.wait(item.operation, item.keys)
        try:
            if item.composition == "bare":
                return await wait
            if item.composition == "wait_for":
                return await asyncio.wait_for(wait, timeout_ms / 1000)
            if item.composition == "timeout":
                async with asyncio.timeout(timeout_ms / 1000):
                    return await wait
            if item.composition == "shield":
                inner = asyncio.get_running_loop().create_task(wait)
                item.waiter = inner
                return await asyncio.shield(inner)
            if item.composition == "gather":
                outcomes = await asyncio.gather(wait)
                outcome: Outcome = outcomes[0]
                return outcome
            async with asyncio.TaskGroup() as group:  # task_group
                child = group.create_task(wait)
            return child.result()
        except (asyncio.CancelledError, TimeoutError):
            if item.composition != "shield":
                self._give_up(item)
            raise
        finally:
            wait.close()  # not started (cancelled first): no "never awaited" warning

    def _give_up(self, item: Tracked) -> None:
        if item.gave_up_at is None:
            item.finished_before_give_up = self._finished(item)
            item.gave_up_at = next(self.counter)

    @staticmethod
    def _finished(item: Tracked) -> bool:
        operation = item.operation
        return bool(operation.is_completed or operation.is_abandoned)

    # -- rules ------------------------------------------------------------------

    @rule(
        composition=st.sampled_from(COMPOSITIONS),
        delay=st.integers(0, 40),
        timeout_ms=st.integers(1, 40),
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True),
        ready=st.booleans(),
        fail=st.sampled_from([None, "exception", "cancelled"]),
    )
    def start(
        self,
        composition: str,
        delay: int,
        timeout_ms: int,
        keys: list[str],
        ready: bool,
        fail: str | None,
    ) -> None:
        operation = self.op_class(delay, lambda: next(self.counter))
        operation.ready = ready
        operation.fail_with = {
            None: None,
            "exception": CallbackError("on_complete failed"),
            "cancelled": asyncio.CancelledError("on_complete cancelled"),
        }[fail]
        item = Tracked(operation, composition, tuple(keys))
        operation.tracked = item
        self.tracked.append(item)
        if composition == "future":
            # on_complete raising at once makes submit raise it (R48)
            with contextlib.suppress(CallbackError, asyncio.CancelledError):
                item.waiter = self._call(lambda: self.purgatory.submit(operation, keys))
            return
        if composition == "task":  # the wait's own coroutine is the task's
            item.task = self.loop.create_task(self.purgatory.wait(operation, keys))
            return
        item.task = self.loop.create_task(self._waiting_code(item, timeout_ms))

    @precondition(lambda self: self.tracked)
    @rule(pick=st.integers(0, 10**6))
    def cancel(self, pick: int) -> None:
        item = self.tracked[pick % len(self.tracked)]
        target = item.waiter if item.composition == "future" else item.task
        if target is None or target.done():
            return
        finished = self._finished(item)
        if target.cancel() and item.composition in ("future", "task"):
            item.finished_before_give_up = finished
            item.gave_up_at = next(self.counter)

    @rule(times=st.integers(1, 3))
    def loop_step(self, times: int) -> None:
        for _ in range(times):
            self._on_loop(asyncio.sleep(0))

    @rule(ms=st.integers(1, 25))
    def let_time_pass(self, ms: int) -> None:
        self._on_loop(asyncio.sleep(ms / 1000))

    @rule(key=st.sampled_from(KEYS))
    def publish(self, key: str) -> None:
        for item in self.tracked:
            if key in item.keys:
                item.operation.ready = True
        # on_complete raising: every other operation was tried first (R53)
        with contextlib.suppress(CallbackError, asyncio.CancelledError, BaseExceptionGroup):
            self._call(lambda: self.purgatory.check_and_complete(key))

    # -- invariants -----------------------------------------------------------

    @invariant()
    def nothing_completes_after_its_waiter_gave_up(self) -> None:
        for item in self.tracked:
            if item.gave_up_at is None or item.finished_before_give_up:
                continue
            for stamp in (item.completed_at, item.expired_at):
                assert stamp is None or stamp < item.gave_up_at, (
                    f"{item.composition}: callback after the waiting code gave up"
                )
            operation = item.operation
            assert not operation.is_completed
            submitted = operation.is_abandoned
            assert submitted or (operation._waiter is None and not operation.is_abandoned), (
                "given up, yet neither abandoned nor left unsubmitted"
            )

    @invariant()
    def callbacks_run_at_most_once(self) -> None:
        for item in self.tracked:
            assert item.callbacks in ([], ["complete"], ["complete", "expire"])
            if item.operation.is_abandoned:
                assert item.callbacks == []

    @invariant()
    def waiting_counts_the_unfinished_waiters(self) -> None:
        unfinished = [
            item
            for item in self.tracked
            if item.operation._waiter is not None and not self._finished(item)
        ]
        assert self.purgatory.waiting == len(unfinished)

    @invariant()
    def a_finished_operation_leaves_no_waiter_pending(self) -> None:
        for item in self.tracked:
            if self._finished(item):
                assert item.operation._waiter is None

    def teardown(self) -> None:
        try:
            for item in self.tracked:
                if item.task is not None:
                    item.task.cancel()
            pending = [item.task for item in self.tracked if item.task is not None]
            if pending:
                self._on_loop(asyncio.wait(pending))
            for item in self.tracked:  # retrieved: no "never retrieved" log
                for future in (item.waiter, item.task):
                    if future is not None and future.done() and not future.cancelled():
                        future.exception()
            self._call(self.purgatory.shutdown)
            assert self.purgatory.waiting == 0
            assert self.purgatory.purgatory.num_delayed in (
                0,
                sum(1 for item in self.tracked if not self._finished(item)),
            )
            for item in self.tracked:
                waiter = item.waiter
                if waiter is not None and item.operation._waiter is not None:
                    raise AssertionError(f"{item.composition}: waiter left pending")
        finally:
            self.loop.close()


class ReferenceCancellationMachine(CancellationMachine):
    implementation = "reference"


MACHINES: dict[str, type[CancellationMachine]] = {
    machine.implementation: machine
    for machine in (CancellationMachine, ReferenceCancellationMachine)
}


@pytest.mark.parametrize("implementation", ["optimized", "reference"])
def test_cancellation_machine(implementation: PurgatoryImplementation) -> None:
    """R47, R57, R58: every composition, cancelled at every loop step, keeps the rules."""
    run_state_machine_as_test(
        MACHINES[implementation],
        settings=settings(settings(), max_examples=60, stateful_step_count=40),
    )
