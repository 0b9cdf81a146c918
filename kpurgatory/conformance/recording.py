"""The labelled tasks and operations the driver submits to an implementation.

They subclass the implementation's own ``TimerTask`` and ``DelayedOperation`` (built
once per implementation module) and report to their ``Driver`` what happens to them:
a task's run, an operation's tries, completion, expiration and timer hand-over, and
perform the steps a task's ``on_run`` and an operation's ``on_try``, ``on_complete`` and
``on_expiration`` carry (calls back into the library from user code, R69).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kpurgatory.steps import Step, Watch

if TYPE_CHECKING:
    from kpurgatory.conformance.driver import Driver

__all__ = ["recording_classes"]


@functools.cache
def recording_classes(impl: ModuleType) -> tuple[type[Any], type[Any]]:
    """The recording task and operation classes for implementation ``impl``."""

    class ConformanceTask(impl.TimerTask):  # type: ignore[misc,name-defined]
        """A labelled task: records ``TaskRan`` and performs its ``on_run`` steps."""

        def __init__(
            self, delay_ms: int, label: str, driver: Driver, on_run: tuple[Step, ...]
        ) -> None:
            super().__init__(delay_ms)
            self.label = label
            self.driver = driver
            self.on_run = on_run

        def run(self) -> None:
            self.driver._task_ran(self)

        def __repr__(self) -> str:
            return f"ConformanceTask({self.label!r}, delay_ms={self.delay_ms})"

    class ConformanceOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        """A labelled operation whose condition is the flag ``ready`` (see ``Watch``)."""

        def __init__(self, watch: Watch, driver: Driver) -> None:
            super().__init__(watch.delay_ms)
            self.watch_step = watch  # a repeated watch must equal it (docs/vectors.md)
            self.label = watch.operation
            self.driver = driver
            self.ready = watch.ready
            self.ready_on_try = watch.ready_on_try
            self.keys = watch.keys
            self.tries = 0
            self.trying = False  # its on_try steps are running (a nested try skips them)

        def try_complete(self) -> bool:
            self.tries += 1
            driver = self.driver
            step_tries = driver._step_tries
            step_tries[self.label] = step_tries.get(self.label, 0) + 1
            if self.ready_on_try is not None and self.tries == self.ready_on_try:
                self.ready = True
            if self.watch_step.on_try and not self.trying:
                self.trying = True
                try:
                    driver._callback("try_complete", self, self.watch_step.on_try, held=True)
                finally:
                    self.trying = False
            return bool(self.ready and self.force_complete())

        def on_complete(self) -> None:
            driver = self.driver
            via = driver._via[-1]
            driver._record("completed", self.label, via)
            if self.watch_step.on_complete:
                # the lock is held unless a plain force_complete from user code completed it
                held = via != "force_complete"
                driver._callback("on_complete", self, self.watch_step.on_complete, held=held)

        def on_expiration(self) -> None:
            driver = self.driver
            driver._record("expired", self.label, None)
            if self.watch_step.on_expiration:
                driver._callback("on_expiration", self, self.watch_step.on_expiration, held=True)

        def run(self) -> None:
            self.driver._expiry_run(self, super().run)

        def __repr__(self) -> str:
            return f"ConformanceOperation({self.label!r}, delay_ms={self.delay_ms})"

    return ConformanceTask, ConformanceOperation
