"""The lifecycle steps the implementations share: the reaper loop and the wait for
termination (R31, R39, R52).

They were written twice, once per implementation, so the equivalence machines (which
compare the two) could not see a bug in them; they now have this one home, and the
lifecycle model in tests/machines checks them against the spec with code it does not
share. What stays per implementation is the shutdown latch, because each guards it with
its own lock (the reference's one lock, the optimized shutdown lock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["REAPER_STEP_MS", "await_purgatory_termination", "run_reaper"]

REAPER_STEP_MS = 200
"""How long each reaper step waits for a due task (Kafka: ``advanceClock(200L)``)."""


class _Timer(Protocol):
    @property
    def closed(self) -> bool: ...

    def await_termination(self, timeout: float | None = None) -> bool: ...


def run_reaper(
    stop: threading.Event,
    timer: _Timer,
    step: Callable[[], None],
    name: str,
    logger: logging.Logger,
) -> None:
    """The reaper thread's body (R31): ``step()`` until ``stop`` is set.

    A closed timer is waited out instead of spun on. Anything a step raises, any
    ``BaseException``, is logged and the reaper carries on (R52): a reaper that died
    would leave every operation unexpired, silently."""
    while not stop.is_set():
        try:
            if timer.closed:  # closed under us: idle instead of spinning
                stop.wait(REAPER_STEP_MS / 1000)
                continue
            step()
        except BaseException:
            logger.exception("expiration reaper of %r failed a step; it carries on", name)
            stop.wait(REAPER_STEP_MS / 1000)


def await_purgatory_termination(
    is_shut_down: bool,
    reaper: threading.Thread | None,
    timer: _Timer,
    timeout: float | None,
) -> bool:
    """``await_termination`` of a purgatory (R39): after shutdown, wait up to ``timeout``
    seconds (None: no limit) for the reaper thread and the timer's own executor.

    True iff both finished; False at once before shutdown, and from the reaper thread
    itself (it cannot wait for its own exit)."""
    if not is_shut_down:
        return False
    deadline = None if timeout is None else time.monotonic() + timeout
    if reaper is not None:
        if reaper is threading.current_thread():
            return False
        reaper.join(timeout)
        if reaper.is_alive():
            return False
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    return timer.await_termination(remaining)
