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

``build_session`` starts Spark the way this machine needs it (docs/pipeline.md):
``SPARK_LOCAL_IP=127.0.0.1`` and ``PYSPARK_PYTHON`` = this interpreter for local and
``local-cluster`` masters (their executors share this machine), UI off, quiet log4j2
(root and ``org.apache.spark`` at the same level). Given an ``ExecutorPython``
(``kpurgatory.pipeline.executor_python.select``: ``pipeline run --executor-python``),
those executors run the interpreter it chose instead (the compiled build when there is
one), in the worker environment it gives. For any other master, and for
``local-cluster`` executors running the driver's interpreter, the ``kpurgatory``
package is zipped and shipped with ``addPyFile`` (executors read nothing from the
driver's disk), and on a cluster the executors' Python must come with the cluster or be
shipped as a packed environment (``EXECUTOR_HELP``). ``check_executors`` verifies
before the job starts that every executor can replay, and which build and sources it
imports.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kpurgatory.pipeline.executor_python import (
    OPTION,
    ExecutorPython,
    is_local_cluster_master,
    is_local_master,
)
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
from kpurgatory.workloads import GridRow

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "COUNTEREXAMPLE_COLUMNS",
    "MODES",
    "ExecutorEnvironmentError",
    "JavaMissingError",
    "PipelineResult",
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

LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""
"""Quiet logging: root and org.apache.spark at the same level (else Spark prints a banner)."""

JAVA_HELP = (
    "PySpark 4 needs Java 17 or newer on PATH (or JAVA_HOME). On Debian/Ubuntu: "
    "`sudo apt-get update && sudo apt-get install -y openjdk-17-jre-headless`; "
    "elsewhere install any Java 17+ runtime and put `java` on PATH."
)

T = TypeVar("T")


class JavaMissingError(RuntimeError):
    """No usable Java 17+ runtime; the message says how to install one."""


def check_java() -> str:
    """The Java version string if Java >= 17 is available, else ``JavaMissingError``."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JavaMissingError(f"no `java` found. {JAVA_HELP}")
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaMissingError(f"`{java} -version` failed ({exc}). {JAVA_HELP}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        raise JavaMissingError(f"cannot read the version of {java}. {JAVA_HELP}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_..." style
        major = int(match.group(2))
    if major < 17:
        raise JavaMissingError(f"{java} is Java {major}. {JAVA_HELP}")
    return match.group(0).split('"')[1]


def package_zip(directory: Path) -> Path:
    """Zip the ``kpurgatory`` package (sources only) into ``directory``; returns the zip."""
    package = Path(__file__).resolve().parents[1]
    target = directory / "kpurgatory.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".so":
                archive.write(path, path.relative_to(package.parent).as_posix())
    return target


def _submitted_master() -> str:
    """The master spark-submit configured (read from the launcher's Spark conf)."""
    from pyspark import SparkConf

    master: str = SparkConf().get("spark.master", "local[*]") or "local[*]"
    return master


def resolve_master(master: str | None) -> str:
    """``master``, or for None the master ``spark-submit --master`` chose (``local[*]``
    outside spark-submit)."""
    if master is not None:
        return master
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit
    return _submitted_master() if submitted else "local[*]"


class ExecutorEnvironmentError(RuntimeError):
    """The executors' Python cannot run the job; the message names the fix."""


EXECUTOR_HELP = (
    "The executors need a Python with the pipeline extra (pyarrow, pandas). On a cluster, "
    "pack this environment (venv-pack or conda-pack) and ship it as Spark's docs describe: "
    "spark-submit --archives env.tar.gz#environment with "
    "PYSPARK_PYTHON=./environment/bin/python; or set PYSPARK_PYTHON to an interpreter with "
    "the pipeline extra that exists at the same path on every worker."
)


def _executor_probe(_: object) -> str:
    """Runs in an executor: ``builds.describe()`` of its Python worker, as JSON (hashable,
    so ``distinct`` keeps one answer per worker process)."""
    from kpurgatory.pipeline.builds import describe

    return json.dumps(describe(), sort_keys=True)


def _selected_by(expected: ExecutorPython) -> str:
    """How the user can change the executors' interpreter, for error messages."""
    if expected.chosen_by == "cluster":
        return EXECUTOR_HELP
    return (
        f"The executors' interpreter was chosen by {expected.chosen_by} "
        f"({expected.executable}); pass {OPTION} driver, {OPTION} auto or another "
        f"{OPTION} PATH."
    )


def check_executors(
    session: SparkSession, expected: ExecutorPython | None = None
) -> list[dict[str, Any]]:
    """Run one tiny task per executor slot; ``ExecutorEnvironmentError`` unless each
    executor's Python has the modules the replay needs (and the driver's version) and,
    if ``expected`` is given, imports the build and the sources it names. Returns what
    each Python worker reported (``builds.describe()``), for the run's report.

    A worker Python that cannot start, or lacks pyarrow, would otherwise fail deep inside
    the first stage with a long Py4J traceback; a worker that imports another build than
    the one selected (a source checkout on its path shadowing a compiled install) would
    make the run measure something else than it says. Cost: one small job (a second or
    two: Python workers start for it).
    """
    import platform

    context = session.sparkContext
    slots = max(1, context.defaultParallelism)
    python = getattr(context, "pythonExec", None) or os.environ.get(
        "PYSPARK_PYTHON", "python3 (unset)"
    )
    try:
        answers = context.parallelize(range(slots), slots).map(_executor_probe).distinct()
        collected = answers.collect()
    except Exception as exc:  # Py4J wraps the worker's failure
        last = str(exc).strip().splitlines()[-1:] or ["?"]
        raise ExecutorEnvironmentError(
            f"the executors could not run Python on master {context.master} "
            f"(PYSPARK_PYTHON={python}): {last[0]}. {EXECUTOR_HELP}"
        ) from None
    found = sorted((json.loads(answer) for answer in collected), key=repr)
    driver = platform.python_version()
    for worker in found:
        executable, version = worker.get("executable"), str(worker.get("python"))
        missing = tuple(worker.get("missing", ()))
        if "error" in worker:
            missing += ("kpurgatory",)
        if missing or version.rsplit(".", 1)[0] != driver.rsplit(".", 1)[0]:
            lacks = f"lacks {', '.join(missing)}" if missing else f"is Python {version}"
            raise ExecutorEnvironmentError(
                f"the executors' Python {executable} {lacks} (driver: Python {driver}, "
                f"master {context.master}). {EXECUTOR_HELP}"
            )
        if expected is None:
            continue
        imported = f"kpurgatory from {worker.get('kpurgatory_path')}"
        if expected.build is not None and worker.get("build") != expected.build:
            raise ExecutorEnvironmentError(
                f"the executors' Python {executable} replays with the {worker.get('build')} "
                f"build ({imported}), not the {expected.build} build selected: "
                f"{expected.message}. {_selected_by(expected)}"
            )
        if expected.digest is not None and worker.get("digest") != expected.digest:
            raise ExecutorEnvironmentError(
                f"the executors' Python {executable} imports {imported}, built from other "
                f"sources than the driver's (master {context.master}). {_selected_by(expected)}"
            )
    return found


def build_session(
    master: str | None = "local[*]",
    app_name: str = "kpurgatory-pipeline",
    *,
    shuffle_partitions: int | None = None,
    executor_python: ExecutorPython | None = None,
) -> SparkSession:
    """A SparkSession configured for this project (see the module docstring).

    ``master=None`` keeps the master chosen by ``spark-submit --master`` (or
    ``local[*]`` outside spark-submit). ``executor_python``: the executors' interpreter
    and worker environment (None: this interpreter for local masters, as before
    ``--executor-python`` existed). ``JavaMissingError`` if Java 17+ is absent;
    ``ImportError`` (with the extra to install) if pyspark is not installed.
    """
    check_java()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ImportError(
            "pyspark is not installed: pip install -e '.[pipeline]' (pyspark, pyarrow, pandas<3)"
        ) from None
    master = resolve_master(master)
    local = is_local_master(master)
    interpreter: str | None = None  # PYSPARK_PYTHON while the session starts
    if local or is_local_cluster_master(master):  # executors on this machine
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if executor_python is None:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        elif executor_python.set_interpreter:
            interpreter = executor_python.executable
    scratch = Path(tempfile.mkdtemp(prefix="kpurgatory-spark-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # log4j2 file, package zip
    log4j = scratch / "log4j2.properties"
    log4j.write_text(LOG4J2, encoding="utf-8")
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, cores)))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.python.worker.reuse", "true")
    )
    for name, value in (executor_python.worker_env if executor_python else {}).items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    # pyspark reads PYSPARK_PYTHON once, when the context starts: set it only for that,
    # so this process's environment stays as the user left it.
    saved = os.environ.get("PYSPARK_PYTHON")
    if interpreter is not None:
        os.environ["PYSPARK_PYTHON"] = interpreter
    try:
        session = builder.getOrCreate()
    finally:
        if interpreter is not None:
            if saved is None:
                os.environ.pop("PYSPARK_PYTHON", None)
            else:
                os.environ["PYSPARK_PYTHON"] = saved
    session.sparkContext.setLogLevel("ERROR")
    if not local and (executor_python is None or executor_python.ship_package):
        session.sparkContext.addPyFile(str(package_zip(scratch)))
    return session


# ---- the executors' side -----------------------------------------------------------------


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


class _Stages:
    """Runs one Spark action per stage and shows its task progress (rich) if asked."""

    def __init__(self, spark: SparkSession, show: bool) -> None:
        self.spark = spark
        self.show = show
        self.seconds: dict[str, float] = {}
        self._progress: Any = None

    def __enter__(self) -> _Stages:
        if self.show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("tasks"),
                TimeElapsedColumn(),
            )
            self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def run(self, name: str, action: Callable[[], T]) -> T:
        """Run ``action`` (which triggers Spark jobs) as stage ``name``; returns its result."""
        started = time.perf_counter()
        if self._progress is None:
            direct = action()
            self.seconds[name] = time.perf_counter() - started
            return direct
        context = self.spark.sparkContext
        group = f"kpurgatory-{name}-{uuid.uuid4().hex[:8]}"
        box: dict[str, Any] = {}

        def target() -> None:
            context.setJobGroup(group, name)
            try:
                box["result"] = action()
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

        task = self._progress.add_task(name, total=None)
        worker = threading.Thread(target=target, name=f"stage-{name}", daemon=True)
        worker.start()
        tracker = context.statusTracker()
        while worker.is_alive():
            worker.join(0.25)
            done = total = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job is not None else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            if total:
                self._progress.update(task, completed=done, total=total)
        final = self._progress.tasks[task].total or 1
        self._progress.update(task, completed=final, total=final)
        self.seconds[name] = time.perf_counter() - started
        if "error" in box:
            raise box["error"]
        result: T = box["result"]
        return result


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
    impl_a: str = "reference",
    impl_b: str = "optimized",
    mode: str = "arrow",
    partitions: int | None = None,
    state_every: int = 32,
    out_dir: Path | None = None,
    show_progress: bool = False,
    max_counterexamples: int = 1000,
    port: Port | None = None,
) -> PipelineResult:
    """Replay ``grid_rows`` on ``spark``, diff side a against side b, aggregate.

    Writes Parquet tables under ``out_dir`` if given (``streams``, ``counterexamples``,
    ``summary``, ``deciles``). ``ValueError`` for an unknown mode or implementation.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as sf

    replayed = replay_dataframe(
        spark,
        grid_rows,
        impl_a=impl_a,
        impl_b=impl_b,
        mode=mode,
        partitions=partitions,
        state_every=state_every,
        port=port,
    )
    replayed = replayed.persist(StorageLevel.MEMORY_AND_DISK)

    with _Stages(spark, show_progress) as stages:
        stages.run("replay", replayed.count)
        outcomes = replayed.filter(sf.col("kind") == "outcome").select(*OUTCOME_COLUMNS)
        streams = replayed.filter(sf.col("kind") == "stream").select(*STREAM_COLUMNS)
        counterexamples = _diff(outcomes, streams)
        diff_rows = stages.run(
            "diff",
            lambda: [row.asDict() for row in counterexamples.limit(max_counterexamples).collect()],
        )
        diff_count = (
            len(diff_rows)
            if len(diff_rows) < max_counterexamples
            else stages.run("diff-count", counterexamples.count)
        )
        summary_df, deciles_df = _aggregates(outcomes, streams)
        summary: pd.DataFrame = stages.run("aggregate", summary_df.toPandas)
        deciles: pd.DataFrame = stages.run("deciles", deciles_df.toPandas)
        stream_table: pd.DataFrame = stages.run("streams", streams.toPandas)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)

            def write() -> None:
                # Written by the driver from collected tables: on a cluster the executors'
                # disks are not the driver's, and these tables are small.
                import pandas as pd

                stream_table.to_parquet(out_dir / "streams.parquet", index=False)
                pd.DataFrame(diff_rows, columns=COUNTEREXAMPLE_COLUMNS).to_parquet(
                    out_dir / "counterexamples.parquet", index=False
                )
                summary.to_parquet(out_dir / "summary.parquet", index=False)
                deciles.to_parquet(out_dir / "deciles.parquet", index=False)

            stages.run("write", write)
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


def _diff(outcomes: DataFrame, streams: DataFrame) -> DataFrame:
    """Counterexamples: per-operation outcome differences plus diverged streams."""
    from pyspark.sql import functions as sf

    keys = [*KEY_COLUMNS, "op"]
    compared = ("outcome", "at_ms", "via")
    side_a = outcomes.filter(sf.col("side") == "a").select(
        *keys, *(sf.col(c).alias(f"a_{c}") for c in compared)
    )
    side_b = outcomes.filter(sf.col("side") == "b").select(
        *keys, *(sf.col(c).alias(f"b_{c}") for c in compared)
    )
    joined = side_a.join(side_b, on=keys, how="full_outer")
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
                sf.lit("outcome "),
                sf.coalesce(sf.col("a_outcome"), sf.lit("missing")),
                sf.lit("@"),
                sf.coalesce(sf.col("a_at_ms").cast("string"), sf.lit("-")),
                sf.lit(" via "),
                sf.coalesce(sf.col("a_via"), sf.lit("-")),
                sf.lit(" (expected) vs "),
                sf.coalesce(sf.col("b_outcome"), sf.lit("missing")),
                sf.lit("@"),
                sf.coalesce(sf.col("b_at_ms").cast("string"), sf.lit("-")),
                sf.lit(" via "),
                sf.coalesce(sf.col("b_via"), sf.lit("-")),
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
    lateness = sf.col("at_ms") - sf.col("deadline_ms")
    latency = sf.col("at_ms") - sf.col("arrival_ms")
    expired = sf.col("outcome") == "expired"
    early = (sf.col("outcome") == "completed") & (sf.col("via") != "expiry")
    per_ops = ops.groupBy(*group).agg(
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
    # null, not a division by zero, for streams without timed operations (a port's
    # streams that its adapter never answered have no outcomes)
    total = sf.when(sf.sum("timed_ops") > 0, sf.sum("timed_ops"))
    per_streams = streams.groupBy(*group).agg(
        sf.count("*").alias("streams"),
        sf.sum("timed_ops").alias("timed_ops"),
        sf.sum("bucket_offers").alias("bucket_offers"),
        sf.sum("bucket_polls").alias("bucket_polls"),
        sf.sum("empty_bucket_polls").alias("empty_bucket_polls"),
        sf.sum("cascades").alias("cascades"),
        ((sf.sum("bucket_offers") + sf.sum("bucket_polls")) / total).alias(
            "bucket_queue_ops_per_request"
        ),
        ((sf.sum("heap_offers") + sf.sum("heap_polls")) / total).alias("heap_ops_per_request"),
        (sf.sum("bucket_queue_cost") / total).alias("bucket_queue_cost_per_request"),
        (sf.sum("heap_cost") / total).alias("heap_cost_per_request"),
        (sf.sum("cascades") / total).alias("cascades_per_op"),
        sf.max("wheel_levels").alias("max_wheel_levels"),
        sf.max("peak_bucket_queue").alias("peak_bucket_queue"),
        sf.max("peak_heap").alias("peak_heap"),
        sf.max("peak_pending").alias("peak_pending"),
        sf.max("peak_watched").alias("peak_watched"),
        sf.sum("purges").alias("purges"),
        sf.sum("purged_ops").alias("purged_ops"),
        sf.sum("model_mismatches").alias("model_mismatches"),
        sf.sum(sf.col("divergence_step").isNotNull().cast("long")).alias("diverged_streams"),
        sf.sum("seconds").alias("replay_seconds"),
        sf.concat_ws(",", sf.array_sort(sf.collect_set("build"))).alias("builds"),
    )
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
