"""Tables, goals and the page: ratios with spread, trust marks, and the analysis quoting
only figures of the run the page was made from."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pyperf
import pytest

from kpurgatory.bench.report import ANALYSIS_END, ANALYSIS_START, goals, render
from kpurgatory.bench.tables import tables

PAGE = Path(__file__).resolve().parents[2] / "docs" / "performance.md"

FIGURES: dict[tuple[str, str, int], tuple[list[float], float]] = {
    ("add-cancel", "optimized", 1000): ([0.5e-6, 0.5e-6, 0.5e-6], 0.5),
    ("add-cancel", "bare-heap", 1000): ([1.0e-6, 1.0e-6, 1.0e-6], 0.5),
    ("add-cancel", "asyncio", 1000): ([2.0e-6, 2.0e-6, 2.0e-6], 0.5),
    ("lifecycle", "optimized", 100): ([1e-4, 1e-4, 1e-4], 3.0),
    ("lifecycle", "bare-heap", 100): ([2e-4, 3e-4, 4e-4], 0.5),
    ("memory", "optimized", 100): ([5000.0], 0.5),
    ("memory", "bare-heap", 100): ([10000.0], 0.5),
    ("long-poll", "aio", 10): ([4e-5, 4e-5], 0.5),
    ("long-poll", "plain", 10): ([3e-5, 3e-5], 0.5),
    ("long-poll", "harness", 10): ([1e-5, 1e-5], 0.5),
    **{
        ("asyncio-wait", f"{mechanism}|{outcome}", 100): ([cost * 1e-6] * 2, 0.5)
        for outcome in ("completed", "expired")
        for mechanism, cost in (
            ("future+call_at", 10.0),
            ("timeout_at", 12.0),
            ("aio wait", 12.0),
            ("aio submit", 8.0),
        )
    },
}

WAITS = [
    {"what": "memory", "mechanism": "future+call_at", "n": 100, "bytes": 1000.0, "objects": 10.0},
    {"what": "memory", "mechanism": "timeout_at", "n": 100, "bytes": 1200.0, "objects": 12.0},
    {"what": "memory", "mechanism": "aio wait", "n": 100, "bytes": 1050.0, "objects": 9.0},
    {"what": "memory", "mechanism": "aio submit", "n": 100, "bytes": 500.0, "objects": 4.0},
    *(
        {
            "what": "lag",
            "mechanism": mechanism,
            "n": 1000,
            "max_ms": 9.0,
            "load": 1.5,
            "max_cpu_between_beats_ms": stall,
        }
        for mechanism, stall in (("future+call_at", 8.0), ("timeout_at", 6.0), ("aio wait", 3.0))
    ),
    {"what": "pause", "mechanism": "future+call_at", "n": 50, "error": "too slow", "load": 1.0},
    {
        "what": "pause",
        "mechanism": "timeout_at",
        "n": 50,
        "max_ms": 2.0,
        "load": 1.0,
        "max_cpu_between_beats_ms": 1.0,
    },
    {
        "what": "pause",
        "mechanism": "aio wait",
        "n": 50,
        "max_ms": 2.0,
        "load": 1.0,
        "max_cpu_between_beats_ms": 1.0,
    },
]
"""An asyncio wait's memory and lag rows (aiocost.collect), one of them failed."""


def _suite() -> dict[str, Any]:
    benches = []
    for (question, design, size), (values, load) in FIGURES.items():
        metadata = {
            "name": f"{question} {design} {size}",
            "question": question,
            "design": design,
            "size": size,
            "load_avg_1min": load,
            "unit": "byte" if question == "memory" else "second",
        }
        benches.append(pyperf.Benchmark([pyperf.Run(values, metadata=metadata)]))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "suite.json"
        pyperf.BenchmarkSuite(benches).dump(str(path))
        return dict(json.loads(path.read_text(encoding="utf-8")))


def _results() -> dict[str, Any]:
    plateau = {"high-timeout": {"optimized": {"plateau": 40_000.0, "saturated": True}}}
    plateau["high-timeout"]["old"] = {"plateau": 5_000.0, "saturated": True}
    return {
        "command": "kpurgatory bench --quick",
        "mode": "quick",
        "commit": "abc1234",
        "date": "today",
        "machine": {"cpu": "cpu", "cores": 2, "python": "3.11"},
        "load_start": [0.1, 0.1, 0.1],
        "load_end": [0.2, 0.2, 0.2],
        "configuration": "tiny",
        "builds": {
            "pure": {
                "suite": _suite(),
                "enqueue": {"points": [], "plateau": plateau},
                "asyncio": {"mode": "quick", "rows": WAITS},
            }
        },
    }


def test_tables_give_ratios_with_spread_and_trust_marks() -> None:
    """Ratios of the means; spreads in quadrature; loaded and unsteady rows are marked."""
    add_cancel, lifecycle, memory, poll, proposal, *_ = tables(_results())
    assert add_cancel.rows[0][5:] == ("0.50 ± 0.00", "0.25 ± 0.00", "ok")
    row = lifecycle.rows[0]
    assert row[2:4] == ("1,000,000", "333,333") and row[4] == "3.00 ± 1.00"
    assert row[5] == "loaded (3.0 on 2 cores), unsteady (sd 33%)"
    assert memory.rows[0][2:] == ("50 B", "100 B", "0.50")
    assert poll.rows[0][4:8] == ("3.00 ± 0.00 us", "2.00 ± 0.00 us", "1.50 ± 0.00", "1.33 ± 0.00")
    assert proposal.rows[0][2:5] == ("40,000/s", "5,000/s", "8.00")


def test_goals_are_judged_on_this_runs_rows() -> None:
    """A goal met, one missed, one with no row in the run (no compiled build)."""
    results = _results()
    lines = goals(tables(results))
    assert "| pure | <= 0.6 | pure 1,000: 0.25 ± 0.00 | met |" in lines[2]
    assert "| compiled | <= 0.2 | n/a | not measured |" in lines[3]
    assert lines[7].endswith("| pure | <= 1.5 | pure: 1.33 ± 0.00 | met |")
    assert lines[9].endswith("| any | >= 5.0 | pure high-timeout: 8.00 | met |")
    plateau = results["builds"]["pure"]["enqueue"]["plateau"]["high-timeout"]
    plateau["old"]["plateau"] = 10_000.0
    assert goals(tables(results))[9].endswith("| pure high-timeout: 4.00 | NOT met |")


def test_asyncio_wait_tables_and_goals() -> None:
    """CPU ratios to both of asyncio's timers, memory ratios, the worst stalls against
    plain asyncio's; a failed mechanism is shown failed and its ratio is not made up."""
    cpu, memory, lag, pause = tables(_results())[5:]
    assert cpu.rows[0][:2] == ("pure", "completed")
    assert cpu.rows[0][6:9] == ("1.20 ± 0.00", "1.00 ± 0.00", "0.80 ± 0.00")
    assert memory.rows[0][1] == "100" and memory.rows[0][6:] == ("1.05", "0.90")
    assert lag.rows[0][1:] == (
        "1,000",
        "8.0 ms (9.0 ms)",
        "6.0 ms (9.0 ms)",
        "3.0 ms (9.0 ms)",
        "3.00",
        "0.50",
        "1.5",
    )
    assert pause.rows[0][2] == "failed: too slow" and pause.rows[0][6] == "n/a"
    lines = goals(tables(_results()))
    verdicts = {line.split(" | ")[0]: line.split(" | ")[-1] for line in lines[10:15]}
    assert verdicts == {
        "| An asyncio wait's CPU, aio wait / Future + call_at": "met |",
        "| An asyncio wait's CPU, aio wait / timeout_at": "not measured |",
        "| An asyncio wait's memory, aio wait / Future + call_at, bytes": "met |",
        "| Heartbeat lag with many, aio wait worst stall (ms)": "met |",
        "| Heartbeat lag with many, aio wait / plain asyncio, worst stall": "met |",
    }


def test_render_puts_the_analysis_between_markers() -> None:
    page = render(_results(), ["lifecycle.png"], "It reads 8.00.")
    start, end = page.index(ANALYSIS_START), page.index(ANALYSIS_END)
    assert "It reads 8.00." in page[start:end]
    assert "![lifecycle.png](perf/lifecycle.png)" in page


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d[\d,]*\.\d+|\d{1,3}(?:,\d{3})+|\d{3,}", text))


def test_analysis_quotes_only_figures_of_the_generated_page() -> None:
    """Every figure the hand-written analysis quotes appears in the generated part of
    docs/performance.md, unless its paragraph names the separate experiment it is from,
    or belongs to a topic whose opening paragraph (one starting with ``**``) does: the
    tables and paragraphs that follow it, up to the next such opening."""
    if not PAGE.exists():
        pytest.skip("docs/performance.md is not beside the tests")
    page = PAGE.read_text(encoding="utf-8")
    start, end = page.index(ANALYSIS_START), page.index(ANALYSIS_END)
    generated = page[:start] + page[end:]
    missing = []
    topic_is_separate = False
    for paragraph in page[start + len(ANALYSIS_START) : end].split("\n\n"):
        if paragraph.lstrip().startswith("**"):
            topic_is_separate = "separate experiment" in paragraph
        if topic_is_separate or "separate experiment" in paragraph:
            continue
        missing += [n for n in _numbers(paragraph) if n not in generated]
    assert missing == []


def test_page_names_no_issue_numbers() -> None:
    if not PAGE.exists():
        pytest.skip("docs/performance.md is not beside the tests")
    assert not re.search(r"(?i)\bissues?\s*#?\d", PAGE.read_text(encoding="utf-8"))
