"""What a recorded run left: per thread, the points it passed, with their times.

A ``Point`` is one observable moment of a thread: a call's invocation or return (with
its result), or the start or end of a callback (``try_complete`` with the flag value it
read, ``on_complete``, ``on_expiration``). ``lo`` and ``hi`` bound, in nanoseconds of one
monotonic clock, when the moment happened; a point whose ``hi`` is before another's
``lo`` happened first, whatever the threads. ``History`` adds the program and the
purgatory's state once every thread was done.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpurgatory.history.program import Call, Program

__all__ = ["CALLBACK_KINDS", "Final", "History", "Point", "Result"]

Result = bool | int | None | tuple[int, ...] | str
"""A call's result: what it returned (cancel_for_key: the operations' indices), or the
name of the exception it raised, as ``"raised ValueError"``."""

CALLBACK_KINDS = ("tc", "tc-end", "oc", "oc-end", "oe", "oe-end")
"""``tc``: try_complete read the flag (``value``); ``tc-end``: it returned ``value``;
``oc``/``oe``: on_complete/on_expiration started; ``-end``: it returned."""


@dataclass(frozen=True)
class Point:
    """One observable moment of a thread: ``kind`` is ``call``, ``return`` or one of
    ``CALLBACK_KINDS``; ``call`` is the index of the thread's call it belongs to."""

    kind: str
    call: int
    op: int
    value: Result
    lo: int
    hi: int

    def key(self) -> tuple[str, int, Result]:
        """What a model must reproduce at this point (the times only order it)."""
        return (self.kind, self.op, self.value)


@dataclass(frozen=True)
class Final:
    """The purgatory's state after every thread, the clean-up included, was done."""

    watched: int
    watched_keys: int
    num_delayed: int
    outcomes: tuple[str, ...]  # per operation: "pending", "completed" or "abandoned"


@dataclass(frozen=True)
class History:
    """A program, the calls each thread made (the clean-up thread last) and the points
    each passed, and the final state; ``hung`` names threads that did not finish."""

    program: Program
    implementation: str
    calls: tuple[tuple[Call, ...], ...]
    points: tuple[tuple[Point, ...], ...]
    final: Final | None
    hung: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """The number of points recorded."""
        return sum(len(points) for points in self.points)
