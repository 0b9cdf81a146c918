"""R73 on the wheel: a bounded drain stops inside a bucket and goes on from there.

A thousand tasks in one bucket of the fourth level (due 8,000..8,999 with tick 1 and 20
buckets a level) fall due together; drains of a few entries each then stop inside that
bucket again and again. After every piece: ``_check()`` (the half-flushed bucket is the
delay queue's unfinished one, the wheel stands at its expiration, nothing else moved),
no new entry lands in the half-flushed bucket, and the timer's counts add up.
"""

from __future__ import annotations

import heapq
import random

from kpurgatory.optimized.bucket import TimerTaskList
from kpurgatory.optimized.timer import SystemTimer
from tests.optimized.helpers import Task, manual_timer


def _big_bucket(count: int = 1_000) -> tuple[SystemTimer, list[Task], list[str]]:
    timer = manual_timer()
    log: list[str] = []
    order = list(range(count))
    random.Random(7).shuffle(order)  # the bucket's order is not the due order
    tasks = [Task(8_000 + index, f"t{index}", log) for index in order]
    for task in tasks:
        timer.add(task)
    timer._check()
    return timer, tasks, log


def _advance_to(timer: SystemTimer, time_ms: int) -> None:
    clock = timer.clock
    clock.advance(time_ms - clock.now_ms())  # type: ignore[attr-defined]


def test_r73_the_drain_stops_inside_a_bucket_and_resumes_it_first() -> None:
    """R73: each piece takes at most its bound (cascades plus hand-overs); the bucket it
    stopped inside is the queue's unfinished one and the wheel stays at its expiration
    while the published current time is the reading; the entries left there are all
    from the start (no add lands in it); the next piece resumes it."""
    timer, _, log = _big_bucket()
    _advance_to(timer, 8_500)
    first: TimerTaskList | None = None
    originals: dict[tuple[int, int | None], set[int]] = {}
    pieces = 0
    while True:
        before = timer.stats["cascades"] + len(log)
        timer.advance_clock(0, 37)
        timer._check()
        pieces += 1
        assert timer.stats["cascades"] + len(log) - before <= 37
        unfinished = timer._queue.unfinished
        if first is None:
            first = unfinished  # the level-4 bucket that held all of them
            assert first is not None and first.tick_ms == 8_000 and first.expiration == 8_000
        if unfinished is not None:
            assert timer._wheel.current_time == unfinished.expiration
            assert timer._wheel.current_time <= timer.current_time == 8_500
            original = originals.setdefault(
                (id(unfinished), unfinished.expiration),
                {id(entry) for entry in unfinished.entries()},
            )
            assert {id(entry) for entry in unfinished.entries()} <= original
            for delay in (1, 7, 30, 450, 9_000):  # adds between pieces land elsewhere
                timer.add(Task(delay, f"new{pieces}-{delay}", log))
            assert {id(entry) for entry in unfinished.entries()} <= original
            timer._check()
        if not timer.drain_pending:
            break
    assert first is not None and first.expiration is None and not first.entries()
    assert pieces >= 1_000 // 37
    assert timer._wheel.current_time == timer.current_time == 8_500
    expired = [name for name in log if name.startswith("t")]
    assert sorted(expired) == sorted(f"t{index}" for index in range(501))
    dues = [int(name[1:]) for name in expired]
    assert dues == sorted(dues)  # R6 across the pieces


def test_r73_cancel_in_the_half_flushed_bucket_and_next_due_time() -> None:
    """R73, R9, R44: a task still in the half-flushed bucket cancels (size drops, it
    never runs); next_due_time is the least due time left, the half-flushed bucket
    included; emptied by cancels, the bucket is finished by the next piece."""
    timer, tasks, log = _big_bucket(200)
    _advance_to(timer, 8_100)
    timer.advance_clock(0, 10)
    unfinished = timer._queue.unfinished
    assert unfinished is not None
    left = unfinished.entries()
    scheduled = [task for task in tasks if isinstance(task._entry_list, TimerTaskList)]
    assert len(scheduled) == timer.size > len(left)  # some cascaded to finer buckets
    assert timer.next_due_time == min(task._entry_due for task in scheduled)
    size = timer.size
    victim = left[0]
    assert isinstance(victim, Task)
    victim.cancel()
    assert timer.size == size - 1
    timer._check()
    for entry in unfinished.entries():
        assert isinstance(entry, Task)
        entry.cancel()
    timer._check()
    while timer.drain_pending:
        timer.advance_clock(0, 10)
        timer._check()
    assert timer._queue.unfinished is None
    assert victim.name not in log
    assert timer._wheel.current_time == timer.current_time == 8_100


def test_r73_close_between_pieces_keeps_the_structure() -> None:
    """R73, R14: a timer closed with a half-flushed bucket still passes ``_check()``; its
    advance_clock does nothing, and the tasks left stay counted."""
    timer, _, log = _big_bucket(100)
    _advance_to(timer, 8_099)
    timer.advance_clock(0, 5)
    assert timer._queue.unfinished is not None
    size, ran = timer.size, list(log)
    timer.close()
    assert timer.advance_clock(0, 5) is False and timer.advance_clock(0) is False
    assert timer.size == size and log == ran
    timer._check()


def test_r73_a_plain_advance_finishes_a_pending_drain() -> None:
    """R73, R5: a plain advance_clock after a piece takes everything left, the
    half-flushed bucket first, then catches the wheel up with the current time."""
    timer, _, log = _big_bucket(300)
    _advance_to(timer, 8_299)
    timer.advance_clock(0, 50)
    assert timer.drain_pending
    timer.advance_clock(0)
    timer._check()
    assert not timer.drain_pending and timer.size == 0 and len(log) == 300
    assert [int(name[1:]) for name in log] == sorted(int(name[1:]) for name in log)


def test_r73_r44_next_due_time_visits_the_queue_below_the_unfinished_bucket() -> None:
    """R44, R73: a piece stopped inside a second-level bucket (expiration 20) that still
    holds an entry due 39; a first-level bucket queued behind it holds a task due 21, and the heap's
    last bucket expires at 39 or later. ``next_due_time`` is 21: the walk starts at the
    queue's root with the root's own expiration (a walk keyed by another bucket's would
    stop at the unfinished bucket's 39)."""
    timer = manual_timer()
    log: list[str] = []
    for name in ("b", "c"):
        timer.add(Task(39, name, log))  # level 2 at 0: the bucket [20, 40), expiration 20
    timer.add(Task(65, "d", log))  # level 2: the bucket [60, 80)
    _advance_to(timer, 5)
    assert timer.advance_clock(0) is False and timer.current_time == 5
    timer.add(Task(16, "a", log))  # due 21: level 1 at 5, its own bucket
    assert timer.next_due_time == 21
    _advance_to(timer, 40)
    timer.advance_clock(0, 1)  # one entry: b or c cascades to the bucket at 39, then stop
    timer._check()
    unfinished = timer._queue.unfinished
    assert unfinished is not None and unfinished.expiration == 20 and unfinished.min_due() == 39
    assert timer._queue.heap[0][0] == 21 and timer._queue.heap[-1][0] >= 39
    assert timer.next_due_time == 21 and log == []
    assert timer.advance_clock(0) is True
    assert log in (["a", "b", "c"], ["a", "c", "b"])


def test_r73_a_piece_stops_with_a_bucket_of_another_level_due_at_the_same_time() -> None:
    """Two buckets expire at 8,000 on two levels (tasks added at time 593, due 8,398 and
    8,400); a piece of one entry cascades one task out of the first and stops. The other
    bucket now expires at its level's current time, still queued: due where the drain
    stopped, which ``_check`` allows while the drain is pending (a random seed of the
    bounded-drain machine met it as a false alarm), and the next drain finishes both."""
    timer = manual_timer()
    log: list[str] = []
    _advance_to(timer, 593)
    timer.advance_clock(0, 1)
    _advance_to(timer, 8_391)
    for index, delay in enumerate((7, 8, 9)):
        timer.add(Task(delay, f"t{index}", log))
    timer.advance_clock(0, 1)
    assert timer.drain_pending and log == []
    timer._check()
    timer.advance_clock(0)
    assert not timer.drain_pending and timer.size == 3
    timer._check()
    _advance_to(timer, 8_400)
    timer.advance_clock(0)
    assert sorted(log) == ["t0", "t1", "t2"]


def test_check_fails_on_the_unfinished_bucket_queued_as_well() -> None:
    """The delay queue's ``_check`` asserts that the bucket a bounded drain stopped
    inside (R73) is not in the heap as well, so a drain that queued it again shows in
    every machine that calls it."""
    timer, _, _ = _big_bucket()
    _advance_to(timer, 8_500)
    timer.advance_clock(0, 37)
    timer._check()
    queue = timer._queue
    unfinished = queue.unfinished
    assert unfinished is not None and unfinished.expiration is not None
    entry = (unfinished.expiration, 10**9, unfinished)
    heapq.heappush(queue.heap, entry)  # in heap order, under its own expiration
    try:
        timer._check()
    except AssertionError as exc:
        assert "queued and unfinished" in str(exc), exc
    else:
        raise AssertionError("_check accepted the unfinished bucket in the heap as well")
    finally:
        queue.heap.remove(entry)
        heapq.heapify(queue.heap)
    timer._check()
