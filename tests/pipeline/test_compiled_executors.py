"""A real compiled build in the executors, run from the checkout (where it is easiest to get wrong).

Spark starts its Python workers as ``python -m pyspark.daemon`` in the driver's working
directory with the driver's ``PYTHONPATH``: from a checkout's root, or with the checkout
on ``PYTHONPATH``, a compiled interpreter's workers would import the checkout's *pure*
sources and the run would measure the wrong build. These tests start the compiled build
that ``--executor-python auto`` selects (``build/compiled/venv``, from ``make run`` or
``make compiled-venv`` plus pyarrow and pandas) exactly that way, and check that it
still imports its compiled install. They skip when there is no such build (a fresh
clone before ``make run``, or the compiled CI job, whose driver already is compiled).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpurgatory.pipeline.executor_python import ExecutorPython, select

ROOT = Path(__file__).resolve().parents[2]


def checkout_env() -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH and PYSPARK_PYTHON unset."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def compiled_executors(master: str = "local[2]") -> ExecutorPython:
    """What auto selects here; skips unless that is a compiled interpreter of its own."""
    selected = select("auto", master, environ=checkout_env())
    if selected.build != "compiled" or selected.executable == sys.executable:
        pytest.skip(f"no separate compiled build to select: {selected.message}")
    return selected


def test_workers_of_the_compiled_build_import_it_from_the_checkout() -> None:
    """A worker started like Spark's (``-m``, cwd = the checkout, checkout on PYTHONPATH)
    with the worker environment auto selected imports the compiled install; without that
    environment it would import the checkout's pure sources (the trap, shown too)."""
    selected = compiled_executors()
    command = [selected.executable, "-m", "kpurgatory.pipeline.builds"]
    trapped = subprocess.run(
        command, cwd=ROOT, env=checkout_env(), capture_output=True, text=True, check=True
    )
    assert json.loads(trapped.stdout)["build"] == "pure"  # the checkout shadows the install
    env = checkout_env()
    env["PYTHONSAFEPATH"] = selected.worker_env["PYTHONSAFEPATH"]
    env["PYTHONPATH"] = os.pathsep.join([selected.worker_env["PYTHONPATH"], env["PYTHONPATH"]])
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    assert found["build"] == "compiled" and found["digest"] == selected.digest
    assert found["kpurgatory_path"].startswith(selected.worker_env["PYTHONPATH"])


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None,
    reason="needs the pipeline extra",
)
def test_pipeline_run_from_the_checkout_replays_with_the_compiled_build(tmp_path: Path) -> None:
    """``pipeline run`` (auto) from the checkout's root: every stream is replayed by the
    compiled build, as the run prints and run.json records (about a minute: slow)."""
    selected = compiled_executors()
    done = subprocess.run(
        [
            sys.executable, "-m", "kpurgatory", "pipeline", "run", "--master", "local[2]",
            "--grid", "small", "--scenario", "join_group", "--preset", "tiny", "--ops", "20",
            "--out", str(tmp_path / "out"), "--quiet",
        ],
        cwd=ROOT, env=checkout_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert selected.message in done.stdout
    assert "replayed by the compiled build (" in done.stdout
    facts = json.loads((tmp_path / "out" / "run.json").read_text())
    assert {w["build"] for w in facts["executors"]["workers"]} == {"compiled"}
    assert sum(w["streams"] for w in facts["executors"]["workers"]) == facts["streams"] == 1
