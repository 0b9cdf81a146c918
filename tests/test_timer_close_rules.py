"""Timer rules R13, R14 and R37 through the public API: a task that raises, close, and
thread safety (no timer lock held during a hand-over).

As in ``test_timer_rules.py``: on every implementation (``impl``), due times from a
floor-division oracle; helpers in ``tests.timer_support``.
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.support import Recorder, recorded_clock, task_class
from tests.timer_support import (
    JOIN_TIMEOUT_S,
    ManualExecutor,
    callback_task_class,
    make_timer,
    run_in_thread,
    runs,
)

# ---- R13: task exceptions ---------------------------------------------------------------


def boom_class(impl: ModuleType) -> type[Any]:
    """A ``TimerTask`` of ``impl`` whose run raises, with a distinctive repr."""

    class Boom(impl.TimerTask):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, tag: str) -> None:
            super().__init__(delay_ms)
            self.tag = tag

        def run(self) -> None:
            raise RuntimeError(f"boom from {self.tag}")

        def __repr__(self) -> str:
            return f"<Boom task {self.tag}>"

    return Boom


def test_r13_exception_is_logged_with_task_and_next_task_runs(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """R13: a raising task is logged (kpurgatory logger, task repr); later tasks still run."""
    clock, recorder = recorded_clock()
    caplog.set_level(logging.ERROR, logger="kpurgatory")
    with make_timer(impl, clock) as timer:
        timer.add(boom_class(impl)(3, "drained-7f3a"))
        timer.add(task_class(impl)(4, "after", recorder))
        assert timer.advance_clock(5) is True
        assert runs(recorder) == [("after", 5)]
        timer.add(boom_class(impl)(0, "at-once-91c2"))  # add does not raise
        timer.add(task_class(impl)(1, "later", recorder))
        assert timer.advance_clock(1) is True
        assert runs(recorder)[-1] == ("later", 6)
    messages = [(r.getMessage(), r) for r in caplog.records if r.name.startswith("kpurgatory")]
    for tag in ("drained-7f3a", "at-once-91c2"):
        hits = [r for message, r in messages if f"<Boom task {tag}>" in message]
        assert len(hits) == 1, tag
        assert hits[0].levelno >= logging.ERROR


# ---- R14: close -------------------------------------------------------------------------


def test_r14_close_is_idempotent_and_stops_the_timer(impl: ModuleType) -> None:
    """R14: after close tasks never run, advance_clock returns False at once, add raises."""
    clock, recorder = recorded_clock()
    timer = make_timer(impl, clock)
    timer.add(task_class(impl)(5, "pending", recorder))
    timer.close()
    timer.close()
    assert timer.advance_clock(10) is False
    assert clock.now_ms() == 0  # returned at once: no time let pass
    assert runs(recorder) == []
    with pytest.raises(RuntimeError):
        timer.add(task_class(impl)(5, "late", recorder))
    assert timer.advance_clock(0) is False
    assert runs(recorder) == []


def test_r14_caller_executor_is_left_running(impl: ModuleType) -> None:
    """R14: close never shuts down an executor the caller supplied."""
    executor = ManualExecutor()
    inline = InlineExecutor()
    make_timer(impl, ManualClock(0), executor=executor).close()
    make_timer(impl, ManualClock(0), executor=inline).close()
    assert executor.shut_down is False
    assert inline.submit(lambda: 42).result() == 42


def test_r14_context_manager_closes_on_exit(impl: ModuleType) -> None:
    """R14: leaving the with block closes the timer."""
    clock, recorder = recorded_clock()
    with make_timer(impl, clock) as timer:
        timer.add(task_class(impl)(5, "x", recorder))
    with pytest.raises(RuntimeError):
        timer.add(task_class(impl)(5, "y", recorder))
    assert timer.advance_clock(10) is False and runs(recorder) == []


def test_r14_r39_owned_executor_finishes_handed_over_work_close_does_not_wait(
    impl: ModuleType,
) -> None:
    """R14/R15/R39: the owned worker still runs what was handed over, but close returns
    without waiting for it; await_termination waits, and the worker is gone afterwards.

    ManualClock with the default executor: the task runs on ``executor-<name>``.
    """
    name = f"owned-{impl.__name__.rsplit('.', 1)[-1]}-r14"
    release = threading.Event()
    finished = threading.Event()
    thread_names: list[str] = []

    def slow() -> None:
        thread_names.append(threading.current_thread().name)
        release.wait(JOIN_TIMEOUT_S)
        finished.set()

    timer = impl.SystemTimer(name, clock=ManualClock(0))
    assert timer.await_termination(0) is False  # not closed yet
    timer.add(callback_task_class(impl)(0, "slow", Recorder(ManualClock(0)), slow))
    timer.close()  # returns although the handed-over task is still running
    assert not finished.is_set()
    assert timer.await_termination(0.01) is False
    release.set()
    assert timer.await_termination(JOIN_TIMEOUT_S) is True
    assert finished.is_set()
    assert thread_names == [f"executor-{name}"]
    assert all(t.name != f"executor-{name}" for t in threading.enumerate())


# ---- R37: thread safety, no timer lock held during hand-over ---------------------------


def test_r37_hand_over_holds_no_timer_lock(impl: ModuleType) -> None:
    """R37: while a task runs inline, another thread can add, cancel and read size freely."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    outcomes: list[bool] = []
    with make_timer(impl, clock) as timer:
        extra = task(50, "extra", recorder)

        def from_other_thread() -> None:
            def touch() -> None:
                timer.add(extra)
                _ = timer.size
                extra.cancel()
                timer.add(extra)

            outcomes.append(run_in_thread(touch))

        timer.add(callback_task_class(impl)(5, "drained", recorder, from_other_thread))
        timer.add(callback_task_class(impl)(0, "at-once", recorder, from_other_thread))
        timer.advance_clock(5)
        assert outcomes == [True, True]
        assert timer.size == 1


def test_r37_concurrent_adds_and_cancels_keep_size_exact(impl: ModuleType) -> None:
    """R37/R12: four threads adding and cancelling at once leave exactly the kept tasks."""
    clock, recorder = recorded_clock()
    task = task_class(impl)
    per_thread = 300
    with make_timer(impl, clock, tick_ms=2) as timer:
        batches = [
            [task(2 + (i * 7 + k) % 400, f"w{k}-{i}", recorder) for i in range(per_thread)]
            for k in range(4)
        ]
        start = threading.Barrier(4)

        def work(batch: list[Any]) -> None:
            start.wait(JOIN_TIMEOUT_S)
            for i, t in enumerate(batch):
                timer.add(t)
                if i % 2:
                    t.cancel()

        workers = [threading.Thread(target=work, args=(b,), daemon=True) for b in batches]
        for w in workers:
            w.start()
        for w in workers:
            w.join(JOIN_TIMEOUT_S)
        assert not any(w.is_alive() for w in workers)
        kept = 4 * (per_thread // 2)
        assert timer.size == kept
        assert timer.advance_clock(1000) is True
        names = [name for name, _ in runs(recorder)]
        assert len(names) == len(set(names)) == kept
        assert timer.size == 0
