"""The interfaces every implementation (reference, optimized, or a port) provides.

These are structural ``typing.Protocol`` classes: nothing here holds state or logic.
The rule ids in the docstrings point into ``kpurgatory.spec.rules`` and docs/spec.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = [
    "AbstractLock",
    "Clock",
    "Executor",
    "Operation",
    "Purgatory",
    "Task",
    "Timer",
]


@runtime_checkable
class AbstractLock(Protocol):
    """A mutual-exclusion lock, as ``threading.RLock``.

    ``DelayedOperation`` takes its lock with a blocking ``acquire`` on every path
    except ``maybe_try_complete``, which uses ``acquire(blocking=False)`` (R20). An
    operation's lock must also be re-entrant (R63): ``threading.Lock`` has this shape
    but is refused as an operation's lock.
    """

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...

    def __enter__(self) -> bool: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class Clock(Protocol):
    """A source of milliseconds, and the way a timer lets time pass (R7).

    ``now_ms`` must never decrease. ``wait`` is called by ``advance_clock`` with
    ``condition`` held; it lets time pass until ``next_due()`` (the earliest due time,
    or ``None``) has been reached or ``timeout_ms`` has elapsed, and returns the clock
    reading at which the timer then drains. A real clock blocks on ``condition`` (which
    the timer notifies when an earlier task arrives or it is woken); a virtual clock
    moves itself forward by exactly ``timeout_ms`` and never blocks.

    Optional: ``deadline_base_ms()``, the reading a new task's deadline counts from. A
    clock that truncates a finer real time (``MonotonicClock``) returns it rounded up,
    so no task is due before its delay has really passed (R60); a timer uses
    ``now_ms`` when a clock has no such method (a ``ManualClock`` needs none).
    """

    def now_ms(self) -> int: ...

    def wait(
        self,
        condition: threading.Condition,
        timeout_ms: int,
        next_due: Callable[[], int | None],
    ) -> int: ...


class Executor(Protocol):
    """Where a timer hands over due tasks: ``concurrent.futures.Executor`` qualifies."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


class Task(Protocol):
    """What a timer schedules (``TimerTask``): a relative delay, cancel, and run (R9-R11)."""

    @property
    def delay_ms(self) -> int: ...

    def cancel(self) -> None: ...

    def run(self) -> None: ...


TaskT = TypeVar("TaskT", contravariant=True)


class Timer(Protocol[TaskT]):
    """A ``SystemTimer``: schedules tasks and hands them over when due (R1-R15)."""

    def add(self, task: TaskT) -> None: ...

    def advance_clock(self, timeout_ms: int) -> bool: ...

    @property
    def size(self) -> int: ...

    def close(self) -> None: ...


class Operation(Task, Protocol):
    """A ``DelayedOperation``: a task that completes once, early or on expiry (R16-R21)."""

    @property
    def is_completed(self) -> bool: ...

    def force_complete(self) -> bool: ...

    def try_complete(self) -> bool: ...

    def on_complete(self) -> None: ...

    def on_expiration(self) -> None: ...

    def safe_try_complete(self) -> bool: ...

    def safe_try_complete_or_else(self, f: Callable[[], None]) -> bool: ...

    def maybe_try_complete(self) -> bool: ...


OpT = TypeVar("OpT")


class Purgatory(Protocol[OpT]):
    """A ``DelayedOperationPurgatory``: watcher lists per key plus a timer (R22-R34)."""

    def try_complete_else_watch(self, operation: OpT, watch_keys: Iterable[Hashable]) -> bool: ...

    def check_and_complete(self, key: Hashable) -> int: ...

    def cancel_for_key(self, key: Hashable) -> list[OpT]: ...

    def advance_clock(self, timeout_ms: int) -> None: ...

    @property
    def watched(self) -> int: ...

    @property
    def num_delayed(self) -> int: ...

    def shutdown(self) -> None: ...
