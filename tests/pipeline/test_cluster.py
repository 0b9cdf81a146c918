"""Executors in other processes get the right Python, or the run stops with exit 2 and the fix.

``local-cluster[2,1,1024]`` starts separate executor JVMs on this machine, whose Python
workers run ``PYSPARK_PYTHON`` (``python3`` on the PATH if unset, which lacks pyarrow
here): ``build_session`` points them at this interpreter. For other masters the
executors' Python must come with the cluster or be shipped as a packed environment;
``check_executors`` verifies it before the job and names the fix.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.pipeline.spark import ExecutorEnvironmentError, check_executors

ROOT = Path(__file__).resolve().parents[2]


class FakeRdd:
    """What ``check_executors`` calls on an RDD: parallelize -> map -> distinct -> collect."""

    def __init__(self, found: list[Any] | Exception) -> None:
        self.found = found

    def map(self, _: object) -> FakeRdd:
        return self

    def distinct(self) -> FakeRdd:
        return self

    def collect(self) -> list[Any]:
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


class FakeSession:
    """A session whose executors report ``found`` (or fail with it)."""

    def __init__(self, found: list[Any] | Exception) -> None:
        rdd = FakeRdd(found)

        class Context:
            master = "spark://cluster:7077"
            defaultParallelism = 2  # noqa: N815 - pyspark's name

            def parallelize(self, *_: object) -> FakeRdd:
                return rdd

        self.sparkContext = Context()


def test_executor_without_pyarrow_is_refused_with_the_fix() -> None:
    """An executor Python lacking pyarrow: ExecutorEnvironmentError naming the module and
    the two fixes (a packed environment through --archives, or PYSPARK_PYTHON)."""
    version = ".".join(map(str, sys.version_info[:3]))
    session = FakeSession([("/usr/bin/python3", version, ("pyarrow",))])
    with pytest.raises(ExecutorEnvironmentError, match="/usr/bin/python3 lacks pyarrow") as info:
        check_executors(session)  # type: ignore[arg-type]
    assert "--archives" in str(info.value) and "PYSPARK_PYTHON" in str(info.value)


def test_executor_python_of_another_version_is_refused() -> None:
    """A worker Python of another minor version cannot unpickle the job: refused."""
    session = FakeSession([("/opt/python", "3.9.2", ())])
    with pytest.raises(ExecutorEnvironmentError, match=r"is Python 3\.9\.2"):
        check_executors(session)  # type: ignore[arg-type]


def test_executor_python_that_cannot_start_is_refused() -> None:
    """A worker that fails (Py4J error) gives the error's last line and the fix."""
    session = FakeSession(RuntimeError("Py4JJavaError\nCannot run program python3: not found"))
    with pytest.raises(ExecutorEnvironmentError, match="Cannot run program python3") as info:
        check_executors(session)  # type: ignore[arg-type]
    assert "--archives" in str(info.value)


def test_matching_executors_pass() -> None:
    """Executors with every module and the driver's version: no error."""
    version = ".".join(map(str, sys.version_info[:3]))
    check_executors(FakeSession([(sys.executable, version, ())]))  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None,
    reason="needs the pipeline extra",
)
def test_local_cluster_run_of_a_tiny_grid(tmp_path: Path) -> None:
    """``pipeline run --master 'local-cluster[2,1,1024]'`` on one tiny stream, with
    PYSPARK_PYTHON unset: exit 0, no differences (about 2 minutes on 2 cores: slow)."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    done = subprocess.run(
        [
            sys.executable, "-m", "kpurgatory", "pipeline", "run",
            "--master", "local-cluster[2,1,1024]", "--grid", "small",
            "--scenario", "produce_acks_all", "--preset", "tiny", "--ops", "20",
            "--out", str(tmp_path / "out"), "--quiet",
        ],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "master local-cluster[2,1,1024]" in done.stdout
    assert "no differences" in done.stdout
