"""R51: the asyncio purgatory in virtual time behaves as the threaded one on the same steps.

Hypothesis draws a list of steps (submit, make ready, event on a key, force_complete,
cancel/abandon, let time pass). The same steps run on

* the aio side: an ``AsyncPurgatory`` (each implementation) on a ``VirtualTimeLoop``;
  a submission is a task awaiting ``wait``; a cancel cancels that task (R47); time
  passes with ``asyncio.sleep`` (the loop jumps from due time to due time, R45);
* the threaded side: a reference ``DelayedOperationPurgatory`` on a ``ManualClock``
  with an ``InlineExecutor`` and no reaper, driven by ``advance_clock(ms)``; a cancel
  is ``abandon``.

After every step both sides must show the same completions and expiries (as a
multiset per step: on the aio side an expiry happens at its due time inside the step,
on the threaded side at the end of the step's ``advance_clock``), the same per-operation
state (completed, abandoned, try_complete calls), and the same ``watched``,
``num_delayed`` and ``num_completed``. At the end, each awaited outcome must be the
one the threaded side's events imply (R46). ``purge_interval`` is large so no purge
runs on either side: purges run at different moments (per firing vs per step).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpurgatory import InlineExecutor, ManualClock, reference
from kpurgatory.aio import AsyncPurgatory, Outcome, PurgatoryImplementation, run
from tests.aio.support import IMPLEMENTATIONS, Event, recording_operation

KEYS = st.sampled_from(["a", "b", "c"])
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.integers(0, 120), st.lists(KEYS, min_size=1, max_size=2)),
        st.tuples(st.just("ready"), st.integers(0, 20)),
        st.tuples(st.just("event"), KEYS),
        st.tuples(st.just("force"), st.integers(0, 20)),
        st.tuples(st.just("cancel"), st.integers(0, 20)),
        st.tuples(st.just("advance"), st.integers(0, 60)),
        st.tuples(st.just("until_due"), st.integers(0, 20), st.integers(-1, 1)),
    ),
    max_size=30,
)


class _SyncOperation(reference.DelayedOperation):
    def __init__(self, delay_ms: int, name: str, log: list[Event], clock: ManualClock) -> None:
        super().__init__(delay_ms)
        self.name, self.log, self.clock = name, log, clock
        self.ready = False
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.log.append(("complete", self.name, self.clock.now_ms()))

    def on_expiration(self) -> None:
        self.log.append(("expire", self.name, self.clock.now_ms()))


def _events(log: list[Event]) -> Counter[tuple[str, str]]:
    return Counter((kind, name) for kind, name, _ in log)


def _state(purgatory: Any, ops: list[Any]) -> tuple[Any, ...]:
    return (
        purgatory.watched,
        purgatory.num_delayed,
        purgatory.num_completed,
        [(op.is_completed, op.is_abandoned, op.tries) for op in ops],
    )


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(steps=STEPS, start=st.integers(-50, 50), tick=st.sampled_from([1, 3]))
def test_r51_aio_purgatory_matches_the_threaded_one(
    implementation: PurgatoryImplementation, steps: list[tuple[Any, ...]], start: int, tick: int
) -> None:
    sync_clock, aio_clock = ManualClock(start), ManualClock(start)
    sync_log: list[Event] = []
    aio_log: list[Event] = []
    timer = reference.SystemTimer("s", tick, clock=sync_clock, executor=InlineExecutor())
    sync: reference.DelayedOperationPurgatory[_SyncOperation] = reference.DelayedOperationPurgatory(
        "s", timer, purge_interval=10**6, reaper_enabled=False
    )
    sync_ops: list[_SyncOperation] = []
    dues: dict[str, int] = {}
    aio_op = recording_operation(implementation)

    async def main() -> None:
        aio: AsyncPurgatory[Any] = AsyncPurgatory[Any](
            "a", implementation=implementation, tick_ms=tick, purge_interval=10**6
        )
        aio_ops: list[Any] = []
        tasks: list[asyncio.Task[Outcome]] = []

        async def settle() -> None:
            for _ in range(4):
                await asyncio.sleep(0)

        for index, step in enumerate(steps):
            sync_before, aio_before = len(sync_log), len(aio_log)
            kind = step[0]
            if kind == "submit":
                _, delay, keys = step
                name = f"o{len(sync_ops)}"
                dues[name] = (sync_clock.now_ms() + delay) // tick * tick
                sync_ops.append(_SyncOperation(delay, name, sync_log, sync_clock))
                sync.try_complete_else_watch(sync_ops[-1], keys)
                aio_ops.append(aio_op(delay, name, aio_log, aio_clock))
                tasks.append(asyncio.get_running_loop().create_task(aio.wait(aio_ops[-1], keys)))
            elif kind == "event":
                assert sync.check_and_complete(step[1]) == aio.check_and_complete(step[1])
            elif kind in ("advance", "until_due"):
                if kind == "advance":
                    amount = step[1]
                elif sync_ops:  # to an operation's due time (or 1 ms either side)
                    op = sync_ops[step[1] % len(sync_ops)]
                    amount = max(0, dues[op.name] + step[2] - sync_clock.now_ms())
                else:
                    amount = 0
                sync.advance_clock(amount)
                await asyncio.sleep(amount / 1000)
            elif sync_ops:
                pick = step[1] % len(sync_ops)
                if kind == "ready":
                    sync_ops[pick].ready = aio_ops[pick].ready = True
                elif kind == "force":
                    assert sync_ops[pick].force_complete() == aio_ops[pick].force_complete()
                else:  # cancel
                    sync.abandon(sync_ops[pick])
                    tasks[pick].cancel()
            await settle()
            what = f"step {index} {step}"
            assert aio_clock.now_ms() == sync_clock.now_ms(), what
            assert _events(aio_log[aio_before:]) == _events(sync_log[sync_before:]), what
            assert _state(aio.purgatory, aio_ops) == _state(sync, sync_ops), what
        expected: list[Outcome | None] = []
        for op in sync_ops:
            events = {kind for kind, name, _ in sync_log if name == op.name}
            if "expire" in events:
                expected.append(Outcome.EXPIRED)
            elif "complete" in events:
                expected.append(Outcome.COMPLETED)
            else:
                expected.append(Outcome.ABANDONED if op.is_abandoned else None)
        aio.shutdown()  # pending waits end ABANDONED (R49)
        await settle()
        outcomes = ["cancelled" if task.cancelled() else task.result() for task in tasks]
        for got, want, op in zip(outcomes, expected, sync_ops, strict=True):
            if got == "cancelled":
                assert op.is_abandoned or op.is_completed  # cancelled after it finished
            elif want is None:
                assert got is Outcome.ABANDONED  # still pending at shutdown
            else:
                assert got is want, (op.name, got, want)

    run(main(), aio_clock)
    sync.shutdown()
