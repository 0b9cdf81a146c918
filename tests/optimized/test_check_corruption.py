"""Every ``_check()`` assertion fires on a deliberately corrupted structure.

One case per ``raise AssertionError`` in ``TimerTaskList._check``, ``TimingWheel._check``,
``DelayQueue._check`` and ``SystemTimer._check``, a few of them on a timer a bounded drain
left half done (R72) (a meta-test counts them in the
source, so a new check without a case fails here). Each case builds a healthy timer
with tasks on four levels, checks that it passes, corrupts exactly one thing and
asserts that the structure's own ``_check()`` raises with the expected message.
"""

from __future__ import annotations

import heapq
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.optimized import timer as timer_module
from kpurgatory.optimized.bucket import HandOver, TaskCounter, TimerTaskEntry, TimerTaskList
from kpurgatory.optimized.delay_queue import DelayQueue
from kpurgatory.optimized.timer import SystemTimer
from kpurgatory.optimized.wheel import TimingWheel
from kpurgatory.pipeline.builds import optimized_build
from tests.optimized.helpers import Task, manual_timer
from tests.support import ready_operation

DELAYS = (5, 5, 30, 31, 500, 10_000)
"""Two tasks in one lowest-level bucket, two on level 2, one each on levels 3 and 4."""


def healthy(tick_ms: int = 1) -> SystemTimer:
    timer = manual_timer(tick_ms=tick_ms)
    log: list[str] = []
    for delay in DELAYS:
        timer.add(Task(delay * tick_ms, f"d{delay}", log))
    timer._check()
    return timer


def first_bucket(timer: SystemTimer, level: int = 0) -> TimerTaskList:
    """The bucket of ``level`` holding the most entries (at least one)."""
    wheel = timer._wheel.levels()[level]
    return max(wheel.buckets, key=lambda bucket: len(bucket.entries()))


def empty_bucket(timer: SystemTimer) -> TimerTaskList:
    return next(bucket for bucket in timer._wheel.buckets if not bucket.entries())


def queued_ids(timer: SystemTimer) -> set[int]:
    return {id(bucket) for bucket in timer._queue.buckets()}


@dataclass(frozen=True)
class Case:
    """Corrupt ``healthy()``'s timer; then ``check(timer)`` must raise matching ``match``."""

    structure: str
    match: str
    corrupt: Callable[[SystemTimer], None]
    tick_ms: int = 1


def bucket_check(timer: SystemTimer) -> None:
    first_bucket(timer)._check()


def wheel_check(timer: SystemTimer) -> None:
    timer._wheel._check(queued_ids(timer), timer._queue.unfinished)


def queue_check(timer: SystemTimer) -> None:
    timer._queue._check()


def timer_check(timer: SystemTimer) -> None:
    timer._check()


CHECKS: dict[str, Callable[[SystemTimer], None]] = {
    "bucket": bucket_check,
    "wheel": wheel_check,
    "queue": queue_check,
    "timer": timer_check,
}


def _set(obj: object, name: str, value: object) -> None:
    setattr(obj, name, value)


def _link_bare_entry(timer: SystemTimer) -> None:
    bucket = first_bucket(timer)
    bucket.add(TimerTaskEntry(bucket.entries()[0]._entry_due))


def _break_back_link(timer: SystemTimer) -> None:
    head = first_bucket(timer).entries()[0]
    head._entry_next._entry_prev = head._entry_next


def _swap_heap(timer: SystemTimer) -> None:
    heap = timer._queue.heap
    heap[0], heap[-1] = heap[-1], heap[0]


def _queue_foreign_bucket(timer: SystemTimer) -> None:
    other = healthy()
    timer._queue.heap.append(other._queue.heap[0])
    timer._queue.heap.sort(key=lambda item: item[:2])


def _overflow(timer: SystemTimer) -> TimingWheel:
    overflow = timer._wheel.overflow
    assert overflow is not None
    return overflow


def _time_off_tick(timer: SystemTimer) -> None:
    timer._current_time = 1
    timer._wheel.current_time = 1


def _stopped_inside_a_bucket(timer: SystemTimer) -> TimerTaskList:
    """A bounded drain (R72) at 20 that takes both tasks due at 5, then one of the two
    on level 2 (bucket 20: due 30 and 31), and stops there; the bucket it left."""
    clock = timer.clock
    assert isinstance(clock, ManualClock)
    clock.advance(20)
    timer.advance_clock(0, 3)
    unfinished = timer._queue.unfinished
    assert unfinished is not None and unfinished.expiration == 20
    timer._check()
    return unfinished


def _unfinished_in_another_round(timer: SystemTimer) -> None:
    """The unfinished bucket's expiration moved a whole round on: still its slot's start."""
    unfinished = _stopped_inside_a_bucket(timer)
    unfinished.expiration = 20 + timer._wheel.interval * timer.wheel_size


def _cache_stranger(timer: SystemTimer) -> None:
    timer_module._TASK_TYPES.add(int)


CASES: dict[str, Case] = {
    # TimerTaskList._check
    "sentinel-linked": Case(
        "bucket", "sentinel", lambda t: _set(first_bucket(t).root, "_entry_list", first_bucket(t))
    ),
    "links-disagree": Case("bucket", "links disagree", _break_back_link),
    "foreign-holder": Case(
        "bucket",
        "another holder",
        lambda t: _set(first_bucket(t).entries()[1], "_entry_list", HandOver(t._lock)),
    ),
    "bare-entry-linked": Case("bucket", "without a task", _link_bare_entry),
    "more-than-counter": Case("bucket", "shared counter", lambda t: _set(t._counter, "value", 0)),
    # TimingWheel._check
    "current-off-tick": Case(
        "wheel", "not a multiple", lambda t: _set(t._wheel, "current_time", 1), tick_ms=2
    ),
    "interval": Case("wheel", "interval", lambda t: _set(t._wheel, "interval", 21)),
    "bucket-count": Case("wheel", "buckets, not", lambda t: _set(t._wheel, "buckets", [])),
    "overflow-tick": Case("wheel", "overflow tick", lambda t: _set(_overflow(t), "tick_ms", 21)),
    "overflow-size": Case(
        "wheel", "overflow wheel_size", lambda t: _set(_overflow(t), "wheel_size", 3)
    ),
    "overflow-shares": Case(
        "wheel", "does not share", lambda t: _set(_overflow(t), "counter", TaskCounter())
    ),
    "overflow-current": Case(
        "wheel", "overflow current time", lambda t: _set(_overflow(t), "current_time", 20)
    ),
    "slot-labels": Case("wheel", "slot/tick labels", lambda t: _set(first_bucket(t), "slot", 99)),
    "bucket-lock": Case(
        "wheel", "another lock", lambda t: _set(first_bucket(t), "lock", threading.RLock())
    ),
    "entries-no-expiration": Case(
        "wheel", "entries, no expiration", lambda t: _set(first_bucket(t), "expiration", None)
    ),
    "queued-no-expiration": Case(
        "wheel",
        "queued, no expiration",
        lambda t: t._queue.heap.append((10**9, -1, empty_bucket(t))),
    ),
    "expiration-not-queued": Case("wheel", "not queued", lambda t: t._queue.heap.clear()),
    "expiration-off-slot": Case(
        "wheel", "slot start", lambda t: _set(first_bucket(t, 1), "expiration", 21)
    ),
    "expiration-outside-window": Case(
        "wheel",
        "outside the window",
        lambda t: _set(
            first_bucket(t),
            "expiration",
            (first_bucket(t).expiration or 0) + t._wheel.interval,
        ),
    ),
    "entry-in-wrong-slot": Case(
        "wheel",
        "lies in bucket",
        lambda t: _set(first_bucket(t, 1).entries()[0], "_entry_due", 10**6),
    ),
    "counter-total": Case("wheel", "task counter", lambda t: _set(t._counter, "value", 99)),
    "unfinished-off-level-time": Case(
        "wheel", "not at the level's current time", _unfinished_in_another_round
    ),
    # DelayQueue._check
    "negative-waiters": Case("queue", "negative waiters", lambda t: _set(t._queue, "waiters", -1)),
    "target-without-waiter": Case("queue", "no waiter", lambda t: _set(t._queue, "target", 5)),
    "queued-twice": Case(
        "queue",
        "queued twice",
        lambda t: heapq.heappush(t._queue.heap, (t._queue.heap[0][0], 10**9, t._queue.heap[0][2])),
    ),
    "key-changed": Case(
        "queue",
        "queued under",
        lambda t: _set(t._queue.heap[0][2], "expiration", (t._queue.heap[0][0]) + 1),
    ),
    "not-a-heap": Case("queue", "not a heap", _swap_heap),
    "unfinished-no-expiration": Case(
        "queue", "has no expiration", lambda t: _set(t._queue, "unfinished", empty_bucket(t))
    ),
    # SystemTimer._check
    "timer-time-differs": Case(
        "timer", "wheel time", lambda t: _set(t, "_current_time", t._current_time + 1)
    ),
    "timer-time-off-tick": Case(
        "timer",
        "not a tick multiple",
        _time_off_tick,
        tick_ms=2,
    ),
    "foreign-bucket-queued": Case("timer", "another timer", _queue_foreign_bucket),
    "timer-time-behind-wheel": Case(
        "timer", "> current time", lambda t: _set(t, "_current_time", t._current_time - 1)
    ),
    "timer-unfinished-off-wheel": Case(
        "timer", "not at the wheel's time", _unfinished_in_another_round
    ),
    "task-cache-stranger": Case("timer", "class cache", _cache_stranger),
}


@pytest.fixture(autouse=True)
def _restore_task_cache() -> object:
    saved = set(timer_module._TASK_TYPES)
    yield None
    timer_module._TASK_TYPES.clear()
    timer_module._TASK_TYPES.update(saved)


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_raises_on_the_corruption(name: str) -> None:
    case = CASES[name]
    timer = healthy(case.tick_ms)
    check = CHECKS[case.structure]
    check(timer)  # healthy first: the corruption below is what breaks it
    case.corrupt(timer)
    with pytest.raises(AssertionError, match=case.match):
        check(timer)


SOURCES: dict[str, tuple[Callable[..., object], ...]] = {
    "bucket": (TimerTaskList._check,),
    "wheel": (TimingWheel._check, TimingWheel._check_overflow, TimingWheel._check_buckets),
    "queue": (DelayQueue._check,),
    "timer": (SystemTimer._check, SystemTimer._check_pending_drain),
}
"""Each structure's ``_check`` and the helpers it delegates to."""


@pytest.mark.skipif(
    optimized_build() == "compiled", reason="the mypyc build has no source to count in"
)
@pytest.mark.parametrize("structure", sorted(SOURCES))
def test_every_assertion_has_a_corruption_case(structure: str) -> None:
    """As many cases as ``raise AssertionError`` statements in that ``_check`` (and the
    helpers it delegates to)."""
    source = "".join(inspect.getsource(function) for function in SOURCES[structure])
    raises = len(re.findall(r"raise AssertionError", source))
    cases = sum(1 for case in CASES.values() if case.structure == structure)
    assert cases == raises, f"{structure}: {raises} assertions, {cases} corruption cases"


# -- the purgatory's _check() on corrupted watcher lists ---------------------------------------


def _corruptible() -> Any:
    from kpurgatory import optimized

    timer = optimized.SystemTimer("corrupt", clock=ManualClock(0), executor=InlineExecutor())
    purgatory: Any = optimized.DelayedOperationPurgatory(
        "corrupt", timer=timer, reaper_enabled=False, shards=4
    )
    for index in range(3):
        op = ready_operation(optimized)(10)
        assert purgatory.try_complete_else_watch(op, [f"k{index}"]) is False
    purgatory._check()  # sound before the corruption
    return purgatory


def _shard_of(purgatory: Any, key: str) -> Any:
    return purgatory._shards[abs(hash(key)) % purgatory.shards]


def _other_shard(purgatory: Any, key: str) -> Any:
    own = _shard_of(purgatory, key)
    return next(shard for shard in purgatory._shards if shard is not own)


@pytest.mark.parametrize(
    ("corruption", "says"),
    [
        ("count", "counts"),
        ("misplaced", "not its own"),
        ("empty", "empty watcher list"),
        ("wrong_id", "wrong id"),
        ("foreign_list", "maps to the list of"),
        ("negative", "negative"),
    ],
)
def test_optimized_purgatory_check_raises_on_corruption(corruption: str, says: str) -> None:
    from kpurgatory.optimized.purgatory import WatcherList

    purgatory = _corruptible()
    shard = _shard_of(purgatory, "k0")
    watchers = shard.watchers["k0"]
    if corruption == "count":
        shard.count += 1
    elif corruption == "misplaced":
        other = _other_shard(purgatory, "k0")  # counts moved along: only the key is wrong
        other.watchers["k0"] = shard.watchers.pop("k0")
        other.count += len(watchers)
        shard.count -= len(watchers)
    elif corruption == "empty":
        shard.watchers["k0"] = WatcherList("k0")
    elif corruption == "wrong_id":
        (op,) = watchers.ops.values()
        watchers.ops.clear()
        watchers.ops[id(op) + 1] = op
    elif corruption == "foreign_list":
        shard.watchers["k0"] = WatcherList("elsewhere")
        shard.watchers["k0"].ops.update(watchers.ops)
    else:
        purgatory._num_purged = -1
    with pytest.raises(AssertionError, match=says):
        purgatory._check()
