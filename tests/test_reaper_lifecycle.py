"""The lifecycle steps both implementations share: the reaper loop and the wait for
termination (R31, R39, R52), on every implementation.

Each test names the mutant of a sampled mutation run it kills; they run the reaper
thread on a real clock, every wait bounded, so a regression fails instead of hanging.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.support import Recorder, WaiterLock, operation_class

# -- the shared lifecycle steps: the reaper loop, the wait for termination (R31, R39, R52) -----


REAPER_WAIT_S = 10.0
"""Upper bound for a real-clock wait that should end far sooner (never asserted on)."""

IDLE_STEPS = 3
"""Reaper iterations watched after the timer was closed under it."""


def _ready_operation(impl: ModuleType) -> type[Any]:
    class Ready(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        """Completes when ``ready``; ``on_expiration`` runs ``expire_hook`` if any."""

        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.ready = False
            self.expire_hook: Any = None

        def try_complete(self) -> bool:
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            if self.expire_hook is not None:
                self.expire_hook()

    return Ready


def _wait_until(condition: Any) -> bool:
    deadline = time.monotonic() + REAPER_WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.mark.realtime
def test_r31_the_reaper_idles_on_a_timer_closed_from_outside(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """R31, R30: when the timer is closed under a running purgatory (not by its
    ``shutdown``), the reaper waits instead of stepping: it calls no ``advance_clock``
    and purges nothing, even with a completed operation due for a purge
    (``purge_interval=0``; a second operation stays pending, so the completion itself
    lets nothing go, R61), until ``shutdown`` ends it. It waits a step (200 ms) between
    two looks at the timer rather than spinning (a lower bound of half a step), and
    logs nothing: a closed timer is not a failing step.

    Kills: removing the ``continue`` after the idle wait in ``_lifecycle.run_reaper``
    (the reaper then steps, and purges, on the closed timer every 200 ms), and
    ``REAPER_STEP_MS // 1000`` there (a wait of 0 s: it spins), and ``<< 1000`` there
    (the wait raises ``OverflowError``: logged as a failing step every 200 ms)."""
    caplog.set_level(logging.WARNING)
    step_s = impl.purgatory.REAPER_STEP_MS / 1000
    lock = threading.Lock()
    advanced: list[int] = []
    closed_reads = [0]
    read_at: list[float] = []

    class Watched(impl.SystemTimer):  # type: ignore[misc,name-defined]
        @property
        def closed(self) -> bool:
            is_closed = bool(super().closed)
            if is_closed:
                with lock:
                    closed_reads[0] += 1
                    read_at.append(time.monotonic())
            return is_closed

        def advance_clock(self, timeout_ms: Any) -> bool:
            with lock:
                advanced.append(closed_reads[0])
            return bool(super().advance_clock(timeout_ms))

    timer = Watched("closed-under")
    purgatory = impl.DelayedOperationPurgatory("closed-under", timer=timer, purge_interval=0)
    try:
        operation, pending = _ready_operation(impl)(60_000), _ready_operation(impl)(60_000)
        assert purgatory.try_complete_else_watch(operation, ["k"]) is False
        assert purgatory.try_complete_else_watch(pending, ["k"]) is False  # no let-go (R61)
        assert _wait_until(lambda: bool(advanced))  # the reaper is stepping
        timer.close()
        assert _wait_until(lambda: closed_reads[0] >= 1)  # a step in flight has ended
        operation.ready = True
        assert operation.try_complete()
        with lock:
            seen_at_close = closed_reads[0]
            steps_before = len(advanced)
        assert _wait_until(lambda: closed_reads[0] >= seen_at_close + IDLE_STEPS)
        with lock:
            stepped_after = [read for read in advanced[steps_before:] if read >= seen_at_close]
            idle = read_at[seen_at_close - 1 :]
        assert stepped_after == [], "the reaper stepped on a timer closed under it"
        gaps = [later - earlier for earlier, later in itertools.pairwise(idle)]
        assert gaps and min(gaps) >= step_s / 2, f"looks {gaps} s apart; a step is {step_s} s"
        assert purgatory.num_purged == 0
        assert purgatory.watched == 2  # the completed one is still linked: nobody purged
        assert caplog.records == []
    finally:
        purgatory.shutdown()
        assert purgatory.await_termination(REAPER_WAIT_S)


@pytest.mark.realtime
def test_r39_await_termination_on_the_reaper_thread_returns_false(impl: ModuleType) -> None:
    """R39: ``await_termination`` called on the reaper thread (here from an expiry the
    reaper runs inline, after that expiry shut the purgatory down) cannot wait for its
    own thread: it returns False at once; called afterwards from the test's thread it
    returns True once the reaper has exited.

    Kills: ``return True`` instead of ``return False`` for the reaper thread in
    ``_lifecycle.await_purgatory_termination`` (and removing that test, which makes the
    reaper join itself and raise)."""
    timer = impl.SystemTimer("own-thread", executor=InlineExecutor())
    purgatory = impl.DelayedOperationPurgatory("own-thread", timer=timer)
    results: list[tuple[bool, str]] = []
    finished = threading.Event()
    operation = _ready_operation(impl)(1)

    def shut_down_and_wait() -> None:
        try:
            purgatory.shutdown()
            results.append(
                (purgatory.await_termination(REAPER_WAIT_S), threading.current_thread().name)
            )
        finally:
            finished.set()

    operation.expire_hook = shut_down_and_wait
    try:
        assert purgatory.try_complete_else_watch(operation, ["k"]) is False
        assert finished.wait(REAPER_WAIT_S)
        assert operation.is_completed
    finally:
        purgatory.shutdown()
    assert purgatory.await_termination(REAPER_WAIT_S) is True
    assert len(results) == 1
    returned, thread_name = results[0]
    assert returned is False
    assert thread_name != threading.current_thread().name


@pytest.mark.realtime
def test_r52_a_failing_reaper_step_waits_a_step_before_the_next(impl: ModuleType) -> None:
    """R52, R31: a reaper step that raises is logged and the reaper carries on, but only
    after waiting one step (200 ms), so a step that keeps failing neither spins a core
    nor floods the log. The check is a lower bound on the gap between two failing steps
    (half a step, so a slow machine cannot fail it: a wait never ends early).

    Kills: ``REAPER_STEP_MS // 1000`` (a wait of 0 s) in the error path of
    ``_lifecycle.run_reaper``, and removing that wait."""
    step_s = impl.purgatory.REAPER_STEP_MS / 1000
    lock = threading.Lock()
    calls: list[float] = []

    class Failing(impl.SystemTimer):  # type: ignore[misc,name-defined]
        def advance_clock(self, timeout_ms: Any) -> bool:
            with lock:
                calls.append(time.monotonic())
            raise OSError("the clock's source is gone")

    purgatory = impl.DelayedOperationPurgatory("failing", timer=Failing("failing"))
    try:
        assert _wait_until(lambda: len(calls) >= 3)
    finally:
        purgatory.shutdown()
        assert purgatory.await_termination(REAPER_WAIT_S)
    with lock:
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
    assert gaps and min(gaps) >= step_s / 2, f"steps {gaps} s apart; a step is {step_s} s"


def test_r39_await_termination_before_shutdown_is_false(impl: ModuleType) -> None:
    """R39: before ``shutdown`` there is nothing to wait for: ``await_termination`` is
    False at once, with or without a reaper, whatever the timeout.

    Kills: ``return True`` for the not-shut-down case in
    ``_lifecycle.await_purgatory_termination``."""
    manual = impl.SystemTimer("before", clock=ManualClock(0), executor=InlineExecutor())
    without_reaper = impl.DelayedOperationPurgatory("before", timer=manual, reaper_enabled=False)
    with_reaper = impl.DelayedOperationPurgatory("before-reaped")
    try:
        for purgatory in (without_reaper, with_reaper):
            assert purgatory.await_termination(0) is False
            assert purgatory.await_termination(0.01) is False
    finally:
        for purgatory in (without_reaper, with_reaper):
            purgatory.shutdown()
            assert purgatory.await_termination(REAPER_WAIT_S) is True


@pytest.mark.realtime
def test_r39_await_termination_is_false_while_the_reaper_runs_an_expiry(
    impl: ModuleType,
) -> None:
    """R39: after ``shutdown``, a reaper still running an expiry (inline, waiting for a
    lock the test holds) makes a bounded ``await_termination`` return False when its
    timeout ends; once the lock is released it returns True.

    Kills: ``return True`` when the reaper is still alive after its join in
    ``_lifecycle.await_purgatory_termination``."""
    timer = impl.SystemTimer("busy-reaper", executor=InlineExecutor())
    purgatory = impl.DelayedOperationPurgatory("busy-reaper", timer=timer)
    shared = WaiterLock()
    operation = operation_class(impl)(1, "held", Recorder(ManualClock(0)), shared)
    try:
        with shared:
            assert purgatory.try_complete_else_watch(operation, ["k"]) is False
            assert shared.contended.wait(REAPER_WAIT_S)  # the reaper runs the expiry and waits
            purgatory.shutdown()
            assert purgatory.await_termination(0.05) is False
    finally:
        purgatory.shutdown()
    assert purgatory.await_termination(REAPER_WAIT_S) is True
    assert operation.is_completed


def test_r39_await_termination_gives_the_timer_what_remains_of_the_timeout(
    impl: ModuleType,
) -> None:
    """R39: the purgatory's ``await_termination(timeout)`` waits for its timer with what
    remains of ``timeout`` (never more, never a negative wait): 0 for 0, None for None.

    Kills: ``max(1.0, ...)`` and ``max(-1.0, ...)`` for ``max(0.0, ...)`` in
    ``_lifecycle.await_purgatory_termination`` (a wait past the caller's timeout, a
    negative one)."""
    asked: list[float | None] = []

    class Recording(impl.SystemTimer):  # type: ignore[misc,name-defined]
        def await_termination(self, timeout: float | None = None) -> bool:
            asked.append(timeout)
            return bool(super().await_termination(timeout))

    timer = Recording("remaining", clock=ManualClock(0), executor=InlineExecutor())
    purgatory = impl.DelayedOperationPurgatory("remaining", timer=timer, reaper_enabled=False)
    purgatory.shutdown()
    assert purgatory.await_termination(0) is True
    assert purgatory.await_termination(None) is True
    assert purgatory.await_termination(REAPER_WAIT_S) is True
    assert asked[:2] == [0.0, None]
    assert 0.0 < asked[2] <= REAPER_WAIT_S  # type: ignore[operator]
