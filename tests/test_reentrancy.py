"""Callbacks that call back into the library, on both implementations (R63-R67).

Each test pins one row of the re-entrancy table of docs/spec.md: user code the library
calls (``try_complete``, ``on_complete``, ``on_expiration``, an executor's ``submit``, a
key's ``__hash__``) makes a public call, ``shutdown`` included, and the enclosing call
must still keep every rule. Each failed on the code before these rules (the regression
it names in its docstring).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import ManualClock
from kpurgatory.executors import InlineExecutor
from kpurgatory.sync import AtomicFlag
from tests.support import KnockStagingLock

Hook = Callable[[Any], object]


def hooked_operation(impl: ModuleType) -> type[Any]:
    """An operation whose callbacks run a hook (a callable of the operation) per call."""

    class Hooked(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.ready = False
            self.hooks: dict[str, list[Hook | None]] = {}
            self.calls: dict[str, int] = {}
            self.log: list[str] = []

        def _call(self, name: str) -> None:
            count = self.calls[name] = self.calls.get(name, 0) + 1
            self.log.append(name)
            hooks = self.hooks.get(name, [])
            hook = hooks[count - 1] if count <= len(hooks) else None
            if hook is not None:
                hook(self)

        def try_complete(self) -> bool:
            self._call("try_complete")
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            self._call("on_complete")

        def on_expiration(self) -> None:
            self._call("on_expiration")

    return Hooked


def inline_purgatory(impl: ModuleType, clock: ManualClock, **kwargs: Any) -> Any:
    timer = impl.SystemTimer("r", clock=clock, executor=kwargs.pop("executor", InlineExecutor()))
    return impl.DelayedOperationPurgatory("r", timer, reaper_enabled=False, **kwargs)


# -- R63: the operation lock is re-entrant ------------------------------------------------


@pytest.mark.parametrize(
    "lock", [threading.Lock(), threading.Semaphore(), threading.BoundedSemaphore()]
)
def test_r63_a_lock_that_cannot_be_taken_twice_is_refused(impl: ModuleType, lock: Any) -> None:
    """Regression: an operation with a plain ``threading.Lock`` and a delay of 0 deadlocked
    inside its own submission on an inline executor (the add hands the due task over at
    once and ``run`` takes the lock the submission holds)."""
    with pytest.raises(TypeError, match="lock must be re-entrant"):
        hooked_operation(impl)(0, lock)


def test_r63_a_due_operation_with_a_shared_rlock_expires_inside_its_submission(
    impl: ModuleType,
) -> None:
    """The case that deadlocked with a plain lock, on the lock the spec asks for."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(0, threading.RLock())
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert op.log == ["try_complete", "try_complete", "on_complete", "on_expiration"]
    assert op.is_completed and purgatory.watched == 0 and purgatory.num_delayed == 0


# -- R64: shutdown from inside a callback ---------------------------------------------------


def test_r64_shutdown_from_on_expiration_stops_the_rest_of_the_drain(impl: ModuleType) -> None:
    """Regression: ``shutdown()`` from an ``on_expiration`` returned, and the other
    operations of the same drain still ran ``on_complete`` and ``on_expiration``.
    Whichever expires first (equal due times: R6 leaves the order open) shuts down."""
    clock = ManualClock(0)
    purgatory = inline_purgatory(impl, clock)
    cls = hooked_operation(impl)
    ops = [cls(5), cls(5), cls(6)]
    for index, op in enumerate(ops):
        op.hooks["on_expiration"] = [lambda op: purgatory.shutdown()]
        purgatory.try_complete_else_watch(op, [f"k{index}"])
    clock.advance(10)
    purgatory.timer.advance_clock(0)
    assert sum("on_complete" in op.log for op in ops) == 1
    assert sum("on_expiration" in op.log for op in ops) == 1
    assert sum(not op.is_completed and not op.is_abandoned for op in ops) == 2


def test_r64_shutdown_from_try_complete_refuses_the_submission(impl: ModuleType) -> None:
    """A submission whose own ``try_complete`` shuts the purgatory down is refused as a
    call after shutdown: ``RuntimeError``, rolled back (R38), nothing left watched or
    timed."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(50)
    op.hooks["try_complete"] = [None, lambda op: purgatory.shutdown()]
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert not op.is_completed and not op.is_abandoned


@pytest.mark.parametrize("timer_enabled", [True, False])
def test_r64_shutdown_from_the_first_try_refuses_the_submission(
    impl: ModuleType, timer_enabled: bool
) -> None:
    """Also with no timer to refuse the add (R33): the submission checks the purgatory
    itself before its timer step, so an awaiting caller is never left with an operation
    watched in a purgatory that is gone."""
    purgatory = inline_purgatory(impl, ManualClock(0), timer_enabled=timer_enabled)
    op = hooked_operation(impl)(50)
    op.hooks["try_complete"] = [lambda op: purgatory.shutdown()]
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0


def test_r64_shutdown_from_the_knocked_retry_refuses_the_submission(impl: ModuleType) -> None:
    """The R41 retry is part of the submission (R54): a shutdown from its
    ``try_complete`` refuses the submission too, rolled back."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(50, KnockStagingLock())
    op.hooks["try_complete"] = [
        None,
        lambda op: op.maybe_try_complete(),  # a knock while the submission holds the lock
        lambda op: purgatory.shutdown(),  # the retry it left to the submission
    ]
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a"])
    assert op.calls["try_complete"] == 3
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert not op.is_completed and not op.is_abandoned


def test_r64_shutdown_from_the_hand_over_inside_the_add_refuses_the_submission(
    impl: ModuleType,
) -> None:
    """Found by the re-entrant lifecycle machine: the executor's ``submit`` of an
    operation due at once (inside the submission's timer add) shuts the purgatory down,
    then refuses as a shut-down executor does (R65: quiet, the timer is closed). The
    submission returned False with its operation watched and counted in a closed
    purgatory; it is refused and rolled back like any other step after shutdown."""

    class ShuttingExecutor(InlineExecutor):
        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            purgatory.shutdown()
            raise RuntimeError("cannot schedule new futures after shutdown")

    purgatory = inline_purgatory(impl, ManualClock(0), executor=ShuttingExecutor())
    op = hooked_operation(impl)(0)
    with pytest.raises(RuntimeError, match="shut down"):
        purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert not op.is_completed and "on_complete" not in op.log


# -- R65: an executor's refusal --------------------------------------------------------------


class RefusingExecutor(InlineExecutor):
    """An open executor whose ``submit`` raises ``RuntimeError`` (as CPython's thread pool
    does when no thread can be started)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = True

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.refuse:
            raise RuntimeError("can't start new thread")
        return super().submit(fn, *args, **kwargs)


def test_r65_a_refused_hand_over_of_a_due_submission_leaves_no_trace(impl: ModuleType) -> None:
    """Regression: the ``RuntimeError`` was logged as "executor is shut down" and
    swallowed, and the submission returned False with its operation watched for ever."""
    executor = RefusingExecutor()
    purgatory = inline_purgatory(impl, ManualClock(0), executor=executor)
    op = hooked_operation(impl)(0)
    with pytest.raises(RuntimeError, match="can't start new thread") as raised:
        purgatory.try_complete_else_watch(op, ["k"])
    assert any("was not handed over" in note for note in raised.value.__notes__)
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    executor.refuse = False
    assert purgatory.try_complete_else_watch(op, ["k"]) is False  # no trace: accepted again
    assert op.log[-2:] == ["on_complete", "on_expiration"]


def test_r65_a_refused_hand_over_in_a_drain_is_raised(impl: ModuleType) -> None:
    """Regression: a drain whose executor raised ``RuntimeError`` returned True and its
    operations never expired, with nothing but a misleading log line."""
    clock = ManualClock(0)
    executor = RefusingExecutor()
    executor.refuse = False
    purgatory = inline_purgatory(impl, clock, executor=executor)
    op = hooked_operation(impl)(5)
    purgatory.try_complete_else_watch(op, ["k"])
    executor.refuse = True
    clock.advance(5)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        purgatory.timer.advance_clock(0)
    assert "on_complete" not in op.log


def test_r65_a_refusal_from_an_executor_closed_meanwhile_is_quiet(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """The one refusal that is expected: the timer was closed while it handed over (here
    the executor closes it, then refuses, as a shut-down thread pool does). The task
    stays unrun, as every task of a closed timer (R14), and the drain does not raise."""
    clock = ManualClock(0)

    class ClosingExecutor(InlineExecutor):
        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            timer.close()
            raise RuntimeError("cannot schedule new futures after shutdown")

    timer = impl.SystemTimer("t", clock=clock, executor=ClosingExecutor())
    op = hooked_operation(impl)(5)
    timer.add(op)
    clock.advance(5)
    with caplog.at_level(logging.ERROR):
        timer.advance_clock(0)
    assert op.log == [] and timer.size == 0
    assert not caplog.records


# -- R66: cancel_for_key from inside a submission -----------------------------------------------


def test_r66_cancel_for_key_inside_the_submission_leaves_no_timer_entry(
    impl: ModuleType,
) -> None:
    """Regression: ``cancel_for_key(k)`` from the second ``try_complete`` of an operation
    being submitted on ``k`` returned it, and the submission then added it to the timer,
    where it expired: when ``cancel_for_key`` returns, none of its operations is timed."""
    clock = ManualClock(0)
    purgatory = inline_purgatory(impl, clock)
    op = hooked_operation(impl)(10)
    returned: list[Any] = []
    op.hooks["try_complete"] = [None, lambda op: returned.extend(purgatory.cancel_for_key("k"))]
    assert purgatory.try_complete_else_watch(op, ["k", "other"]) is False
    assert returned == [op]
    assert purgatory.num_delayed == 0
    clock.advance(20)
    purgatory.advance_clock(0)
    assert "on_complete" not in op.log
    assert purgatory.watched == 1  # still on its other key (R29)
    assert purgatory.check_and_complete("other") == 0
    op.ready = True
    assert purgatory.check_and_complete("other") == 1


# -- R67: a key that fails during housekeeping ---------------------------------------------------


class FlakyKey:
    """A key whose ``__hash__`` works ``good`` times, then raises; equal only to itself."""

    def __init__(self, good: int) -> None:
        self.good = good

    def __hash__(self) -> int:
        if self.good <= 0:
            raise ValueError("flaky key")
        self.good -= 1
        return 7

    def __eq__(self, other: object) -> bool:
        if other is not self:
            raise ValueError("flaky key compared")
        return True


@pytest.mark.parametrize("scan", [False, True], ids=["candidates", "scan"])
def test_r67_a_key_failing_in_the_idle_purge_does_not_escape_another_completion(
    impl: ModuleType, caplog: pytest.LogCaptureFixture, scan: bool
) -> None:
    """Regression (the two implementations disagreed): a key that raised during the R61
    idle purge escaped an unrelated operation's ``force_complete`` before its
    ``on_complete`` ran on the optimized purgatory. Both now finish the completion, log
    the key's error and keep its entries linked; ``_check()`` holds. ``scan``: the
    optimized purgatory keeps no purge candidates (limit 0), so its purge is the full
    scan of every list, as the reference's always is."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    if scan:
        if not hasattr(purgatory, "_candidates_limit"):
            pytest.skip("the reference's purge is always the scan: the other case")
        purgatory._candidates_limit = 0
    cls = hooked_operation(impl)
    flaky = FlakyKey(good=10**6)
    done, other = cls(100), cls(100)
    purgatory.try_complete_else_watch(done, [flaky, "x"])
    purgatory.try_complete_else_watch(other, ["y"])  # unfinished: ``done`` will linger
    done.ready = True
    assert purgatory.check_and_complete("x") == 1  # finished, still linked on ``flaky``
    assert purgatory.watched == 2
    flaky.good = 0  # from now on its hash raises
    with caplog.at_level(logging.ERROR):
        assert other.force_complete() is True  # the last unfinished one: idle purge
    assert other.log[-1] == "on_complete"
    logged = [record.exc_info[1] for record in caplog.records if record.exc_info]
    assert any("flaky key" in str(exc) for exc in logged)
    assert purgatory.watched == 1  # ``done`` is still linked on the key that failed
    flaky.good = 10**6  # _check hashes every key itself
    if hasattr(purgatory, "_check"):
        purgatory._check()
    done_lingering = cls(100)
    purgatory.try_complete_else_watch(done_lingering, ["z"])
    assert done_lingering.force_complete() is True  # the next idle purge unlinks ``done``
    assert purgatory.watched == 0


def test_r61_a_keyboard_interrupt_from_a_key_in_the_idle_purge_comes_after_on_complete(
    impl: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """R61, R67: the last unfinished operation's ``force_complete`` runs the idle purge;
    a key whose ``__hash__`` raises ``KeyboardInterrupt`` there does not cost the
    operation its ``on_complete``: it runs exactly once, then the interrupt reaches the
    caller, and the operation is completed with nothing left unfinished."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    cls = hooked_operation(impl)
    flaky = InterruptingKey()
    done, other = cls(100), cls(100)
    purgatory.try_complete_else_watch(done, [flaky, "x"])
    purgatory.try_complete_else_watch(other, ["y"])  # unfinished: ``done`` will linger
    done.ready = True
    assert purgatory.check_and_complete("x") == 1  # finished, still linked on ``flaky``
    flaky.interrupt = True
    with caplog.at_level(logging.ERROR), pytest.raises(KeyboardInterrupt):
        other.force_complete()  # the last unfinished one: the idle purge meets ``flaky``
    assert other.log[-1] == "on_complete" and other.log.count("on_complete") == 1
    assert other.is_completed and purgatory.num_delayed == 0
    assert other.force_complete() is False and other.log.count("on_complete") == 1
    flaky.interrupt = False
    assert purgatory.watched == 1  # ``done`` is still linked on the key that failed


class InterruptingKey:
    """A key whose ``__hash__`` raises ``KeyboardInterrupt`` while ``interrupt`` is set."""

    def __init__(self) -> None:
        self.interrupt = False

    def __hash__(self) -> int:
        if self.interrupt:
            raise KeyboardInterrupt
        return 11

    def __eq__(self, other: object) -> bool:
        return other is self


# -- R68: the lifecycle ------------------------------------------------------------------------


def _probe_each_ending(op: Any, probe: Callable[[], None]) -> None:
    """Run ``probe`` in the middle of the operation's ending transition: right after its
    compare-and-set (the reference's completed flag) or its flag lock's release (the
    optimized operation's test-and-write)."""
    flag = getattr(op, "_completed", None)  # the lifecycle's flag, if it has one
    if isinstance(flag, AtomicFlag):

        class ProbingFlag(AtomicFlag):
            def compare_and_set(self, expect: bool, update: bool) -> bool:
                won = super().compare_and_set(expect, update)
                probe()
                return won

        op._completed = ProbingFlag(flag.get())
    else:
        inner = op._flags

        class Probing:
            def __enter__(self) -> bool:
                return bool(inner.__enter__())

            def __exit__(self, *exc: object) -> None:
                inner.__exit__(*exc)
                probe()

            def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
                return bool(inner.acquire(blocking, timeout))

            def release(self) -> None:
                inner.release()
                probe()

        op._flags = Probing()


@pytest.mark.parametrize("ending", ["abandon", "force_complete"])
def test_r68_a_reader_never_sees_an_ending_half_made(impl: ModuleType, ending: str) -> None:
    """Regression (reference): during ``abandon`` a reader could see
    ``is_completed=True, is_abandoned=False``: the completed flag was set before the
    abandoned mark. A reader in the middle of either ending sees the operation pending
    or in its final state, and an abandoned one is never seen completed."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(10)
    purgatory.try_complete_else_watch(op, ["k"])
    seen: list[tuple[bool, bool]] = []
    _probe_each_ending(op, lambda: seen.append((op.is_completed, op.is_abandoned)))
    purgatory.abandon(op) if ending == "abandon" else op.force_complete()
    final = (False, True) if ending == "abandon" else (True, False)
    assert seen and set(seen) <= {(False, False), final}
    assert (op.is_completed, op.is_abandoned) == final


def test_r68_transitions_follow_the_table(impl: ModuleType) -> None:
    """Every row of the lifecycle table: new -> submitted -> new on a rollback;
    submitted -> completed / abandoned; the final states refuse every later ending."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    cls = hooked_operation(impl)

    rolled = cls(10)
    rolled.hooks["try_complete"] = [None, lambda op: (_ for _ in ()).throw(ValueError("x"))]
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(rolled, ["k"])
    assert (rolled.is_completed, rolled.is_abandoned, purgatory.watched) == (False, False, 0)
    assert purgatory.try_complete_else_watch(rolled, ["k"]) is False  # new again: accepted

    completed = cls(10)
    purgatory.try_complete_else_watch(completed, ["k"])
    assert completed.force_complete() is True
    assert completed.force_complete() is False and purgatory.abandon(completed) is False
    assert (completed.is_completed, completed.is_abandoned) == (True, False)

    abandoned = cls(10)
    purgatory.try_complete_else_watch(abandoned, ["k"])
    assert purgatory.abandon(abandoned) is True
    assert abandoned.force_complete() is False and purgatory.abandon(abandoned) is False
    assert (abandoned.is_completed, abandoned.is_abandoned) == (False, True)
    assert abandoned.log.count("on_complete") == 0

    timed = cls(0)  # new, added to a timer by hand: expiry completes it
    purgatory.timer.add(timed)
    assert timed.is_completed and timed.log[-2:] == ["on_complete", "on_expiration"]


# -- R69: calls from callbacks ------------------------------------------------------------------


def test_r69_try_complete_resubmitting_its_own_operation_is_refused(impl: ModuleType) -> None:
    """A ``try_complete`` that submits its own operation again gets R34's ``ValueError``;
    raised through the submission, it rolls it back (R38)."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(10)
    op.hooks["try_complete"] = [lambda op: purgatory.try_complete_else_watch(op, ["j"])]
    with pytest.raises(ValueError, match="already passed"):
        purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.watched == 0 and purgatory.num_delayed == 0
    assert purgatory.try_complete_else_watch(op, ["k"]) is False


def test_r69_on_complete_shutting_down_lets_the_sweep_finish(impl: ModuleType) -> None:
    """``shutdown`` from an ``on_complete`` inside ``check_and_complete``: the sweep still
    tries every other operation on the key (R32, R64)."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    cls = hooked_operation(impl)
    ops = [cls(100) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
        op.ready = True
    ops[0].hooks["on_complete"] = [lambda op: purgatory.shutdown()]
    assert purgatory.check_and_complete("k") == 3
    assert all(op.is_completed for op in ops) and purgatory.timer.closed


def test_r69_on_expiration_may_drain_again(impl: ModuleType) -> None:
    """``advance_clock`` from an ``on_expiration`` is a nested drain: every due task runs
    once, none early."""
    clock = ManualClock(0)
    purgatory = inline_purgatory(impl, clock)
    cls = hooked_operation(impl)
    first, second, later = cls(5), cls(7), cls(30)
    first.hooks["on_expiration"] = [lambda op: purgatory.advance_clock(0)]
    for index, op in enumerate((first, second, later)):
        purgatory.try_complete_else_watch(op, [f"k{index}"])
    clock.advance(10)
    purgatory.advance_clock(0)
    assert first.log.count("on_expiration") == second.log.count("on_expiration") == 1
    assert "on_complete" not in later.log and purgatory.num_delayed == 1


def test_r69_try_complete_checking_its_own_key_tries_itself_nested(impl: ModuleType) -> None:
    """A ``try_complete`` that calls ``check_and_complete`` on one of its own keys during
    its submission's second try: the operation is tried again, nested, under its own
    (re-entrant, R63) lock, and completes there once."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    op = hooked_operation(impl)(10)

    def check_own_key(op: Any) -> None:
        op.ready = True
        assert purgatory.check_and_complete("k") == 1

    op.hooks["try_complete"] = [None, check_own_key]
    assert purgatory.try_complete_else_watch(op, ["k"]) is False  # the nested try won
    assert op.log.count("on_complete") == 1 and op.is_completed
    assert purgatory.num_delayed == 0 and purgatory.watched == 0
