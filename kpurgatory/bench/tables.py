"""The answers of one run, a table per question, from its results only.

Each row is a ratio with its spread beside the absolute figures it divides, and a
``trust`` column: ``loaded`` when pyperf recorded a 1-minute load average at or above
the number of cores during the benchmarks behind the row, ``unsteady`` when one of them
has a standard deviation above 10 % of its mean (pyperf's own stability warning).
Ratios are only ever taken between figures of the same build in the same run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Figure", "Table", "figures", "markdown", "tables"]

UNSTEADY = 0.10
"""pyperf's warning threshold: standard deviation above this share of the mean."""


@dataclass(frozen=True)
class Figure:
    """One benchmark's result: mean and standard deviation of its values, and the
    highest load average pyperf recorded while it ran (None when not recorded)."""

    mean: float
    stdev: float
    load: float | None

    def __truediv__(self, other: Figure) -> tuple[float, float]:
        """The ratio of the means and its spread (relative spreads added in quadrature)."""
        ratio = self.mean / other.mean
        return ratio, ratio * math.hypot(self.stdev / self.mean, other.stdev / other.mean)

    def __sub__(self, other: Figure) -> Figure:
        """The difference of the means; standard deviations added in quadrature."""
        loads = [x for x in (self.load, other.load) if x is not None]
        return Figure(
            self.mean - other.mean, math.hypot(self.stdev, other.stdev), max(loads, default=None)
        )


@dataclass(frozen=True)
class Table:
    """A question, the table that answers it, and how it was measured."""

    title: str
    note: str
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]


def figures(suite: dict[str, Any]) -> dict[tuple[str, str, int], Figure]:
    """(question, design, size) -> Figure, for every benchmark of a pyperf suite (JSON)."""
    import pyperf

    found = {}
    for bench in pyperf.BenchmarkSuite.loads(json.dumps(suite)).get_benchmarks():
        meta = bench.get_metadata()
        loads = [
            run.get_metadata()["load_avg_1min"]
            for run in bench.get_runs()
            if "load_avg_1min" in run.get_metadata()
        ]
        stdev = bench.stdev() if bench.get_nvalue() > 1 else 0.0
        key = (str(meta["question"]), str(meta["design"]), int(meta["size"]))
        found[key] = Figure(bench.mean(), stdev, max(loads, default=None))
    return found


def _trust(cores: int, *parts: Figure) -> str:
    marks = []
    loads = [part.load for part in parts if part.load is not None]
    if loads and max(loads) >= cores:
        marks.append(f"loaded ({max(loads):.1f} on {cores} cores)")
    worst = max(part.stdev / part.mean for part in parts if part.mean)
    if worst > UNSTEADY:
        marks.append(f"unsteady (sd {worst:.0%})")
    return ", ".join(marks) or "ok"


def _ratio(a: Figure, b: Figure, invert: bool = False) -> str:
    ratio, spread = (b / a) if invert else (a / b)
    return f"{ratio:.2f} ± {spread:.2f}"


def _us(figure: Figure) -> str:
    return f"{figure.mean * 1e6:.2f} ± {figure.stdev * 1e6:.2f} us"


def tables(results: dict[str, Any]) -> list[Table]:
    """Every question's table for the builds in ``results`` (pure first)."""
    cores = int(results["machine"].get("cores") or os.cpu_count() or 1)
    builds = sorted(results["builds"].items(), key=lambda item: item[0] != "pure")
    found = {build: figures(data["suite"]) for build, data in builds}
    return [
        add_cancel_table(found, cores),
        lifecycle_table(found, cores),
        memory_table(found),
        long_poll_table(found, cores),
        plateau_table(results, list(found), cores),
        wait_cpu_table(found, cores),
        wait_memory_table(results),
        heartbeat_table(results, "lag"),
        heartbeat_table(results, "pause"),
    ]


Found = dict[str, dict[tuple[str, str, int], Figure]]
"""Build -> that build's ``figures``."""


def _sizes(got: dict[tuple[str, str, int], Figure], question: str) -> list[int]:
    """The sizes ``question`` was measured at for the optimized design, in order."""
    return sorted(size for q, design, size in got if q == question and design == "optimized")


# Each table spells out its own rows and columns: the tables share a shape deliberately.
def add_cancel_table(found: Found, cores: int) -> Table:
    """Timer add+cancel: optimized against a bare heap and asyncio's call_at."""
    rows = []
    for build, got in found.items():
        for size in _sizes(got, "add-cancel"):
            opt, heap, loop = (
                got[("add-cancel", d, size)] for d in ("optimized", "bare-heap", "asyncio")
            )
            rows.append(
                (
                    build,
                    f"{size:,}",
                    _us(opt),
                    _us(heap),
                    _us(loop),
                    _ratio(opt, heap),
                    _ratio(opt, loop),
                    _trust(cores, opt, heap, loop),
                )
            )
    return Table(
        "Timer add+cancel against asyncio's call_at and a heapq timer",
        "CPU time per add + cancel of a task due within 10 s while other tasks are "
        "pending far ahead: the optimized SystemTimer, a bare heapq timer, asyncio's "
        "loop.call_at + TimerHandle.cancel in a running loop. Ratio below 1: the "
        "optimized timer is cheaper.",
        (
            "build",
            "pending",
            "optimized",
            "bare heap",
            "asyncio call_at",
            "optimized / bare heap",
            "optimized / asyncio",
            "trust",
        ),
        rows,
    )


def lifecycle_table(found: Found, cores: int) -> Table:
    """The full timer lifecycle: tasks per CPU second, optimized against a bare heap."""
    rows = []
    for build, got in found.items():
        for n in _sizes(got, "lifecycle"):
            opt, heap = got[("lifecycle", "optimized", n)], got[("lifecycle", "bare-heap", n)]
            rates = (f"{n / opt.mean:,.0f}", f"{n / heap.mean:,.0f}")
            rows.append(
                (build, f"{n:,}", *rates, _ratio(opt, heap, invert=True), _trust(cores, opt, heap))
            )
    return Table(
        "Full lifecycle at three sizes",
        "n tasks added at once with log-normal delays (median 200 ms), 90 % cancelled "
        "before they are due, the rest expiring as a manual clock walks in 5 ms steps; "
        "garbage collector on. Throughput = n / CPU time. Ratio above 1: the optimized "
        "timer is faster.",
        (
            "build",
            "tasks",
            "optimized tasks/s",
            "bare heap tasks/s",
            "optimized / bare heap",
            "trust",
        ),
        rows,
    )


def memory_table(found: Found) -> Table:
    """Bytes per pending task over the lifecycle, optimized against a bare heap."""
    rows = []
    for build, got in found.items():
        for n in _sizes(got, "memory"):
            opt, heap = got[("memory", "optimized", n)], got[("memory", "bare-heap", n)]
            rows.append(
                (
                    build,
                    f"{n:,}",
                    f"{opt.mean / n:.0f} B",
                    f"{heap.mean / n:.0f} B",
                    f"{opt.mean / heap.mean:.2f}",
                )
            )
    return Table(
        "Memory per pending task",
        "tracemalloc peak over the lifecycle above, divided by n (the task objects "
        "included): one traced run each, so no spread.",
        ("build", "tasks", "optimized", "bare heap", "optimized / bare heap"),
        rows,
    )


def long_poll_table(found: Found, cores: int) -> Table:
    """Long-poll CPU per wait: kpurgatory.aio against plain asyncio, harness taken off."""
    rows = []
    for build, got in found.items():
        keys = [k for k in got if k[0] == "long-poll"]
        if not keys:
            continue
        waits = keys[0][2]
        aio, plain, harness = (got[("long-poll", a, waits)] for a in ("aio", "plain", "harness"))
        per = Figure(1 / waits, 0.0, None)
        rows.append(
            (
                build,
                _us(_scaled(aio, per)),
                _us(_scaled(plain, per)),
                _us(_scaled(harness, per)),
                _us(_scaled(aio - harness, per)),
                _us(_scaled(plain - harness, per)),
                _ratio(aio - harness, plain - harness),
                _ratio(aio, plain),
                _trust(cores, aio, plain, harness),
            )
        )
    return Table(
        "Long-poll CPU per wait against plain asyncio",
        "10,000 waits on 2,500 keys in one process, 90 % answered by an event, the rest "
        "timing out: kpurgatory.aio (await purgatory.wait) against a plain-asyncio "
        "version (a future and a call_later per wait). Harness = the same tasks "
        "returning at once; library-only = approach - harness. Process CPU per wait.",
        (
            "build",
            "aio",
            "plain asyncio",
            "harness",
            "aio library-only",
            "plain library-only",
            "aio / plain, library-only",
            "aio / plain, total",
            "trust",
        ),
        rows,
    )


def plateau_table(results: dict[str, Any], builds: list[str], cores: int) -> Table:
    """The proposal's enqueue plateau: the timing wheel against Kafka 0.8's design."""
    rows = []
    for build in builds:
        enqueue = results["builds"][build].get("enqueue", {})
        for case, designs in enqueue.get("plateau", {}).items():
            opt, old = designs["optimized"], designs["old"]
            behind = [
                max((p["unfinished"] for p in enqueue["points"] if p["design"] == d), default=0)
                for d in ("optimized", "old")
            ]
            rows.append(
                (
                    build,
                    case,
                    f"{opt['plateau']:,.0f}/s",
                    f"{old['plateau']:,.0f}/s",
                    f"{opt['plateau'] / old['plateau']:.2f}",
                    f"{behind[0]:,} / {behind[1]:,}",
                    _saturation(cores, results, opt, old),
                )
            )
    return Table(
        "The proposal's enqueue plateau against Kafka 0.8's design",
        "Kafka's purgatory benchmark on a real clock (timeout 200 ms, 3 keys of 100): "
        "the highest achieved enqueue rate over a sweep of target rates, the timing "
        "wheel (optimized) against Kafka 0.8's delay queue (old). Left behind: the most "
        "requests of one point neither completed nor expired 30 s after its last "
        "request. One sweep: no spread; loaded = the run's load average reached the "
        "number of cores.",
        (
            "build",
            "case",
            "optimized",
            "old",
            "optimized / old",
            "left behind, optimized / old",
            "trust",
        ),
        rows,
    )


_WAYS = (
    ("future+call_at", "Future + call_at"),
    ("timeout_at", "timeout_at"),
    ("aio wait", "aio wait"),
    ("aio submit", "aio submit"),
)
"""The ways to wait of ``kpurgatory.bench.aiocost``: (mechanism, column name)."""


def wait_cpu_table(found: Found, cores: int) -> Table:
    """CPU per asyncio wait with a deadline: kpurgatory.aio against asyncio's timers."""
    rows = []
    for build, got in found.items():
        for outcome in ("completed", "expired"):
            cells = {
                mechanism: figure
                for mechanism, _ in _WAYS
                for (question, design, _size), figure in got.items()
                if question == "asyncio-wait" and design == f"{mechanism}|{outcome}"
            }
            if len(cells) < len(_WAYS):
                continue
            plain, timeout, wait, submit = (cells[mechanism] for mechanism, _ in _WAYS)
            rows.append(
                (
                    build,
                    outcome,
                    *(_us(cells[mechanism]) for mechanism, _ in _WAYS),
                    _ratio(wait, plain),
                    _ratio(wait, timeout),
                    _ratio(submit, plain),
                    _trust(cores, plain, timeout, wait, submit),
                )
            )
    return Table(
        "An asyncio wait's CPU against asyncio's own timers",
        "Process CPU per wait for an event with a deadline, each wait on its own key, "
        "every event coming first (completed) or none (expired): a Future resolved by "
        "loop.call_at (cancelled when the event wins), asyncio.timeout_at around a "
        "Future, await purgatory.wait(op, [key]) in a task, and purgatory.submit "
        "(its Waiter, no task). Ratio below 1: kpurgatory.aio is cheaper.",
        (
            "build",
            "outcome",
            *(name for _, name in _WAYS),
            "aio wait / Future + call_at",
            "aio wait / timeout_at",
            "aio submit / Future + call_at",
            "trust",
        ),
        rows,
    )


def _asyncio_rows(results: dict[str, Any], what: str) -> list[tuple[str, dict[str, Any]]]:
    """(build, row) for every ``what`` row of the asyncio wait figures, pure first."""
    builds = sorted(results["builds"].items(), key=lambda item: item[0] != "pure")
    return [
        (build, row)
        for build, data in builds
        for row in data.get("asyncio", {}).get("rows", [])
        if row["what"] == what
    ]


def wait_memory_table(results: dict[str, Any]) -> Table:
    """Bytes and tracked objects per pending asyncio wait, each with what it needs."""
    rows = []
    by_build: dict[str, dict[str, dict[str, Any]]] = {}
    for build, row in _asyncio_rows(results, "memory"):
        by_build.setdefault(build, {})[row["mechanism"]] = row
    for build, got in by_build.items():
        if any(mechanism not in got or "error" in got[mechanism] for mechanism, _ in _WAYS):
            continue
        size = got["aio wait"]["bytes"] / got["future+call_at"]["bytes"]
        objects = got["aio wait"]["objects"] / got["future+call_at"]["objects"]
        rows.append(
            (
                build,
                f"{got['aio wait']['n']:,}",
                *(
                    f"{got[mechanism]['bytes']:,.0f} B, {got[mechanism]['objects']:.1f}"
                    for mechanism, _ in _WAYS
                ),
                f"{size:.2f}",
                f"{objects:.2f}",
            )
        )
    return Table(
        "An asyncio wait's memory per pending wait",
        "tracemalloc bytes and gc-tracked objects per wait while n waits are pending, "
        "each with everything it needs (its task, future, timer entry, operation, watcher "
        "list): one traced count each, so no spread.",
        (
            "build",
            "pending",
            *(name for _, name in _WAYS),
            "aio wait / Future + call_at, bytes",
            "aio wait / Future + call_at, objects",
        ),
        rows,
    )


_HEARTBEAT_TEXTS: dict[str, tuple[str, str]] = {
    "lag": (
        "Heartbeat lag with many asyncio waits pending",
        "n waits pending, due 1-20 s after they start, 90 % answered at a random "
        "time before their deadline, 10 % expiring; a 1 ms heartbeat records the "
        "longest the loop's thread ran (CPU time) between two of its wake-ups: the "
        "stall the loop itself causes, whatever else the machine runs; in "
        "brackets the worst wall-clock lag, which a loaded machine inflates.",
    ),
    "pause": (
        "Heartbeat lag after a pause left every wait overdue",
        "n waits fall due within 100 ms, and the process blocks (a long collection, "
        "a blocking call) until all are overdue; the longest CPU time of the loop's "
        "thread between two 1 ms heartbeats until the last has expired (wall-clock "
        "lag in brackets).",
    ),
}
"""The title and note of ``heartbeat_table`` per question (``lag``, ``pause``)."""


def heartbeat_table(results: dict[str, Any], what: str) -> Table:
    """The loop's worst stall with many waits pending (``lag``) or after a pause that left
    them all overdue (``pause``): kpurgatory.aio against asyncio's own timers."""
    ways = _WAYS[:3]
    rows = []
    by_build: dict[str, dict[str, dict[str, Any]]] = {}
    for build, row in _asyncio_rows(results, what):
        by_build.setdefault(build, {})[row["mechanism"]] = row
    for build, got in by_build.items():
        if any(mechanism not in got for mechanism, _ in ways):
            continue
        cells = []
        for mechanism, _ in ways:
            row = got[mechanism]
            cells.append(
                f"failed: {row['error']}"
                if "error" in row
                else f"{row['max_cpu_between_beats_ms']:.1f} ms ({row['max_ms']:.1f} ms)"
            )
        stalls = [float(got[m].get("max_cpu_between_beats_ms", "nan")) for m, _ in ways]
        plain = min(stalls[:2])
        ratio = "n/a" if any(map(math.isnan, stalls)) or plain <= 0 else f"{stalls[2] / plain:.2f}"
        aio = got["aio wait"]
        rows.append(
            (
                build,
                f"{aio['n']:,}",
                *cells,
                "n/a" if "error" in aio else f"{aio['max_cpu_between_beats_ms']:.2f}",
                ratio,
                f"{max(row['load'] for row in got.values()):.1f}",
            )
        )
    title, note = _HEARTBEAT_TEXTS[what]
    return Table(
        title,
        note,
        (
            "build",
            "pending",
            *(name for _, name in ways),
            "aio wait worst stall (ms)",
            "aio wait / plain asyncio, worst stall",
            "load",
        ),
        rows,
    )


def _scaled(figure: Figure, by: Figure) -> Figure:
    return Figure(figure.mean * by.mean, figure.stdev * by.mean, figure.load)


def _saturation(cores: int, results: dict[str, Any], *designs: dict[str, Any]) -> str:
    marks = []
    load = max(results["load_start"][0], results.get("load_end", [0.0])[0])
    if load >= cores:
        marks.append(f"loaded ({load:.1f} on {cores} cores)")
    if not all(design["saturated"] for design in designs):
        marks.append("lower bound (a design never saturated)")
    return ", ".join(marks) or "ok"


def markdown(table: Table) -> list[str]:
    """The table as markdown lines: title, note, header, rows (or a line saying none)."""
    lines = [f"### {table.title}", "", table.note, ""]
    if not table.rows:
        return [*lines, "Not measured in this run.", ""]
    lines.append("| " + " | ".join(table.header) + " |")
    lines.append("|" + "---|" * len(table.header))
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return [*lines, ""]
