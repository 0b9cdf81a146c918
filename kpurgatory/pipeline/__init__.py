"""The data pipeline: workloads at scale, differential replay, cost sweeps, vectors.

- the workloads themselves (the scenario x preset x seed x shard grid and each row's step
  stream) live in ``kpurgatory.workloads``, outside this package, because the conformance
  kit builds vectors from them and must not depend on the Spark package.
- ``replay``: one stream through two implementations in virtual time (plain Python):
  per-operation outcomes, per-stream cost counters, first divergence.
- ``costs``: a model of Kafka's hierarchical wheel and of a per-request heap, fed from
  the observations, that counts delay-queue work (bucket offers, polls, cascades).
- ``rows``: one grid row's output rows (outcomes and stream counters) as plain columns,
  the unit the Spark executors run and the tests compare against.
- ``builds`` and ``executor_python``: which build of ``kpurgatory.optimized`` an
  interpreter runs, and which interpreter the executors replay with (the compiled build
  when there is one: ``pipeline run --executor-python``).
- ``spark``: the PySpark job (local or cluster): replay in the executors, diff, report;
  ``session``: starting Spark for it (session, executors' Python, Java); ``stages``:
  its stages, timed, with a progress bar.
- ``report``: aggregates to Parquet, Markdown/HTML and PNG charts.
- ``cli``: ``kpurgatory pipeline run`` and ``kpurgatory pipeline vectors``
  (``python -m kpurgatory.pipeline`` and the spark-submit script ``__main__``);
  ``run``: the body of ``pipeline run``; ``reproduce``: ``kpurgatory replay``, one
  stream of a run replayed locally.

Only ``spark``, ``session`` and ``report`` import pyspark, pandas, pyarrow or matplotlib (the
``[pipeline]`` and ``[plot]`` extras); everything else is plain Python.
"""
