"""Test doubles shared by the whole suite: recording tasks and operations for any implementation.

Every implementation package (``kpurgatory.reference``, ``kpurgatory.optimized``) exports
the same names, so one suite runs against each (as CPython tests ``heapq`` with and
without its C accelerator). The classes here are built per implementation and cached.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

import pytest

from kpurgatory import ManualClock
from kpurgatory.spec.events import (
    CompletionVia,
    Event,
    OperationCompleted,
    OperationExpired,
    TaskRan,
)

NextDue = Callable[[], int | None]
"""What a clock's ``wait`` calls for the next due time (``kpurgatory.clock``'s protocol)."""


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class LockStatement:
    """``with lock:`` for a test lock class: ``acquire()`` on entry, ``release()`` on exit."""

    def __enter__(self: _Lock) -> bool:
        return self.acquire()

    def __exit__(self: _Lock, *exc_info: object) -> None:
        self.release()


def implementation_names() -> list[str]:
    """The implementation packages present in this checkout (a present one must import)."""
    names = ["reference"]
    if importlib.util.find_spec("kpurgatory.optimized") is not None:
        names.append("optimized")
    return names


def optimized_is_python_source() -> bool:
    """Whether ``kpurgatory.optimized`` runs from ``.py`` files: mutants and port bugs edit
    that source, and a mypyc-compiled build has none (its functions ignore patches)."""
    if "optimized" not in implementation_names():
        return False
    modules = ("bucket", "delay_queue", "operation", "purgatory", "timer", "wheel")
    return all(
        str(
            getattr(importlib.import_module(f"kpurgatory.optimized.{name}"), "__file__", "")
        ).endswith(".py")
        for name in modules
    )


def needs_python_source() -> pytest.MarkDecorator:
    """Skip a test (or module, as ``pytestmark``) that patches kpurgatory.optimized's source."""
    return pytest.mark.skipif(
        not optimized_is_python_source(),
        reason="kpurgatory.optimized is absent or compiled: this check patches its Python source",
    )


@functools.cache
def ready_operation(impl: ModuleType) -> type[Any]:
    """An operation of ``impl`` that completes once its ``ready`` is set; callbacks do
    nothing and it has no ``__repr__`` of its own (the default repr is under test)."""

    class Ready(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.ready = False

        def try_complete(self) -> bool:
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    return Ready


@functools.cache
def pending_operation(base: type[Any]) -> type[Any]:
    """An operation class over ``base`` (an implementation's or the aio layer's
    ``DelayedOperation``) that never completes by itself and ignores how it ends."""

    class Pending(base):  # type: ignore[misc]
        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    return Pending


def floor_to(ms: int, tick_ms: int) -> int:
    """Largest multiple of ``tick_ms`` at or below ``ms``: the tests' own R1 oracle, written
    independently of ``kpurgatory.spec.arithmetic``."""
    return (ms // tick_ms) * tick_ms


def load(name: str) -> ModuleType:
    """The implementation package called ``name``."""
    return importlib.import_module(f"kpurgatory.{name}")


@dataclass
class Recorder:
    """Collects the events of a run, stamped with a clock's reading."""

    clock: Any
    events: list[Event] = field(default_factory=list)
    via: CompletionVia = "force_complete"

    def ran(self, name: str) -> None:
        self.events.append(TaskRan(name, self.clock.now_ms()))

    def completed(self, name: str) -> None:
        self.events.append(OperationCompleted(name, self.clock.now_ms(), self.via))

    def expired(self, name: str) -> None:
        self.events.append(OperationExpired(name, self.clock.now_ms()))

    def names(self, kind: type[Event]) -> list[str]:
        """Names of the recorded events of one kind, in order."""
        return [_subject(event) for event in self.events if isinstance(event, kind)]


def recorded_clock(start_ms: int = 0) -> tuple[ManualClock, Recorder]:
    """A manual clock at ``start_ms`` and a recorder stamping events with its readings."""
    clock = ManualClock(start_ms)
    return clock, Recorder(clock)


def _subject(event: Event) -> str:
    return event.task if isinstance(event, TaskRan) else event.operation


class RunSink(Protocol):
    """Where a ``RecordingTask`` reports its runs: a ``Recorder``, or a test's own log."""

    def ran(self, name: str) -> None: ...


@functools.cache
def task_class(impl: ModuleType) -> type[Any]:
    """A ``TimerTask`` of ``impl`` that calls ``recorder.ran(name)`` when it runs.

    With a ``Recorder`` that records ``TaskRan``; ``impl`` may be any (hashable) object
    exporting ``TimerTask``, such as a baseline or mutant package.
    """

    class RecordingTask(impl.TimerTask):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, name: str, recorder: RunSink) -> None:
            super().__init__(delay_ms)
            self.name = name
            self.recorder = recorder

        def run(self) -> None:
            self.recorder.ran(self.name)

        def __repr__(self) -> str:
            return f"RecordingTask({self.name!r}, delay_ms={self.delay_ms})"

    return RecordingTask


@functools.cache
def operation_class(impl: ModuleType) -> type[Any]:
    """A ``DelayedOperation`` of ``impl`` whose condition is the attribute ``ready``.

    ``try_complete`` counts its calls and completes iff ``ready``; the callbacks
    record ``OperationCompleted`` / ``OperationExpired``.
    """

    class FlagOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(self, delay_ms: int, name: str, recorder: Recorder, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.name = name
            self.recorder = recorder
            self.ready = False
            self.try_calls = 0

        def try_complete(self) -> bool:
            self.try_calls += 1
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            self.recorder.completed(self.name)

        def on_expiration(self) -> None:
            self.recorder.expired(self.name)

        def __repr__(self) -> str:
            return f"FlagOperation({self.name!r}, delay_ms={self.delay_ms})"

    return FlagOperation


class DelegatingLock(LockStatement):
    """A lock that wraps ``inner`` (an ``RLock`` by default) and is a context manager
    through its own ``acquire``/``release``: subclasses override those two to watch,
    gate or break the lock (they satisfy ``AbstractLock``)."""

    def __init__(self, inner: Any = None) -> None:
        self._lock = threading.RLock() if inner is None else inner

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got: bool = self._lock.acquire(blocking, timeout)
        return got

    def release(self) -> None:
        self._lock.release()


class KnockStagingLock(DelegatingLock):
    """A re-entrant lock that refuses a non-blocking ``acquire`` while it is held, by any
    thread: a ``maybe_try_complete`` made by the holder's own thread then knocks as one
    from another thread would (R20, R41), which a plain ``RLock`` would let through.
    (A ``threading.Lock`` did this before operation locks had to be re-entrant, R63.)"""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking and self.depth:
            return False
        got = super().acquire(blocking, timeout)
        self.depth += got
        return got

    def release(self) -> None:
        self.depth -= 1
        super().release()


class TrackingLock(LockStatement):
    """A re-entrant lock that knows which thread holds it (to check "holds the lock").

    Satisfies ``kpurgatory.spec.protocols.AbstractLock``; passed as an operation's lock.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0
        self.acquisitions = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Acquire like ``RLock.acquire`` and remember the owner."""
        got = self._lock.acquire(blocking, timeout)
        if got:
            self._owner = threading.get_ident()
            self._depth += 1
            self.acquisitions += 1
        return got

    def release(self) -> None:
        """Release one level; forget the owner when fully released."""
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
        self._lock.release()

    def held_by_me(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()


class WaiterLock(LockStatement):
    """A re-entrant lock that sets ``contended`` when a thread starts waiting for it.

    With ``give_up_s``, a blocking ``acquire`` that waits that long gives up: it sets
    ``gave_up`` and raises ``TimeoutError``, so a deadlock on the lock ends by itself.
    Satisfies ``kpurgatory.spec.protocols.AbstractLock``.
    """

    def __init__(self, give_up_s: float | None = None) -> None:
        self._lock = threading.RLock()
        self._give_up_s = give_up_s
        self.contended = threading.Event()
        self.gave_up = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Acquire like ``RLock.acquire``, reporting a wait (and a give-up)."""
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self.contended.set()
        if self._give_up_s is None:
            return self._lock.acquire(True, timeout)
        if self._lock.acquire(True, self._give_up_s):
            return True
        self.gave_up.set()
        raise TimeoutError("gave up waiting for the lock")

    def release(self) -> None:
        """Release one level."""
        self._lock.release()


def race_threads(threads: Sequence[threading.Thread], timeout_s: float) -> None:
    """Start ``threads`` and join each for up to ``timeout_s`` while CPython switches
    threads as often as it allows (every microsecond); the switch interval is restored
    afterwards. Whether a thread is still alive is for the caller to check."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout_s)
    finally:
        sys.setswitchinterval(previous)


def run_in_a_fresh_interpreter(module: str, call: str, timeout_s: float = 600) -> None:
    """Run ``call`` (``function(args)`` of test module ``module``) in a new interpreter
    with ``PYTHONHASHSEED=0``, from the repository root; fail with its output if it fails.

    For checks whose course depends on more than their own inputs: where a str key's hash
    puts it, and state that earlier tests of the same process left behind (both seen to
    change a derandomized machine's run under pytest-xdist)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    function = call.split("(")[0]
    done = subprocess.run(
        [sys.executable, "-c", f"from {module} import {function}; {call}"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
