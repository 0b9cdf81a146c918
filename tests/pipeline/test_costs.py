"""The cost models: Kafka's hierarchical wheel with a bucket delay queue, and a request heap.

The wheel cases are the worked cascade examples of Kafka's TimingWheel (tick 1 ms):
with 3 buckets, expiration 26 goes to level 3 (bucket 18), cascades to level 2 (bucket
24), then to level 1 (bucket 26) and fires at 26; expiration 27 goes to level 4 and fires
directly. R1 and R3 decide "due at once"; R2 moves the current time at the end of a drain.
"""

from __future__ import annotations

from kpurgatory.pipeline.costs import HeapModel, WheelModel


def test_r1_two_cascades_for_26_on_a_3_bucket_wheel() -> None:
    model = WheelModel(1, 3, 0)
    assert model.add("a", 26)
    assert model.first_level["a"] == 2  # third level (0-based)
    assert model.drain(17) == []
    assert model.drain(25) == []
    assert model.cascades_of["a"] == 2
    assert model.drain(26) == ["a"]
    assert model.bucket_polls == 3 and model.bucket_offers == 3


def test_expiration_27_lands_on_level_four_and_fires_directly() -> None:
    model = WheelModel(1, 3, 0)
    model.add("b", 27)
    assert model.first_level["b"] == 3
    assert model.drain(27) == ["b"]
    assert model.cascades == 0


def test_r3_due_at_once_against_the_current_time_not_the_clock() -> None:
    model = WheelModel(5, 4, 0)
    assert not model.add("now", 4)  # due 0 <= current time 0
    assert model.due_at_once == 1
    assert model.add("later", 5)
    assert model.drain(12) == ["later"]  # R2: current time becomes 10
    assert not model.add("past", 14)  # due 10 <= 10
    assert model.add("next", 15)


def test_a_bucket_is_offered_once_per_round_and_polled_even_when_emptied() -> None:
    model = WheelModel(1, 20, 0)
    for label in ("x", "y", "z"):
        model.add(label, 7)
    assert model.bucket_offers == 1
    for label in ("x", "y", "z"):
        model.cancel(label)
    assert model.pending == 0
    assert model.drain(10) == []
    assert model.bucket_polls == 1 and model.empty_polls == 1


def test_heap_model_counts_completed_requests_until_their_deadline() -> None:
    heap = HeapModel()
    heap.offer(0, 100)
    heap.offer(10, 20)
    heap.offer(30, 40)
    offers, polls, peak, cost = heap.finish()
    assert (offers, polls, peak) == (3, 3, 2)
    assert cost >= 6
