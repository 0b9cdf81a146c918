"""Finished operations are let go (R61), on both implementations and the aio layer.

Once every operation has finished, ``watched`` is 0 and no finished operation is
reachable from the purgatory (checked with weak references after a collection), with
the default settings; while one is unfinished, finished ones linger as R23-R30 say.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import ManualClock
from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, run
from kpurgatory.executors import InlineExecutor
from tests.aio.support import recording_operation
from tests.support import Recorder, operation_class


def make_purgatory(impl: ModuleType, clock: ManualClock) -> Any:
    timer = impl.SystemTimer("p", clock=clock, executor=InlineExecutor())
    return impl.DelayedOperationPurgatory("p", timer, reaper_enabled=False)


def test_r61_a_round_of_completions_and_expiries_leaves_nothing_behind(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R61: 300 operations on 2 keys each (a shared key and their own); a third complete
    through the shared key, a third expire, a third are abandoned. While any is
    unfinished, the finished ones linger on their own keys; once all have finished,
    watched is 0 and none of them is reachable any more."""
    purgatory = make_purgatory(impl, clock)
    op = operation_class(impl)
    refs: list[weakref.ref[Any]] = []
    ops = [op(50 if i % 3 == 1 else 10**6, f"o{i}", recorder) for i in range(300)]
    for index, each in enumerate(ops):
        purgatory.try_complete_else_watch(each, ["shared", f"own-{index}"])
        refs.append(weakref.ref(each))
    for each in ops[0::3]:
        each.ready = True
    assert purgatory.check_and_complete("shared") == 100
    assert purgatory.watched == 500  # 200 pending on 2 keys, 100 finished on their own
    clock.advance(50)
    purgatory.advance_clock(0)
    assert all(each.is_completed for each in ops[1::3])
    assert purgatory.watched > 0  # the abandoned third is still unfinished
    for each in ops[2::3]:
        assert purgatory.abandon(each) is True
    assert (purgatory.watched, purgatory.watched_keys, purgatory.num_delayed) == (0, 0, 0)
    assert purgatory.num_purged > 0
    del ops, each
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []


def test_r61_one_unfinished_operation_keeps_the_lazy_rules(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R61, R27: with one operation still unfinished nothing is unlinked early; when it
    finishes, everything goes at once."""
    purgatory = make_purgatory(impl, clock)
    op = operation_class(impl)
    keeper, done = op(10**6, "keeper", recorder), op(10**6, "done", recorder)
    purgatory.try_complete_else_watch(keeper, ["a"])
    purgatory.try_complete_else_watch(done, ["a", "b"])
    done.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert (purgatory.watched, purgatory.watched_keys) == (2, 2)  # "done" lingers on "b"
    keeper.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert (purgatory.watched, purgatory.watched_keys) == (0, 0)


@pytest.mark.parametrize("implementation", ["optimized", "reference"])
def test_r61_aio_finished_waits_are_let_go(implementation: PurgatoryImplementation) -> None:
    """R61 on the aio layer: after a round of waits that all finished (published,
    expired, hung up), watched is 0 and no operation is reachable."""
    clock = ManualClock(0)
    log: list[Any] = []
    op = recording_operation(implementation)
    refs: list[weakref.ref[Any]] = []

    async def main() -> None:
        async with AsyncPurgatory[Any]("polls", implementation=implementation) as purgatory:
            tasks = []
            for index in range(90):
                operation = op(30, f"p{index}", log, clock, ready=False)
                refs.append(weakref.ref(operation))
                keys = ["topic", f"client-{index}"]
                tasks.append(asyncio.create_task(purgatory.wait(operation, keys)))
                del operation
            await asyncio.sleep(0)
            for task in tasks[2::3]:
                task.cancel()  # hung up
            for ref in refs[0::3]:
                alive = ref()
                assert alive is not None
                alive.ready = True
                del alive
            purgatory.check_and_complete("topic")
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            assert outcomes.count(Outcome.COMPLETED) == 30
            assert outcomes.count(Outcome.EXPIRED) == 30
            assert purgatory.purgatory.watched == 0
            del tasks, outcomes

    run(main(), clock)
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
