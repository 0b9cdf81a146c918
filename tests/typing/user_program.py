"""A typed user program: what a user's ``mypy --strict`` must accept, and must flag.

Checked by tests/typing/test_user_program.py with mypy run from outside the repository
(as a user's checker sees the installed package), and by the project's own
``mypy --strict kpurgatory tests``. Each deliberate mistake carries a type-ignore
comment naming the expected error code: under ``--strict`` (``warn_unused_ignores``) an ignore that
suppresses nothing is itself an error, so a mistake the checker stops flagging fails
the check. The pyright ignore next to it names pyright's rule for the same mistake
(tests/typing/test_pyright.py checks them the same way). Never run: only type-checked.
"""

from __future__ import annotations

from typing import assert_type

from kpurgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    InlineExecutor,
    ManualClock,
    SystemTimer,
    TimerTask,
)


class Op(DelayedOperation):
    """A user's operation: completes when ``ready``."""

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class Tick(TimerTask):
    """A user's timer task."""

    def run(self) -> None:
        pass


def correct_use() -> None:
    """Well-typed calls: no error, and the types are kpurgatory's (not Any)."""
    clock = ManualClock(0)
    timer = SystemTimer("user", tick_ms=1, wheel_size=20, clock=clock, executor=InlineExecutor())
    assert_type(timer, SystemTimer)
    timer.add(Tick(5))
    assert_type(timer.advance_clock(10), bool)
    purgatory = DelayedOperationPurgatory[Op]("user", timer, reaper_enabled=False)
    assert_type(purgatory.try_complete_else_watch(Op(100), ["key"]), bool)
    assert_type(purgatory.check_and_complete("key"), int)
    assert_type(purgatory.cancel_for_key("key"), list[Op])
    purgatory.advance_clock(0)
    # A purgatory built without a type argument holds any DelayedOperation (PEP 696
    # default), never DelayedOperationPurgatory[Never].
    default = DelayedOperationPurgatory("any", reaper_enabled=False, timer=timer)
    assert_type(default, DelayedOperationPurgatory[DelayedOperation])
    default.try_complete_else_watch(Op(1), ["k"])


def mistakes() -> None:
    """Each call is wrong; the user's checker must flag it (the run-time check would too)."""
    timer = SystemTimer("user", tick_ms="5")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    SystemTimer(7)  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    SystemTimer("user", start_ms=1.5)  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    Op("500")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Tick("500")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    timer.advance_clock("100")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    timer.add("task")  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]
    purgatory = DelayedOperationPurgatory[Op]("user", timer, reaper_enabled=False)
    purgatory.advance_clock("100")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    purgatory.try_complete_else_watch(None, ["k"])  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType]
    DelayedOperationPurgatory("p", timer="timer")  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    DelayedOperationPurgatory("p", reaper_enabled=1)  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    DelayedOperationPurgatory(3)  # type: ignore[type-var]  # pyright: ignore[reportArgumentType]
    ManualClock(0).advance("1")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
