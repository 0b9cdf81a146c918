"""Benchmarks: the timing wheel against the designs it replaced or competes with.

``kpurgatory bench [--quick|--full] [--out DIR]`` (``kpurgatory.bench.cli``) runs them
all and prints the goals; with ``--out`` it writes JSON and PNG results there and the
report (``make bench``: docs/perf/ and docs/performance.md). Modules:

- ``baselines``: the ``old`` (Kafka 0.8) and ``heap`` (asyncio-style) designs.
- ``designs``: the registry of designs the harness can drive (reference, optimized,
  heap, old), all through the same four public names.
- ``harness``: executors, clocks and probes shared by the benchmarks (CPU, RSS, ...).
- ``enqueue``: Kafka's TestPurgatoryPerformance, ported with its Scala semantics.
- ``scaling``: timer cost per operation against the number pending, memory per task,
  and the full add/cancel/expire lifecycle.
- ``idle``: what a timer costs while nothing is due.
- ``profiling``: pyinstrument profiles of the optimized timer and purgatory.
- ``report``: the markdown report and the plots, made from the JSON results only.
- ``compiled``: the mypyc build of ``kpurgatory.optimized`` (opt-in) and its test run.

Nothing here is imported by ``kpurgatory`` itself; heavy optional dependencies
(matplotlib, rich, pyinstrument) are imported only inside the functions that need them.
"""
