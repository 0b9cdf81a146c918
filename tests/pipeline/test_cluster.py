"""Executors in other processes get the right Python, or the run stops with exit 2 and the fix.

``local-cluster[2,1,1024]`` starts separate executor JVMs on this machine, whose Python
workers run ``PYSPARK_PYTHON`` (``python3`` on the PATH if unset, which lacks pyarrow
here): ``build_session`` points them at this interpreter, or at the one
``--executor-python`` selected. For other masters the executors' Python must come with
the cluster or be shipped as a packed environment; ``check_executors`` verifies it
before the job and names the fix, and checks that every executor imports the build and
the sources that were selected.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.pipeline.builds import describe
from kpurgatory.pipeline.executor_python import ExecutorPython, select
from kpurgatory.pipeline.spark import ExecutorEnvironmentError, check_executors

ROOT = Path(__file__).resolve().parents[2]
VERSION = ".".join(map(str, sys.version_info[:3]))


def worker(executable: str, version: str = VERSION, **changes: Any) -> str:
    """What an executor's probe answers (``builds.describe()`` as JSON), for a worker of
    ``executable`` with this process's kpurgatory unless ``changes`` say otherwise."""
    answer = {**describe(), "executable": executable, "python": version, **changes}
    return json.dumps(answer, sort_keys=True)


def expected(build: str, chosen_by: str = "--executor-python") -> ExecutorPython:
    """A selection that expects ``build`` with this process's sources."""
    return ExecutorPython(
        executable="/opt/compiled/bin/python",
        chosen_by=chosen_by,
        build=build,
        digest=str(describe()["digest"]),
        message=f"executors replay with the {build} build: /opt/compiled/bin/python",
    )


class FakeRdd:
    """What ``check_executors`` calls on an RDD: parallelize -> map -> distinct -> collect."""

    def __init__(self, found: list[str] | Exception) -> None:
        self.found = found

    def map(self, _: object) -> FakeRdd:
        return self

    def distinct(self) -> FakeRdd:
        return self

    def collect(self) -> list[str]:
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


class FakeSession:
    """A session whose executors report ``found`` (or fail with it)."""

    def __init__(self, found: list[str] | Exception) -> None:
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
    session = FakeSession([worker("/usr/bin/python3", missing=["pyarrow"])])
    with pytest.raises(ExecutorEnvironmentError, match="/usr/bin/python3 lacks pyarrow") as info:
        check_executors(session)  # type: ignore[arg-type]
    assert "--archives" in str(info.value) and "PYSPARK_PYTHON" in str(info.value)


def test_executor_python_of_another_version_is_refused() -> None:
    """A worker Python of another minor version cannot unpickle the job: refused."""
    session = FakeSession([worker("/opt/python", "3.9.2")])
    with pytest.raises(ExecutorEnvironmentError, match=r"is Python 3\.9\.2"):
        check_executors(session)  # type: ignore[arg-type]


def test_executor_python_that_cannot_start_is_refused() -> None:
    """A worker that fails (Py4J error) gives the error's last line and the fix."""
    session = FakeSession(RuntimeError("Py4JJavaError\nCannot run program python3: not found"))
    with pytest.raises(ExecutorEnvironmentError, match="Cannot run program python3") as info:
        check_executors(session)  # type: ignore[arg-type]
    assert "--archives" in str(info.value)


def test_matching_executors_pass_and_are_returned_per_worker() -> None:
    """Executors with every module and the driver's version: no error; the answer of
    every worker comes back (for the report)."""
    answers = [worker(sys.executable, worker="host:1"), worker(sys.executable, worker="host:2")]
    found = check_executors(FakeSession(answers))  # type: ignore[arg-type]
    assert [w["worker"] for w in found] == ["host:1", "host:2"]
    assert all(w["digest"] == describe()["digest"] for w in found)


def test_executors_running_another_build_than_selected_stop_the_run() -> None:
    """The compiled build was selected but a worker imports the pure one (a checkout on
    its path shadowing the install): refused, naming the option to change it."""
    answers = [worker("/opt/compiled/bin/python", build="compiled", worker="h:1")]
    answers.append(worker("/opt/compiled/bin/python", build="pure", worker="h:2"))
    session = FakeSession(answers)
    with pytest.raises(ExecutorEnvironmentError, match="with the pure build") as info:
        check_executors(session, expected("compiled"))  # type: ignore[arg-type]
    assert "not the compiled build selected" in str(info.value)
    assert "--executor-python driver" in str(info.value)
    both = FakeSession([worker("/opt/compiled/bin/python", build="compiled")])
    assert check_executors(both, expected("compiled"))  # type: ignore[arg-type]


def test_executors_on_other_sources_than_the_driver_stop_the_run() -> None:
    """A worker whose kpurgatory was built from other sources (a stale compiled venv)."""
    session = FakeSession([worker("/opt/compiled/bin/python", build="compiled", digest="0" * 64)])
    with pytest.raises(ExecutorEnvironmentError, match="other sources than the driver's"):
        check_executors(session, expected("compiled"))  # type: ignore[arg-type]


def test_executors_that_cannot_import_kpurgatory_are_refused() -> None:
    session = FakeSession([worker("/opt/python", error="cannot import kpurgatory: boom")])
    with pytest.raises(ExecutorEnvironmentError, match="/opt/python lacks kpurgatory"):
        check_executors(session)  # type: ignore[arg-type]


MASTER = "local-cluster[2,1,1024]"


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None,
    reason="needs the pipeline extra",
)
@pytest.mark.parametrize("executor_python", ["driver", "auto"])
def test_local_cluster_run_of_a_tiny_grid(tmp_path: Path, executor_python: str) -> None:
    """``pipeline run --master 'local-cluster[2,1,1024]'`` on one tiny stream, with
    PYSPARK_PYTHON unset: exit 0, no differences, and every Python worker replayed with
    the build selected (about 2 minutes each on 2 cores: slow).

    ``driver``: the executors run this interpreter on the package zip the driver ships
    (the cluster path). ``auto``: the checkout's compiled build, installed in its own
    venv, with no zip shipped (skipped when there is none: then auto is ``driver``).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    selected = select(executor_python, MASTER, environ=env)
    if executor_python == "auto" and selected.build != "compiled":
        pytest.skip(f"no compiled build to select: {selected.message}")
    done = subprocess.run(
        [
            sys.executable, "-m", "kpurgatory", "pipeline", "run",
            "--master", MASTER, "--grid", "small", "--executor-python", executor_python,
            "--scenario", "produce_acks_all", "--preset", "tiny", "--ops", "20",
            "--out", str(tmp_path / "out"), "--quiet",
        ],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"master {MASTER}" in done.stdout
    assert "no differences" in done.stdout
    assert selected.message in done.stdout
    facts = json.loads((tmp_path / "out" / "run.json").read_text())
    workers = facts["executors"]["workers"]
    assert workers and {w["build"] for w in workers} == {selected.build}
    probes = facts["executors"]["probes"]
    assert probes and {p["executable"] for p in probes} == {selected.executable}
    shipped = {p["kpurgatory_path"].endswith("kpurgatory.zip/kpurgatory") for p in probes}
    assert shipped == {executor_python == "driver"}
