"""The optimized implementation: Kafka's hierarchical timing wheel and sharded purgatory.

Same public API and observable behaviour as ``kpurgatory.reference``: every rule of
docs/spec.md (indexed in ``kpurgatory.spec.rules``). Built from Kafka's structures:
bucket lists with O(1) add/remove (``bucket``), a hierarchical timing wheel with lazily
created overflow levels (``wheel``), a delay queue of buckets (``delay_queue``), the
timer (``timer``), operations (``operation``) and a purgatory whose watcher lists are
sharded by key hash (``purgatory``). Every structure has a ``_check()`` method that
asserts its representation invariants. Its structures are its own; with the reference
it shares the package's common modules (``_checks``: argument and subclass checks,
``_sweep``: sweeps that finish before they raise, ``_lifecycle``: the reaper and
termination, ``clock``, ``executors``, ``sync``). docs/algorithm.md explains the
algorithm and the cost of each operation.

Documented extensions beyond the reference API (nothing else differs):

* ``SystemTimer.levels``: the number of wheel levels created so far.
* ``DelayedOperationPurgatory(..., *, shards=512)``: the number of watcher-list shards,
  readable as ``DelayedOperationPurgatory.shards``.
* ``DelayedOperationPurgatory.num_expired``: operations submitted there whose expiry won.
"""

from kpurgatory.optimized.operation import DelayedOperation
from kpurgatory.optimized.purgatory import DelayedOperationPurgatory
from kpurgatory.optimized.timer import SystemTimer, TimerTask

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "SystemTimer", "TimerTask"]
