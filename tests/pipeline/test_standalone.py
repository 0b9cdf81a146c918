"""The pipeline on a real Spark standalone cluster: a master and two workers on 127.0.0.1.

Slow tier (``make pipeline-cluster``, run by .ci/run): ``standalone_cluster`` starts the
cluster from pyspark's own ``spark-class``; the job runs with ``--master
spark://127.0.0.1:PORT`` as a user would run it against their cluster (PYSPARK_PYTHON
names the executors' interpreter; the driver ships kpurgatory's sources). Checked: the
streams were replayed by Python workers of the cluster's executors (other processes
than the driver, importing the shipped sources); a port firing a tick late is found and
shrunk there too; and once the cluster is stopped none of its processes is left.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpurgatory.pipeline.standalone import Cluster, standalone_cluster, still_running

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None,
        reason="needs the pipeline extra",
    ),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the module; afterwards, no process it started may be alive."""
    started: dict[int, str] = {}
    with standalone_cluster(2, log_dir=tmp_path_factory.mktemp("standalone")) as running:
        yield running
        started = running.snapshot()
    assert len(started) >= 3  # the master and two workers at least
    alive = still_running(started)
    assert not alive, f"cluster processes left behind: {[started[pid] for pid in alive]}"


def pipeline(cluster: Cluster, out: Path, *argv: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``kpurgatory pipeline run`` against the cluster; the process and its output."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    process = subprocess.Popen(
        [
            sys.executable, "-m", "kpurgatory", "pipeline", "run", "--master",
            cluster.master_url, "--grid", "small", "--out", str(out), "--quiet", *argv,
        ],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    output, _ = process.communicate(timeout=900)
    return process, output


def test_executors_of_the_standalone_cluster_replay_the_grid(
    cluster: Cluster, tmp_path: Path
) -> None:
    process, output = pipeline(
        cluster, tmp_path, "--scenario", "produce_acks_all", "--scenario", "adversarial",
        "--preset", "tiny", "--ops", "40",
    )  # fmt: skip
    assert process.returncode == 0, output
    assert f"master {cluster.master_url}" in output and "no differences" in output
    facts = json.loads((tmp_path / "run.json").read_text())
    workers = facts["executors"]["workers"]
    pids = {int(worker["worker"].rsplit(":", 1)[1]) for worker in workers}
    assert pids and process.pid not in pids  # Python workers of the executors, not the driver
    assert sum(worker["streams"] for worker in workers) == 2
    probes = facts["executors"]["probes"]
    assert probes and all(
        p["kpurgatory_path"].endswith("kpurgatory.zip/kpurgatory") for p in probes
    )


def test_r5_a_late_port_is_found_and_shrunk_on_the_standalone_cluster(
    cluster: Cluster, tmp_path: Path
) -> None:
    adapter = f"{sys.executable} {ROOT / 'tests' / 'conformance' / 'broken_adapter.py'} --bug late"
    process, output = pipeline(
        cluster, tmp_path, "--adapter", adapter, "--scenario", "fetch_long_poll",
        "--preset", "kafka", "--ops", "60",
    )  # fmt: skip
    assert process.returncode == 1, output
    assert "- R5: 1 stream(s)" in output, output
    files = list((tmp_path / "counterexamples").glob("*.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) <= 8
    assert f"--replay {files[0]}" in output
