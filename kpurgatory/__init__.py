"""kpurgatory: Apache Kafka's delayed-operation purgatory and timing wheel, in Python.

The names exported here are the implementation users should use, plus the clocks and
executors that drive it. ``kpurgatory.reference`` is the simple implementation that
defines the semantics (docs/spec.md).
"""

from kpurgatory.clock import ManualClock, MonotonicClock
from kpurgatory.executors import InlineExecutor, SingleThreadExecutor
from kpurgatory.reference import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
)

__version__ = "0.1.0"

__all__ = [
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "InlineExecutor",
    "ManualClock",
    "MonotonicClock",
    "SingleThreadExecutor",
    "SystemTimer",
    "TimerTask",
    "__version__",
]
