"""The PySpark job: grid -> replay in the executors -> diff -> aggregates -> report.

Stages (each shown with its own progress bar when the output is a terminal):

1. **replay**: the grid DataFrame (one row per stream) is spread over the cluster and
   every partition runs ``kpurgatory.pipeline.rows.replay_rows`` through ``mapInArrow``
   (the default; ``mapInPandas`` and RDD ``mapPartitions`` are selectable with ``mode``
   for comparison, docs/pipeline.md gives the measurements). The output (outcome rows and
   stream rows in one layout) is persisted.
2. **diff**: outcomes of side a (the expectation) and side b are joined per operation
   (full outer join); any difference, or a stream whose step-by-step comparison
   diverged, becomes a counterexample row (scenario, preset, seed, shard, n_ops).
3. **aggregate**: per scenario and preset: outcome fractions, virtual lateness, cost
   counters, cascades per operation by deadline decile.

Starting Spark (``build_session``, ``check_executors``, Java, the package zip) is
``kpurgatory.pipeline.session``; its names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from kpurgatory.pipeline.ports import Port
from kpurgatory.pipeline.replay import resolve_impl
from kpurgatory.pipeline.rows import (
    COLUMNS,
    GRID_COLUMNS,
    KEY_COLUMNS,
    OUTCOME_COLUMNS,
    STREAM_COLUMNS,
    replay_rows,
    replay_rows_through_port,
)
from kpurgatory.pipeline.session import (
    ExecutorEnvironmentError,
    JavaMissingError,
    build_session,
    check_executors,
    check_java,
    package_zip,
    resolve_master,
)
from kpurgatory.pipeline.stages import Stages
from kpurgatory.workloads import GridRow

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "COUNTEREXAMPLE_COLUMNS",
    "MODES",
    "ExecutorEnvironmentError",
    "JavaMissingError",
    "PipelineResult",
    "ReplayOptions",
    "build_session",
    "check_executors",
    "check_java",
    "package_zip",
    "replay_dataframe",
    "resolve_master",
    "run_pipeline",
]

COUNTEREXAMPLE_COLUMNS = (*KEY_COLUMNS, "n_ops", "op", "step", "reason", "rule", "shrunk")
"""The counterexample table: the stream, and the operation or step that differs, and why
(for a port: the rule the first difference breaks and the shrunk steps, as JSON lines)."""

MODES = ("arrow", "pandas", "rdd")
"""How the replay stage runs in the executors: mapInArrow, mapInPandas, RDD mapPartitions."""


def _grid_tuples(columns: dict[str, list[Any]]) -> list[tuple[str, str, int, int, int]]:
    return list(
        zip(
            columns["scenario"],
            columns["preset"],
            columns["seed"],
            columns["shard"],
            columns["n_ops"],
            strict=True,
        )
    )


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def arrow_replayer(
    impl_a: str, impl_b: str, state_every: int, port: Port | None = None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: grid batches in, one output batch per stream out
    (with a ``port``: one batch per task, replayed through one adapter process)."""

    def replay(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        schema = _arrow_schema()
        if port is not None:
            rows = [row for batch in batches for row in _grid_tuples(batch.to_pydict())]
            reference = (impl_a, resolve_impl(impl_a))
            yield pa.RecordBatch.from_pydict(
                replay_rows_through_port(rows, port, reference), schema=schema
            )
            return
        pair_a, pair_b = (impl_a, resolve_impl(impl_a)), (impl_b, resolve_impl(impl_b))
        for batch in batches:
            for grid_row in _grid_tuples(batch.to_pydict()):
                columns = replay_rows([grid_row], pair_a, pair_b, state_every=state_every)
                yield pa.RecordBatch.from_pydict(columns, schema=schema)

    return replay


def pandas_replayer(
    impl_a: str, impl_b: str, state_every: int
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function (same rows as ``arrow_replayer``)."""

    def replay(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd

        pair_a, pair_b = (impl_a, resolve_impl(impl_a)), (impl_b, resolve_impl(impl_b))
        dtypes = {"string": "object", "long": "Int64", "double": "float64"}
        for frame in frames:
            grid_rows = _grid_tuples({c: frame[c].tolist() for c in frame.columns})
            for grid_row in grid_rows:
                columns = replay_rows([grid_row], pair_a, pair_b, state_every=state_every)
                yield pd.DataFrame(
                    {name: pd.Series(columns[name], dtype=dtypes[kind]) for name, kind in COLUMNS}
                )

    return replay


def rdd_replayer(
    impl_a: str, impl_b: str, state_every: int
) -> Callable[[Iterable[Any]], Iterable[tuple[Any, ...]]]:
    """The RDD ``mapPartitions`` function: grid ``Row``s in, output tuples out."""

    def replay(rows: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        pair_a, pair_b = (impl_a, resolve_impl(impl_a)), (impl_b, resolve_impl(impl_b))
        names = [name for name, _ in COLUMNS]
        for row in rows:
            grid_row = (row.scenario, row.preset, row.seed, row.shard, row.n_ops)
            columns = replay_rows([grid_row], pair_a, pair_b, state_every=state_every)
            yield from zip(*(columns[name] for name in names), strict=True)

    return replay


# ---- the driver's side ---------------------------------------------------------------------


def _spark_schema(columns: Sequence[tuple[str, str]]) -> Any:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    types = {"string": StringType(), "long": LongType(), "double": DoubleType()}
    return StructType([StructField(name, types[kind], True) for name, kind in columns])


@dataclass
class PipelineResult:
    """What ``run_pipeline`` produced: counts, counterexamples, aggregates, timings."""

    streams: int
    operations: int
    counterexamples: list[dict[str, Any]]
    counterexample_count: int
    summary: pd.DataFrame
    deciles: pd.DataFrame
    stream_table: pd.DataFrame
    stage_seconds: dict[str, float] = field(default_factory=dict)
    model_mismatches: int = 0

    @property
    def ok(self) -> bool:
        """True iff no counterexample was found."""
        return self.counterexample_count == 0


class ReplayOptions(TypedDict, total=False):
    """``replay_dataframe``'s keyword parameters, which ``run_pipeline`` passes on: the
    names and types once, so the two never drift apart (the defaults are
    ``replay_dataframe``'s)."""

    impl_a: str
    impl_b: str
    mode: str
    partitions: int | None
    state_every: int
    port: Port | None


def replay_dataframe(
    spark: SparkSession,
    grid_rows: Sequence[GridRow],
    *,
    impl_a: str = "reference",
    impl_b: str = "optimized",
    mode: str = "arrow",
    partitions: int | None = None,
    state_every: int = 32,
    port: Port | None = None,
) -> DataFrame:
    """The replay stage, lazily: one output row (``rows.COLUMNS``) per outcome and stream.

    With a ``port``, side b is the port behind its adapter (``kpurgatory.pipeline.ports``;
    mode arrow only) and ``impl_b`` only names it. ``ValueError`` for an unknown mode,
    an unknown implementation or an empty grid.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if port is not None and mode != "arrow":
        raise ValueError(f"mode: a port's adapter replays in mode arrow only, not {mode!r}")
    resolve_impl(impl_a)  # fail fast, on the driver, with a clear message
    if port is None:
        resolve_impl(impl_b)
    if not grid_rows:
        raise ValueError("grid_rows must not be empty")
    parallelism = spark.sparkContext.defaultParallelism
    n_partitions = partitions or min(len(grid_rows), max(2, parallelism * 8))
    grid_df = spark.createDataFrame(
        [(r.scenario, r.preset, r.seed, r.shard, r.n_ops) for r in grid_rows],
        _spark_schema(GRID_COLUMNS),
    ).repartition(n_partitions)
    out_schema = _spark_schema(COLUMNS)
    if mode == "arrow":
        replayer = arrow_replayer(impl_a, impl_b, state_every, port)
        return grid_df.mapInArrow(replayer, out_schema)
    if mode == "pandas":
        return grid_df.mapInPandas(pandas_replayer(impl_a, impl_b, state_every), out_schema)
    rdd = grid_df.rdd.mapPartitions(rdd_replayer(impl_a, impl_b, state_every))
    return spark.createDataFrame(rdd, out_schema)


def run_pipeline(
    spark: SparkSession,
    grid_rows: Sequence[GridRow],
    *,
    out_dir: Path | None = None,
    show_progress: bool = False,
    max_counterexamples: int = 1000,
    **replay: Unpack[ReplayOptions],
) -> PipelineResult:
    """Replay ``grid_rows`` on ``spark``, diff side a against side b, aggregate.

    ``replay`` is passed on to ``replay_dataframe`` (``ReplayOptions``: the two sides,
    the mode, partitions, state_every, a port). Writes Parquet tables under ``out_dir``
    if given (``streams``, ``counterexamples``, ``summary``, ``deciles``). ``ValueError``
    for an unknown mode or implementation.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as sf

    replayed = replay_dataframe(spark, grid_rows, **replay)
    replayed = replayed.persist(StorageLevel.MEMORY_AND_DISK)

    with Stages(spark, show_progress) as stages:
        stages.run("replay", replayed.count)
        outcomes = replayed.filter(sf.col("kind") == "outcome").select(*OUTCOME_COLUMNS)
        streams = replayed.filter(sf.col("kind") == "stream").select(*STREAM_COLUMNS)
        diff_rows, diff_count = _collect_diff(stages, _diff(outcomes, streams), max_counterexamples)
        summary_df, deciles_df = _aggregates(outcomes, streams)
        summary: pd.DataFrame = stages.run("aggregate", summary_df.toPandas)
        deciles: pd.DataFrame = stages.run("deciles", deciles_df.toPandas)
        stream_table: pd.DataFrame = stages.run("streams", streams.toPandas)
        if out_dir is not None:
            written = (stream_table, diff_rows, summary, deciles)
            stages.run("write", lambda: _write_tables(out_dir, *written))
    replayed.unpersist()
    operations = int(stream_table["ops"].sum()) if len(stream_table) else 0
    return PipelineResult(
        streams=len(stream_table),
        operations=operations,
        counterexamples=diff_rows,
        counterexample_count=diff_count,
        summary=summary,
        deciles=deciles,
        stream_table=stream_table,
        stage_seconds=stages.seconds,
        model_mismatches=int(stream_table["model_mismatches"].sum()) if len(stream_table) else 0,
    )


def _collect_diff(
    stages: Stages, counterexamples: DataFrame, most: int
) -> tuple[list[dict[str, Any]], int]:
    """The first ``most`` counterexample rows (stage ``diff``) and how many there are
    (stage ``diff-count``, only when there may be more)."""
    rows = stages.run(
        "diff", lambda: [row.asDict() for row in counterexamples.limit(most).collect()]
    )
    count = len(rows) if len(rows) < most else stages.run("diff-count", counterexamples.count)
    return rows, count


def _write_tables(
    out_dir: Path,
    stream_table: pd.DataFrame,
    diff_rows: list[dict[str, Any]],
    summary: pd.DataFrame,
    deciles: pd.DataFrame,
) -> None:
    """Write the run's tables as ``out_dir/<name>.parquet``: by the driver, from collected
    tables (on a cluster the executors' disks are not the driver's; these are small)."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {
        "streams": stream_table,
        "counterexamples": pd.DataFrame(diff_rows, columns=COUNTEREXAMPLE_COLUMNS),
        "summary": summary,
        "deciles": deciles,
    }
    for name, table in tables.items():
        table.to_parquet(out_dir / f"{name}.parquet", index=False)


def _diff(outcomes: DataFrame, streams: DataFrame) -> DataFrame:
    """Counterexamples: per-operation outcome differences plus diverged streams."""
    from pyspark.sql import functions as sf

    keys = [*KEY_COLUMNS, "op"]
    compared = ("outcome", "at_ms", "via")

    def side(name: str) -> DataFrame:
        """One side's outcomes, its compared columns prefixed with its name."""
        return outcomes.filter(sf.col("side") == name).select(
            *keys, *(sf.col(c).alias(f"{name}_{c}") for c in compared)
        )

    def shown(name: str) -> list[Column]:
        """One side's outcome as a counterexample reads it: outcome@at_ms via via."""
        return [
            sf.coalesce(sf.col(f"{name}_outcome"), sf.lit("missing")),
            sf.lit("@"),
            sf.coalesce(sf.col(f"{name}_at_ms").cast("string"), sf.lit("-")),
            sf.lit(" via "),
            sf.coalesce(sf.col(f"{name}_via"), sf.lit("-")),
        ]

    joined = side("a").join(side("b"), on=keys, how="full_outer")
    differs = ~sf.col("a_outcome").eqNullSafe(sf.col("b_outcome"))
    for c in compared[1:]:
        differs = differs | ~sf.col(f"a_{c}").eqNullSafe(sf.col(f"b_{c}"))
    n_ops = streams.select(*KEY_COLUMNS, "n_ops")
    op_rows = (
        joined.filter(differs)
        .join(n_ops, on=list(KEY_COLUMNS), how="left")
        .select(
            *KEY_COLUMNS,
            "n_ops",
            "op",
            sf.lit(None).cast("long").alias("step"),
            sf.concat(
                sf.lit("outcome "), *shown("a"), sf.lit(" (expected) vs "), *shown("b")
            ).alias("reason"),
            sf.lit(None).cast("string").alias("rule"),
            sf.lit(None).cast("string").alias("shrunk"),
        )
    )
    stream_rows = streams.filter(sf.col("divergence_step").isNotNull()).select(
        *KEY_COLUMNS,
        "n_ops",
        sf.lit(None).cast("string").alias("op"),
        sf.col("divergence_step").alias("step"),
        sf.col("divergence").alias("reason"),
        "rule",
        "shrunk",
    )
    return stream_rows.unionByName(op_rows).orderBy(*KEY_COLUMNS, "step", "op")


def _aggregates(outcomes: DataFrame, streams: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Per scenario/preset summary (with the builds of kpurgatory.optimized that replayed
    its streams, e.g. "compiled"), and cascades per operation by deadline decile."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    group = ["scenario", "preset"]
    ops = outcomes.filter(sf.col("side") == "a")
    per_ops = _outcome_aggregates(ops, group)
    per_streams = _stream_aggregates(streams, group)
    summary = per_ops.join(per_streams, on=group, how="outer").orderBy(*group)
    placed = ops.filter(sf.col("wheel_level") >= 0)
    window = Window.partitionBy(*group).orderBy("delay_ms", "scenario", "seed", "shard", "op")
    deciles = (
        placed.withColumn("decile", sf.ntile(10).over(window))
        .groupBy(*group, "decile")
        .agg(
            sf.count("*").alias("ops"),
            sf.min("delay_ms").alias("delay_min_ms"),
            sf.max("delay_ms").alias("delay_max_ms"),
            sf.avg("op_cascades").alias("cascades_per_op"),
            sf.avg("wheel_level").alias("mean_level"),
        )
        .orderBy(*group, "decile")
    )
    return summary, deciles


def _outcome_aggregates(ops: DataFrame, group: list[str]) -> DataFrame:
    """Per group: outcome fractions, virtual lateness of expiries, completion latency."""
    from pyspark.sql import functions as sf

    lateness = sf.col("at_ms") - sf.col("deadline_ms")
    latency = sf.col("at_ms") - sf.col("arrival_ms")
    expired = sf.col("outcome") == "expired"
    early = (sf.col("outcome") == "completed") & (sf.col("via") != "expiry")
    return ops.groupBy(*group).agg(
        sf.count("*").alias("ops"),
        sf.avg(expired.cast("double")).alias("expired_fraction"),
        sf.avg(early.cast("double")).alias("completed_fraction"),
        sf.avg((sf.col("outcome") == "pending").cast("double")).alias("pending_fraction"),
        sf.avg(sf.when(expired, lateness)).alias("lateness_mean_ms"),
        sf.min(sf.when(expired, lateness)).alias("lateness_min_ms"),
        sf.percentile_approx(sf.when(expired, lateness), 0.5).alias("lateness_p50_ms"),
        sf.percentile_approx(sf.when(expired, lateness), 0.99).alias("lateness_p99_ms"),
        sf.max(sf.when(expired, lateness)).alias("lateness_max_ms"),
        sf.percentile_approx(sf.when(early, latency), 0.5).alias("completion_p50_ms"),
        sf.percentile_approx(sf.when(early, latency), 0.99).alias("completion_p99_ms"),
    )


def _stream_aggregates(streams: DataFrame, group: list[str]) -> DataFrame:
    """Per group: the streams' cost counters, peaks, purges and builds."""
    from pyspark.sql import functions as sf

    # null, not a division by zero, for streams without timed operations (a port's
    # streams that its adapter never answered have no outcomes)
    total = sf.when(sf.sum("timed_ops") > 0, sf.sum("timed_ops"))
    return streams.groupBy(*group).agg(
        sf.count("*").alias("streams"),
        *_same_name(sf.sum, "timed_ops", "bucket_offers", "bucket_polls", "empty_bucket_polls"),
        *_same_name(sf.sum, "cascades"),
        ((sf.sum("bucket_offers") + sf.sum("bucket_polls")) / total).alias(
            "bucket_queue_ops_per_request"
        ),
        ((sf.sum("heap_offers") + sf.sum("heap_polls")) / total).alias("heap_ops_per_request"),
        (sf.sum("bucket_queue_cost") / total).alias("bucket_queue_cost_per_request"),
        (sf.sum("heap_cost") / total).alias("heap_cost_per_request"),
        (sf.sum("cascades") / total).alias("cascades_per_op"),
        sf.max("wheel_levels").alias("max_wheel_levels"),
        *_same_name(sf.max, "peak_bucket_queue", "peak_heap", "peak_pending", "peak_watched"),
        *_same_name(sf.sum, "purges", "purged_ops", "model_mismatches"),
        sf.sum(sf.col("divergence_step").isNotNull().cast("long")).alias("diverged_streams"),
        sf.sum("seconds").alias("replay_seconds"),
        sf.concat_ws(",", sf.array_sort(sf.collect_set("build"))).alias("builds"),
    )


def _same_name(aggregate: Callable[[str], Column], *names: str) -> list[Column]:
    """``aggregate`` of each column, named as the column (a per-stream count summed, a peak
    maximised): the summary keeps the streams table's names for them."""
    return [aggregate(name).alias(name) for name in names]
