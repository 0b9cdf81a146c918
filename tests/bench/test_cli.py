"""``kpurgatory bench --quick``: the CI smoke run writes every artefact (no timing asserted)."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.bench import cli as bench_cli
from kpurgatory.bench.runner import BENCHMARKS
from kpurgatory.cli import main


@pytest.mark.realtime
def test_bench_quick_writes_results_plots_and_report(tmp_path: Path) -> None:
    """One quick run: results.json with every benchmark, PNG plots, profiles, the report;
    then --report-only regenerates the report from the JSON alone."""
    out = tmp_path / "perf"
    report = tmp_path / "performance.md"
    assert main(["bench", "--quick", "--plain", "--out", str(out), "--report", str(report)]) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["mode"] == "quick"
    assert results["command"].startswith("kpurgatory bench --quick --out ")
    (run,) = results["runs"]
    for name in BENCHMARKS:
        assert name in run
    designs = set(run["designs"])
    assert {p["design"] for p in run["enqueue"]["points"]} == designs
    for point in run["enqueue"]["points"]:
        assert point["enqueued"] == point["num"] and point["unfinished"] == 0
    assert {g["goal"] for g in results["goals"]}
    pngs = sorted(out.glob("*.png"))
    assert {p.name for p in pngs} >= {"enqueue-high-timeout.png", "scaling.png"}
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out.glob("profile-*.txt")) == [
        f"profile-{run['build']}-generator.txt",
        f"profile-{run['build']}-replay.txt",
    ]
    text = report.read_text(encoding="utf-8")
    assert (
        results["command"] in text and "## Goals" in text and "Purgatory Redesign Proposal" in text
    )
    report.unlink()
    assert (
        main(["bench", "--quick", "--report-only", "--out", str(out), "--report", str(report)]) == 0
    )
    assert "Issue 13" in report.read_text(encoding="utf-8")


def test_bench_rejects_unknown_benchmark(tmp_path: Path) -> None:
    """--only names must be benchmarks (a typo must not silently skip everything)."""
    with pytest.raises(SystemExit, match="unknown benchmark"):
        main(["bench", "--quick", "--only", "enqeue", "--out", str(tmp_path)])


def _fake_pass(
    monkeypatch: pytest.MonkeyPatch, build: str, seen: dict[str, object]
) -> argparse.Namespace:
    """Stand in for the compiled interpreter: record the env, write a run of ``build``."""

    def fake_run(command: list[str], **kwargs: Any) -> None:
        seen["env"] = kwargs["env"]
        out = Path(command[command.index("--json-only") + 1])
        out.write_text(json.dumps({"build": build}), encoding="utf-8")

    monkeypatch.setenv("PYTHONPATH", "/some/source/tree")
    monkeypatch.setattr(subprocess, "run", fake_run)
    return argparse.Namespace(mode="quick", seed=1, only=["versus"], designs=[])


def test_compiled_pass_drops_pythonpath_and_refuses_a_pure_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A source tree on PYTHONPATH would shadow the compiled install: the pass runs
    without it, and a pass that still ran pure code is an error, not a figure."""
    seen: dict[str, object] = {}
    args = _fake_pass(monkeypatch, "compiled", seen)
    data, texts = bench_cli._compiled_pass("python3", args, lambda text: None)
    assert data == {"build": "compiled"} and texts == {}
    env = seen["env"]
    assert isinstance(env, dict) and "PYTHONPATH" not in env
    args = _fake_pass(monkeypatch, "pure", seen)
    with pytest.raises(SystemExit, match="ran a pure build"):
        bench_cli._compiled_pass("python3", args, lambda text: None)
