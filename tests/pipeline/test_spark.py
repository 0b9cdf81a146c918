"""The Spark job on a local session: same rows as plain Python, diff detection, report."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.cli import build_parser
from kpurgatory.pipeline.builds import optimized_build
from kpurgatory.pipeline.cli import run_with
from kpurgatory.pipeline.replay import resolve_impl
from kpurgatory.pipeline.report import (
    builds_by_worker,
    builds_line,
    cpu_throughput,
    write_report,
)
from kpurgatory.pipeline.reproduce import replay
from kpurgatory.pipeline.rows import COLUMNS, replay_rows
from kpurgatory.pipeline.spark import (
    JavaMissingError,
    check_java,
    replay_dataframe,
    run_pipeline,
)
from kpurgatory.workloads import GridRow, grid

TINY = grid(["join_group", "fetch_long_poll", "adversarial"], ["tiny", "tick5"], (1,), 1, 25)
MUTANT = "tests.pipeline.mutants"
IGNORED = {"seconds", "cpu_seconds", "worker"}  # times and host:pid: not deterministic


def _normalise(row: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for name, _ in COLUMNS:
        value = None if name in IGNORED else row.get(name)
        if isinstance(value, float) and math.isnan(value):
            value = None
        out.append(value)
    return tuple(out)


def _local_rows(rows: list[GridRow], impl_b: str = "optimized") -> list[tuple[Any, ...]]:
    pair_a = ("reference", resolve_impl("reference"))
    pair_b = (impl_b, resolve_impl(impl_b))
    columns = replay_rows(
        [(r.scenario, r.preset, r.seed, r.shard, r.n_ops) for r in rows], pair_a, pair_b
    )
    names = [name for name, _ in COLUMNS]
    records = [
        dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)
    ]
    return sorted((_normalise(r) for r in records), key=repr)


def test_java_17_is_found() -> None:
    assert int(check_java().split(".")[0]) >= 17


@pytest.mark.parametrize("mode", ["arrow", "pandas", "rdd"])
def test_spark_rows_equal_plain_python_rows(spark: Any, mode: str) -> None:
    """Every output row of the replay stage equals the plain-Python path's, row for row."""
    frame = replay_dataframe(spark, TINY, mode=mode, partitions=3)
    got = sorted((_normalise(row.asDict()) for row in frame.collect()), key=repr)
    assert got == _local_rows(TINY)


def test_pipeline_reports_no_difference_and_writes_the_report(spark: Any, tmp_path: Path) -> None:
    result = run_pipeline(spark, TINY, out_dir=tmp_path)
    assert result.ok and result.counterexamples == []
    assert result.operations == sum(r.n_ops for r in TINY)
    assert result.model_mismatches == 0
    assert set(result.summary["scenario"]) == {"join_group", "fetch_long_poll", "adversarial"}
    assert (result.summary["expired_fraction"] >= 0).all()
    assert set(result.summary["builds"]) == {optimized_build()}  # which build replayed
    assert (tmp_path / "summary.parquet").exists() and (tmp_path / "streams.parquet").exists()
    report = write_report(result, tmp_path, title="t", context="c")
    assert "No differences" in report.read_text()
    for chart in ("expired.png", "lateness.png", "cascades_by_decile.png", "delay_queue.png"):
        assert (tmp_path / chart).stat().st_size > 1000
    assert (tmp_path / "report.html").exists()


def test_pipeline_catches_a_mutant_and_replay_reproduces_it(spark: Any) -> None:
    """R5 violated one tick late: the diff finds it with a seed `kpurgatory replay` repeats."""
    rows = grid(["fetch_long_poll", "long_timeouts"], ["kafka"], (1, 2), 1, 25)
    result = run_pipeline(spark, rows, impl_b=MUTANT)
    assert not result.ok
    assert result.counterexample_count >= len(result.counterexamples) > 0
    streams = {
        (r["scenario"], r["preset"], r["seed"], r["shard"], r["n_ops"])
        for r in result.counterexamples
    }
    assert any(r["op"] is not None for r in result.counterexamples)  # outcome join found it
    side = r"(completed|expired|missing)@(\d+|-) via \S+"
    for row in result.counterexamples:
        if row["op"] is not None:  # both sides read, side a first
            assert re.fullmatch(f"outcome {side} \\(expected\\) vs {side}", row["reason"]), row
    assert any(r["step"] is not None for r in result.counterexamples)  # step comparison too
    scenario, preset, seed, shard, n_ops = sorted(streams)[0]
    status, lines = replay(scenario, preset, seed, shard, n_ops, MUTANT, "reference")
    assert status == 1
    assert any(line.startswith("FIRST DIVERGENCE") for line in lines)
    diverged = [r for r in result.counterexamples if r["step"] is not None]
    assert any(f"step {r['step']}" in lines[1] for r in diverged if r["seed"] == seed)


def test_reference_against_itself_is_a_valid_pair(spark: Any) -> None:
    result = run_pipeline(spark, TINY[:2], impl_b="reference")
    assert result.ok and result.operations == 50


def test_missing_java_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", "/nonexistent/jdk")
    with pytest.raises(JavaMissingError, match="openjdk-17-jre-headless"):
        check_java()


def test_run_command_exits_1_prints_the_replay_command_and_records_the_build(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``pipeline run`` command end to end: a mutant gives exit 1 and a replay
    command; and for every Python worker, which build of kpurgatory.optimized replayed
    its streams (from the stream rows: what really ran) goes into report.md, run.json and
    streams.parquet, with the operations replayed and diffed per minute."""
    import pandas as pd

    args = ["pipeline", "run", "--grid", "small", "--scenario", "fetch_long_poll"]
    args += ["--preset", "kafka", "--ops", "30", "--impl-b", MUTANT, "--out", str(tmp_path)]
    assert run_with(build_parser().parse_args(args), spark) == 1
    out = capsys.readouterr().out
    assert "COUNTEREXAMPLE fetch_long_poll kafka seed 1 shard 0" in out
    command = next(line for line in out.splitlines() if "reproduce:" in line)
    assert "kpurgatory replay --scenario fetch_long_poll --preset kafka --seed 1" in command
    assert command.endswith(f"--impl {MUTANT} --against reference")
    printed = command.split("reproduce: ", 1)[1]
    report = (tmp_path / "report.md").read_text()
    assert f"`{printed}`" in report  # the report says the same
    assert f"report: {tmp_path.resolve() / 'report.md'}" in out
    assert (tmp_path / "counterexamples.parquet").exists()
    assert spark.sparkContext._jsc is not None  # the shared session was left running

    build = optimized_build()  # the shared session's executors run this interpreter
    facts = json.loads((tmp_path / "run.json").read_text())
    workers = facts["executors"]["workers"]
    assert {w["build"] for w in workers} == {build}
    assert sum(w["streams"] for w in workers) == facts["streams"] == 1
    assert sum(w["operations"] for w in workers) == facts["operations"] == 30
    assert facts["replayed_by"] == f"{build} build (1 Python worker, 1 stream)"
    assert facts["operations_per_minute"] > 0 and facts["wall_seconds"] > 0
    assert facts["replay_operations_per_cpu_minute"] > 0 and workers[0]["cpu_seconds"] > 0
    assert facts["counterexamples"] > 0 and facts["impl_b"] == MUTANT
    assert "## Executors: which build replayed" in report
    assert f"| {build} | {workers[0]['worker']} | 1 | 30 |" in report
    assert f"replayed by the {facts['replayed_by']}" in out
    assert f"{facts['operations_per_minute']:,} operations replayed" in out
    assert f"{facts['replay_operations_per_cpu_minute']:,} per CPU-minute" in out
    streams = pd.read_parquet(tmp_path / "streams.parquet")
    assert list(streams["build"]) == [build] and list(streams["worker"]) == [workers[0]["worker"]]


def test_builds_by_worker_groups_streams_per_worker_and_build() -> None:
    """Per worker: build, streams, operations, replay wall and CPU seconds; a mixed run
    says so."""
    import pandas as pd

    table = pd.DataFrame(
        {
            "build": ["compiled", "compiled", "pure", "compiled"],
            "worker": ["h:2", "h:1", "h:3", "h:2"],
            "ops": [10, 20, 30, 40],
            "seconds": [1.0, 2.0, 3.0, 4.0],
            "cpu_seconds": [0.5, 1.0, 1.5, 2.0],
        }
    )
    workers = builds_by_worker(table)
    assert [(w["build"], w["worker"], w["streams"], w["operations"]) for w in workers] == [
        ("compiled", "h:1", 1, 20),
        ("compiled", "h:2", 2, 50),
        ("pure", "h:3", 1, 30),
    ]
    assert [(w["replay_seconds"], w["cpu_seconds"]) for w in workers] == [
        (2.0, 1.0),
        (5.0, 2.5),
        (3.0, 1.5),
    ]
    assert cpu_throughput(workers) == 100 / 5.0 * 60  # operations per CPU-minute
    assert builds_line(workers) == (
        "compiled build (2 Python workers, 3 streams) and pure build (1 Python worker, 1 stream)"
    )
    assert builds_by_worker(table.drop(columns=["build"])) == []
