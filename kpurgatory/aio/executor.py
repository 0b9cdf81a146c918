"""``LoopExecutor``: runs each hand-over at once, in the caller (the loop thread, R45).

The timer of an ``AsyncPurgatory`` is only ever advanced by its driver on the loop and
added to by ``wait``/``submit`` on the loop, so every hand-over already happens on the
loop thread; running it inline is what "due tasks run on the loop" means. Unlike
``InlineExecutor`` (which builds a ``Future`` per call, as tests of the executor
contract need), this returns one shared, already-done future: timers ignore the
result, and a ``Future`` per expiry is measurable on the long-poll pattern.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

__all__ = ["LoopExecutor"]

P = ParamSpec("P")
R = TypeVar("R")

_DONE: Future[Any] = Future()
_DONE.set_result(None)


class LoopExecutor(Executor):
    """Calls ``fn(*args, **kwargs)`` inside ``submit`` and returns a shared done future.

    An exception raised by ``fn`` is stored in a fresh failed future instead (the
    timers submit ``run_logged``, which never raises). After ``shutdown``, ``submit``
    raises ``RuntimeError`` (the timers log and drop the task, R14).
    """

    def __init__(self) -> None:
        self._shut_down = False

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Run ``fn`` now; return a done future (shared unless ``fn`` raised)."""
        if self._shut_down:
            raise RuntimeError("cannot submit to a LoopExecutor after shutdown")
        try:
            fn(*args, **kwargs)
        except Exception as exc:
            failed: Future[R] = Future()
            failed.set_exception(exc)
            return failed
        done: Future[R] = _DONE
        return done

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse further submissions (nothing is ever pending)."""
        self._shut_down = True
