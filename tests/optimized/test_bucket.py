"""Unit tests of the bucket list (``TimerTaskList``), the entry slots a task carries
(``TimerTaskEntry``), the drain marker (``HandOver``) and ``_check``."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable

from kpurgatory.optimized.bucket import (
    UNLINKED,
    EntryHolder,
    HandOver,
    TaskCounter,
    TimerTaskEntry,
    TimerTaskList,
)
from kpurgatory.optimized.operation import DelayedOperation
from kpurgatory.optimized.timer import TimerTask
from tests.optimized.helpers import Task, assert_check_fails, locate, manual_timer


class Noop(TimerTask):
    """A task that does nothing (the bucket never runs tasks)."""

    def run(self) -> None:
        """Nothing to do."""


LOCK = threading.RLock()


def entry(due: int) -> TimerTaskEntry:
    """A task carrying a scheduling due at ``due`` (what the timer sets before linking)."""
    task = Noop(0)
    task._entry_due = due
    return task


def holder_of(e: TimerTaskEntry) -> EntryHolder | None:
    """Read ``e``'s holder (a call, so mypy does not keep a narrowed type across steps)."""
    return e._entry_list


def make(counter: TaskCounter | None = None) -> TimerTaskList:
    return TimerTaskList(TaskCounter() if counter is None else counter, LOCK, 0, 1)


def test_add_keeps_order_and_counts() -> None:
    bucket = make()
    entries = [entry(5) for _ in range(4)]
    for e in entries:
        bucket.add(e)
    assert bucket.entries() == entries
    assert bucket.counter.value == 4
    assert all(e._entry_list is bucket for e in entries)
    assert bucket._check() == 4


def test_remove_is_o1_and_only_from_its_own_list() -> None:
    counter = TaskCounter()
    first, second = make(counter), make(counter)
    a, b, c = entry(1), entry(1), entry(1)
    for e in (a, b, c):
        first.add(e)
    assert second.remove(b) is False  # not linked there: nothing happens
    assert counter.value == 3
    assert first.remove(b) is True
    assert first.remove(b) is False  # idempotent
    assert first.entries() == [a, c]
    assert b._entry_list is None and b._entry_next is UNLINKED and b._entry_prev is UNLINKED
    assert counter.value == 2
    first._check()


def test_add_moves_an_entry_linked_elsewhere() -> None:
    """An entry is in at most one list: adding it to another list unlinks it first."""
    counter = TaskCounter()
    first, second = make(counter), make(counter)
    e = entry(3)
    first.add(e)
    second.add(e)
    assert first.is_empty() and second.entries() == [e]
    assert counter.value == 1
    first._check()
    second._check()


def test_counter_is_shared_between_buckets() -> None:
    counter = TaskCounter()
    buckets = [make(counter) for _ in range(3)]
    for index, bucket in enumerate(buckets):
        for _ in range(index + 1):
            bucket.add(entry(index))
    assert counter.value == 6
    assert sum(bucket._check() for bucket in buckets) == 6


def test_set_expiration_reports_change() -> None:
    bucket = make()
    assert bucket.expiration is None
    assert bucket.set_expiration(10) is True
    assert bucket.set_expiration(10) is False
    assert bucket.set_expiration(-1) is True  # -1 is a real slot start on negative clocks


def test_flush_unlinks_everything_in_order_and_resets_expiration() -> None:
    bucket = make()
    entries = [entry(7) for _ in range(3)]
    for e in entries:
        bucket.add(e)
    bucket.set_expiration(7)
    seen: list[TimerTaskEntry] = []

    def visit(e: TimerTaskEntry) -> None:
        assert e._entry_list is None  # unlinked before the callback runs
        seen.append(e)

    bucket.flush(visit)
    assert seen == entries
    assert bucket.is_empty()
    assert bucket.expiration is None
    assert bucket.counter.value == 0
    bucket._check()


def flush_acting_at(
    bucket: TimerTaskList, first: TimerTaskEntry, action: Callable[[], object]
) -> list[TimerTaskEntry]:
    """Flush ``bucket`` with a callback that runs ``action`` when it is handed ``first``;
    the entries it was handed, in order."""
    seen: list[TimerTaskEntry] = []

    def visit(e: TimerTaskEntry) -> None:
        seen.append(e)
        if e is first:
            action()

    bucket.flush(visit)
    return seen


def test_flush_callback_may_remove_from_the_same_list() -> None:
    """Re-entrant flush: the callback cancels a later entry of the bucket being flushed."""
    bucket = make()
    a, b, c = entry(1), entry(1), entry(1)
    for e in (a, b, c):
        bucket.add(e)
    assert flush_acting_at(bucket, a, lambda: bucket.remove(c)) == [a, b]
    assert bucket.counter.value == 0
    bucket._check()


def test_flush_callback_may_add_to_the_same_list() -> None:
    """An entry the callback puts back is flushed as well (Kafka's flush loop)."""
    bucket = make()
    a, b = entry(1), entry(1)
    bucket.add(a)
    assert flush_acting_at(bucket, a, lambda: bucket.add(b)) == [a, b]
    assert bucket.is_empty()


def test_min_due_scans_for_the_least_due_time() -> None:
    bucket = TimerTaskList(TaskCounter(), LOCK, 0, 10)
    assert bucket.min_due() is None
    bucket.set_expiration(20)
    for due in (27, 23, 25):
        bucket.add(entry(due))
    assert bucket.min_due() == 23
    bucket.add(entry(20))
    assert bucket.min_due() == 20


def test_check_detects_broken_links() -> None:
    bucket = make()
    a, b = entry(1), entry(1)
    bucket.add(a)
    bucket.add(b)
    b._entry_prev = b  # corrupt the back link
    assert_check_fails(bucket, "links disagree")


def test_check_detects_an_entry_pointing_at_another_list() -> None:
    bucket, other = make(), make()
    a = entry(1)
    bucket.add(a)
    a._entry_list = other
    assert_check_fails(bucket, "another holder")


def test_check_detects_more_entries_than_the_counter() -> None:
    bucket = make()
    bucket.add(entry(1))
    bucket.add(entry(1))
    bucket.counter.value = 0
    assert_check_fails(bucket, "counter")


def test_check_detects_a_bare_entry_linked_as_a_task() -> None:
    bucket = make()
    bucket.add(TimerTaskEntry(1))
    assert_check_fails(bucket, "without a task")


def test_a_task_is_its_own_entry_with_no_dict() -> None:
    """The memory saving of issue 5: no separate entry object, and no ``__dict__``."""

    class Slotted(TimerTask):
        __slots__ = ()

        def run(self) -> None:
            """Nothing to do."""

    task = Slotted(5)
    assert isinstance(task, TimerTaskEntry)
    assert not hasattr(task, "__dict__")

    class SlottedOperation(DelayedOperation):
        __slots__ = ()

        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            """Nothing to do."""

        def on_expiration(self) -> None:
            """Nothing to do."""

    assert not hasattr(SlottedOperation(5), "__dict__")  # DelayedOperation has slots too
    assert task._entry_list is None and task._entry_next is UNLINKED  # no self-cycle


def test_hand_over_marker_forgets_only_its_own_entries() -> None:
    """A drain's marker holds collected entries until their turn (R11)."""
    bucket, marker, other = make(), HandOver(LOCK), HandOver(LOCK)
    a = entry(1)
    a._entry_list = marker
    assert other.remove(a) is False and holder_of(a) is marker
    bucket.add(a)  # a re-add detaches it from the marker first
    assert holder_of(a) is bucket and bucket.counter.value == 1
    bucket.remove(a)
    a._entry_list = marker
    assert marker.remove(a) is True and holder_of(a) is None
    a._entry_list = marker
    assert "collected" in repr(a)


def test_finished_tasks_are_freed_by_refcount_not_by_the_cycle_collector() -> None:
    """Neither a new task nor an unlinked one points at itself: dropping it frees it."""

    class Weak(TimerTask):
        __slots__ = ("__weakref__",)

        def run(self) -> None:
            """Nothing to do."""

    bucket = make()
    task = Weak(0)
    task._entry_due = 1
    bucket.add(task)
    bucket.remove(task)
    ref = weakref.ref(task)
    gc.disable()
    try:
        del task
        assert ref() is None
    finally:
        gc.enable()


class _AllEqual(Task):
    """A task equal to whatever has its priority, read with a default of 0: every task of
    this class, and the bucket's root entry too. The timer must link, unlink and check
    entries by identity, whatever a task's ``__eq__`` says."""

    priority = 0

    def __eq__(self, other: object) -> bool:
        return bool(getattr(other, "priority", 0) == self.priority)

    __hash__ = Task.__hash__


def test_r9_r12_tasks_that_compare_equal_are_linked_and_checked_by_identity() -> None:
    """R9, R12: three tasks equal to each other (and to the bucket's root, an entry too) in
    one bucket: ``_check()`` walks the whole ring (a walk that stopped at an equal entry
    would count one), and cancelling the middle one unlinks that one only."""
    timer = manual_timer()
    log: list[str] = []
    tasks = [_AllEqual(5, name, log) for name in ("a", "b", "c")]
    for task in tasks:
        timer.add(task)
    timer._check()
    assert timer.size == 3
    tasks[1].cancel()
    timer._check()
    assert timer.size == 2 and locate(timer, tasks[1]) is None
    assert locate(timer, tasks[0]) == locate(timer, tasks[2]) is not None
