"""Two orders of calls back in that the spec decides, on both implementations (R74, R75).

R74: ``advance_clock`` from a task's ``run`` during a drain is a nested drain, and the
tasks the outer drain took out and has not handed over yet are handed over after it, at
the later reading. R75: a ``check_and_complete`` sweep still tries the operations that a
``cancel_for_key`` of the same key, called from inside the sweep, returned. The committed
vectors ``r69-nested-drain-from-a-task`` and ``r75-sweep-after-cancel-for-key`` check
the same through the step language, for ports; the lifecycle model agrees.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kpurgatory import ManualClock
from kpurgatory.executors import InlineExecutor
from tests.machines.lifecycle_model import Call, LifecycleModel
from tests.test_reentrancy import hooked_operation, inline_purgatory


def _recording_task(impl: ModuleType, log: list[tuple[str, int]], clock: ManualClock) -> type[Any]:
    class Task(impl.TimerTask):  # type: ignore[misc,name-defined]
        def __init__(self, label: str, delay_ms: int, action: Any = None) -> None:
            super().__init__(delay_ms)
            self.label = label
            self.action = action

        def run(self) -> None:
            log.append((self.label, clock.now_ms()))
            if self.action is not None:
                self.action()

    return Task


def test_r74_a_nested_drain_comes_before_the_rest_of_the_outer_batch(impl: ModuleType) -> None:
    clock = ManualClock(0)
    timer = impl.SystemTimer("t", 1, 8, 0, clock=clock, executor=InlineExecutor())
    log: list[tuple[str, int]] = []
    task = _recording_task(impl, log, clock)
    timer.add(task("outer", 1, lambda: timer.advance_clock(1)))  # drains at 2 + 1 = 3
    timer.add(task("batch", 2))  # taken out by the outer drain at 2
    timer.add(task("inner", 3))  # due by the nested drain's reading only
    assert timer.advance_clock(2) is True
    assert log == [("outer", 2), ("inner", 3), ("batch", 3)]
    assert timer.size == 0


def test_r74_a_task_of_the_outer_batch_cancelled_in_the_nested_drain_stays_unrun(
    impl: ModuleType,
) -> None:
    clock = ManualClock(0)
    timer = impl.SystemTimer("t", 1, 8, 0, clock=clock, executor=InlineExecutor())
    log: list[tuple[str, int]] = []
    task = _recording_task(impl, log, clock)
    batch = task("batch", 2)
    timer.add(task("outer", 1, lambda: timer.advance_clock(1)))
    timer.add(batch)
    timer.add(task("inner", 3, batch.cancel))  # R11 holds across the nesting
    timer.advance_clock(2)
    assert log == [("outer", 2), ("inner", 3)]


def test_r75_a_sweep_tries_the_operations_a_nested_cancel_for_key_returned(
    impl: ModuleType,
) -> None:
    purgatory = inline_purgatory(impl, ManualClock(0))
    op_class = hooked_operation(impl)
    returned: list[list[Any]] = []
    canceller, stays, ready = op_class(10), op_class(10), op_class(10)
    canceller.hooks["on_complete"] = [lambda op: returned.append(purgatory.cancel_for_key("k"))]
    for op in (canceller, stays, ready):
        assert purgatory.try_complete_else_watch(op, ["k"]) is False
    canceller.ready = ready.ready = True
    assert purgatory.check_and_complete("k") == 2  # canceller, then ready after the cancel
    assert returned == [[canceller, stays, ready]]  # the list as the sweep found it
    assert stays.calls["try_complete"] == 3  # two in its submission, one in the sweep
    assert ready.is_completed and ready.calls["on_complete"] == 1
    assert not stays.is_completed and purgatory.timer.size == 0  # out of the timer (R29)


def test_r74_and_r75_the_lifecycle_model_agrees() -> None:
    """The spec-only model (tests/machines/lifecycle_model.py), written before R74 and R75,
    already made both choices: the rules write down what all three do."""
    order: list[tuple[str, int]] = []
    model = LifecycleModel(1, 1000, True)
    expire = model._expire

    def recording_expire(op: Any) -> None:
        order.append((op.name, model.now))
        expire(op)

    model._expire = recording_expire  # type: ignore[method-assign]
    ops = [
        model.new_op("outer", 1, {("on_expiration", 1): Call("advance_clock", amount=1)}),
        model.new_op("batch", 2, {}),
        model.new_op("inner", 3, {}),
    ]
    for op, key in zip(ops, "abc", strict=True):
        model.submit(op, [key])
    model.advance_clock(2)
    assert order == [("outer", 2), ("inner", 3), ("batch", 3)]  # R74

    model = LifecycleModel(1, 1000, True)
    canceller = model.new_op("canceller", 10, {("on_complete", 1): Call("cancel_for_key", key="k")})
    stays, ready = model.new_op("stays", 10, {}), model.new_op("ready", 10, {})
    for op in (canceller, stays, ready):
        model.submit(op, ["k"])
    canceller.ready = ready.ready = True
    assert model.check_and_complete("k") == 2  # R75
    assert stays.calls["try_complete"] == 3 and ready.outcome == "completed"
    assert model.log[0][2] == ("ok", ["canceller", "stays", "ready"])
