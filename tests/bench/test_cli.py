"""``kpurgatory bench``: the quick smoke run, what it writes (only under --out), its help."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.bench import cli as bench_cli
from kpurgatory.bench.cli import _progress
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


def test_bench_rejects_unknown_benchmark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--only names must be benchmarks (a typo must not silently skip everything): exit 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--quick", "--only", "enqeue", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "unknown benchmark" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--report", "r.md"], ["--report-only"]])
def test_bench_report_needs_out(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--report and --report-only without --out are usage errors (exit 2), nothing written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *argv])
    assert exit_info.value.code == 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.realtime
def test_bench_defaults_to_quick_and_writes_nothing_without_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kpurgatory bench`` alone: the quick run, nothing written in the current folder,
    goal lines that say the capped run is not a measurement (never "met"/"NOT met"); a
    missing pyinstrument skips profiling with a note instead of a traceback."""
    monkeypatch.chdir(tmp_path)
    real_find_spec = importlib.util.find_spec

    def without_pyinstrument(name: str, *args: Any) -> Any:
        return None if name == "pyinstrument" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_pyinstrument)
    assert main(["bench", "--plain", "--only", "idle,profile"]) == 0
    out = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    assert "nothing written" in out
    assert "pyinstrument is not installed: the profile benchmark is skipped" in out
    goal_lines = [line for line in out.splitlines() if line.startswith("goal ")]
    assert goal_lines
    for line in goal_lines:
        assert "not a measurement (quick run" in line and "met" not in line


def test_bench_progress_lines_name_no_source_location(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The rich progress lines carry the elapsed time and the text, no ``cli.py:62``."""
    pytest.importorskip("rich")
    with _progress(plain=False) as say:
        say("enqueue high optimized")
    err = capsys.readouterr().err
    assert "enqueue high optimized" in err
    assert "cli.py" not in err and ".py:" not in err


def test_bench_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    """bench --help: no RST markup, no hidden flag, a help text for every option."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and "json-only" not in text
    assert "--quick" in text and "(default)" in text and "--out DIR" in text


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
