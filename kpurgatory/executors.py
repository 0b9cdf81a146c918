"""Executors a timer hands due tasks to.

``SingleThreadExecutor`` is Kafka's default: one worker thread named exactly
``executor-<name>``, so tasks run one at a time, in hand-over order, off the thread
that drives the clock. ``InlineExecutor`` runs each task at once in the caller, which
makes a timer on a ``ManualClock`` fully deterministic for tests and replays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from kpurgatory._checks import require_str

__all__ = ["InlineExecutor", "SingleThreadExecutor", "await_termination"]

P = ParamSpec("P")
R = TypeVar("R")


class InlineExecutor(Executor):
    """Runs every submitted callable immediately, in the caller's thread.

    The returned future is already done; an ``Exception`` raised by the callable is
    stored in it (as any executor does), not raised from ``submit``. Any other
    ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``, ``CancelledError``) is stored
    and also raised from ``submit``: the callable ran in the caller's thread, so the
    caller is who must see it (R52). After ``shutdown``, ``submit`` raises ``RuntimeError``.
    """

    def __init__(self) -> None:
        self._shut_down = False

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Run ``fn(*args, **kwargs)`` now and return its completed future."""
        if self._shut_down:
            raise RuntimeError("cannot submit to an InlineExecutor after shutdown")
        future: Future[R] = Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # stored in the future, like ThreadPoolExecutor
            future.set_exception(exc)
        except BaseException as exc:  # stored, and the caller's thread sees it (R52)
            future.set_exception(exc)
            raise
        else:
            future.set_result(result)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse further submissions (nothing is ever pending)."""
        self._shut_down = True


class SingleThreadExecutor(ThreadPoolExecutor):
    """One worker thread named exactly ``name`` (Kafka: ``executor-<timer name>``).

    The thread starts on the first ``submit``. ``shutdown(wait=True)`` called from the
    worker itself (a task closing its own timer) does not try to join its own thread.
    """

    def __init__(self, name: str) -> None:
        self._thread_name = require_str("name", name)
        self._worker: threading.Thread | None = None
        super().__init__(max_workers=1, thread_name_prefix=name, initializer=self._name_worker)

    @property
    def thread_name(self) -> str:
        """The worker thread's name."""
        return self._thread_name

    def _name_worker(self) -> None:
        worker = threading.current_thread()
        worker.name = self._thread_name
        self._worker = worker

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Finish the tasks already submitted (when ``wait``), then stop the worker."""
        on_worker = threading.current_thread() is self._worker
        super().shutdown(wait=wait and not on_worker, cancel_futures=cancel_futures)

    def await_termination(self, timeout: float | None = None) -> bool:
        """After ``shutdown``: wait up to ``timeout`` seconds (None: no limit) for the worker
        to finish what was submitted and exit; True iff it has (or never started).

        Called from the worker itself it cannot wait for its own exit and returns False.
        """
        worker = self._worker
        if worker is None:
            return True
        if worker is threading.current_thread():
            return False
        worker.join(timeout)
        return not worker.is_alive()


def await_termination(executor: Executor, timeout: float | None) -> bool:
    """Wait for ``executor``'s threads after its shutdown, where it can say (see
    ``SingleThreadExecutor.await_termination``); any other executor counts as done."""
    if isinstance(executor, SingleThreadExecutor):
        return executor.await_termination(timeout)
    return True


def run_logged(task: Any, logger: Any) -> None:
    """Run ``task.run()``, logging (with the task) any ``Exception`` instead of raising it
    (R13); any other ``BaseException`` is logged too and re-raised (R52)."""
    try:
        task.run()
    except Exception:
        logger.exception("timer task %r raised; the timer carries on", task)
    except BaseException as exc:
        logger.error("timer task %r raised %r; re-raised after the drain", task, exc)
        raise
