"""Baselines the benchmarks measure the timing wheel against (never exported by ``kpurgatory``).

- ``heap``: what a Python user would write today: an asyncio-style ``heapq`` timer with
  lazy cancellation and asyncio's re-heapify rule, behind the spec's purgatory. It is
  meant to be exactly equivalent to ``kpurgatory.reference`` (tests/bench checks it with
  the equivalence machines).
- ``bare``: what the optimized timer must beat without any scaffolding (issue 13): a
  bare ``heapq`` timer of ``[due, seq, task]`` handles (no lock, no checks, no spec API)
  and asyncio's own ``loop.call_at``; the scaling benchmark drives them directly
  (``kpurgatory.bench.versus``).
- ``old``: the purgatory Kafka 0.8 had before the redesign (the "Purgatory Redesign
  Proposal"): a delay queue of *operations*, completed operations left in it until they
  expire, and purges of the queue and of the watcher lists triggered by their size.

``heap`` and ``old`` export the four public names of every implementation (``SystemTimer``,
``TimerTask``, ``DelayedOperation``, ``DelayedOperationPurgatory``), so the harness drives
every design through the same calls.
"""
