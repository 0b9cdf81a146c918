"""Bad input rules R35 and R36: every refusal is the right exception and names the argument.

``pytest.raises(match=named(...))`` pins the argument name at the start of each message
(``^tick_ms\b``), so a caller who passes ``tick_ms=0`` learns which argument was wrong,
and a message that merely contains the name elsewhere (a module path such as
``kpurgatory.optimized.operation.DelayedOperation``, mypyc's own argument check) fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.support import Recorder, operation_class, task_class


def named(argument: str) -> str:
    """A ``match`` pattern: the message starts with the argument's name as a whole word."""
    return rf"^{re.escape(argument)}\b"


NOT_INTS: list[object] = [True, False, 1.0, "1", None]
"""Values that are not ints (bool included, R35)."""


def timer_kwargs(**overrides: object) -> dict[str, object]:
    """Keyword arguments for a valid manual-clock SystemTimer, with ``overrides`` applied."""
    kwargs: dict[str, object] = {
        "executor_name": "inputs",
        "clock": ManualClock(0),
        "executor": InlineExecutor(),
    }
    kwargs.update(overrides)
    return kwargs


@pytest.fixture
def purg(impl: ModuleType) -> Iterator[Any]:
    """A manual-clock purgatory with the reaper off."""
    timer = impl.SystemTimer("inputs", clock=ManualClock(0), executor=InlineExecutor())
    with impl.DelayedOperationPurgatory("inputs", timer, reaper_enabled=False) as made:
        yield made


@pytest.fixture
def new_op(impl: ModuleType) -> Callable[[], Any]:
    """Factory for fresh, not-ready FlagOperations of ``impl``."""
    recorder = Recorder(ManualClock(0))
    return lambda: operation_class(impl)(100, "op", recorder)


# ---- R35: SystemTimer ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [("tick_ms", 0), ("tick_ms", -5), ("wheel_size", 1)])
def test_r35_timer_numbers_out_of_range_are_value_errors(
    impl: ModuleType, name: str, value: int
) -> None:
    """R35: tick_ms < 1 and wheel_size < 2 raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=named(name)):
        impl.SystemTimer(**timer_kwargs(**{name: value}))


def test_r35_smallest_valid_timer_numbers_are_accepted(impl: ModuleType) -> None:
    """R35: the boundaries tick_ms=1 and wheel_size=2 are valid."""
    with impl.SystemTimer(**timer_kwargs(tick_ms=1, wheel_size=2)) as timer:
        assert timer.size == 0


@pytest.mark.parametrize("name", ["tick_ms", "wheel_size", "start_ms"])
@pytest.mark.parametrize("value", NOT_INTS[:-1])
def test_r35_timer_non_int_numbers_are_type_errors(
    impl: ModuleType, name: str, value: object
) -> None:
    """R35: a non-int (bool included) where an int is expected raises TypeError naming it."""
    with pytest.raises(TypeError, match=named(name)):
        impl.SystemTimer(**timer_kwargs(**{name: value}))


@pytest.mark.parametrize(
    ("name", "value"),
    [("executor_name", 7), ("executor_name", None), ("clock", object()), ("executor", object())],
)
def test_r35_timer_wrong_kinds_are_type_errors(impl: ModuleType, name: str, value: object) -> None:
    """R35: a non-str name, or a clock/executor of the wrong kind, raises TypeError naming it."""
    with pytest.raises(TypeError, match=named(name)):
        impl.SystemTimer(**timer_kwargs(**{name: value}))


class Millis(int):
    """An ``int`` subclass: R35 takes it as the int it is (only ``bool`` is refused)."""


def test_r35_advance_clock_takes_an_int_subclass_and_names_its_bound(impl: ModuleType) -> None:
    """R35: ``advance_clock(Millis(0))`` is a zero timeout (it leaves the fast path for an
    exact ``int`` and is checked in full); ``Millis(-1)`` is refused naming the bound 0."""
    recorder = Recorder(ManualClock(0))
    clock = recorder.clock
    with impl.SystemTimer(**timer_kwargs(clock=clock)) as timer:
        timer.add(task_class(impl)(5, "due", recorder))
        clock.advance(5)
        assert timer.advance_clock(Millis(0)) is True and clock.now_ms() == 5
        with pytest.raises(ValueError, match=r"timeout_ms must be >= 0, got -1"):
            timer.advance_clock(Millis(-1))


@pytest.mark.parametrize("value", NOT_INTS)
def test_r35_advance_clock_non_int_is_type_error(impl: ModuleType, value: object) -> None:
    """R35: advance_clock(non-int) raises TypeError naming timeout_ms; the clock is untouched."""
    clock = ManualClock(0)
    with impl.SystemTimer(**timer_kwargs(clock=clock)) as timer:
        with pytest.raises(TypeError, match=named("timeout_ms")):
            timer.advance_clock(value)
        with pytest.raises(ValueError, match=named("timeout_ms")):
            timer.advance_clock(-1)
        assert clock.now_ms() == 0


def test_r35_add_rejects_non_tasks(impl: ModuleType) -> None:
    """R35: add of something that is not a TimerTask raises TypeError naming task."""
    with impl.SystemTimer(**timer_kwargs()) as timer:
        with pytest.raises(TypeError, match=named("task")):
            timer.add(object())
        assert timer.size == 0


@pytest.mark.parametrize("value", NOT_INTS)
def test_r35_task_delay_must_be_int(impl: ModuleType, value: object) -> None:
    """R35: TimerTask/DelayedOperation delay_ms must be an int (bool refused)."""
    recorder = Recorder(ManualClock(0))
    with pytest.raises(TypeError, match=named("delay_ms")):
        task_class(impl)(value, "t", recorder)
    with pytest.raises(TypeError, match=named("delay_ms")):
        operation_class(impl)(value, "op", recorder)


def test_r35_any_int_delay_is_accepted(impl: ModuleType) -> None:
    """R35/R1: negative, zero and huge delays are valid."""
    recorder = Recorder(ManualClock(0))
    for delay in (-(10**15), -1, 0, 1, 10**15):
        assert task_class(impl)(delay, "t", recorder).delay_ms == delay


def test_r35_operation_lock_must_be_a_lock(impl: ModuleType) -> None:
    """R35/R21: a lock without acquire/release raises TypeError naming lock."""
    with pytest.raises(TypeError, match=named("lock")):
        operation_class(impl)(10, "op", Recorder(ManualClock(0)), "not a lock")


# ---- R35: DelayedOperationPurgatory ----------------------------------------------------


def test_r35_negative_purge_interval_is_value_error(impl: ModuleType) -> None:
    """R35: purge_interval < 0 raises ValueError naming it; 0 is valid."""
    with pytest.raises(ValueError, match=named("purge_interval")):
        impl.DelayedOperationPurgatory(
            "p", impl.SystemTimer(**timer_kwargs()), purge_interval=-1, reaper_enabled=False
        )
    timer = impl.SystemTimer(**timer_kwargs())
    with impl.DelayedOperationPurgatory("p", timer, purge_interval=0, reaper_enabled=False) as purg:
        assert purg.watched == 0


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("purgatory_name", 3, TypeError),
        ("purgatory_name", None, TypeError),
        ("broker_id", "0", TypeError),
        ("broker_id", True, TypeError),
        ("purge_interval", 1.5, TypeError),
        ("purge_interval", True, TypeError),
        ("reaper_enabled", 0, TypeError),
        ("timer_enabled", "yes", TypeError),
        ("timer", object(), TypeError),
    ],
)
def test_r35_purgatory_arguments(
    impl: ModuleType, name: str, value: object, error: type[Exception]
) -> None:
    """R35: wrong kinds of purgatory arguments raise TypeError naming the argument."""
    kwargs: dict[str, object] = {"purgatory_name": "p", "reaper_enabled": False}
    if name != "timer":
        kwargs["timer"] = impl.SystemTimer(**timer_kwargs())
    kwargs[name] = value
    with pytest.raises(error, match=named(name)):
        impl.DelayedOperationPurgatory(**kwargs)


def test_r35_purgatory_advance_clock_checks_timeout(purg: Any) -> None:
    """R35: the purgatory's advance_clock refuses negative and non-int timeouts."""
    with pytest.raises(ValueError, match=named("timeout_ms")):
        purg.advance_clock(-1)
    with pytest.raises(TypeError, match=named("timeout_ms")):
        purg.advance_clock(2.5)


def test_r35_purgatory_refuses_non_operations(purg: Any, impl: ModuleType) -> None:
    """R35: try_complete_else_watch or abandon of a plain task, object or None: TypeError
    naming operation (in the compiled build too: not mypyc's own check)."""
    plain = task_class(impl)(10, "plain", Recorder(ManualClock(0)))
    for bad in (object(), plain, None):
        with pytest.raises(TypeError, match=named("operation")):
            purg.try_complete_else_watch(bad, ["k"])
        with pytest.raises(TypeError, match=named("operation")):
            purg.abandon(bad)
    assert purg.watched == 0


def test_r35_manual_clock_inputs() -> None:
    """R35: ManualClock refuses a negative advance (ValueError) and non-int values (TypeError)."""
    clock = ManualClock(3)
    with pytest.raises(ValueError, match=named("ms")):
        clock.advance(-1)
    for bad in NOT_INTS:
        with pytest.raises(TypeError, match=named("ms")):
            clock.advance(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=named("start_ms")):
            ManualClock(bad)  # type: ignore[arg-type]
    assert clock.now_ms() == 3


# ---- R36: keys ---------------------------------------------------------------------------


def test_r36_empty_watch_keys_is_value_error(purg: Any, new_op: Callable[[], Any]) -> None:
    """R36: an empty watch_keys raises ValueError naming watch_keys."""
    empties: list[Iterable[object]] = [[], (), set(), iter([])]
    for empty in empties:
        with pytest.raises(ValueError, match=named("watch_keys")):
            purg.try_complete_else_watch(new_op(), empty)
    assert purg.watched == 0


@pytest.mark.parametrize("keys", ["abc", b"ab", bytearray(b"ab"), 5, None])
def test_r36_non_iterable_or_string_watch_keys_is_type_error(
    purg: Any, new_op: Callable[[], Any], keys: object
) -> None:
    """R36: a lone str/bytes or a non-iterable watch_keys raises TypeError naming watch_keys."""
    with pytest.raises(TypeError, match=named("watch_keys")):
        purg.try_complete_else_watch(new_op(), keys)
    assert purg.watched == 0


def test_r36_unhashable_keys_are_type_errors(purg: Any, new_op: Callable[[], Any]) -> None:
    """R36: an unhashable key is a TypeError in watch_keys, check_and_complete, cancel_for_key."""
    with pytest.raises(TypeError, match="hashable"):
        purg.try_complete_else_watch(new_op(), ["ok", ["unhashable"]])
    assert purg.watched == 0
    with pytest.raises(TypeError, match=named("key")):
        purg.check_and_complete({"a": 1})
    with pytest.raises(TypeError, match=named("key")):
        purg.cancel_for_key([1])
