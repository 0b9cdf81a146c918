"""kpurgatory: Apache Kafka's delayed-operation purgatory and timing wheel, in Python.

The names exported here are the implementation users should use, the hierarchical
timing wheel and sharded purgatory of ``kpurgatory.optimized``, plus the clocks and
executors that drive it. ``kpurgatory.reference`` is the simple implementation that
defines the semantics (docs/spec.md); the two are checked equivalent step by step.
"""

from importlib import metadata as _metadata

from kpurgatory.clock import ManualClock, MonotonicClock
from kpurgatory.executors import InlineExecutor, SingleThreadExecutor
from kpurgatory.optimized import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
)

try:
    __version__: str = _metadata.version("kpurgatory")
    """The installed distribution's version (pyproject.toml's, the one place it is written)."""
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

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
