"""``kpurgatory bench``: one quick run end to end, what it writes, its errors, --compare-to.

The quick run measures for about 30 s of real time (over two minutes on a loaded
machine), so the two tests that read it run under ``slow``; the usage errors stay quick.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from kpurgatory.cli import main
from kpurgatory.pipeline.builds import optimized_build


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One quick run with --out and --report (about 30 s); its charts need matplotlib."""
    pytest.importorskip("matplotlib", reason="the bench extra's matplotlib is not installed")
    out = tmp_path_factory.mktemp("perf")
    assert main(["bench", "--quick", "--out", str(out), "--report", str(out / "page.md")]) == 0
    return out


@pytest.mark.slow
@pytest.mark.realtime
def test_quick_run_writes_results_charts_and_page(
    quick_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """results.json holds this build's pyperf suite and sweep; PNG charts; the page has
    every question's table, filled, and no issue numbers."""
    results = json.loads((quick_run / "results.json").read_text(encoding="utf-8"))
    assert results["mode"] == "quick" and list(results["builds"]) == [optimized_build()]
    benchmarks = results["builds"][optimized_build()]["suite"]["benchmarks"]
    names = {b["metadata"]["name"] for b in benchmarks}
    assert len(names) == 6 + 6 + 6 + 3 + 8
    for png in ("lifecycle.png", "enqueue-high-timeout.png"):
        assert (quick_run / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (quick_run / "page.md").read_text(encoding="utf-8")
    assert page.count("\n### ") == 9 and "Not measured in this run." not in page
    waits = results["builds"][optimized_build()]["asyncio"]["rows"]
    assert {row["what"] for row in waits} == {"memory", "lag", "pause"}
    assert not [row for row in waits if "error" in row]
    assert results["command"] in page and results["commit"] in page
    assert not re.search(r"(?i)issue\s*#?\d", page)


@pytest.mark.slow
@pytest.mark.realtime
def test_compare_to_runs_pyperf_compare_to(
    quick_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run against itself: pyperf's comparison table, and the plateaus unchanged."""
    results = quick_run / "results.json"
    argv = ["bench", "--report-only", "--out", str(quick_run), "--compare-to", str(results)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{optimized_build()} build:" in out and "+0%" in out


def test_report_needs_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--report and --report-only without --out are usage errors (exit 2), nothing written."""
    monkeypatch.chdir(tmp_path)
    for argv in (["--report", "r.md"], ["--report-only"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", *argv])
        assert exit_info.value.code == 2
    assert list(tmp_path.iterdir()) == []


def test_missing_files_are_usage_errors_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--report-only without results.json and --compare-to a missing file exit 2 at once."""
    for argv, flag in (
        (["--report-only", "--out", str(tmp_path)], "--report-only"),
        (["--compare-to", str(tmp_path / "old.json")], "--compare-to"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", *argv])
        assert exit_info.value.code == 2 and flag in capsys.readouterr().err


def test_compiled_python_must_be_a_compiled_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """--compiled-python naming a pure interpreter stops the run with a clear message."""
    from kpurgatory.bench import cli

    def fake_build(python: str, mode: str) -> dict[str, str]:
        return {"build": "pure", "python": python}

    monkeypatch.setattr(cli, "run_build", fake_build)
    with pytest.raises(SystemExit, match="runs a pure build"):
        main(["bench", "--compiled-python", sys.executable + "-other"])


def test_help_speaks_of_questions_not_goals(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = capsys.readouterr().out
    assert "--compare-to" in text and "--reduced" in text
    assert "goal" not in text.lower() and not re.search(r"(?i)issue\s*\d", text)
