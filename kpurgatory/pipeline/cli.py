"""``kpurgatory pipeline``: ``run`` (the Spark job) and ``vectors`` (export conformance vectors).

``kpurgatory pipeline run`` starts Spark (``local[*]`` by default), replays the grid
through the reference and the optimized implementation, diffs them, writes the report
and prints where it is. Exit status: 0 when no difference was found, 1 when there are
counterexamples, 2 when the environment is missing something (Java 17, pyspark).

pyspark, pandas and matplotlib are imported only inside the handlers (kpurgatory.cli's
rule), so ``kpurgatory --help`` works without the ``[pipeline]`` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kpurgatory.cli import add_command, at_least
from kpurgatory.conformance.adapter import DEFAULT_STEP_TIMEOUT_S
from kpurgatory.pipeline.run import GRIDS, grid_rows, run_with
from kpurgatory.workloads import PRESETS, SCENARIOS

__all__ = [
    "COMMITTED_VECTORS",
    "GRIDS",
    "add_parser",
    "grid_rows",
    "run",
    "run_with",
    "vectors",
]

DESCRIPTION = """\
The PySpark pipeline. run: replay the grid through two implementations on Spark, diff
them, write the report. vectors: export conformance vectors (JSON).
"""

RUN_DESCRIPTION = """\
Start Spark (local[*] by default), replay the grid through the expectation (--impl-a) and
the implementation checked (--impl-b) in the executors, diff them, write the report and
print where it is. Needs the pipeline extra and Java 17.

The executors replay with the fastest build found (--executor-python auto): for local
and local-cluster masters, the checkout's mypyc-compiled build (build/compiled/venv,
which `make run` builds) when it exists and matches the driver's sources, else this
interpreter; the run prints which build replays and why, and the report, run.json and
streams.parquet record the build of every Python worker. An interpreter named
explicitly (--executor-python PATH, or PYSPARK_PYTHON) that cannot be used stops the
run with exit status 2. On a cluster the executors run the cluster's Python on the
sources the driver ships: ship a packed environment (spark-submit --archives) or set
PYSPARK_PYTHON; the run checks the executors first.

With --adapter CMD the implementation checked is a port behind its conformance
adapter (one adapter process per executor task, the kit's line protocol, --allow as in
`kpurgatory conformance`): every difference is shrunk to a short step sequence, written
under OUT/counterexamples/ and printed with the `kpurgatory conformance --adapter CMD
--replay FILE` command that reproduces it.

exit status: 0 no difference, 1 counterexamples, 2 missing environment or bad arguments
"""

HELP = "the PySpark pipeline: differential replay at scale, report, vectors"
"""``kpurgatory pipeline``'s line in ``kpurgatory --help``."""

RUN_HELP = "replay and diff the grid on Spark, report"
"""``pipeline run``'s line in ``kpurgatory pipeline --help``."""

COMMITTED_VECTORS: dict[str, Any] = {"seeds": (1,), "n_ops": 12, "adversarial_n_ops": 40}
"""What ``kpurgatory pipeline vectors`` writes by default (the set in conformance/vectors/)."""


def add_parser(subparsers: Any) -> None:
    """Register ``pipeline run`` and ``pipeline vectors``."""
    parser = add_command(subparsers, "pipeline", help=HELP, description=DESCRIPTION)
    commands = parser.add_subparsers(dest="pipeline_command", required=True, metavar="ACTION")
    add_run_parser(commands)
    add_vectors_parser(commands)


def add_run_parser(commands: Any) -> None:
    """Register ``pipeline run``: what to replay, where, and against what."""
    run_parser = add_command(commands, "run", help=RUN_HELP, description=RUN_DESCRIPTION)
    run_parser.add_argument(
        "--grid",
        default="default",
        choices=sorted(GRIDS),
        help="default: 504 streams, 1,008,000 operations; small: 24 streams of 200",
    )
    run_parser.add_argument(
        "--out",
        type=Path,
        default=Path("build/pipeline"),
        metavar="DIR",
        help="report, Parquet tables and charts (default build/pipeline)",
    )
    run_parser.add_argument(
        "--impl-a", default="reference", metavar="IMPL", help="the expectation (reference)"
    )
    run_parser.add_argument(
        "--impl-b",
        default="optimized",
        metavar="IMPL",
        help="the implementation checked: reference, optimized (default) or a module path",
    )
    run_parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="only these (repeatable)"
    )
    run_parser.add_argument(
        "--preset", action="append", choices=sorted(PRESETS), help="only these (repeatable)"
    )
    run_parser.add_argument("--seed", action="append", type=int, help="seeds (repeatable)")
    run_parser.add_argument(
        "--ops", type=at_least(1), help="operations per stream (default: the grid's)"
    )
    add_spark_options(run_parser)
    add_adapter_options(run_parser)
    run_parser.add_argument("--quiet", action="store_true", help="no progress display")
    run_parser.set_defaults(func=run)


def add_spark_options(run_parser: argparse.ArgumentParser) -> None:
    """``pipeline run``'s options for Spark: master, replay mode, partitions, executors."""
    run_parser.add_argument(
        "--master",
        help="Spark master: local[N], local[*] (default), local-cluster[N,cores,MB] or "
        "spark://host:port; under spark-submit the submit's --master is used",
    )
    run_parser.add_argument(
        "--mode",
        default="arrow",
        choices=("arrow", "pandas", "rdd"),
        help="how executors replay: mapInArrow (default), mapInPandas or RDD mapPartitions",
    )
    run_parser.add_argument(
        "--partitions", type=at_least(1), help="grid partitions (default 8 x cores)"
    )
    run_parser.add_argument(
        "--executor-python",
        default="auto",
        metavar="PYTHON",
        help="the executors' interpreter (local and local-cluster masters): auto (default: "
        "the compiled build when there is one, else this interpreter), driver (this "
        "interpreter) or an interpreter path",
    )


def add_adapter_options(run_parser: argparse.ArgumentParser) -> None:
    """``pipeline run``'s options for checking a port through its conformance adapter."""
    run_parser.add_argument(
        "--adapter",
        metavar="CMD",
        help="check a port instead of --impl-b: replay the streams through its conformance "
        "adapter command (the kit's line protocol; one process per executor task; use "
        "absolute paths, the executors run it) against --impl-a; each difference is shrunk "
        "and written as a step file for `kpurgatory conformance --adapter CMD --replay FILE`",
    )
    run_parser.add_argument(
        "--allow",
        metavar="IDS",
        help="with --adapter: accept known differences, as `kpurgatory conformance --allow` "
        "('kafka' or comma-separated ids)",
    )
    run_parser.add_argument(
        "--step-timeout",
        type=float,
        default=DEFAULT_STEP_TIMEOUT_S,
        metavar="S",
        help=f"with --adapter: seconds to wait for each answer (default "
        f"{DEFAULT_STEP_TIMEOUT_S:g}); an adapter that does not answer fails its stream",
    )


def add_vectors_parser(commands: Any) -> None:
    """Register ``pipeline vectors``: export conformance vectors."""
    vec_parser = commands.add_parser(
        "vectors",
        help="export conformance vectors (JSON)",
        description="Write the rule vectors and one vector per scenario x preset x seed.",
    )
    vec_parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="folder for the .json files"
    )
    vec_parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="only these (repeatable)"
    )
    vec_parser.add_argument(
        "--preset", action="append", choices=sorted(PRESETS), help="only these (repeatable)"
    )
    vec_parser.add_argument("--seeds", type=at_least(1), default=1, help="seeds 1..N (1)")
    vec_parser.add_argument(
        "--ops",
        type=at_least(1),
        default=COMMITTED_VECTORS["n_ops"],
        help=f"operations per stream ({COMMITTED_VECTORS['n_ops']})",
    )
    vec_parser.add_argument(
        "--adversarial-ops", type=at_least(1), help="operations for adversarial streams"
    )
    vec_parser.add_argument("--no-rules", action="store_true", help="skip the rule vectors")
    vec_parser.set_defaults(func=vectors)


def run(args: argparse.Namespace) -> int:
    """``kpurgatory pipeline run``: the whole job; prints where the report is."""
    return run_with(args, None)


def vectors(args: argparse.Namespace) -> int:
    """``kpurgatory pipeline vectors``: the rule and timer vectors plus one per scenario x
    preset x seed."""
    from kpurgatory.conformance.vectors import (
        rule_vectors,
        timer_vectors,
        workload_vector,
        write_vector,
    )

    if args.seeds < 1 or args.ops < 1:
        print("kpurgatory pipeline vectors: --seeds and --ops must be >= 1", file=sys.stderr)
        return 2
    written = []
    if not args.no_rules:
        written += [write_vector(args.out, v) for v in rule_vectors()]
        written += [write_vector(args.out, v) for v in timer_vectors()]
    adversarial_ops = args.adversarial_ops or (
        COMMITTED_VECTORS["adversarial_n_ops"]
        if args.ops == COMMITTED_VECTORS["n_ops"]
        else args.ops
    )
    for scenario in args.scenario or sorted(SCENARIOS):
        for preset in args.preset or sorted(PRESETS):
            for seed in range(1, args.seeds + 1):
                n_ops = adversarial_ops if scenario == "adversarial" else args.ops
                written.append(
                    write_vector(args.out, workload_vector(scenario, preset, seed, 0, n_ops))
                )
    size = sum(path.stat().st_size for path in written)
    print(f"wrote {len(written)} vectors ({size / 1e6:.2f} MB) to {args.out}")
    return 0
