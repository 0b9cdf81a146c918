"""Starting Spark for the pipeline: the session, its executors' Python, Java.

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
imports. The job itself is ``kpurgatory.pipeline.spark``.
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
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpurgatory.pipeline.executor_python import (
    OPTION,
    ExecutorPython,
    is_local_cluster_master,
    is_local_master,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "EXECUTOR_HELP",
    "JAVA_HELP",
    "ExecutorEnvironmentError",
    "JavaMissingError",
    "build_session",
    "check_executors",
    "check_java",
    "package_zip",
    "resolve_master",
]

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


def _configured(
    builder: Any, master: str, app_name: str, scratch: Path, shuffle_partitions: int | None
) -> Any:
    """``builder`` set for this project: UI off, quiet log4j2 (written into ``scratch``),
    a shuffle partition per core (at least 2), adaptive execution, reused workers."""
    log4j = scratch / "log4j2.properties"
    log4j.write_text(LOG4J2, encoding="utf-8")
    cores = os.cpu_count() or 2
    return (
        builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, cores)))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.python.worker.reuse", "true")
    )


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
    builder = _configured(SparkSession.builder, master, app_name, scratch, shuffle_partitions)
    for name, value in (executor_python.worker_env if executor_python else {}).items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    # pyspark reads PYSPARK_PYTHON once, when the context starts: set it only for that,
    # so this process's environment stays as the user left it.
    saved = os.environ.get("PYSPARK_PYTHON")
    if interpreter is not None:
        os.environ["PYSPARK_PYTHON"] = interpreter
    try:
        session: SparkSession = builder.getOrCreate()
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
