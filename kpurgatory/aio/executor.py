"""``LoopExecutor``: runs each hand-over in the caller (the loop thread, R45), or queues it
for the driver's bounded firings (R70).

The timer of an ``AsyncPurgatory`` is only ever advanced by its driver on the loop and
added to by ``wait``/``submit`` on the loop, so every hand-over already happens on the
loop thread; running it inline is what "due tasks run on the loop" means. During a
driver firing the hand-overs are queued instead (``defer``), and the driver runs them
in batches of a bounded size, one batch per loop iteration (``run_backlog``), so a
drain of many due tasks never holds the loop for all of them at once. Unlike
``InlineExecutor`` (which builds a ``Future`` per call, as tests of the executor
contract need), this returns one shared, already-done future for an inline run and one
future per backlog for queued runs: timers ignore the result, and a ``Future`` per
expiry is measurable on the long-poll pattern.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

from kpurgatory._sweep import raise_collected

__all__ = ["LoopExecutor"]

P = ParamSpec("P")
R = TypeVar("R")

_DONE: Future[Any] = Future()
_DONE.set_result(None)


class LoopExecutor(Executor):
    """Calls ``fn(*args, **kwargs)`` inside ``submit`` and returns a shared done future.

    An exception raised by ``fn`` is stored in a fresh failed future instead (the
    timers submit ``run_logged``, which never raises an ``Exception``). After
    ``shutdown``, ``submit`` raises ``RuntimeError`` (the timers log and drop the task,
    R14). Between ``defer(True)`` and ``defer(False)``, ``submit`` queues the call in the
    backlog instead and returns the backlog's future, done once the whole backlog has run
    (cancelled if it is dropped); ``run_backlog`` runs it in order (R70).
    """

    def __init__(self) -> None:
        self._shut_down = False
        self._deferring = False
        self._backlog: deque[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = deque()
        self._backlog_future: Future[Any] | None = None

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Run ``fn`` now (or queue it while deferring); return a future as the class says."""
        if self._shut_down:
            raise RuntimeError("cannot submit to a LoopExecutor after shutdown")
        if self._deferring:
            self._backlog.append((fn, args, kwargs))
            future = self._backlog_future
            if future is None:
                future = self._backlog_future = Future()
            queued: Future[R] = future
            return queued
        try:
            fn(*args, **kwargs)
        except Exception as exc:
            failed: Future[R] = Future()
            failed.set_exception(exc)
            return failed
        done: Future[R] = _DONE
        return done

    @property
    def backlog(self) -> int:
        """How many queued hand-overs have not run yet."""
        return len(self._backlog)

    def defer(self, deferring: bool) -> None:
        """Queue submissions from now on (True) or run them inline again (False)."""
        self._deferring = deferring

    def run_backlog(self, limit: int) -> int:
        """Run up to ``limit`` queued hand-overs, oldest first; return how many ran.

        Every one of them runs even if some raise: an ``Exception`` is dropped (the
        timers' ``run_logged`` logs it first), anything else is raised at the end (R53).
        When the backlog empties, its future is done. A call queued by a hand-over that
        runs here (while deferring) joins the end of the backlog.
        """
        backlog = self._backlog
        errors: list[BaseException] | None = None
        ran = 0
        while ran < limit and backlog:
            fn, args, kwargs = backlog.popleft()
            ran += 1
            try:
                fn(*args, **kwargs)
            except Exception:  # logged by run_logged; an inline run drops it too
                pass
            except BaseException as exc:  # the rest of the batch runs first (R53)
                if errors is None:
                    errors = []
                errors.append(exc)
        if not backlog:
            future, self._backlog_future = self._backlog_future, None
            if future is not None:
                future.set_result(None)
        raise_collected(errors, "a batch of timer hand-overs")
        return ran

    def drop_backlog(self) -> int:
        """Drop every queued hand-over (a shutdown, R32, R70); return how many; cancel
        the backlog's future."""
        dropped = len(self._backlog)
        self._backlog.clear()
        future, self._backlog_future = self._backlog_future, None
        if future is not None:
            future.cancel()
        return dropped

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse further submissions; ``cancel_futures`` also drops the backlog (else it
        is left to its driver, which drops it when it stops)."""
        self._shut_down = True
        if cancel_futures:
            self.drop_backlog()
