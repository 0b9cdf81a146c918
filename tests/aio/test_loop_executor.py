"""``LoopExecutor``'s backlog (R70), its batches (R53) and its shutdown (R32), called
directly: behaviours the project's own mutation run (``make mutation``) found no test
pinning. Each test was seen to fail with its mutant applied."""

from __future__ import annotations

import pytest

from kpurgatory.aio import LoopExecutor


class Interrupt(BaseException):
    """A ``BaseException`` that is not an ``Exception``, as a hand-over may raise."""


def _interrupt() -> None:
    raise Interrupt("stop")


def _fail() -> None:
    raise ValueError("a hand-over failed")


def test_r70_a_deferred_submit_returns_the_backlogs_future_done_once_it_empties() -> None:
    """While deferring, every ``submit`` returns the one future of the backlog; it is
    done once the whole backlog has run, not after a partial batch."""
    executor = LoopExecutor()
    assert executor.run_backlog(10) == 0, "an empty backlog runs nothing"
    calls: list[int] = []
    executor.defer(True)
    first = executor.submit(calls.append, 1)
    second = executor.submit(calls.append, 2)
    assert first is second and not first.done()
    assert (executor.backlog, calls) == (2, [])
    assert executor.run_backlog(1) == 1
    assert (executor.backlog, calls, first.done()) == (1, [1], False)
    assert executor.run_backlog(10) == 1
    assert (executor.backlog, calls) == (0, [1, 2])
    assert first.done() and first.result() is None
    third = executor.submit(calls.append, 3)
    assert third is not first and not third.done(), "a new backlog has a new future"


def test_r53_a_batch_runs_every_hand_over_before_raising_a_base_exception() -> None:
    """A hand-over raising a ``BaseException`` that is not an ``Exception`` is raised
    only after the rest of the batch has run; the emptied backlog's future is done."""
    executor = LoopExecutor()
    calls: list[int] = []
    executor.defer(True)
    future = executor.submit(_interrupt)
    executor.submit(calls.append, 1)
    with pytest.raises(Interrupt):
        executor.run_backlog(10)
    assert (executor.backlog, calls) == (0, [1])
    assert future.done() and not future.cancelled()


def test_r70_a_batch_drops_an_exception_as_an_inline_run_does() -> None:
    """An ``Exception`` raised by a queued hand-over is dropped (the timers' ``run_logged``
    has logged it) and the batch goes on: ``run_backlog`` raises nothing."""
    executor = LoopExecutor()
    calls: list[int] = []
    executor.defer(True)
    future = executor.submit(_fail)
    executor.submit(calls.append, 1)
    assert executor.run_backlog(10) == 2
    assert (executor.backlog, calls) == (0, [1])
    assert future.done() and future.exception() is None


def test_r32_r70_shutdown_leaves_the_backlog_unless_futures_are_cancelled() -> None:
    """``shutdown()`` refuses new submissions and leaves the backlog to its driver;
    ``shutdown(cancel_futures=True)`` drops it and cancels its future."""
    calls: list[int] = []
    kept = LoopExecutor()
    kept.defer(True)
    kept_future = kept.submit(calls.append, 1)
    kept.shutdown()
    assert kept.backlog == 1 and not kept_future.cancelled()
    assert kept.run_backlog(10) == 1 and calls == [1] and kept_future.done()

    dropped = LoopExecutor()
    dropped.defer(True)
    dropped_future = dropped.submit(calls.append, 2)
    dropped.shutdown(cancel_futures=True)
    assert dropped.backlog == 0 and dropped_future.cancelled()
    assert dropped.run_backlog(10) == 0 and calls == [1]
