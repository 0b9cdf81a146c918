"""The reference implementation: simple, obviously correct, and the definition of the semantics.

Every other implementation (``kpurgatory.optimized``, and ports to other languages) must
behave exactly as this package does, except where docs/spec.md leaves a choice open.
"""

from kpurgatory.reference.operation import DelayedOperation
from kpurgatory.reference.purgatory import DelayedOperationPurgatory
from kpurgatory.reference.timer import SystemTimer, TimerTask

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "SystemTimer", "TimerTask"]
