"""What the timer rule tests share: a manual-clock timer, its runs, a thread helper, an
executor that runs hand-overs when told, and a task class whose run calls back."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from types import ModuleType
from typing import Any, ParamSpec, TypeVar

from kpurgatory import InlineExecutor, ManualClock
from kpurgatory.spec.events import TaskRan
from tests.support import Recorder, task_class

P = ParamSpec("P")
R = TypeVar("R")

JOIN_TIMEOUT_S = 5.0
"""Upper bound for joining a helper thread; a healthy run needs milliseconds."""


def make_timer(
    impl: ModuleType,
    clock: ManualClock,
    tick_ms: int = 1,
    start_ms: int | None = None,
    *,
    executor: Executor | None = None,
    name: str = "t",
) -> Any:
    """A timer of ``impl`` on ``clock`` that runs tasks inline unless told otherwise."""
    return impl.SystemTimer(
        name,
        tick_ms,
        20,
        start_ms,
        clock=clock,
        executor=InlineExecutor() if executor is None else executor,
    )


def runs(recorder: Recorder) -> list[tuple[str, int]]:
    """(task name, clock reading) of every run recorded so far, in run order."""
    return [(e.task, e.at_ms) for e in recorder.events if isinstance(e, TaskRan)]


def random_timer_steps(
    rng: random.Random,
    timer: Any,
    tasks: Sequence[Any],
    steps: int,
    *,
    add_below: float,
    cancel_below: float,
    advances: Sequence[int],
    after_each: Callable[[], None] = lambda: None,
) -> None:
    """``steps`` random steps on ``timer``, each on a task drawn from ``tasks``: a roll
    below ``add_below`` adds it, below ``cancel_below`` cancels it, and any other roll
    advances the clock by one of ``advances``; ``after_each`` runs after every step."""
    for _ in range(steps):
        roll = rng.random()
        task = rng.choice(tasks)
        if roll < add_below:
            timer.add(task)
        elif roll < cancel_below:
            task.cancel()
        else:
            timer.advance_clock(rng.choice(advances))
        after_each()


def run_in_thread(fn: Callable[[], object]) -> bool:
    """Run ``fn`` on a helper thread; True iff it finished within ``JOIN_TIMEOUT_S``.

    Used to prove that no lock is held by the calling thread: if one were, the helper
    would block on it and not finish.
    """
    worker = threading.Thread(target=fn, daemon=True)
    worker.start()
    worker.join(JOIN_TIMEOUT_S)
    return not worker.is_alive()


class ManualExecutor(Executor):
    """An executor that only queues hand-overs; ``run_all`` runs them later.

    Lets a test act between a task's hand-over and its run (R9), and shows whether a
    timer shut a caller's executor down (R14).
    """

    def __init__(self) -> None:
        self.queue: list[Callable[[], None]] = []
        self.shut_down = False

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Queue ``fn(*args, **kwargs)``; its future completes when ``run_all`` runs it."""
        future: Future[R] = Future()

        def call() -> None:
            future.set_result(fn(*args, **kwargs))

        self.queue.append(call)
        return future

    def run_all(self) -> int:
        """Run every queued call in submission order; return how many ran."""
        pending, self.queue = self.queue, []
        for call in pending:
            call()
        return len(pending)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Record that the timer (or someone) shut this executor down."""
        self.shut_down = True


def callback_task_class(impl: ModuleType) -> type[Any]:
    """A recording task of ``impl`` (``task_class``) that then calls ``action``."""

    class CallbackTask(task_class(impl)):  # type: ignore[misc]
        def __init__(
            self, delay_ms: int, name: str, recorder: Recorder, action: Callable[[], None]
        ) -> None:
            super().__init__(delay_ms, name, recorder)
            self.action = action

        def run(self) -> None:
            super().run()
            self.action()

        def __repr__(self) -> str:
            return f"CallbackTask({self.name!r})"

    return CallbackTask
