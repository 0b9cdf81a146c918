"""Invariants of the optimized bucket list and wheel, in a form CrossHair can check.

CrossHair builds ``self`` by calling ``__init__`` with symbolic arguments and then
checks one method call, so a class invariant on ``TimerTaskList`` itself would only
ever see a fresh bucket. Two forms get further:

* ``BucketDriver`` / ``WheelDriver``: small classes with ``inv:`` invariants (the
  structures' own ``_check`` plus a model count) whose methods are the operations;
  CrossHair checks that each method preserves the invariants from any state reachable
  by ``__init__``;
* ``bucket_sequence`` / ``wheel_sequence``: functions that run a whole symbolic list of
  operations on a fresh structure against a plain model, checking after every step, so
  bugs that need a sequence of calls are in reach.

Every invariant violation surfaces as a failed condition or an ``AssertionError`` from
the structure's ``_check`` (which CrossHair reports as an error).
"""

from __future__ import annotations

import threading

from kpurgatory.optimized.bucket import TaskCounter, TimerTaskEntry, TimerTaskList
from kpurgatory.optimized.delay_queue import DelayQueue
from kpurgatory.optimized.timer import TimerTask
from kpurgatory.optimized.wheel import TimingWheel


class StandInTask(TimerTask):
    """Stands in for a scheduled task due at ``due`` (a task is its own entry): the bucket
    and the wheel link and place it but never run it. A real ``TimerTask`` subclass, so
    the mypyc-compiled wheel accepts it (tests/contracts/diff_pairs.py uses it too)."""

    __slots__ = ()

    def __init__(self, due: int) -> None:
        super().__init__(0)
        self._entry_due = due

    def run(self) -> None:
        raise AssertionError("the bucket and the wheel never run a task")


class BucketDriver:
    """One bucket plus the entries the driver has linked into it.

    inv: self.bucket._check() == len(self.linked)
    inv: self.counter.value == len(self.linked)
    inv: all(entry._entry_list is self.bucket for entry in self.linked)
    """

    def __init__(self, dues: list[int]) -> None:
        """
        pre: len(dues) <= 3
        """
        self.lock = threading.RLock()
        self.counter = TaskCounter()
        self.bucket = TimerTaskList(self.counter, self.lock, 0, 1)
        self.linked: list[TimerTaskEntry] = []
        for due in dues:
            self.add(due)

    def add(self, due: int) -> int:
        """Link a new entry; return the bucket's size.

        post: __return__ == len(self.linked)
        """
        entry = StandInTask(due)
        self.bucket.add(entry)
        self.linked.append(entry)
        return len(self.linked)

    def remove(self, index: int) -> bool:
        """Unlink the ``index``-th linked entry (if any); a second remove is refused.

        post: __return__ == (0 <= index < __old__.self.linked.__len__())
        """
        if not 0 <= index < len(self.linked):
            return False
        entry = self.linked.pop(index)
        removed = self.bucket.remove(entry)
        assert not self.bucket.remove(entry), "an entry was unlinked twice"
        return removed

    def flush(self) -> list[int]:
        """Unlink everything, head first; return the due times in insertion order.

        post: __return__ == [entry._entry_due for entry in __old__.self.linked]
        post: self.bucket.expiration is None
        """
        flushed: list[int] = []
        self.bucket.flush(lambda entry: flushed.append(entry._entry_due))
        self.linked.clear()
        return flushed


def bucket_sequence(ops: list[int]) -> list[int]:
    """Run ``ops`` on a fresh bucket (``op >= 0``: add an entry due ``op``; ``op < 0``:
    remove linked entry ``-op - 1``); return the due times left, head first.

    pre: len(ops) <= 6
    post: __return__ == _bucket_model(ops)
    """
    driver = BucketDriver([])
    for op in ops:
        if op >= 0:
            driver.add(op)
        else:
            driver.remove(-op - 1)
        assert driver.bucket._check() == len(driver.linked) == driver.counter.value
    return [entry._entry_due for entry in driver.bucket.entries()]


def _bucket_model(ops: list[int]) -> list[int]:
    model: list[int] = []
    for op in ops:
        if op >= 0:
            model.append(op)
        elif -op - 1 < len(model):
            del model[-op - 1]
    return model


class WheelDriver:
    """A wheel with Kafka's 1 ms x 4 buckets shape (levels grow as needed).

    inv: self.wheel._check() == self.counter.value
    inv: self.wheel.current_time % self.wheel.tick_ms == 0
    """

    def __init__(self, start_ms: int) -> None:
        """
        pre: -100 <= start_ms <= 100
        """
        self.lock = threading.RLock()
        self.counter = TaskCounter()
        self.queue = DelayQueue(self.lock)
        self.wheel = TimingWheel(1, 4, start_ms, self.counter, self.queue, self.lock)

    def add(self, delay: int) -> bool:
        """Add an entry due ``delay`` ms after the current time; True iff linked.

        pre: 0 <= delay <= 200
        post: __return__ == (delay >= 1)
        """
        with self.lock:
            return self.wheel.add(StandInTask(self.wheel.current_time + delay))

    def advance(self, step: int) -> int:
        """Drain every bucket due within ``step`` ms, cascading the rest; return how many
        entries were handed over (the timer's drain loop, minus the hand-over).

        pre: 0 <= step <= 200
        post: __return__ >= 0
        """
        with self.lock:
            now = self.wheel.current_time + step
            due: list[TimerTaskEntry] = []

            def cascade(entry: TimerTaskEntry) -> None:
                if not self.wheel.add(entry):
                    due.append(entry)

            while True:
                bucket = self.queue.poll(now)
                if bucket is None:
                    break
                expiration = bucket.expiration
                assert expiration is not None
                self.wheel.advance_clock(expiration)
                bucket.flush(cascade)
            self.wheel.advance_clock(now)
            assert all(entry._entry_due <= now for entry in due), "drained an entry early"
            return len(due)


def wheel_sequence(start_ms: int, ops: list[int]) -> int:
    """Run ``ops`` on a fresh wheel (``op > 0``: add an entry ``op`` ms ahead; ``op <= 0``:
    advance by ``-op`` ms); return how many entries were handed over in total.

    Every entry is handed over exactly when its due time is reached: the total equals a
    model that tracks due times alone, and the wheel's invariants hold after each step.

    pre: -100 <= start_ms <= 100
    pre: len(ops) <= 5
    pre: all(-100 <= op <= 100 for op in ops)
    post: __return__ == _wheel_model(start_ms, ops)
    """
    driver = WheelDriver(start_ms)
    fired = 0
    for op in ops:
        if op > 0:
            driver.add(op)
        else:
            fired += driver.advance(-op)
        assert driver.wheel._check() == driver.counter.value
    return fired


def _wheel_model(start_ms: int, ops: list[int]) -> int:
    now, pending, fired = start_ms, [], 0
    for op in ops:
        if op > 0:
            pending.append(now + op)
        else:
            now -= op
            fired += sum(1 for due in pending if due <= now)
            pending = [due for due in pending if due > now]
    return fired
