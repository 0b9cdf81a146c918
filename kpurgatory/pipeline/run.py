"""``kpurgatory pipeline run``: check the options, start Spark, run the job, report.

``run_with`` is the command's body (``kpurgatory.pipeline.cli`` registers it): every
option is checked before Spark starts (``plan_run``: ``ValueError`` naming the option),
the session is started and its executors checked (``open_session``), the job runs
(``kpurgatory.pipeline.spark.run_pipeline``) and the report, run.json and the summary
are written and printed (``report_run``). pyspark, pandas and matplotlib are imported
inside the functions only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpurgatory.workloads import GridRow, grid

__all__ = [
    "GRIDS",
    "RunPlan",
    "check_master",
    "check_out",
    "check_port",
    "grid_rows",
    "open_session",
    "plan_run",
    "report_run",
    "run_with",
]

GRIDS: dict[str, dict[str, Any]] = {
    "default": {"seeds": tuple(range(1, 8)), "shards": 3, "n_ops": 2000},
    "small": {"seeds": (1,), "shards": 1, "n_ops": 200},
}
"""Named grids (every scenario x every preset x seeds x shards, ``n_ops`` per stream).

``default``: 6 x 4 x 7 x 3 = 504 streams of 2000 operations = 1,008,000 operations.
``small``: 24 streams of 200 operations (a smoke run in well under a minute).
"""


def grid_rows(
    name: str,
    *,
    scenarios: list[str] | None = None,
    presets: list[str] | None = None,
    seeds: list[int] | None = None,
    n_ops: int | None = None,
) -> list[GridRow]:
    """The grid called ``name``, optionally narrowed or resized."""
    if name not in GRIDS:
        raise ValueError(f"grid must be one of {sorted(GRIDS)}, got {name!r}")
    spec = GRIDS[name]
    return grid(
        scenarios,
        presets,
        seeds=tuple(seeds) if seeds else spec["seeds"],
        shards=spec["shards"],
        n_ops=n_ops or spec["n_ops"],
    )


@dataclass(frozen=True)
class RunPlan:
    """What ``run`` checked before starting Spark: the grid's rows, the adapter's port
    (None without ``--adapter``), the master URL and the executors' interpreter (None
    with a given session)."""

    rows: list[GridRow]
    port: Any
    master_url: str
    selected: Any

    @property
    def operations(self) -> int:
        """Operations in the grid."""
        return sum(row.n_ops for row in self.rows)


def run_with(args: argparse.Namespace, session: Any) -> int:
    """``run`` on ``session`` if given (left running: the tests share one; its executors
    are as they are, so ``--executor-python`` must be ``auto``), else on a session of its
    own built from ``--master`` and ``--executor-python`` and stopped at the end."""
    from kpurgatory.pipeline.executor_python import ExecutorPythonError
    from kpurgatory.pipeline.session import ExecutorEnvironmentError, JavaMissingError
    from kpurgatory.pipeline.spark import run_pipeline

    started = time.perf_counter()
    try:
        plan = plan_run(args, session)
    except (ValueError, ExecutorPythonError) as exc:
        print(f"kpurgatory pipeline run: {exc}", file=sys.stderr)
        return 2
    if plan.selected is not None:
        print(plan.selected.message, flush=True)
    try:
        spark, probes = open_session(plan, session)
    except (JavaMissingError, ImportError, ExecutorEnvironmentError) as exc:
        print(f"kpurgatory pipeline run: {exc}", file=sys.stderr)
        return 2
    print(
        f"grid {args.grid}: {len(plan.rows)} streams, {plan.operations:,} operations; "
        f"{args.impl_a} vs {side_b(args, plan)}; master {spark.sparkContext.master}; "
        f"mode {args.mode}",
        flush=True,
    )
    try:
        show = not args.quiet and sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
        result = run_pipeline(
            spark,
            plan.rows,
            impl_a=args.impl_a,
            impl_b=args.impl_b,
            mode=args.mode,
            partitions=args.partitions,
            out_dir=args.out,
            show_progress=show,
            port=plan.port,
        )
        spark_info = {
            "master": str(spark.sparkContext.master),
            "cores": spark.sparkContext.defaultParallelism,
            "probes": probes,
        }
    finally:
        if session is None:
            spark.stop()
    return report_run(args, plan, result, spark_info, time.perf_counter() - started)


def side_b(args: argparse.Namespace, plan: RunPlan) -> str:
    """How the run names its side b: ``--impl-b``, or the adapter command."""
    return args.impl_b if plan.port is None else f"adapter {plan.port.command!r}"


def plan_run(args: argparse.Namespace, session: Any) -> RunPlan:
    """Check every option of ``run`` before Spark starts: ``ValueError`` (or
    ``ExecutorPythonError``) naming the option that is wrong."""
    from kpurgatory.pipeline.executor_python import select
    from kpurgatory.pipeline.replay import resolve_impl
    from kpurgatory.pipeline.session import resolve_master

    rows = grid_rows(
        args.grid,
        scenarios=args.scenario,
        presets=args.preset,
        seeds=args.seed,
        n_ops=args.ops,
    )
    resolve_impl(args.impl_a)
    if args.adapter is None:
        resolve_impl(args.impl_b)
    if session is not None and args.executor_python != "auto":
        raise ValueError(
            f"--executor-python {args.executor_python}: a running session's executors "
            "cannot be changed (only auto with a given session)"
        )
    check_out(args.out)
    master_url = resolve_master(args.master)
    if session is None:
        check_master(master_url)
    port = None
    if args.adapter is not None:
        port = check_port(args)
    elif args.allow is not None:
        raise ValueError("--allow: known differences are accepted only with --adapter")
    selected = None if session is not None else select(args.executor_python, master_url)
    return RunPlan(rows, port, master_url, selected)


def open_session(plan: RunPlan, session: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The Spark session to run on (``session``, or a new one for ``plan``) and, for a
    new one, the probes showing its executors run the build selected with the replay's
    modules (``ExecutorEnvironmentError`` otherwise, after stopping it)."""
    from kpurgatory.pipeline.session import build_session, check_executors

    if session is not None:
        return session, []
    spark = build_session(plan.master_url, executor_python=plan.selected)
    try:
        return spark, check_executors(spark, plan.selected)
    except BaseException:
        spark.stop()
        raise


def report_run(
    args: argparse.Namespace,
    plan: RunPlan,
    result: Any,
    spark_info: dict[str, Any],
    elapsed: float,
) -> int:
    """Write the run's report and run.json, print its summary and counterexamples;
    return the exit status (0: no differences and the cost model agrees, else 1)."""
    from kpurgatory.pipeline.report import builds_by_worker, builds_line, cpu_throughput

    workers = builds_by_worker(result.stream_table)
    replayed_by = builds_line(workers)
    per_minute = result.operations / elapsed * 60
    per_cpu_minute = cpu_throughput(workers)
    cpu_note = (
        ""
        if per_cpu_minute is None
        else f" (the replay alone: {per_cpu_minute:,.0f} per CPU-minute of the Python workers)"
    )
    context = (
        f"Grid `{args.grid}` ({len(plan.rows)} streams), `{args.impl_a}` (expected) vs "
        f"`{side_b(args, plan)}`, Spark master `{spark_info['master']}` "
        f"({spark_info['cores']} cores), mode `{args.mode}`, "
        f"replayed by the {replayed_by}, {elapsed:.0f} s wall including Spark start-up: "
        f"{per_minute:,.0f} operations replayed (on both) and diffed per minute{cpu_note}."
    )
    executors = {
        "selected": None if plan.selected is None else plan.selected.as_dict(),
        "probes": spark_info["probes"],
        "workers": workers,
    }
    summary = {
        "replayed_by": replayed_by,
        "per_minute": per_minute,
        "per_cpu_minute": per_cpu_minute,
        "elapsed": elapsed,
    }
    report, port_lines = write_run_outputs(args, plan, result, context, executors)
    write_run_record(args, plan, result, spark_info, executors, summary)
    print(context)
    return print_outcome(args, plan, result, report, port_lines)


def write_run_outputs(
    args: argparse.Namespace,
    plan: RunPlan,
    result: Any,
    context: str,
    executors: dict[str, Any],
) -> tuple[Path, list[str]]:
    """Write report.md (and its HTML, tables, charts) in ``--out``; return its path and
    the adapter's summary lines (none without ``--adapter``)."""
    from kpurgatory.pipeline.report import write_report

    port_lines: list[str] = []
    commands: dict[tuple[Any, ...], str] = {}
    if plan.port is not None:
        from kpurgatory.pipeline.port_report import port_summary

        port_lines, commands = port_summary(result.stream_table, plan.port, args.out)
    report = write_report(
        result,
        args.out,
        title="kpurgatory pipeline report",
        context=context,
        impl_a=args.impl_a,
        impl_b=args.impl_b,
        executors=executors,
        sections=port_lines,
        commands=commands,
    )
    return report, port_lines


def write_run_record(
    args: argparse.Namespace,
    plan: RunPlan,
    result: Any,
    spark_info: dict[str, Any],
    executors: dict[str, Any],
    summary: dict[str, Any],
) -> None:
    """Write run.json in ``--out``: the run's options, figures and executors."""
    from kpurgatory.pipeline.report import write_run_json

    per_cpu_minute = summary["per_cpu_minute"]
    write_run_json(
        args.out,
        {
            "grid": args.grid,
            "streams": result.streams,
            "operations": result.operations,
            "impl_a": args.impl_a,
            "impl_b": side_b(args, plan),
            "adapter": None if plan.port is None else plan.port.command,
            "master": spark_info["master"],
            "cores": spark_info["cores"],
            "mode": args.mode,
            "wall_seconds": round(summary["elapsed"], 3),
            "operations_per_minute": round(summary["per_minute"]),
            "replay_operations_per_cpu_minute": (
                None if per_cpu_minute is None else round(per_cpu_minute)
            ),
            "stage_seconds": {k: round(v, 3) for k, v in result.stage_seconds.items()},
            "counterexamples": result.counterexample_count,
            "model_mismatches": result.model_mismatches,
            "replayed_by": summary["replayed_by"],
            "executors": executors,
        },
    )


def print_outcome(
    args: argparse.Namespace, plan: RunPlan, result: Any, report: Path, port_lines: list[str]
) -> int:
    """Print the adapter's summary or the first counterexamples, and the verdict; return
    the exit status."""
    from kpurgatory.pipeline.report import replay_command

    if plan.port is not None:
        print("\n".join(port_lines))
    for row in result.counterexamples[:10] if plan.port is None else ():
        print(
            f"COUNTEREXAMPLE {row['scenario']} {row['preset']} seed {row['seed']} shard "
            f"{row['shard']}: {row['reason']}\n"
            f"  reproduce: {replay_command(row, args.impl_a, args.impl_b)}"
        )
    verdict = "no differences" if result.ok else f"{result.counterexample_count} counterexample(s)"
    print(
        f"{verdict}; report: {report.resolve()} (and report.html, run.json, Parquet tables, "
        "PNG charts)"
    )
    return 0 if result.ok and result.model_mismatches == 0 else 1


def check_out(out: Path) -> None:
    """``ValueError`` naming ``--out`` unless the report can be written in ``out``: an
    existing folder takes a file, else its nearest existing parent is a writable folder
    (nothing is created here: a run refused leaves no trace)."""
    if out.exists():
        probe = out / ".kpurgatory-write-check"
        try:
            probe.write_text("", encoding="utf-8")
            probe.unlink()
        except OSError as exc:
            raise ValueError(f"--out {out}: cannot write the report there: {exc}") from None
        return
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: cannot create it: {parent} is not a writable folder")


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """``ValueError`` naming ``--master`` if a ``spark://`` master does not accept a TCP
    connection within ``timeout_s`` (Spark itself would retry for minutes)."""
    import socket

    if not master.startswith("spark://"):
        return
    last: OSError | None = None
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--master {master}: want spark://HOST:PORT")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            return
        except OSError as exc:
            last = exc
    raise ValueError(f"--master {master}: cannot reach the Spark master: {last}")


def check_port(args: argparse.Namespace) -> Any:
    """The ``Port`` of ``--adapter``, ``--allow`` and ``--step-timeout``, after the adapter
    answered one ``init`` on this machine; ``ValueError`` naming the option otherwise."""
    from kpurgatory.conformance.adapter import AdapterProcess, probe
    from kpurgatory.pipeline.ports import Port
    from kpurgatory.spec.known_differences import resolve

    if args.mode != "arrow":
        raise ValueError(f"--mode {args.mode}: --adapter replays in mode arrow only")
    if args.allow is not None:
        try:
            resolve(args.allow)
        except ValueError as exc:
            raise ValueError(f"--allow: {exc}") from None
    if not args.step_timeout > 0:
        raise ValueError(f"--step-timeout must be > 0, got {args.step_timeout}")
    try:
        adapter = AdapterProcess(args.adapter, step_timeout_s=args.step_timeout)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--adapter: {exc}") from None
    with adapter:
        unusable = probe(adapter)
    if unusable is not None:
        raise ValueError(f"--adapter {args.adapter!r} did not answer an init step: {unusable}")
    return Port(args.adapter, args.allow, args.step_timeout)
