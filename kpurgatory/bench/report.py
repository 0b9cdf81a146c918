"""docs/performance.md and its charts, made from one run's results.json only.

The page holds what the CLI prints (a table per question) plus what belongs to the
project rather than to a user's question: the goals it holds itself to, judged on this
run, and a hand-written analysis (``analysis.md`` in the results folder) included
verbatim between markers, so a test can check that it quotes only this run's figures.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kpurgatory.bench.tables import Table, markdown, tables

__all__ = ["ANALYSIS_END", "ANALYSIS_START", "goals", "render", "write_charts"]

ANALYSIS_START, ANALYSIS_END = "<!-- analysis -->", "<!-- /analysis -->"

_RATIO = re.compile(r"^(\d+\.\d+)")

# A table: its rows share a shape deliberately (one goal a row).
GOALS: tuple[tuple[str, str, str, str, float, bool], ...] = (
    ("Timer add+cancel", "optimized / asyncio", "pure", "<=", 0.6, False),
    ("Timer add+cancel", "optimized / asyncio", "compiled", "<=", 0.2, False),
    ("Full lifecycle", "optimized / bare heap", "pure", ">=", 1.5, True),
    ("Full lifecycle", "optimized / bare heap", "compiled", ">=", 3.0, True),
    ("Memory per pending task", "optimized / bare heap", "any", "<=", 0.6, True),
    ("Long-poll", "aio / plain, total", "pure", "<=", 1.5, False),
    ("Long-poll", "aio / plain, total", "compiled", "<=", 1.0, False),
    ("The proposal", "optimized / old", "any", ">=", 5.0, False),
    ("An asyncio wait's CPU", "aio wait / Future + call_at", "pure", "<=", 1.3, False),
    ("An asyncio wait's CPU", "aio wait / timeout_at", "compiled", "<=", 1.0, False),
    ("An asyncio wait's memory", "aio wait / Future + call_at, bytes", "any", "<=", 1.1, False),
    ("Heartbeat lag with many", "aio wait worst stall (ms)", "any", "<=", 5.0, True),
    ("Heartbeat lag with many", "aio wait / plain asyncio, worst stall", "any", "<=", 1.0, True),
)
"""(table, column, build, comparison, bound, at the largest size only): the project's
goals, each judged on every matching row of this run (the proposal measured about 4.2
for optimized / old on the JVM)."""


def goals(answers: list[Table]) -> list[str]:
    """Markdown lines: each goal, the ratios of this run it is judged on, met or not."""
    lines = ["| goal | build | target | this run | verdict |", "|---|---|---|---|---|"]
    for title, column, build, op, bound, largest_only in GOALS:
        table = next(t for t in answers if t.title.startswith(title))
        index = table.header.index(column)
        rows = [row for row in table.rows if build in ("any", row[0])]
        if largest_only:
            for name in {row[0] for row in rows}:
                largest = max(int(row[1].replace(",", "")) for row in rows if row[0] == name)
                rows = [r for r in rows if r[0] != name or int(r[1].replace(",", "")) == largest]
        values = [float(m.group(1)) for row in rows if (m := _RATIO.match(row[index]))]
        met = all(v <= bound if op == "<=" else v >= bound for v in values)
        verdict = "not measured" if not values else "met" if met else "NOT met"
        sized = table.header[1] in ("pending", "tasks", "case", "outcome")
        shown = "; ".join(f"{row[0]}{' ' + row[1] if sized else ''}: {row[index]}" for row in rows)
        where = " at the largest size" if largest_only else ""
        lines.append(
            f"| {title}, {column} | {build} | {op} {bound}{where} | {shown or 'n/a'} | {verdict} |"
        )
    return [*lines, ""]


def _chart(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kpurgatory.bench.tables import figures

    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for build, data in results["builds"].items():
        got = figures(data["suite"])
        for design in ("optimized", "bare-heap"):
            sizes = sorted(n for q, d, n in got if q == "lifecycle" and d == design)
            rates = [n / got[("lifecycle", design, n)].mean for n in sizes]
            ax.plot(sizes, rates, marker="o", label=f"{design} ({build})")
    ax.set(xscale="log", xlabel="tasks", ylabel="tasks per CPU second", title="Full lifecycle")
    paths.append(_finish(fig, ax, out / "lifecycle.png"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    top = 0.0
    for build, data in results["builds"].items():
        points = [
            p for p in data.get("enqueue", {}).get("points", []) if p["case"] == "high-timeout"
        ]
        for design in ("optimized", "old"):
            mine = sorted(
                (p for p in points if p["design"] == design), key=lambda p: p["target_rate"]
            )
            xs = [p["target_rate"] for p in mine]
            top = max([top, *xs])
            ax.plot(xs, [p["achieved_rate"] for p in mine], marker="o", label=f"{design} ({build})")
    ax.plot([0, top], [0, top], color="grey", linestyle=":", label="target")
    ax.set(xlabel="target rate (requests/s)", ylabel="achieved rate (requests/s)")
    ax.set_title("Enqueue benchmark, high-timeout case")
    paths.append(_finish(fig, ax, out / "enqueue-high-timeout.png"))
    return paths


def _finish(fig: Any, ax: Any, path: Path) -> Path:
    """Grid, legend and layout for a chart, saved to ``path`` and closed; returns ``path``."""
    import matplotlib.pyplot as plt

    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_charts(results: dict[str, Any], out: Path) -> list[Path]:
    """The lifecycle and enqueue charts in ``out``; none (and no error) without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return []
    return _chart(results, out)


def render(results: dict[str, Any], charts: list[str], analysis: str | None) -> str:
    """The page: provenance, goals, the analysis, every table, the charts, the method."""
    machine = results["machine"]
    answers = tables(results)
    lines = [
        "# Performance",
        "",
        "<!-- Generated by `kpurgatory bench` from docs/perf/results.json: edit "
        "docs/perf/analysis.md and run `kpurgatory bench --report-only --out docs/perf "
        "--report docs/performance.md`, or re-run the benchmarks. -->",
        "",
        f"One run: `{results['command']}` ({results['mode']} mode), commit "
        f"{results['commit']}, {results['date']}; builds: {', '.join(results['builds'])}.",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}; "
        f"load average (1, 5, 15 min) {results['load_start']} at the start and "
        f"{results['load_end']} at the end of the run.",
        "",
        f"Configuration: {results['configuration']}",
        "",
        "## Goals",
        "",
        "What the project holds itself to, judged on this run's tables below.",
        "",
        *goals(answers),
    ]
    if analysis:
        lines += ["## Reading the results", "", ANALYSIS_START, analysis.strip(), ANALYSIS_END, ""]
    lines += ["## Results", ""]
    for table in answers:
        lines += markdown(table)
    lines += [f"![{name}](perf/{name})" for name in charts] + [""]
    lines += [
        "## Method",
        "",
        "pyperf runs the timer, lifecycle, long-poll and asyncio-wait CPU benchmarks: "
        "worker processes, warm-ups, calibrated loops, and the mean and standard deviation "
        "of the values; each value is process CPU time. Memory is pyperf's --tracemalloc "
        "peak. The enqueue sweep is custom code (a real clock and threads, see "
        "kpurgatory/bench/enqueue.py), and so are an asyncio wait's memory and heartbeat "
        "lags (kpurgatory/bench/aiocost.py, each in a fresh process). Each build runs "
        "everything in its own interpreter, one after the other; ratios divide figures "
        "of the same build. "
        "`kpurgatory bench --compare-to OLD.json` compares a run with an earlier one "
        "(pyperf compare_to: significant or not).",
        "",
    ]
    return "\n".join(lines)
