"""Run a program on real threads against one shared purgatory and record its history.

Every thread runs its calls on the same ``DelayedOperationPurgatory`` (``ManualClock``,
``InlineExecutor``, no reaper), started together at a barrier, with the interpreter's
switch interval at 1 µs (restored afterwards) and a ``time.sleep(0)`` in some callbacks
to widen the races. Each call, and each callback the library makes, is recorded as
points with ``time.perf_counter_ns`` bounds. The threads are joined with a timeout: a
thread still running then is reported as hung, never waited for.
"""

from __future__ import annotations

import importlib
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.clock import ManualClock
from kpurgatory.executors import InlineExecutor
from kpurgatory.history.history import Final, History, Point, Result
from kpurgatory.history.program import Call, Program, cleanup_calls

__all__ = ["IMPLEMENTATIONS", "Implementation", "implementation", "implementation_of", "record"]

IMPLEMENTATIONS = ("reference", "optimized")
"""The packages a history can be recorded on."""

_now = time.perf_counter_ns


@dataclass(frozen=True)
class Implementation:
    """An implementation's classes, and a ``DelayedOperation`` subclass that records."""

    name: str
    operation: type[Any]
    purgatory: type[Any]
    timer: type[Any]


def implementation(name: str) -> Implementation:
    """The implementation package ``name`` ("reference" or "optimized")."""
    if name not in IMPLEMENTATIONS:
        raise ValueError(
            f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, not {name!r}"
        )
    return implementation_of(importlib.import_module("kpurgatory." + name), name)


def implementation_of(package: ModuleType, name: str) -> Implementation:
    """The implementation in ``package`` (a module with ``DelayedOperation``,
    ``DelayedOperationPurgatory`` and ``SystemTimer``), recorded under ``name``: the
    conformance kit's Python adapter records the package it serves this way."""
    return Implementation(
        name,
        _recording_operation(package.DelayedOperation),
        package.DelayedOperationPurgatory,
        package.SystemTimer,
    )


class _ThreadLog(threading.local):
    """The points of the thread that runs now, and its random numbers for sleeps."""

    points: list[Point]
    call: int
    rng: random.Random
    yield_chance: float


_LOG = _ThreadLog()


def _mark(kind: str, op: int, value: Result, lo: int) -> None:
    _LOG.points.append(Point(kind, _LOG.call, op, value, lo, _now()))


def _maybe_yield() -> None:
    if _LOG.rng.random() < _LOG.yield_chance:
        time.sleep(0)


_OPERATION_CLASSES: dict[type[Any], type[Any]] = {}


def _recording_operation(base: type[Any]) -> type[Any]:
    """A subclass of ``base`` whose callbacks record points; ``ready`` is its condition."""
    if base in _OPERATION_CLASSES:
        return _OPERATION_CLASSES[base]

    class RecordingOperation(base):  # type: ignore[misc]
        def __init__(self, delay_ms: int, index: int) -> None:
            super().__init__(delay_ms)
            self.index = index
            self.ready = False

        def try_complete(self) -> bool:
            lo = _now()
            ready = self.ready
            _mark("tc", self.index, ready, lo)
            _maybe_yield()
            done: bool = self.force_complete() if ready else False
            _mark("tc-end", self.index, done, _now())
            return done

        def on_complete(self) -> None:
            _mark("oc", self.index, None, _now())
            _maybe_yield()
            _mark("oc-end", self.index, None, _now())

        def on_expiration(self) -> None:
            _mark("oe", self.index, None, _now())
            _maybe_yield()
            _mark("oe-end", self.index, None, _now())

    RecordingOperation.__qualname__ = RecordingOperation.__name__ = f"Recording{base.__name__}"
    _OPERATION_CLASSES[base] = RecordingOperation
    return RecordingOperation


def _invoke(call: Call, purgatory: Any, ops: list[Any], program: Program) -> Result:
    """Make ``call`` and return its result in the history's terms."""
    kind = call.kind
    if kind == "submit":
        return bool(purgatory.try_complete_else_watch(ops[call.op], program.ops[call.op].keys))
    if kind == "set_ready":
        ops[call.op].ready = True
        return None
    if kind == "check":
        return int(purgatory.check_and_complete(call.key))
    if kind == "cancel_for_key":
        return tuple(op.index for op in purgatory.cancel_for_key(call.key))
    if kind == "advance":
        purgatory.advance_clock(call.ms)
        return None
    if kind == "abandon":
        return bool(purgatory.abandon(ops[call.op]))
    method: Callable[[], bool] = getattr(
        ops[call.op],
        {"force": "force_complete", "safe_try": "safe_try_complete"}.get(
            kind, "maybe_try_complete"
        ),
    )
    return bool(method())


def _run_calls(
    calls: tuple[Call, ...],
    purgatory: Any,
    ops: list[Any],
    program: Program,
    seed: int,
    yield_chance: float,
) -> list[Point]:
    """Run ``calls`` in this thread, recording a point at each invocation and return."""
    _LOG.points = points = []
    _LOG.rng = random.Random(seed)
    _LOG.yield_chance = yield_chance
    for index, call in enumerate(calls):
        _LOG.call = index
        _mark("call", call.op, None, _now())
        try:
            result = _invoke(call, purgatory, ops, program)
        except BaseException as exc:  # recorded: the model says whether it may raise
            result = f"raised {type(exc).__name__}"
        lo = _now()
        points.append(Point("return", index, call.op, result, lo, lo))
    return points


def record(
    program: Program,
    impl: Implementation,
    *,
    seed: int = 0,
    switch_interval: float = 1e-6,
    timeout_s: float = 10.0,
    serial: bool = False,
    yield_chance: float = 0.05,
) -> History:
    """Run ``program`` on real threads against one purgatory of ``impl``; its history.

    ``seed`` draws where callbacks yield; ``switch_interval`` is set with
    ``sys.setswitchinterval`` while the threads run; a thread not done after
    ``timeout_s`` seconds is reported in ``History.hung``. ``serial`` runs the threads
    one after another (each starts once the one before it has finished): the same
    program with no race at all. ``yield_chance``: how often a callback calls
    ``time.sleep(0)`` between its start and end (a wider window for other threads).
    """
    if not 0.0 <= yield_chance <= 1.0:
        raise ValueError(f"yield_chance must be between 0 and 1, not {yield_chance}")
    if not isinstance(impl, Implementation):
        raise TypeError(f"impl must be an Implementation, not {type(impl).__name__}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, not {timeout_s}")
    if switch_interval <= 0:
        raise ValueError(f"switch_interval must be > 0, not {switch_interval}")
    timer = impl.timer("history", clock=ManualClock(0), executor=InlineExecutor())
    purgatory = impl.purgatory(
        "history", timer=timer, reaper_enabled=False, purge_interval=1_000_000
    )
    ops = [impl.operation(spec.delay_ms, index) for index, spec in enumerate(program.ops)]
    count = len(program.threads)
    results: list[list[Point]] = [[] for _ in range(count)]
    barrier = threading.Barrier(1 if serial else count)

    def body(thread: int) -> None:
        try:
            barrier.wait(timeout_s)
        except threading.BrokenBarrierError:
            return
        results[thread] = _run_calls(
            program.threads[thread], purgatory, ops, program, seed * 1009 + thread, yield_chance
        )

    workers = [
        threading.Thread(target=body, args=(index,), name=f"history-T{index}", daemon=True)
        for index in range(count)
    ]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    try:
        deadline = time.monotonic() + timeout_s
        for worker in workers:
            worker.start()
            if serial:
                worker.join(max(0.0, deadline - time.monotonic()))
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
    finally:
        sys.setswitchinterval(previous)
    hung = tuple(index for index, worker in enumerate(workers) if worker.is_alive())
    calls = program.threads
    if hung:
        return History(program, impl.name, calls, tuple(map(tuple, results)), None, hung)
    cleanup = cleanup_calls(program)
    cleanup_points = _run_calls(cleanup, purgatory, ops, program, seed * 1009 + count, yield_chance)
    final = Final(
        purgatory.watched,
        purgatory.watched_keys,
        purgatory.num_delayed,
        tuple(
            "completed" if op.is_completed else "abandoned" if op.is_abandoned else "pending"
            for op in ops
        ),
    )
    return History(
        program,
        impl.name,
        (*calls, cleanup),
        (*tuple(map(tuple, results)), tuple(cleanup_points)),
        final,
    )
