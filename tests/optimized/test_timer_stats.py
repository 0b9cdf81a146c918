"""``SystemTimer.stats``: the wheel's work counters (extension), checked against Kafka's
worked example and against the pipeline's independent wheel model (R1-R6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kpurgatory.pipeline.costs import WheelModel
from kpurgatory.spec.arithmetic import expiration_ms
from tests.optimized.helpers import Task, manual_timer


def test_r4_stats_count_the_two_cascades_of_kafkas_example() -> None:
    """R4/R5: tick 1, wheel 3: a task due at 26 cascades twice (level 3 -> 2 -> 1); one due
    at 27 never cascades. Offers: 2 at add + 2 cascades; polls: the 3 buckets t26 passes
    through, then t27's; a snapshot does not change afterwards."""
    log: list[str] = []
    with manual_timer(1, 3) as timer:
        assert timer.stats == {"bucket_offers": 0, "bucket_polls": 0, "cascades": 0}
        timer.add(Task(26, "t26", log))
        timer.add(Task(27, "t27", log))
        assert timer.stats == {"bucket_offers": 2, "bucket_polls": 0, "cascades": 0}
        for _ in range(26):
            timer.advance_clock(1)
        snapshot = timer.stats
        assert log == ["t26"]
        assert snapshot == {"bucket_offers": 4, "bucket_polls": 3, "cascades": 2}
        timer.advance_clock(1)
        assert log == ["t26", "t27"]
        assert timer.stats == {"bucket_offers": 4, "bucket_polls": 4, "cascades": 2}
        assert snapshot["bucket_polls"] == 3


steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(min_value=-5, max_value=3000)),
        st.tuples(st.just("cancel"), st.integers(min_value=0, max_value=50)),
        st.tuples(st.just("advance"), st.integers(min_value=0, max_value=700)),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(min_value=-1000, max_value=1000),
    tick=st.integers(min_value=1, max_value=7),
    size=st.integers(min_value=2, max_value=8),
    script=steps,
)
def test_r6_stats_equal_the_pipeline_wheel_model(
    start: int, tick: int, size: int, script: list[tuple[str, int]]
) -> None:
    """R1-R6: over any add/cancel/advance script the three counters equal those of
    ``kpurgatory.pipeline.costs.WheelModel`` (Kafka's wheel written independently)."""
    log: list[str] = []
    model = WheelModel(tick, size, start)
    with manual_timer(tick, size, start) as timer:
        tasks: list[Task] = []
        for kind, value in script:
            if kind == "add":
                task = Task(value, f"t{len(tasks)}", log)
                tasks.append(task)
                model.add(task.name, expiration_ms(timer.clock.now_ms(), value))
                timer.add(task)
            elif kind == "cancel" and tasks:
                task = tasks[value % len(tasks)]
                task.cancel()
                model.cancel(task.name)
            elif kind == "advance":
                timer.advance_clock(value)
                model.drain(timer.clock.now_ms())
            assert timer.stats == {
                "bucket_offers": model.bucket_offers,
                "bucket_polls": model.bucket_polls,
                "cascades": model.cascades,
            }
