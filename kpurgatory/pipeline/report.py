"""The report: Markdown and HTML pages with PNG charts, from the pipeline's aggregates.

Charts (matplotlib, Agg backend, no display needed):

- ``expired.png``: the share of operations that expired, per scenario and preset;
- ``lateness.png``: virtual lateness of expired operations (at_ms - deadline: negative
  means up to tick - 1 ms early, which R1 allows; positive means the drain came late);
- ``cascades_by_decile.png``: cascades per operation by deadline decile (R1's wheel
  levels at work: long deadlines cascade more, tiny wheels far more);
- ``delay_queue.png``: delay-queue operations (offers + polls) and their log2 cost per
  request, for Kafka's queue of buckets versus a heap of requests (the Purgatory
  Redesign Proposal's argument, as numbers).

Beside the pages, ``run.json`` keeps the run's facts for tools: grid, master, wall
time, operations replayed and diffed per minute, stage times, and which interpreter the
executors were given and which build of ``kpurgatory.optimized`` each Python worker
replayed with (``builds_by_worker``, from the stream rows: what really ran).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from kpurgatory.pipeline.spark import PipelineResult

__all__ = [
    "builds_by_worker",
    "builds_line",
    "cpu_throughput",
    "replay_command",
    "write_report",
    "write_run_json",
]

_SUMMARY_COLUMNS = (
    ("scenario", "scenario"),
    ("preset", "preset"),
    ("ops", "ops"),
    ("expired_fraction", "expired"),
    ("completed_fraction", "completed early"),
    ("lateness_p50_ms", "lateness p50 (ms)"),
    ("lateness_p99_ms", "lateness p99 (ms)"),
    ("cascades_per_op", "cascades / op"),
    ("bucket_queue_ops_per_request", "bucket queue ops / req"),
    ("heap_ops_per_request", "heap ops / req"),
    ("bucket_queue_cost_per_request", "bucket queue log2 cost / req"),
    ("heap_cost_per_request", "heap log2 cost / req"),
    ("peak_bucket_queue", "peak buckets queued"),
    ("peak_heap", "peak heap size"),
    ("peak_pending", "peak pending"),
    ("peak_watched", "peak watched"),
    ("purges", "purges"),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def _table_rows(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [label for _, label in _SUMMARY_COLUMNS]
    rows = [
        [_fmt(record.get(name)) for name, _ in _SUMMARY_COLUMNS]
        for record in summary.to_dict("records")
    ]
    return headers, rows


def _charts(result: PipelineResult, out: Path) -> list[tuple[str, str]]:
    """Draw the report's PNG charts into ``out``; (file name, caption) of each."""
    import matplotlib

    matplotlib.use("Agg")
    cells = _Cells(result.summary)
    return [
        _grouped_bars(
            cells,
            out,
            "expired_fraction",
            "Expired fraction",
            "fraction of operations",
            "expired.png",
        ),
        _grouped_bars(
            cells,
            out,
            "lateness_p99_ms",
            "Virtual lateness of expired operations, p99 (at_ms - deadline)",
            "ms",
            "lateness.png",
        ),
        _cascades_chart(cells, result.deciles, out),
        _delay_queue_chart(cells, out),
    ]


class _Cells:
    """The summary table by scenario and preset: the charts' grid of cells."""

    def __init__(self, summary: pd.DataFrame) -> None:
        self.summary = summary
        self.scenarios = sorted(summary["scenario"].unique())
        self.presets = sorted(summary["preset"].unique())

    def cell(self, column: str, scenario: str, preset: str) -> float:
        """``column`` summed over the rows of ``scenario`` and ``preset``."""
        summary = self.summary
        return float(
            summary[(summary.scenario == scenario) & (summary.preset == preset)][column].sum()
        )


def _grouped_bars(
    cells: _Cells, out: Path, column: str, title: str, ylabel: str, name: str
) -> tuple[str, str]:
    """A bar per scenario and preset of ``column``, grouped by scenario."""
    import matplotlib.pyplot as plt

    scenarios, presets = cells.scenarios, cells.presets
    width = 0.8 / max(1, len(presets))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for offset, preset in enumerate(presets):
        values = [cells.cell(column, s, preset) for s in scenarios]
        ax.bar([i + offset * width for i in range(len(scenarios))], values, width, label=preset)
    ax.set_xticks([i + width * (len(presets) - 1) / 2 for i in range(len(scenarios))])
    ax.set_xticklabels(scenarios, rotation=15)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    plt.close(fig)
    return name, title


def _cascades_chart(cells: _Cells, deciles: pd.DataFrame, out: Path) -> tuple[str, str]:
    """Cascades per operation by deadline decile, a panel per scenario."""
    import matplotlib.pyplot as plt

    scenarios = cells.scenarios
    fig, axes = plt.subplots(2, (len(scenarios) + 1) // 2, figsize=(13, 7), squeeze=False)
    for ax, scenario in zip(axes.flat, scenarios, strict=False):
        for preset in cells.presets:
            part = deciles[(deciles.scenario == scenario) & (deciles.preset == preset)]
            ax.plot(part["decile"], part["cascades_per_op"], marker="o", label=preset)
        ax.set_title(scenario, fontsize="medium")
        ax.set_xlabel("deadline decile")
        ax.set_ylabel("cascades / op")
    axes.flat[0].legend(fontsize="small")
    fig.suptitle("Cascades per operation by deadline decile")
    fig.tight_layout()
    fig.savefig(out / "cascades_by_decile.png", dpi=100)
    plt.close(fig)
    return "cascades_by_decile.png", "Cascades per operation by deadline decile"


def _delay_queue_chart(cells: _Cells, out: Path) -> tuple[str, str]:
    """Delay-queue work per request: Kafka's bucket queue against a heap of requests."""
    import matplotlib.pyplot as plt

    pairs = [(s, p) for s in cells.scenarios for p in cells.presets]
    labels = [f"{s}\n{p}" for s, p in pairs]
    x = range(len(labels))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    for ax, (bucket_col, heap_col, title) in (
        (left, ("bucket_queue_ops_per_request", "heap_ops_per_request", "queue ops / request")),
        (right, ("bucket_queue_cost_per_request", "heap_cost_per_request", "log2 cost / request")),
    ):
        bucket = [cells.cell(bucket_col, s, p) for s, p in pairs]
        heap = [cells.cell(heap_col, s, p) for s, p in pairs]
        ax.bar([i - 0.2 for i in x], bucket, 0.4, label="bucket queue (Kafka wheel)")
        ax.bar([i + 0.2 for i in x], heap, 0.4, label="heap of requests")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=90, fontsize="x-small")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize="small")
    fig.suptitle("Delay-queue work per request: bucket queue vs per-request heap")
    fig.tight_layout()
    fig.savefig(out / "delay_queue.png", dpi=100)
    plt.close(fig)
    return "delay_queue.png", "Delay-queue work per request"


def builds_by_worker(stream_table: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per Python worker that replayed streams: its ``build`` of
    ``kpurgatory.optimized``, ``worker`` (host:pid), ``streams``, ``operations``, and the
    summed ``replay_seconds`` (wall) and ``cpu_seconds``; sorted by build and worker.
    Empty for a table without them."""
    if not len(stream_table) or not {"build", "worker"} <= set(stream_table.columns):
        return []
    table = stream_table.fillna({"build": "unknown", "worker": "unknown"})
    if "cpu_seconds" not in table.columns:
        table = table.assign(cpu_seconds=float("nan"))
    grouped = (
        table.groupby(["build", "worker"])
        .agg(
            streams=("ops", "size"),
            operations=("ops", "sum"),
            replay_seconds=("seconds", "sum"),
            cpu_seconds=("cpu_seconds", "sum"),
        )
        .reset_index()
        .sort_values(["build", "worker"])
    )
    return [
        {
            "build": str(record["build"]),
            "worker": str(record["worker"]),
            "streams": int(record["streams"]),
            "operations": int(record["operations"]),
            "replay_seconds": round(float(record["replay_seconds"]), 3),
            "cpu_seconds": round(float(record["cpu_seconds"]), 3),
        }
        for record in grouped.to_dict("records")
    ]


def cpu_throughput(workers: Sequence[Mapping[str, Any]]) -> float | None:
    """Operations replayed (on both implementations) per CPU-minute of the Python
    workers, from ``builds_by_worker``; None without CPU times. Unlike the wall-clock
    rate, other processes on the machine barely move it (shared caches aside)."""
    cpu = sum(float(w.get("cpu_seconds") or 0.0) for w in workers)
    operations = sum(int(w["operations"]) for w in workers)
    return operations / cpu * 60 if cpu > 0 else None


def builds_line(workers: Sequence[Mapping[str, Any]]) -> str:
    """``workers`` (``builds_by_worker``) in a few words, e.g. "compiled build (2 Python
    workers, 504 streams)"; builds joined with "and" when a run mixed them."""
    if not workers:
        return "unknown build (no stream rows)"
    parts = []
    for build in sorted({str(w["build"]) for w in workers}):
        mine = [w for w in workers if w["build"] == build]
        count, streams = len(mine), sum(int(w["streams"]) for w in mine)
        parts.append(
            f"{build} build ({count} Python worker{'s' if count != 1 else ''}, "
            f"{streams} stream{'s' if streams != 1 else ''})"
        )
    return " and ".join(parts)


def write_run_json(out: Path, facts: Mapping[str, Any]) -> Path:
    """Write ``facts`` (JSON-ready) as ``out/run.json``; returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "run.json"
    path.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _executor_lines(executors: Mapping[str, Any]) -> list[str]:
    """The report's "Executors" section: what was selected, and what each worker ran."""
    lines = ["## Executors: which build replayed", ""]
    selected = executors.get("selected")
    if selected:
        lines += [f"Selected before the run: {selected['message']}.", ""]
    workers = executors.get("workers") or []
    lines += [f"Replayed by the {builds_line(workers)}.", ""]
    if workers:
        lines += [
            "| build of kpurgatory.optimized | Python worker (host:pid) | streams | "
            "operations | replay s (wall) | replay CPU s |",
            "|---|---|---|---|---|---|",
            *(
                f"| {w['build']} | {w['worker']} | {w['streams']} | {w['operations']:,} | "
                f"{w['replay_seconds']:.1f} | {w['cpu_seconds']:.1f} |"
                for w in workers
            ),
            "",
        ]
    return lines


def replay_command(row: Mapping[str, Any], impl_a: str, impl_b: str) -> str:
    """The ``kpurgatory replay`` command that repeats a counterexample ``row`` of a run
    that checked ``impl_b`` against ``impl_a`` (printed by ``pipeline run`` and written
    into the report, so both give the same command)."""
    return (
        f"kpurgatory replay --scenario {row['scenario']} --preset {row['preset']} "
        f"--seed {row['seed']} --shard {row['shard']} --ops {row['n_ops']} "
        f"--impl {impl_b} --against {impl_a}"
    )


def write_report(
    result: PipelineResult,
    out: Path,
    *,
    title: str,
    context: str,
    impl_a: str = "reference",
    impl_b: str = "optimized",
    executors: Mapping[str, Any] | None = None,
    sections: Sequence[str] = (),
    commands: Mapping[tuple[Any, ...], str] | None = None,
) -> Path:
    """Write ``report.md``, ``report.html`` and the PNG charts into ``out``; returns the .md.

    ``sections``: lines printed after the verdict (a port's summary); ``commands``: the
    command reproducing a counterexample, by (scenario, preset, seed, shard), instead
    of ``replay_command`` (a port's ``kpurgatory conformance --replay``).

    ``impl_a``/``impl_b``: the pair the run compared (for the counterexamples' replay
    commands). ``executors``: ``selected`` (``ExecutorPython.as_dict()``) and ``workers``
    (``builds_by_worker``) for the "Executors" section; by default the workers come from
    ``result.stream_table``."""
    out.mkdir(parents=True, exist_ok=True)
    if executors is None:
        executors = {"workers": builds_by_worker(result.stream_table)}
    charts = _charts(result, out)
    table = _table_rows(result.summary)
    lines = [
        *_markdown_head(result, title, context, sections, executors, table),
        *_counterexample_lines(result, impl_a, impl_b, commands or {}),
        "## Charts",
        "",
    ]
    for name, caption in charts:
        lines += [f"### {caption}", "", f"![{caption}]({name})", ""]
    markdown = out / "report.md"
    markdown.write_text("\n".join(lines), encoding="utf-8")
    (out / "report.html").write_text(
        _html_page(result, title, context, executors, table, charts), encoding="utf-8"
    )
    return markdown


def _markdown_head(
    result: PipelineResult,
    title: str,
    context: str,
    sections: Sequence[str],
    executors: Mapping[str, Any],
    table: tuple[list[str], list[list[str]]],
) -> list[str]:
    """report.md up to its counterexamples: figures, verdict, sections, executors, summary."""
    headers, rows = table
    verdict = (
        "**No differences**: every operation had the same outcome, at the same virtual "
        "time, by the same call, and every step's observation agreed."
        if result.ok
        else f"**{result.counterexample_count} counterexample(s)** (see below)."
    )
    return [
        f"# {title}",
        "",
        context,
        "",
        f"- streams: {result.streams}; operations replayed per implementation: "
        f"{result.operations:,}",
        f"- cost-model mismatches (should be 0): {result.model_mismatches}",
        "- stage times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in result.stage_seconds.items()),
        "",
        verdict,
        "",
        *sections,
        *([""] if sections else []),
        *_executor_lines(executors),
        "## Summary per scenario and preset",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


def _counterexample_lines(
    result: PipelineResult,
    impl_a: str,
    impl_b: str,
    commands: Mapping[tuple[Any, ...], str],
) -> list[str]:
    """report.md's counterexamples section (the first 50), each with the command that
    reproduces it; no lines when there are none."""
    if not result.counterexamples:
        return []
    lines = ["## Counterexamples (first ones)", ""]
    for row in result.counterexamples[:50]:
        key = (row["scenario"], row["preset"], row["seed"], row["shard"])
        command = commands.get(key) or replay_command(row, impl_a, impl_b)
        lines.append(
            f"- `{row['scenario']}` `{row['preset']}` seed {row['seed']} shard "
            f"{row['shard']}: {row['reason']}  \n  reproduce: `{command}`"
        )
    return [*lines, ""]


def _html_page(
    result: PipelineResult,
    title: str,
    context: str,
    executors: Mapping[str, Any],
    table: tuple[list[str], list[list[str]]],
    charts: Sequence[tuple[str, str]],
) -> str:
    """report.html: the same figures, summary table, counterexamples and charts."""
    headers, rows = table
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(context)}</p>",
        f"<p>streams: {result.streams}; operations per implementation: {result.operations:,};"
        f" counterexamples: {result.counterexample_count}; cost-model mismatches: "
        f"{result.model_mismatches}</p>",
        *(
            f"<p>{html.escape(line)}</p>"
            for line in _executor_lines(executors)[2:]
            if line and not line.startswith("|")
        ),
        "<table border=1 cellspacing=0 cellpadding=3><tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        + "</tr>",
        *("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows),
        "</table>",
    ]
    for row in result.counterexamples[:50]:
        body.append(f"<p>{html.escape(str(row))}</p>")
    for name, caption in charts:
        body.append(
            f"<h3>{html.escape(caption)}</h3><img src='{name}' alt='{html.escape(caption)}'>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        + html.escape(title)
        + "</title></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
