"""kpurgatory on asyncio: awaitable operations and a loop-driven timer, with no thread.

``AsyncPurgatory`` wraps a ``DelayedOperationPurgatory`` (optimized by default) on an
event loop: ``outcome = await purgatory.wait(operation, keys)`` waits until the
operation completes, expires or is abandoned; one ``loop.call_at`` at the timer's next
due time replaces the reaper and executor threads. ``VirtualTimeLoop`` (and ``run``)
runs it all in virtual time on a ``ManualClock`` for deterministic tests. Rules
R44-R51 and R57-R59 (docs/spec.md); guide: docs/tutorial.md; reference: docs/api.md. Standard
library only.
"""

from kpurgatory.aio.driver import LoopTimerDriver
from kpurgatory.aio.executor import LoopExecutor
from kpurgatory.aio.operation import DelayedOperation, ReferenceDelayedOperation, Waiter
from kpurgatory.aio.outcome import Outcome
from kpurgatory.aio.purgatory import AsyncPurgatory, PurgatoryImplementation
from kpurgatory.aio.virtual import VirtualTimeLoop, run

__all__ = [
    "AsyncPurgatory",
    "DelayedOperation",
    "LoopExecutor",
    "LoopTimerDriver",
    "Outcome",
    "PurgatoryImplementation",
    "ReferenceDelayedOperation",
    "VirtualTimeLoop",
    "Waiter",
    "run",
]
