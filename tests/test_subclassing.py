"""R43: the subclass contract of TimerTask and DelayedOperation, the same in every build.

Run against each implementation (and, in ``make compiled-ci``, against the mypyc build of
the optimized one, where nothing of ``abc`` applies and these checks are the library's
own): abstract methods are enforced at instantiation, an abstract method called
explicitly raises ``NotImplementedError`` instead of returning ``None`` (the compiled
build used to crash the interpreter there), and ``delay_ms`` cannot be redefined.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from types import ModuleType
from typing import Any

import pytest

from kpurgatory import InlineExecutor, ManualClock
from tests.support import implementation_names

OPERATION_METHODS = ("on_complete", "on_expiration", "try_complete")


def assert_names_abstract(error: TypeError, class_name: str, methods: list[str]) -> None:
    """``error`` is the interpreter's refusal to instantiate ``class_name``: it says
    "abstract" and names the class and exactly the ``methods`` missing, in order. Only
    these words are checked, not the sentence around them, which CPython reworded in
    3.12 ("with abstract method run" became "without an implementation for abstract
    method 'run'")."""
    message = str(error)
    assert "abstract" in message, message
    assert re.search(rf"\b{re.escape(class_name)}\b", message), message
    named = [name for name in re.findall(r"\w+", message) if name in (*OPERATION_METHODS, "run")]
    assert named == methods, message


def operation_without(impl: ModuleType, missing: str) -> type[Any]:
    """A DelayedOperation subclass of ``impl`` implementing every abstract method but one."""
    namespace: dict[str, object] = {
        "try_complete": lambda self: False,
        "on_complete": lambda self: None,
        "on_expiration": lambda self: None,
    }
    del namespace[missing]
    made: type[Any] = type(f"Without_{missing}", (impl.DelayedOperation,), namespace)
    return made


def test_r38_task_without_run_cannot_be_instantiated(impl: ModuleType) -> None:
    """R43: a TimerTask subclass without run (and TimerTask itself) is refused: TypeError."""

    class NoRun(impl.TimerTask):  # type: ignore[misc,name-defined]
        pass

    with pytest.raises(TypeError) as refused:
        NoRun(5)
    assert_names_abstract(refused.value, "NoRun", ["run"])
    with pytest.raises(TypeError) as refused:
        impl.TimerTask(5)
    assert_names_abstract(refused.value, "TimerTask", ["run"])


@pytest.mark.parametrize("missing", OPERATION_METHODS)
def test_r38_operation_missing_a_method_cannot_be_instantiated(
    impl: ModuleType, missing: str
) -> None:
    """R43: a DelayedOperation subclass missing one abstract method: TypeError naming it."""
    cls = operation_without(impl, missing)
    with pytest.raises(TypeError) as refused:
        cls(5)
    assert_names_abstract(refused.value, cls.__name__, [missing])


def test_r38_operation_class_itself_is_abstract(impl: ModuleType) -> None:
    """R43: DelayedOperation itself cannot be instantiated; the message lists all three."""
    with pytest.raises(TypeError) as refused:
        impl.DelayedOperation(5)
    assert_names_abstract(refused.value, "DelayedOperation", sorted(OPERATION_METHODS))


def test_r38_abstract_intermediate_class_then_complete_subclass(impl: ModuleType) -> None:
    """R43: an abstract intermediate class is allowed; its complete subclass instantiates."""
    partial = operation_without(impl, "try_complete")
    complete = type("Complete", (partial,), {"try_complete": lambda self: False})
    operation = complete(5)
    assert operation.safe_try_complete() is False
    assert operation.delay_ms == 5


@pytest.mark.parametrize("how", ["super", "explicit"])
def test_r38_abstract_method_called_explicitly_raises(impl: ModuleType, how: str) -> None:
    """R43: ``super().try_complete()`` or ``DelayedOperation.try_complete(op)`` raises
    NotImplementedError (never returns None, never crashes the interpreter)."""
    base = impl.DelayedOperation

    class Op(base):  # type: ignore[misc,valid-type]
        def try_complete(self) -> bool:
            return bool(super().try_complete() if how == "super" else False)

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    operation = Op(5)
    with pytest.raises(NotImplementedError, match=r"^Op\.try_complete is abstract$"):
        if how == "super":
            operation.safe_try_complete()
        else:
            base.try_complete(operation)
    for name in ("on_complete", "on_expiration"):
        with pytest.raises(NotImplementedError, match=rf"^Op\.{name} is abstract$"):
            getattr(base, name)(operation)
    with pytest.raises(NotImplementedError, match=r"^Op\.run is abstract$"):
        impl.TimerTask.run(operation)


@pytest.mark.parametrize("impl_name", implementation_names())
def test_r38_abstract_calls_do_not_crash_the_interpreter(impl_name: str) -> None:
    """R43: the calls that killed the compiled build (SIGABRT) end in a Python exception.

    In a child process, so a crash is a failed test and not a dead test run.
    """
    program = textwrap.dedent(
        f"""
        from kpurgatory.{impl_name} import DelayedOperation

        class Op(DelayedOperation):
            def try_complete(self):
                return super().try_complete()
            def on_complete(self):
                pass
            def on_expiration(self):
                pass

        for call in (lambda op: op.safe_try_complete(),
                     lambda op: DelayedOperation.try_complete(op)):
            try:
                call(Op(5))
            except NotImplementedError as error:
                print("NotImplementedError:", error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["NotImplementedError: Op.try_complete is abstract"] * 2


def test_r38_delay_ms_override_is_refused_at_class_creation(impl: ModuleType) -> None:
    """R43: redefining delay_ms (property or plain attribute) is a TypeError at class creation,
    also deeper in the hierarchy; the timer schedules with the constructor's delay."""
    with pytest.raises(TypeError, match=r"^Late overrides delay_ms .*fixed at construction"):

        class Late(impl.TimerTask):  # type: ignore[misc,name-defined]
            @property
            def delay_ms(self) -> int:
                return 1000

            def run(self) -> None:
                pass

    with pytest.raises(TypeError, match=r"^Deep overrides delay_ms"):
        type("Deep", (operation_without(impl, "try_complete"),), {"delay_ms": 7})

    ran: list[int] = []

    class Plain(impl.TimerTask):  # type: ignore[misc,name-defined]
        def run(self) -> None:
            ran.append(clock.now_ms())

    clock = ManualClock(0)
    with impl.SystemTimer("r38", clock=clock, executor=InlineExecutor()) as timer:
        timer.add(Plain(30))
        clock.advance(29)
        timer.advance_clock(0)
        assert ran == []
        clock.advance(1)
        timer.advance_clock(0)
        assert ran == [30]


def test_r43_the_class_hook_passes_on_to_the_other_bases_hooks(impl: ModuleType) -> None:
    """R43: the hook that refuses a ``delay_ms`` override cooperates, as a class hook
    must: a task or operation class that also derives from a mixin with its own
    ``__init_subclass__`` runs that hook too, class keywords included, and a keyword no
    base takes is still refused. (Pure builds only: whether a mypyc-compiled
    ``TimerTask`` takes an interpreted mixin base beside it is not checked here.)"""
    if not str(getattr(sys.modules[impl.TimerTask.__module__], "__file__", "")).endswith(".py"):
        pytest.skip("compiled TimerTask: a mixin base beside it is not checked here")
    seen: list[tuple[str, object]] = []

    class Tagged:
        def __init_subclass__(cls, tag: object = None, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            seen.append((cls.__name__, tag))

    class Task(impl.TimerTask, Tagged, tag="task"):  # type: ignore[misc,name-defined]
        def run(self) -> None:
            pass

    class Operation(operation_without(impl, "try_complete"), Tagged, tag="operation"):  # type: ignore[misc]
        def try_complete(self) -> bool:
            return False

    assert seen == [("Task", "task"), ("Operation", "operation")]
    assert Task(5).delay_ms == 5
    with pytest.raises(TypeError):
        type("Unknown", (impl.TimerTask,), {"run": lambda self: None}, colour="red")
