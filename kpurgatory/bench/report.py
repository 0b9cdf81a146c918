"""docs/performance.md and the PNG plots, generated from the results JSON only.

``write_plots`` draws achieved-vs-target enqueue rate per case (the proposal's plot),
CPU against achieved rate, and per-operation timer cost against pending count.
``render`` turns the results (one or more runs, plus the goals) into markdown; an
optional hand-written analysis (docs/perf/analysis.md) is included verbatim, so the
reading of the profiles stays next to the numbers it explains.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kpurgatory.bench import aio

__all__ = ["render", "write_plots"]

DESIGN_ORDER = ("optimized", "heap", "old", "reference")


def _series_name(run: dict[str, Any], design: str) -> str:
    build = run.get("build", "pure")
    return f"{design} ({build})" if design == "optimized" else f"{design} [{build} run]"


def _by_design(rows: Sequence[dict[str, Any]], design: str, x: str) -> list[dict[str, Any]]:
    """The rows of ``design``, sorted by the field ``x`` (one plotted series)."""
    return sorted((row for row in rows if row["design"] == design), key=lambda row: row[x])


def _cpu_us_per_request(point: dict[str, Any]) -> float:
    return float(point["cpu_s"] * 1e6 / max(point["enqueued"], 1))


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _enqueue_plot(
    runs: Sequence[dict[str, Any]], case: str, metric: str, ylabel: str, path: Path
) -> Path:
    """One case's enqueue points, ``metric`` (achieved rate or CPU) against target rate."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    top = 0.0
    for run in runs:
        points = [p for p in run.get("enqueue", {}).get("points", []) if p["case"] == case]
        for design in DESIGN_ORDER:
            mine = _by_design(points, design, "target_rate")
            if not mine:
                continue
            xs = [p["target_rate"] for p in mine]
            if metric == "achieved_rate":
                ys = [p["achieved_rate"] for p in mine]
            else:
                ys = [_cpu_us_per_request(p) for p in mine]
            top = max(top, *xs)
            ax.plot(xs, ys, marker="o", label=_series_name(run, design))
    if metric == "achieved_rate" and top:
        ax.plot([0, top], [0, top], color="grey", linestyle=":", label="target")
    ax.set_xlabel("target rate (requests/s)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"Enqueue benchmark, {case} (timeout 200 ms, 3 keys of 100)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _scaling_plot(runs: Sequence[dict[str, Any]], path: Path) -> Path:
    """Per-operation timer cost against pending count, add+cancel and add+expire side by side."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, kind, title in (
        (axes[0], "add_cancel_s", "add + cancel"),
        (axes[1], "add_expire_s", "add + expire"),
    ):
        for run in runs:
            rows = run.get("scaling", {}).get("per_op", [])
            for design in DESIGN_ORDER:
                mine = _by_design(rows, design, "pending")
                if mine:
                    ax.plot(
                        [r["pending"] for r in mine],
                        [r[kind] * 1e6 for r in mine],
                        marker="o",
                        label=_series_name(run, design),
                    )
        ax.set_xscale("log")
        ax.set_xlabel("tasks pending")
        ax.set_ylabel("CPU us per operation")
        ax.set_title(f"Timer cost per {title}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def write_plots(runs: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Write the PNGs into ``out_dir``; return their paths (empty without matplotlib data)."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    cases = sorted({p["case"] for run in runs for p in run.get("enqueue", {}).get("points", [])})
    for case in cases:
        for metric, ylabel, stem in (
            ("achieved_rate", "achieved enqueue rate (requests/s)", "enqueue"),
            ("cpu_per_request_us", "process CPU per request (us)", "enqueue-cpu"),
        ):
            written.append(
                _enqueue_plot(runs, case, metric, ylabel, out_dir / f"{stem}-{case}.png")
            )
    if any(run.get("scaling", {}).get("per_op") for run in runs):
        written.append(_scaling_plot(runs, out_dir / "scaling.png"))
    return written


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _goals_section(goal_list: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "## Goals",
        "",
        "Issue 5: reproduce the benchmark of Kafka's *Purgatory Redesign Proposal* (the "
        "Kafka wiki page that introduced the hierarchical timing wheel and measured it "
        'against Kafka 0.8\'s purgatory on the JVM; "the proposal" below). Issue 13: beat '
        "the timers a Python user would pick instead, a bare heapq timer and asyncio's "
        '`loop.call_at` (goals prefixed "Issue 13"; unmeasured unless the run included the '
        "`versus` benchmark).",
        "",
    ]
    rows = []
    for goal in goal_list:
        verdict = {True: "**met**", False: "**not met**", None: "not measured"}[goal["met"]]
        figures = "; ".join(
            f"{m['run']}: {_fmt(m['value'])} ({m['detail']})" for m in goal["measurements"]
        )
        rows.append([goal["goal"], goal["target"], figures or "n/a", verdict])
    lines += _table(["goal", "target", "measured", "verdict"], rows)
    lines.append("")
    lines += [f"- {goal['goal']}: {goal['note']}." for goal in goal_list]
    return [*lines, ""]


def _images(plots: Sequence[str], prefix: str) -> list[str]:
    return [f"![{stem}](perf/{stem})" for stem in plots if stem.startswith(prefix)]


def _enqueue_section(data: dict[str, Any], build: str, plots: Sequence[str]) -> list[str]:
    lines = [f"### Enqueue benchmark ({build} run)", ""]
    rows = []
    for point in data["points"]:
        rows.append(
            [
                point["case"],
                point["design"],
                f"{point['requested_rate']:,.0f}",
                f"{point['target_rate']:,.0f}",
                f"{point['achieved_rate']:,.0f}",
                "yes" if point["saturated"] else "",
                f"{point['enqueued']:,}",
                f"{point['cpu_s']:.2f}",
                f"{_cpu_us_per_request(point):.0f}",
                f"{point['rss_peak_mb']:.0f}",
                f"{point['gc_collections']} / {point['gc_s'] * 1000:.0f}",
                f"{point['expired']:,}",
            ]
        )
    lines += _table(
        [
            "case",
            "design",
            "requested/s",
            "target/s",
            "achieved/s",
            "saturated",
            "requests",
            "CPU s",
            "CPU us/req",
            "peak RSS MB",
            "GCs / ms",
            "expired",
        ],
        rows,
    )
    lines += ["", "Saturation (plateau = highest achieved rate; kept up = highest target met):", ""]
    rows = []
    for case, designs in sorted(data["saturation"].items()):
        for design in DESIGN_ORDER:
            entry = designs.get(design)
            if entry:
                rows.append(
                    [
                        case,
                        design,
                        f"{entry['plateau']:,.0f}",
                        f"{entry['kept_up_to']:,.0f}",
                        "yes" if entry["saturated"] else "no (lower bound)",
                    ]
                )
    lines += _table(["case", "design", "plateau/s", "kept up to/s", "saturated"], rows)
    lines += [
        "",
        f"Single-threaded virtual-time replay of the same workload at {data['replay_rate']:,.0f} "
        "requests/s (no sleeps, no thread switches: CPU cost only):",
        "",
    ]
    rows = [
        [
            r["case"],
            r["design"],
            f"{r['num']:,}",
            f"{r['cpu_s']:.2f}",
            f"{r['requests_per_cpu_s']:,.0f}",
            f"{r['expired']:,}",
        ]
        for r in data["replay"]
    ]
    lines += _table(["case", "design", "requests", "CPU s", "requests per CPU s", "expired"], rows)
    lines.append("")
    lines += _images(plots, "enqueue")
    return [*lines, ""]


def _scaling_section(data: dict[str, Any], build: str, plots: Sequence[str]) -> list[str]:
    lines = [f"### Timer scaling ({build} run)", ""]
    rows = [
        [
            r["design"],
            f"{r['pending']:,}",
            f"{r['add_cancel_s'] * 1e6:.2f}",
            f"{r['add_expire_s'] * 1e6:.2f}",
        ]
        for r in data["per_op"]
    ]
    lines += _table(["design", "pending", "add+cancel CPU us/op", "add+expire CPU us/op"], rows)
    lines += [
        "",
        f"The reference is capped at {data['reference_pending_cap']:,} pending: its "
        "advance_clock scans every pending task (O(n) per call), so larger runs take minutes "
        "and say nothing new.",
        "",
    ]
    rows = [
        [
            m["design"],
            f"{m['pending']:,}",
            f"{m['task_bytes']:.0f}",
            f"{m['timer_bytes']:.0f}",
            f"{m['total_bytes']:.0f}",
        ]
        for m in data["memory"]
    ]
    lines += _table(["design", "pending", "task B", "timer B per task", "total B per task"], rows)
    lines += ["", "Full lifecycle (add; 90 % cancelled before due, 10 % expire):", ""]
    rows = [
        [
            r["design"],
            f"{r['n']:,}",
            f"{r['add_s']:.2f}",
            f"{r['walk_s']:.2f}",
            f"{r['tasks_per_s']:,.0f}",
            f"{r['gc_collections']} / {r['gc_s']:.2f}",
            _fmt(r["peak_bytes_per_task"], 0),
        ]
        for r in data["lifecycle"]
    ]
    lines += _table(
        ["design", "tasks", "add CPU s", "walk CPU s", "tasks/CPU s", "GCs / s", "peak B per task"],
        rows,
    )
    lines += [
        "",
        f"The reference's lifecycle is capped at {data['reference_lifecycle_n']:,} tasks "
        "(6,000 advance_clock calls, each scanning every pending task).",
        "",
    ]
    lines += _images(plots, "scaling")
    return [*lines, ""]


def _versus_section(data: dict[str, Any], build: str, run: dict[str, Any]) -> list[str]:
    machine = run["machine"]
    lines = [
        f"### Optimized against a bare heapq timer and asyncio ({build} run)",
        "",
        f"Commit {machine['git_commit']}, {machine['date']}, load average at start "
        f"{machine['load_average_at_start']}"
        + (f"; made by `{run['command']}`." if "command" in run else "."),
        "",
        "Lifecycle (log-normal delays, median 200 ms; 90 % cancelled before due, 10 % "
        "expire; 5 ms clock steps; best of alternating rounds; pure runs add `api-floor`: "
        "the same calls on a timer that only checks, locks and reads or waits on the "
        "clock, keeping no schedule):",
        "",
    ]
    rows = [
        [
            r["design"],
            f"{r['n']:,}",
            f"{r['add_s']:.3f}",
            f"{r['walk_s']:.3f}",
            f"{r['tasks_per_s']:,.0f}",
            f"{r['gc_collections']} / {r['gc_s']:.3f}",
            _fmt(r["peak_bytes_per_task"], 0),
        ]
        for r in data.get("lifecycle", [])
    ]
    lines += _table(
        ["design", "tasks", "add CPU s", "walk CPU s", "tasks/CPU s", "GCs / s", "peak B per task"],
        rows,
    )
    lines += [
        "",
        "Per operation: add+cancel (optimized) and call_at+cancel (asyncio), add+expire:",
        "",
    ]
    rows = [
        [
            r["design"],
            f"{r['pending']:,}",
            f"{r['add_cancel_s'] * 1e6:.2f}",
            "n/a" if r.get("add_expire_s") is None else f"{r['add_expire_s'] * 1e6:.2f}",
        ]
        for r in data.get("add_cancel", [])
    ]
    lines += _table(["design", "pending", "add+cancel CPU us/op", "add+expire CPU us/op"], rows)
    return [*lines, ""]


def _idle_section(data: dict[str, Any], build: str) -> list[str]:
    lines = [f"### Idle cost ({build} run)", ""]
    rows = [
        [
            r["design"],
            f"{r['window_s']:.1f}",
            str(r["waits"]),
            str(r["wakeups"]),
            f"{r['wakeups_per_minute']:.0f}",
            _fmt(r["reaper_cpu_s"], 3),
        ]
        for r in data["results"]
    ]
    lines += _table(
        ["design", "window s", "waits", "wake-ups", "wake-ups/min", "reaper CPU s"], rows
    )
    lines += [
        "",
        f"Process CPU over the window, all designs together: {data['process_cpu_s']:.3f} s. "
        "One operation due in an hour per purgatory; every reaper loops advance_clock(200), "
        "as Kafka's does, so each wakes about 300 times a minute whatever the design.",
        "",
    ]
    return lines


def _profile_section(data: dict[str, Any], build: str) -> list[str]:
    lines = [f"### Profile of {data['design']} ({build} run, {data['case']})", ""]
    for view, title in (
        ("generator", "generator thread of a real run"),
        ("replay", "single-threaded replay (enqueue, completion, expiry, purge)"),
    ):
        summary = data[view]
        lines += [
            f"Top self time, {title} ({summary['sampled_s']:.2f} s sampled; full tree in "
            f"docs/perf/profile-{build}-{view}.txt):",
            "",
        ]
        rows = [
            [f"`{f['function']}`", f"`{f['location']}`", f"{f['share'] * 100:.1f} %"]
            for f in summary["functions"][:12]
        ]
        lines += _table(["function", "where", "self time"], rows)
        lines += ["", "By file:", ""]
        rows = [[f"`{f['file']}`", f"{f['share'] * 100:.1f} %"] for f in summary["files"][:8]]
        lines += _table(["file", "self time"], rows)
        lines.append("")
    return lines


def render(results: dict[str, Any], plots: Sequence[str], analysis: str | None = None) -> str:
    """The markdown of docs/performance.md for ``results`` (runs, goals, command)."""
    runs: list[dict[str, Any]] = results["runs"]
    first = runs[0]
    machine = first["machine"]
    lines = [
        "# Performance",
        "",
        "<!-- Generated by `kpurgatory bench` from docs/perf/results.json: do not edit by hand; "
        "edit docs/perf/analysis.md or re-run the command. -->",
        "",
        f"Made by: `{results['command']}` ({results['mode']} mode).",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, load average at start "
        f"{machine['load_average_at_start']}, Python {machine['python']} "
        f"({machine['implementation']}), {machine['platform']}; commit "
        f"{machine['git_commit']}, {machine['date']}.",
        "",
        "Runs: "
        + "; ".join(
            f"{run['build']} build ({', '.join(run['designs'])})"
            + (f", added from `{run['command']}`" if "command" in run else "")
            for run in runs
        )
        + ". Every ratio below compares designs measured in the same run, alternating designs "
        "within each sweep point; absolute figures from different runs are never divided.",
        "",
    ]
    if results["mode"] != "full":
        lines += [
            "**This is a quick (smoke) run: its numbers are too small to mean anything.** "
            "Run `kpurgatory bench --full` for the measurement.",
            "",
        ]
    lines += _goals_section(results["goals"])
    if analysis:
        lines += [analysis.strip(), ""]
    lines += ["## Results", ""]
    for run in runs:
        build = run.get("build", "pure")
        images = plots if run is first else []
        if run.get("enqueue"):
            lines += _enqueue_section(run["enqueue"], build, images)
        if run.get("scaling"):
            lines += _scaling_section(run["scaling"], build, images)
        if run.get("versus"):
            lines += _versus_section(run["versus"], build, run)
        if run.get("idle"):
            lines += _idle_section(run["idle"], build)
        if run.get("profile"):
            lines += _profile_section(run["profile"], build)
        if run.get("aio"):
            lines += aio.report_section(run["aio"], build)
    lines += [
        "## Method",
        "",
        "- Designs: **optimized** (`kpurgatory.optimized`, hierarchical timing wheel), "
        "**heap** (asyncio-style heapq timer, lazy cancellation, asyncio's re-heapify rule), "
        "**old** (Kafka 0.8's purgatory: a delay queue of operations, completed ones left in "
        "it, size-triggered purges after every expiry), **reference** (`kpurgatory.reference`, "
        "the semantics; O(n) scan per advance_clock). Baselines live in "
        "`kpurgatory/bench/baselines/`: heap is checked equivalent to the reference by the "
        "equivalence machines; old differs from the spec only where Kafka 0.8 did: its "
        "size counts completed operations until they are drained or purged (R9, R12, R28), "
        "its purges are triggered by size (R30), and a reaper step expires one operation "
        "(R31).",
        "- Enqueue: Kafka's TestPurgatoryPerformance with the Scala semantics: a generator "
        "thread (exponential inter-arrival at the target rate, ms-truncated with the remainder "
        "carried), log-normal completion latency from p50/p75, 3 keys drawn once from 100, "
        "timeout 200 ms, tick 1 ms, wheel 20, purge interval 1000, reaper on, a completion "
        "thread calling force_complete at arrival + latency when latency < timeout; the rest "
        "expire. Target = requests / planned arrival span; achieved = requests / the "
        "generator's real span; saturated when achieved < 95 % of target or when the "
        "per-point time budget stopped the generator. A design leaves the sweep after two "
        "saturated points in a row that did not raise its best achieved rate by 10 %.",
        "- Scaling: ManualClock, a direct executor, pending tasks 10^7 ms away; best of the "
        "repeats; the pending tasks are frozen for the garbage collector during the "
        "per-operation measurement (the lifecycle runs with the collector fully on).",
        "- Memory: tracemalloc, task objects included (a minimal TimerTask subclass with "
        "`__slots__ = ()`).",
        "- Versus (issue 13): the optimized timer against a **bare heap** (a heapq of "
        "`[due, seq, task]` handles, lazy cancellation, asyncio's rebuild when more than half "
        "are cancelled; no lock, no checks: `kpurgatory/bench/baselines/bare.py`) and "
        "**asyncio**'s `loop.call_at` + `TimerHandle.cancel` in a running event loop (it runs "
        "between batches of 1,000). Lifecycle: log-normal delays (median 200 ms, sigma 1), "
        "90 % cancelled at a uniform time before due, a ManualClock walking in 5 ms steps; "
        "the two timers alternate round by round, best round each (about 2 million tasks per "
        "design in all, at least 3 rounds), collector on; one traced round each for the peak "
        "memory. Per operation: as in Scaling, alternating with asyncio, best of 3.",
        "- Idle: all purgatories idle side by side; per-reaper CPU from /proc/self/task.",
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"
