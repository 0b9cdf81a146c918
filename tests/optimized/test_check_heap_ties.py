"""``DelayQueue._check`` orders the heap by (expiration, offer order), ties included.

Buckets of different wheels can be queued under the same expiration; the heap breaks the
tie by the order they were offered, so ``poll`` hands them over first offered, first out.
A mutation run found that ``_check`` comparing a parent by its expiration alone passed
every test: this pins that a tie out of offer order is reported as "not a heap".
"""

from __future__ import annotations

import threading

from kpurgatory.optimized.bucket import TaskCounter, TimerTaskList
from kpurgatory.optimized.delay_queue import DelayQueue
from tests.optimized.helpers import assert_check_fails


def _queue_of_two_tied_buckets() -> tuple[DelayQueue, list[TimerTaskList]]:
    lock = threading.Lock()
    queue = DelayQueue(lock)
    counter = TaskCounter()
    buckets = [TimerTaskList(counter, lock, slot, 1) for slot in (3, 7)]
    for bucket in buckets:
        assert bucket.set_expiration(40)
        queue.offer(bucket)
    return queue, buckets


def test_check_accepts_tied_buckets_in_offer_order() -> None:
    queue, buckets = _queue_of_two_tied_buckets()
    queue._check()
    assert queue.poll(40) is buckets[0]
    assert queue.poll(40) is buckets[1]


def test_check_reports_a_tie_out_of_offer_order() -> None:
    """Kills: ``heap[index][:1]`` for ``heap[index][:2]`` in ``DelayQueue._check`` (a
    parent compared by its expiration alone lets a tie out of order pass)."""
    queue, _ = _queue_of_two_tied_buckets()
    queue.heap[0], queue.heap[1] = queue.heap[1], queue.heap[0]
    assert_check_fails(queue, "not a heap")
