"""User code that fails, on both implementations (R52-R56, R38, R41).

Each test here pins one behaviour at the boundary where the library calls user code:
callbacks raising an ``Exception`` or another ``BaseException``, sweeps that must finish
before they raise, the R41 retry inside the submission's rollback, a knock during
``cancel_for_key``, and ``cancel`` racing a rolled-back submission. Every test failed on
the code before these rules existed (the regression each names).
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import ManualClock
from kpurgatory.executors import InlineExecutor
from tests.mutants.catalog import Mutant, applied
from tests.support import (
    DelegatingLock,
    KnockStagingLock,
    Recorder,
    needs_python_source,
    operation_class,
    task_class,
)


def make_purgatory(impl: ModuleType, clock: ManualClock, **kwargs: Any) -> Any:
    """A purgatory of ``impl`` on an inline timer reading ``clock``, reaper off."""
    timer = impl.SystemTimer("p", clock=clock, executor=InlineExecutor())
    return impl.DelayedOperationPurgatory("p", timer, reaper_enabled=False, **kwargs)


def failing_operation(impl: ModuleType) -> type[Any]:
    """A flag operation whose callbacks raise what the test asks for.

    ``raises`` maps a callback name (``try_complete``, ``on_complete``,
    ``on_expiration``) to the exception it raises on every call."""
    base = operation_class(impl)

    class Failing(base):  # type: ignore[misc,valid-type]
        def __init__(self, delay_ms: int, name: str, recorder: Recorder, lock: Any = None) -> None:
            super().__init__(delay_ms, name, recorder, lock)
            self.raises: dict[str, BaseException] = {}
            self.hook: Callable[[int], None] | None = None

        def try_complete(self) -> bool:
            self.try_calls += 1
            if self.hook is not None:
                self.hook(self.try_calls)
            if "try_complete" in self.raises:
                raise self.raises["try_complete"]
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            super().on_complete()
            if "on_complete" in self.raises:
                raise self.raises["on_complete"]

        def on_expiration(self) -> None:
            super().on_expiration()
            if "on_expiration" in self.raises:
                raise self.raises["on_expiration"]

    return Failing


# ---- R53: a check_and_complete tries every operation before it raises ------------------


def test_r53_check_and_complete_tries_every_operation_when_some_raise(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R52, R53 (bug: one bad operation poisoned its key): five operations on a key, the
    second's try_complete and the third's on_complete raise; the other three complete,
    and the two errors arrive together, in order, as an ExceptionGroup."""
    op = failing_operation(impl)
    purgatory = make_purgatory(impl, clock)
    ops = [op(100, f"o{i}", recorder) for i in range(5)]
    for each in ops:
        assert purgatory.try_complete_else_watch(each, ["k"]) is False
        each.ready = True
    bad_try, bad_complete = ValueError("try"), RuntimeError("complete")
    ops[1].raises["try_complete"] = bad_try
    ops[2].raises["on_complete"] = bad_complete
    with pytest.raises(ExceptionGroup) as caught:
        purgatory.check_and_complete("k")
    assert caught.value.exceptions == (bad_try, bad_complete)
    assert [each.is_completed for each in ops] == [True, False, True, True, True]
    assert purgatory.num_completed == 3  # the raising on_complete's operation is not counted
    assert purgatory.watched == 1  # only the pending one: the completed ones are unlinked
    assert purgatory.num_delayed == 1
    del ops[1].raises["try_complete"]
    assert purgatory.check_and_complete("k") == 1
    assert (purgatory.watched, purgatory.num_delayed) == (0, 0)


def test_r53_one_error_is_raised_as_it_is(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R53: a single error keeps its type (R48's "the completing call raises it" holds);
    a BaseException from try_complete is handled the same way."""
    op = failing_operation(impl)
    purgatory = make_purgatory(impl, clock)
    first, second = op(100, "a", recorder), op(100, "b", recorder)
    for each in (first, second):
        purgatory.try_complete_else_watch(each, ["k"])
        each.ready = True
    first.raises["try_complete"] = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        purgatory.check_and_complete("k")
    assert second.is_completed and not first.is_completed


# ---- R52, R53: a drain hands every task over before it raises ---------------------------


def test_r53_a_drain_hands_every_due_task_over_when_one_raises_a_base_exception(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R52, R53, R13 (bug: a BaseException from on_expiration escaped the drain and the
    other tasks collected from the bucket were lost): three operations due together; the
    first to expire raises SystemExit, the second a plain Exception (logged, swallowed);
    all three expire, then advance_clock raises the SystemExit."""
    op = failing_operation(impl)
    purgatory = make_purgatory(impl, clock)
    ops = [op(10, f"o{i}", recorder) for i in range(3)]
    for each in ops:
        purgatory.try_complete_else_watch(each, ["k"])
        each.raises["on_expiration"] = ValueError("logged")
    ops[0].raises["on_expiration"] = SystemExit(3)
    ops[2].raises["on_expiration"] = SystemExit(3)  # whichever runs first: same error kind
    with pytest.raises(BaseExceptionGroup) as caught:
        purgatory.advance_clock(10)
    assert [type(error) for error in caught.value.exceptions] == [SystemExit, SystemExit]
    assert all(each.is_completed for each in ops)
    assert sorted(recorder.names(type(recorder.events[0]))) == ["o0", "o1", "o2"]
    assert (purgatory.num_delayed, purgatory.timer.next_due_time) == (0, None)


def test_r52_a_task_run_raising_keyboard_interrupt_reaches_the_caller_after_the_drain(
    impl: ModuleType, clock: ManualClock
) -> None:
    """R52, R53: a plain timer task whose run raises KeyboardInterrupt; the other due
    tasks still run, and the interrupt is raised as it is from advance_clock."""
    ran: list[str] = []
    base = task_class(impl)

    class Interrupting(base):  # type: ignore[misc,valid-type]
        def run(self) -> None:
            super().run()
            raise KeyboardInterrupt

    class Sink:
        def ran(self, name: str) -> None:
            ran.append(name)

    timer = impl.SystemTimer("t", clock=clock, executor=InlineExecutor())
    timer.add(base(5, "before", Sink()))
    timer.add(Interrupting(5, "raiser", Sink()))
    timer.add(base(5, "after", Sink()))
    with pytest.raises(KeyboardInterrupt):
        timer.advance_clock(5)
    assert sorted(ran) == ["after", "before", "raiser"]
    assert timer.size == 0


def test_r53_an_executor_whose_submit_raises_is_named_in_a_note(
    impl: ModuleType, clock: ManualClock
) -> None:
    """R53, R54: a supplied executor whose submit raises fails the drain after the other
    tasks were handed over; the error names the task that did not run."""
    ran: list[str] = []

    class Sink:
        def ran(self, name: str) -> None:
            ran.append(name)

    class Flaky(InlineExecutor):
        calls = 0

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                raise OSError("no thread available")
            return super().submit(fn, *args, **kwargs)

    timer = impl.SystemTimer("t", clock=clock, executor=Flaky())
    for name in ("a", "b"):
        timer.add(task_class(impl)(5, name, Sink()))
    with pytest.raises(OSError) as caught:
        timer.advance_clock(5)
    assert len(ran) == 1
    assert any("was not handed over" in note for note in caught.value.__notes__)


def test_r52_inline_executor_raises_a_base_exception_and_stores_an_exception() -> None:
    """R52: an InlineExecutor stores an Exception in the future, but a BaseException
    that is not one (the callable ran in the caller's thread) is stored and raised."""
    executor = InlineExecutor()

    def fail(error: BaseException) -> None:
        raise error

    assert isinstance(executor.submit(fail, ValueError()).exception(), ValueError)
    with pytest.raises(asyncio.CancelledError):
        executor.submit(fail, asyncio.CancelledError())


# ---- R54: the R41 retry is inside the submission's rollback ------------------------------


def test_r54_the_r41_retry_that_raises_rolls_the_submission_back(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R54, R41, R38 (bug: the retry escaped the rollback; the call raised yet the
    operation stayed watched, timed and claimed): a knock lands during the submission
    (a maybe_try_complete that finds the operation's lock held: a knock-staging lock), and the
    retry the submission then owes raises. Afterwards nothing is left and a resubmission
    is accepted."""
    op = failing_operation(impl)
    purgatory = make_purgatory(impl, clock)
    operation = op(100, "a", recorder, KnockStagingLock())

    def knock_then_fail(call: int) -> None:
        if call == 2:  # the second try, lock held: a knock that must wait for the holder
            assert operation.maybe_try_complete() is False
        if call == 3:  # the retry after the lock was released
            raise ValueError("retry failed")

    operation.hook = knock_then_fail
    with pytest.raises(ValueError, match="retry failed"):
        purgatory.try_complete_else_watch(operation, ["k", "j"])
    assert operation.try_calls == 3
    assert (purgatory.watched, purgatory.watched_keys, purgatory.num_delayed) == (0, 0, 0)
    assert purgatory.estimated_total_operations == 0
    operation.hook = None
    assert purgatory.try_complete_else_watch(operation, ["k"]) is False  # claim released
    clock.advance(100)
    purgatory.advance_clock(0)
    assert operation.is_completed and recorder.names(type(recorder.events[0])) == ["a"]


# ---- R55: cancel_for_key honours a knock ---------------------------------------------------


class HookLock(KnockStagingLock):
    """A knock-staging lock that runs ``on_acquire`` once, right after an acquisition."""

    def __init__(self) -> None:
        super().__init__()
        self.on_acquire: Callable[[], None] | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = super().acquire(blocking, timeout)
        hook, self.on_acquire = self.on_acquire, None
        if got and hook is not None:
            hook()
        return got


def test_r55_a_knock_during_cancel_for_key_is_honoured(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R55, R41 (bug: the knock was dropped; the operation, out of the timer, waited for an
    event that would not recur): while cancel_for_key holds the operation's lock, a
    maybe_try_complete knocks and leaves its attempt to the holder; cancel_for_key makes
    it after releasing the lock, completes the operation and still returns it."""
    lock = HookLock()
    operation = operation_class(impl)(100, "a", recorder, lock)
    purgatory = make_purgatory(impl, clock)
    purgatory.try_complete_else_watch(operation, ["k", "j"])
    operation.ready = True

    def knock() -> None:
        assert operation.maybe_try_complete() is False  # lock held: left to the holder

    lock.on_acquire = knock
    assert purgatory.cancel_for_key("k") == [operation]
    assert operation.is_completed
    assert recorder.names(type(recorder.events[0])) == ["a"]
    assert purgatory.num_delayed == 0


def test_r53_cancel_for_key_makes_every_knock_attempt_then_raises(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R53, R55: two operations on the key, each knocked while cancel_for_key holds its
    lock; the first one's attempt raises. cancel_for_key still makes the second one's
    attempt (which completes it), takes both out of the timer, and then raises the one
    error as it is."""
    first = failing_operation(impl)(100, "a", recorder, HookLock())
    second = failing_operation(impl)(100, "b", recorder, HookLock())
    purgatory = make_purgatory(impl, clock)
    for operation in (first, second):
        purgatory.try_complete_else_watch(operation, ["k", "j"])
        operation.ready = True

        def knock(operation: Any = operation) -> None:
            assert operation.maybe_try_complete() is False  # lock held: left to the holder

        operation.lock.on_acquire = knock
    first.raises["try_complete"] = ValueError("first's try_complete")
    with pytest.raises(ValueError, match="first's try_complete"):
        purgatory.cancel_for_key("k")
    assert not first.is_completed and second.is_completed
    assert purgatory.num_delayed == 0 and purgatory.cancel_for_key("k") == []


class HashCountingKey:
    """A key that counts the calls of its ``__hash__`` (user code the purgatory runs)."""

    def __init__(self) -> None:
        self.hashes = 0

    def __hash__(self) -> int:
        self.hashes += 1
        return 3

    def __eq__(self, other: object) -> bool:
        return other is self


def test_r38_a_submission_failing_before_it_watched_touches_no_key_again(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R38, R54: the first ``try_complete`` raises, before any key is watched; the
    rollback has nothing to unwatch, so it hashes no key again (a key's hash is user
    code), the error reaches the caller as it is and nothing is left behind."""
    purgatory = make_purgatory(impl, clock)
    key = HashCountingKey()
    operation = failing_operation(impl)(100, "a", recorder)
    seen: list[int] = []
    operation.hook = lambda call: seen.append(key.hashes)
    operation.raises["try_complete"] = ValueError("first try")
    with pytest.raises(ValueError, match="first try"):
        purgatory.try_complete_else_watch(operation, [key, "last"])
    assert seen and key.hashes == seen[0]  # none after the first try began
    assert (purgatory.watched, purgatory.estimated_total_operations) == (0, 0)


class CancelOnNextAcquire(DelegatingLock):
    """An operation lock whose next ``acquire``, once armed, first cancels the operation:
    a ``cancel`` between a submission's claim and its lock (R40), in one thread."""

    def __init__(self) -> None:
        super().__init__()
        self.operation: Any = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        operation, self.operation = self.operation, None
        if operation is not None:
            operation.cancel()
        return bool(super().acquire(blocking, timeout))


def test_r38_r40_an_abandon_after_a_rolled_back_submission_touches_none_of_its_keys(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R38, R40: a rollback after the operation watched its keys takes the submission
    back whole, its keys included: a later submission of the operation (other keys),
    cancelled between its claim and its lock, abandons it without unwatching the rolled
    back keys again, so it hashes none of them (a key's hash is user code)."""
    purgatory = make_purgatory(impl, clock)
    key = HashCountingKey()
    lock = CancelOnNextAcquire()
    operation = failing_operation(impl)(100, "a", recorder, lock)

    def fail_after_watching(call: int) -> None:
        if call == 2:
            raise ValueError("try failed")

    operation.hook = fail_after_watching
    with pytest.raises(ValueError, match="try failed"):
        purgatory.try_complete_else_watch(operation, [key, "last"])
    hashes = key.hashes
    operation.hook = None
    lock.operation = operation  # the next acquire, the resubmission's, cancels first
    assert purgatory.try_complete_else_watch(operation, ["other"]) is False
    assert operation.is_abandoned and lock.operation is None
    assert key.hashes == hashes
    assert (purgatory.watched, purgatory.num_delayed) == (0, 0)


def test_r29_without_a_knock_cancel_for_key_runs_no_callback(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R29, R55: with nobody knocking, cancel_for_key calls no try_complete."""
    operation = operation_class(impl)(100, "a", recorder)
    purgatory = make_purgatory(impl, clock)
    purgatory.try_complete_else_watch(operation, ["k"])
    tries = operation.try_calls
    assert purgatory.cancel_for_key("k") == [operation]
    assert operation.try_calls == tries and not operation.is_completed


# ---- R56: cancel never fails on a valid operation ------------------------------------------


class GateLock(DelegatingLock):
    """Forces cancel's first lock section between a submission's claim and its lock, and
    the submission's rollback before cancel's abandon (each wait bounded by 5 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.submitter = -1
        self.canceller = -1
        self.cancel_read = threading.Event()
        self.rolled_back = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if threading.get_ident() == self.submitter:
            assert self.cancel_read.wait(5)
        return super().acquire(blocking, timeout)

    def release(self) -> None:
        super().release()
        me = threading.get_ident()
        if me == self.canceller and not self.cancel_read.is_set():
            self.cancel_read.set()
            assert self.rolled_back.wait(5)
        elif me == self.submitter:
            self.rolled_back.set()


def test_r56_cancel_racing_a_rolled_back_submission_does_not_raise(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R56, R38 (bug: ValueError "was not submitted"): cancel reads the owner after the
    submission claimed the operation, the submission's try_complete raises and rolls it
    back, then cancel goes on: it is the plain R9 cancel and returns quietly."""
    lock = GateLock()
    operation = failing_operation(impl)(100, "a", recorder, lock)
    operation.raises["try_complete"] = ValueError("no")
    purgatory = make_purgatory(impl, clock)
    outcomes: dict[str, BaseException | None] = {}

    def submit() -> None:
        lock.submitter = threading.get_ident()
        try:
            purgatory.try_complete_else_watch(operation, ["k"])
        except BaseException as exc:
            outcomes["submit"] = exc

    def cancel() -> None:
        lock.canceller = threading.get_ident()
        try:
            operation.cancel()
            outcomes["cancel"] = None
        except BaseException as exc:
            outcomes["cancel"] = exc

    canceller = threading.Thread(target=cancel)
    submitter = threading.Thread(target=submit)
    canceller_started = threading.Event()
    original_claim = operation._claim_submission

    def claim_then_let_cancel_in(owner: Any) -> bool:
        claimed: bool = original_claim(owner)
        canceller.start()
        canceller_started.set()
        return claimed

    operation._claim_submission = claim_then_let_cancel_in
    submitter.start()
    submitter.join(10)
    canceller.join(10)
    assert canceller_started.is_set()
    assert isinstance(outcomes["submit"], ValueError)
    assert outcomes["cancel"] is None
    assert not operation.is_abandoned and not operation.is_completed
    assert (purgatory.watched, purgatory.num_delayed) == (0, 0)


def test_r56_cancel_is_idempotent_on_every_kind_of_operation(
    impl: ModuleType, clock: ManualClock, recorder: Recorder
) -> None:
    """R56, R40, R9: cancel on a never-submitted, a submitted, an abandoned and a
    completed operation never raises."""
    purgatory = make_purgatory(impl, clock)
    never = operation_class(impl)(100, "never", recorder)
    never.cancel()
    submitted = operation_class(impl)(100, "submitted", recorder)
    purgatory.try_complete_else_watch(submitted, ["k"])
    submitted.cancel()
    submitted.cancel()
    assert submitted.is_abandoned and purgatory.watched == 0
    done = operation_class(impl)(100, "done", recorder)
    done.ready = True
    assert purgatory.try_complete_else_watch(done, ["k"])
    done.cancel()
    assert done.is_completed and not done.is_abandoned


# ---- R52: the reaper survives anything a step raises ---------------------------------------


def test_r52_the_reaper_logs_a_base_exception_and_carries_on(
    impl: ModuleType, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """R52, R31: a reaper step that raises SystemExit (an on_expiration on an inline
    executor runs on the reaper) is logged, and the reaper still expires the next one."""
    op = failing_operation(impl)
    timer = impl.SystemTimer("t", executor=InlineExecutor())
    with impl.DelayedOperationPurgatory("p", timer) as purgatory:
        first, second = op(1, "first", recorder), op(30, "second", recorder)
        first.raises["on_expiration"] = SystemExit(1)
        purgatory.try_complete_else_watch(first, ["k"])
        purgatory.try_complete_else_watch(second, ["k"])
        deadline = threading.Event()
        for _ in range(200):
            if second.is_completed:
                break
            deadline.wait(0.01)
        assert first.is_completed and second.is_completed
    assert any("failed a step" in record.getMessage() for record in caplog.records)


# ---- mutation gaps: the pending flag on the blocking paths (R41) ---------------------------


def test_r41_a_stale_knock_is_cleared_by_safe_try_complete(
    impl: ModuleType, recorder: Recorder
) -> None:
    """R41, R18: a knock nobody took leaves the pending flag set; safe_try_complete on a
    not-ready operation clears it and returns False after one more try (a path that did
    not clear it would go round for ever)."""
    operation = failing_operation(impl)(100, "a", recorder, KnockStagingLock())

    def guard(call: int) -> None:
        if call > 5:
            raise AssertionError("safe_try_complete goes round and round")

    operation.hook = guard
    operation.lock.acquire()
    assert operation.maybe_try_complete() is False  # lock held: the flag stays set
    operation.lock.release()
    assert operation.safe_try_complete() is False
    assert operation.try_calls == 1


def test_r41_safe_try_complete_or_else_makes_the_attempt_a_knocker_left(
    impl: ModuleType, recorder: Recorder
) -> None:
    """R41, R19: a knock during safe_try_complete_or_else's f is honoured by one more
    try after the lock is released, whose result is returned (False here)."""
    operation = failing_operation(impl)(100, "a", recorder, KnockStagingLock())

    def knock() -> None:
        assert operation.maybe_try_complete() is False

    assert operation.safe_try_complete_or_else(knock) is False
    assert operation.try_calls == 3
    operation.ready = True
    assert operation.safe_try_complete_or_else(knock) is True


def test_r41_a_stale_knock_is_cleared_by_safe_try_complete_or_else(
    impl: ModuleType, recorder: Recorder
) -> None:
    """R41, R19: a knock nobody took leaves the pending flag set; safe_try_complete_or_else
    clears it before its first try, so with no knock while it holds the lock it makes
    exactly its two tries and returns False, and leaves the flag clear (a path that kept
    the stale flag would make a third try after releasing the lock)."""
    operation = failing_operation(impl)(100, "a", recorder, KnockStagingLock())
    operation.lock.acquire()
    assert operation.maybe_try_complete() is False  # lock held: the flag stays set
    operation.lock.release()
    ran: list[str] = []
    assert operation.safe_try_complete_or_else(lambda: ran.append("f")) is False
    assert ran == ["f"] and operation.try_calls == 2
    assert operation.safe_try_complete() is False and operation.try_calls == 3


def _let_go_after_a_rolled_back_submission(
    impl: ModuleType, clock: ManualClock, recorder: Recorder, completes_on: int
) -> bool:
    """Roll a submission back (its try after watching raises), resubmit the same
    operation so that it completes at once (on try ``completes_on`` of the second
    submission), drop it: whether it is garbage then (nothing of the purgatory holds it)."""
    op = failing_operation(impl)
    purgatory = make_purgatory(impl, clock)
    operation = op(100, "a", recorder)

    def fail_after_watching(call: int) -> None:
        if call == 2:
            raise ValueError("try failed")

    operation.hook = fail_after_watching
    with pytest.raises(ValueError, match="try failed"):
        purgatory.try_complete_else_watch(operation, ["k", "j"])
    tries = operation.try_calls
    reference = weakref.ref(operation)

    def ready_on_try(call: int) -> None:
        target = reference()
        assert target is not None
        target.ready = call - tries >= completes_on

    operation.hook = ready_on_try
    assert purgatory.try_complete_else_watch(operation, ["k", "j"]) is True
    assert operation.is_completed
    assert (purgatory.watched, purgatory.watched_keys, purgatory.num_delayed) == (0, 0, 0)
    del operation
    gc.collect()
    return reference() is None


@pytest.mark.parametrize("completes_on", [1, 2], ids=["first-try", "after-watching"])
def test_r61_a_rolled_back_operation_resubmitted_and_completed_is_let_go(
    impl: ModuleType, clock: ManualClock, recorder: Recorder, completes_on: int
) -> None:
    """R61, R38, R52: a rolled-back operation, resubmitted and completed at once (on the
    try before watching, or on the one after), is held by nothing of the purgatory: no
    count, no watcher list, no purge candidate, no timer entry."""
    assert _let_go_after_a_rolled_back_submission(impl, clock, recorder, completes_on)


RELEASE_KEEPS_WATCH_KEYS = Mutant(
    "release-keeps-watch-keys",
    "kpurgatory.protocol",
    "Watchable._release_submission",
    "        self._watch_keys = ()  # type: ignore[misc]\n",
    "",
    "A statement removed: the rollback keeps the keys of the failed submission, so the "
    "resubmitted operation, completed before it is watched, is recorded as a purge "
    "candidate that no purge of its keys ever takes (R61).",
)


@needs_python_source()
def test_r61_the_rolled_back_resubmission_check_catches_a_removed_reset(
    clock: ManualClock, recorder: Recorder
) -> None:
    """The check above fails with the rollback's reset of the watch keys removed."""
    from kpurgatory import optimized

    with applied(RELEASE_KEEPS_WATCH_KEYS):
        assert not _let_go_after_a_rolled_back_submission(optimized, clock, recorder, 1)
    assert _let_go_after_a_rolled_back_submission(optimized, clock, recorder, 1)
