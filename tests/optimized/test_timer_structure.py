"""The optimized timer's structure: ``_check()`` under random operations, moves between
timers, the delay queue, and the real-clock wait on the exact earliest due time."""

from __future__ import annotations

import gc
import random
import threading
import time
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpurgatory import InlineExecutor, MonotonicClock
from kpurgatory.optimized import SystemTimer
from kpurgatory.optimized.bucket import TaskCounter, TimerTaskList
from kpurgatory.optimized.delay_queue import DelayQueue
from kpurgatory.spec.arithmetic import round_down
from tests.mutants.catalog import Mutant, applied
from tests.optimized.helpers import Task, assert_check_fails, locate, manual_timer
from tests.support import needs_python_source
from tests.timer_support import random_timer_steps

# -- _check() after random operations, against a tiny model ----------------------------------

Op = tuple[str, int, int]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 1), st.integers(-5, 300)),
        st.tuples(st.just("cancel"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("readd"), st.integers(0, 7), st.integers(0, 1)),
        st.tuples(st.just("advance"), st.integers(0, 1), st.sampled_from([0, 1, 2, 3, 9, 27, 500])),
    ),
    max_size=40,
)


@settings(max_examples=60)
@given(
    tick=st.integers(1, 3),
    size=st.integers(2, 4),
    start=st.integers(-20, 20),
    steps=ops,
)
def test_random_operations_keep_every_invariant(
    tick: int, size: int, start: int, steps: list[Op]
) -> None:
    """R1-R12: after every step both timers pass ``_check()``, sizes match a model of
    what is scheduled where, and every hand-over is of a due task in due order (R6)."""
    log: list[str] = []
    timers = [manual_timer(tick, size, start), manual_timer(tick, size, start)]
    tasks: list[Task] = []
    where: dict[str, tuple[int, int]] = {}  # name -> (timer index, due)

    def schedule(task: Task, index: int) -> None:
        timer = timers[index]
        where.pop(task.name, None)
        due = round_down(timer.clock.now_ms() + task.delay_ms, tick)
        before = len(log)
        timer.add(task)
        if due <= timer.current_time:
            assert log[before:] == [task.name]  # R3: handed over inside add
        else:
            assert log[before:] == []
            where[task.name] = (index, due)

    try:
        for kind, a, b in steps:
            if kind == "add":
                task = Task(b, f"t{len(tasks)}", log)
                tasks.append(task)
                schedule(task, a)
            elif kind == "cancel" and tasks:
                task = tasks[a % len(tasks)]
                task.cancel()
                where.pop(task.name, None)
            elif kind == "readd" and tasks:
                schedule(tasks[a % len(tasks)], b)
            elif kind == "advance":
                timer = timers[a]
                before = len(log)
                now = timer.clock.now_ms() + b
                due_names = sorted(
                    (due, name) for name, (index, due) in where.items() if index == a and due <= now
                )
                ran = timer.advance_clock(b)
                handed = log[before:]
                assert sorted(handed) == sorted(name for _, name in due_names)
                dues = {name: due for due, name in due_names}
                assert [dues[name] for name in handed] == sorted(dues[name] for name in handed)
                assert ran == bool(handed)
                for _, name in due_names:
                    del where[name]
            for index, timer in enumerate(timers):
                timer._check()
                assert timer.size == sum(1 for i, _ in where.values() if i == index)
    finally:
        for timer in timers:
            timer.close()


# -- moving a task between timers (R10) ------------------------------------------------------


def test_readd_across_timers_moves_the_single_entry() -> None:
    """R10/R12: a task scheduled in A and added to B leaves A; moving back leaves B."""
    log: list[str] = []
    with manual_timer(1, 3) as first, manual_timer(1, 3) as second:
        task = Task(50, "t", log)
        first.add(task)
        assert (first.size, second.size) == (1, 0)
        second.add(task)
        assert (first.size, second.size) == (0, 1)
        assert locate(first, task) is None and locate(second, task) is not None
        first.add(task)
        assert (first.size, second.size) == (1, 0)
        for timer in (first, second):
            timer._check()
        assert second.advance_clock(100) is False
        assert first.advance_clock(100) is True
        assert log == ["t"]


def test_readd_in_the_same_timer_recomputes_the_due_time() -> None:
    """R10: the expiration is recomputed from the clock reading at the new add."""
    log: list[str] = []
    with manual_timer(1, 3) as timer:
        task = Task(10, "t", log)
        timer.add(task)
        timer.advance_clock(5)
        timer.add(task)  # now due at 15
        assert timer.size == 1
        timer._check()
        timer.advance_clock(5)
        assert log == []
        timer.advance_clock(5)
        assert log == ["t"]


def test_cancel_after_a_move_removes_it_from_the_new_timer() -> None:
    """R9/R10: cancel finds the task through its current entry, wherever it is."""
    with manual_timer() as first, manual_timer() as second:
        task = Task(30, "t", [])
        first.add(task)
        second.add(task)
        task.cancel()
        task.cancel()
        assert (first.size, second.size) == (0, 0)
        first._check()
        second._check()


def test_task_readded_by_an_earlier_task_in_the_same_drain_is_skipped() -> None:
    """R11: the drain collected b, but a (handed over first) re-added b: b is not handed
    over by this call and waits for its new due time."""
    log: list[str] = []
    with manual_timer(1, 3) as timer:
        b = Task(5, "b", log)

        class Mover(Task):
            def run(self) -> None:
                super().run()
                timer.add(b)

        timer.add(Mover(4, "a", log))
        timer.add(b)
        assert timer.advance_clock(10) is True
        assert log == ["a"]
        assert timer.size == 1
        timer._check()
        timer.advance_clock(5)
        assert log == ["a", "b"]


def _handed_over_task_refs() -> list[weakref.ref[Task]]:
    """Weak references to three tasks a drain handed over, after their last reference went
    (the cyclic collector off, so only reference counting could have freed them)."""
    log: list[str] = []
    with manual_timer() as timer:
        tasks = [Task(delay, f"t{delay}", log) for delay in (3, 3, 25)]
        for task in tasks:
            timer.add(task)
        refs = [weakref.ref(task) for task in tasks]
        gc.disable()
        try:
            assert timer.advance_clock(30) is True
            assert log == ["t3", "t3", "t25"]
            del task, tasks
            return refs
        finally:
            gc.enable()


DRAIN_KEEPS_ITS_LIST = Mutant(
    "drain-keeps-its-list",
    "kpurgatory.optimized.timer",
    "SystemTimer._hand_over_collected",
    "drain.collected = []",
    "pass",
    "The drain keeps the list of the tasks it collected: task -> drain -> list -> task.",
)
"""The bug ``test_handed_over_tasks_are_freed_by_refcount_not_by_the_cycle_collector``
is meant to catch, planted back by ``test_the_freed_check_catches_a_drain_keeping_its_list``."""


def test_handed_over_tasks_are_freed_by_refcount_not_by_the_cycle_collector() -> None:
    """A task keeps pointing at the drain that collected it (its R11 marker); the drain
    lets go of its list of them once they are handed over, so no task -> drain -> list ->
    task cycle is left for the cyclic collector (it held every handed-over task until a
    collection: twice the collector's work on the lifecycle benchmark)."""
    assert [ref() for ref in _handed_over_task_refs()] == [None, None, None]


@needs_python_source()
def test_the_freed_check_catches_a_drain_keeping_its_list() -> None:
    with applied(DRAIN_KEEPS_ITS_LIST):
        refs = _handed_over_task_refs()
        assert all(ref() is not None for ref in refs)
    gc.collect()
    assert [ref() for ref in refs] == [None, None, None]


# -- the delay queue --------------------------------------------------------------------------


def queued_bucket(queue: DelayQueue, expiration: int, dues: list[int]) -> TimerTaskList:
    bucket = TimerTaskList(TaskCounter(), LOCK, 0, 1)
    for due in dues:
        task = Task(0, "x", [])
        task._entry_due = due
        bucket.add(task)
    bucket.set_expiration(expiration)
    queue.offer(bucket)
    return bucket


LOCK = threading.RLock()


def test_poll_releases_buckets_in_expiration_order_up_to_now() -> None:
    queue = DelayQueue(LOCK)
    b30 = queued_bucket(queue, 30, [30])
    b10 = queued_bucket(queue, 10, [10])
    b20 = queued_bucket(queue, 20, [20])
    queue._check()
    assert queue.poll(9) is None
    assert queue.poll(25) is b10
    assert queue.poll(25) is b20
    assert queue.poll(25) is None
    assert queue.poll(30) is b30
    assert len(queue) == 0


def test_earliest_due_skips_empty_buckets_and_looks_inside_coarse_ones() -> None:
    """The real-clock wait target is the least due time, not the least bucket expiration."""
    queue = DelayQueue(LOCK)
    assert queue.earliest_due() is None
    queued_bucket(queue, 5, [])  # every entry cancelled
    queued_bucket(queue, 20, [37, 29, 33])  # a level-2 bucket [20, 40)
    queued_bucket(queue, 31, [31])
    assert queue.earliest_due() == 29


def test_queue_check_detects_a_changed_key() -> None:
    queue = DelayQueue(LOCK)
    bucket = queued_bucket(queue, 5, [5])
    bucket.expiration = 6
    assert_check_fails(queue, "queued under")


def test_offer_refuses_a_bucket_without_expiration() -> None:
    queue = DelayQueue(LOCK)
    with pytest.raises(ValueError, match="no expiration"):
        queue.offer(TimerTaskList(TaskCounter(), LOCK, 0, 1))


# -- _check() catches broken states -----------------------------------------------------------


def test_timer_check_detects_a_wrong_counter() -> None:
    with manual_timer() as timer:
        timer.add(Task(5, "t", []))
        timer._counter.value += 1
        assert_check_fails(timer, "task counter")


def test_timer_check_detects_a_bucket_that_was_not_queued() -> None:
    with manual_timer() as timer:
        timer.add(Task(5, "t", []))
        timer._queue.heap.clear()
        assert_check_fails(timer, "not queued")


def test_timer_check_detects_an_entry_in_the_wrong_slot() -> None:
    with manual_timer() as timer:
        task = Task(5, "t", [])
        timer.add(task)
        task._entry_due = 6
        assert_check_fails(timer, "lies in bucket")


def test_timer_check_detects_an_entry_linked_under_another_lock() -> None:
    with manual_timer() as timer:
        task = Task(5, "t", [])
        timer.add(task)
        holder = task._entry_list
        assert isinstance(holder, TimerTaskList)
        holder.lock = threading.RLock()
        assert_check_fails(timer, "another")


def test_timer_check_detects_a_wrong_overflow_tick() -> None:
    with manual_timer(1, 3) as timer:
        timer.add(Task(26, "t", []))
        overflow = timer._wheel.overflow
        assert overflow is not None
        overflow.tick_ms = 4
        assert_check_fails(timer, "overflow tick")


def test_timer_check_detects_a_current_time_off_the_tick() -> None:
    with manual_timer(5, 3) as timer:
        timer._wheel.current_time = 3
        timer._current_time = 3
        assert_check_fails(timer, "multiple")


# -- real clock: the wait ends at the exact earliest due time (R7) ---------------------------


@pytest.mark.realtime
def test_real_clock_wait_is_not_ended_by_a_coarse_bucket() -> None:
    """R7/R8: a task due in 65 ms sits in a level-2 bucket expiring at ~60 ms, and a
    cancelled task left an empty bucket at ~30 ms; advance_clock(5000) returns True as
    soon as the task is due, not False at either bucket's expiration."""
    log: list[str] = []
    with SystemTimer("rt", clock=MonotonicClock(), executor=InlineExecutor()) as timer:
        cancelled = Task(30, "cancelled", log)
        timer.add(Task(65, "t", log))
        timer.add(cancelled)
        cancelled.cancel()
        assert timer.advance_clock(5000) is True
        assert log == ["t"]


@pytest.mark.realtime
def test_real_clock_wait_is_shortened_by_an_earlier_add() -> None:
    """R7: a waiter blocked until a task 3 s away is woken by an add due in 40 ms."""
    log: list[str] = []
    with SystemTimer("rt", clock=MonotonicClock(), executor=InlineExecutor()) as timer:
        timer.add(Task(3000, "slow", log))
        results: list[bool] = []
        waiter = threading.Thread(target=lambda: results.append(timer.advance_clock(10_000)))
        waiter.start()
        time.sleep(0.02)
        timer.add(Task(40, "fast", log))
        waiter.join(timeout=10)
        assert results == [True]
        assert log == ["fast"]
        timer._check()


@pytest.mark.parametrize("seed", range(20))
def test_earliest_due_is_the_least_due_time_of_any_linked_entry(seed: int) -> None:
    """The in-order heap walk of ``earliest_due`` against a scan of every bucket, after
    random adds, cancels and drains (coarse buckets, empty buckets, several levels)."""
    rng = random.Random(seed)
    timer = manual_timer(wheel_size=rng.choice([2, 3, 20]))
    log: list[str] = []
    tasks = [
        Task(rng.choice([1, 7, 50, 400, 9000]) + rng.randrange(50), f"t{i}", log) for i in range(40)
    ]

    def earliest_due_is_the_least_linked() -> None:
        linked = [
            entry._entry_due
            for level in timer._wheel.levels()
            for bucket in level.buckets
            for entry in bucket.entries()
        ]
        assert timer._queue.earliest_due() == (min(linked) if linked else None)

    random_timer_steps(
        rng,
        timer,
        tasks,
        150,
        add_below=0.5,
        cancel_below=0.8,
        advances=[0, 1, 13, 200],
        after_each=earliest_due_is_the_least_linked,
    )


def test_r12_check_holds_with_more_tasks_than_python_caches_as_small_ints() -> None:
    """R12: ``_check()`` compares the task counter with the entries it counts by value.
    With 300 tasks both are 300 but separate int objects (CPython caches only -5..256),
    so an identity comparison would report a corruption that is not there.

    Kills: ``total is not self.counter.value`` for ``!=`` in ``TimingWheel._check``."""
    timer = manual_timer(wheel_size=8)
    log: list[str] = []
    for i in range(300):
        timer.add(Task(1 + i * 7, f"t{i}", log))
    assert timer.size == 300
    timer._check()
