"""Deliberately wrong contracts: ``crosshair check`` must report every one of them.

tests/contracts/test_crosshair.py runs the CI bound on this module and asserts each
function below is reported, which shows the contract check can fail (a check that
never fails proves nothing). Not imported by the package or by the other tests.
"""

from __future__ import annotations

from kpurgatory.optimized.bucket import TimerTaskEntry, TimerTaskList
from kpurgatory.spec.arithmetic import deadline_level, round_down
from tests.contracts.sequences import BucketDriver

WRONG = ["round_down_strictly_below", "deadline_never_above_level_one", "leaky_bucket_sequence"]
"""Functions whose contract is false; each must be reported."""


def round_down_strictly_below(ms: int, tick_ms: int) -> int:
    """Wrong: forgets that a multiple of the tick rounds down to itself.

    pre: tick_ms >= 1
    post: __return__ < ms
    """
    return round_down(ms, tick_ms)


def deadline_never_above_level_one(due: int, current_time: int, tick_ms: int) -> int:
    """Wrong: a far due time climbs more than one level (Kafka's wheel of 20 x 1 ms).

    pre: tick_ms == 1
    pre: current_time == 0
    pre: due >= 0
    post: __return__ <= 1
    """
    return deadline_level(due, current_time, tick_ms, 20)


class _LeakyBucket(TimerTaskList):
    """A bucket whose ``remove`` forgets to decrement the shared counter."""

    __slots__ = ()

    def remove(self, entry: TimerTaskEntry) -> bool:
        if entry._entry_list is not self:
            return False
        entry._entry_prev._entry_next = entry._entry_next
        entry._entry_next._entry_prev = entry._entry_prev
        entry._entry_next = entry._entry_prev = entry
        entry._entry_list = None
        return True


def leaky_bucket_sequence(ops: list[int]) -> int:
    """Wrong: the sequence add-then-remove leaves the counter off by one.

    pre: len(ops) <= 4
    post: __return__ >= 0
    """
    driver = BucketDriver([])
    driver.bucket = _LeakyBucket(driver.counter, driver.lock, 0, 1)
    for op in ops:
        if op >= 0:
            driver.add(op)
        else:
            driver.remove(-op - 1)
        assert driver.bucket._check() == driver.counter.value, "counter out of step"
    return driver.counter.value
