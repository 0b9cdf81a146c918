"""Callbacks that call back into the library, on both implementations (R67-R69): a key
that fails during housekeeping, the lifecycle's transitions as readers see them, and
calls from callbacks (resubmission, shutdown, another drain, a check of its own key).

As in ``test_reentrancy.py``, each test pins one row of the re-entrancy table of
docs/spec.md and failed on the code before these rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import ManualClock
from kpurgatory.sync import AtomicFlag
from tests.mutants.catalog import Mutant, applied
from tests.support import DelegatingLock, needs_python_source
from tests.test_reentrancy import hooked_operation, inline_purgatory

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


# -- R38: completed during its own rollback ----------------------------------------------------


class CompletingKey:
    """A key whose ``__hash__``, once armed, completes ``operation`` (a lock-free
    ``force_complete`` from user code), then hashes as usual; equal only to itself."""

    def __init__(self) -> None:
        self.operation: Any = None
        self.armed = False

    def __hash__(self) -> int:
        if self.armed:
            self.armed = False
            self.operation.force_complete()
        return 11

    def __eq__(self, other: object) -> bool:
        return other is self


def stays_submitted_when_completed_in_its_rollback(impl: ModuleType) -> bool:
    """R38's one exception, reached mid-rollback: the second ``try_complete`` raises, and
    while the rollback unlinks the operation its key's ``__hash__`` completes it
    (``on_complete`` runs). Whether it then stays completed and submitted (a second
    submission refused, R34), watched nowhere and timed nowhere."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    key = CompletingKey()
    op = hooked_operation(impl)(100)
    key.operation = op

    def fail(operation: Any) -> None:
        key.armed = True  # the rollback's unlinking hashes the key next
        raise RuntimeError("second try")

    op.hooks["try_complete"] = [None, fail]
    with pytest.raises(RuntimeError, match="second try"):
        purgatory.try_complete_else_watch(op, [key])
    assert op.log == ["try_complete", "try_complete", "on_complete"]
    assert op.is_completed and not op.is_abandoned
    try:
        purgatory.try_complete_else_watch(op, ["other"])
    except ValueError:
        refused = True
    else:
        refused = False
    if refused:  # still submitted here: abandon finds it finished already (R40)
        assert purgatory.abandon(op) is False
    if hasattr(purgatory, "_check"):  # the optimized purgatory's structure check
        purgatory._check()
    return refused and purgatory.num_delayed == 0 and purgatory.watched == 0


def test_r38_an_operation_completed_during_its_rollback_stays_completed_and_submitted(
    impl: ModuleType,
) -> None:
    assert stays_submitted_when_completed_in_its_rollback(impl)


class _FailingLock(DelegatingLock):
    """A re-entrant lock whose ``acquire`` raises while ``failing`` is set."""

    failing = True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.failing:
            raise RuntimeError("lock fault")
        return super().acquire(blocking, timeout)


def test_r54_a_lock_failure_leaves_no_claim_on_a_completed_operation(impl: ModuleType) -> None:
    """R54, R38: a submission whose lock fails changed nothing, so it leaves no claim
    even on an operation completed before it (R38's exception, which keeps a finished
    operation submitted, is for one whose other steps ran): submitting it again runs
    again."""
    assert failed_submission_of_a_completed_operation_leaves_no_claim(impl)


CLAIM_OF_A_COMPLETED_OPERATION_KEPT = Mutant(
    "claim-of-a-completed-operation-kept",
    "kpurgatory.protocol",
    "Purgatory._submit",
    "operation._release_submission(unchanged=True)",
    "operation._release_submission()",
    "R38's exception applied where the lock failed: a submission of an operation "
    "completed before it leaves it claimed, and the next one is refused (R54, R34; the "
    "lifecycle model found it).",
)


@needs_python_source()
def test_r54_the_no_claim_check_catches_a_completed_operation_kept_claimed() -> None:
    """The check above fails with the lock failure's unconditional release dropped."""
    from kpurgatory import optimized

    with applied(CLAIM_OF_A_COMPLETED_OPERATION_KEPT):
        assert not failed_submission_of_a_completed_operation_leaves_no_claim(optimized)
    assert failed_submission_of_a_completed_operation_leaves_no_claim(optimized)


def failed_submission_of_a_completed_operation_leaves_no_claim(impl: ModuleType) -> bool:
    """Whether two submissions of an operation completed beforehand whose lock fails both
    raise the lock's error (no R34 refusal), and a third runs and leaves nothing behind."""
    purgatory = inline_purgatory(impl, ManualClock(0))
    lock = _FailingLock()
    op = hooked_operation(impl)(100, lock)
    assert op.force_complete()
    for _ in range(2):  # the second submission is not refused as a resubmission (R34)
        try:
            purgatory.try_complete_else_watch(op, ["k"])
        except RuntimeError as exc:
            if str(exc) != "lock fault":
                return False
        except ValueError:  # refused: the first one left its claim
            return False
    lock.failing = False
    completed = purgatory.try_complete_else_watch(op, ["k"])  # completed: not again
    return completed is False and purgatory.num_delayed == 0 and purgatory.watched == 0


RELEASE_OF_A_FINISHED_OPERATION = Mutant(
    "release-of-a-finished-operation",
    "kpurgatory.protocol",
    "Watchable._release_submission",
    "        if self._state >= FINISHED and not unchanged:\n            return\n",
    "",
    "A statement removed: the rollback releases an operation that completed while it ran, "
    "which is then completed but no longer submitted, and a second submission of it is "
    "accepted (R38, R34).",
)


@needs_python_source()
def test_r38_the_completed_in_rollback_check_catches_a_released_finished_operation() -> None:
    """The check above fails with the release's finished test removed."""
    from kpurgatory import optimized

    with applied(RELEASE_OF_A_FINISHED_OPERATION):
        assert not stays_submitted_when_completed_in_its_rollback(optimized)
    assert stays_submitted_when_completed_in_its_rollback(optimized)
