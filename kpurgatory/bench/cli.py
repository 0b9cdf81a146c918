"""``kpurgatory bench``: what kpurgatory costs here, against what you would use instead.

Runs every benchmark in this interpreter's build and, with ``--compiled-python``, again
in a mypyc build's interpreter, then prints a table per question. ``--quick`` (the
default, under a minute) is a smoke run at small sizes; ``--reduced`` answers every
question at reduced sizes and repetitions; ``--full`` is the measurement ``make bench``
records. Nothing is written without ``--out DIR`` (results.json and the charts);
``--report FILE`` also writes the markdown page. ``--compare-to OLD.json`` tells a
regression from noise against an earlier results.json (pyperf's compare_to).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kpurgatory.bench import aiocost, suite
from kpurgatory.bench.enqueue import SWEEPS
from kpurgatory.cli import add_command

__all__ = ["add_parser", "main", "run_build"]


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def run_build(python: str, mode: str, say: Any = _say) -> dict[str, Any]:
    """Every benchmark in ``python``'s build: its label, the merged pyperf suite, the sweep."""
    import pyperf

    # Without PYTHONPATH and outside the source tree: a checkout on the path would shadow
    # the build installed in ``python`` (a compiled pass would measure pure code).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="kpurgatory-bench-") as folder:

        def run(*args: str) -> None:
            say(" ".join(args))
            subprocess.run([python, *args], check=True, cwd=folder, env=env)

        label = Path(folder) / "build.txt"
        run(
            "-c",
            "from kpurgatory.pipeline.builds import optimized_build as b; "
            f"open({str(label)!r}, 'w').write(b())",
        )
        merged = None
        for group in suite.GROUPS:
            out = Path(folder) / f"{group}.json"
            options = suite.GROUP_OPTIONS[mode][group]
            run(
                "-m",
                "kpurgatory.bench.suite",
                "--mode",
                mode,
                "--group",
                group,
                *options,
                "-o",
                str(out),
            )
            loaded = pyperf.BenchmarkSuite.load(str(out))
            if merged is None:
                merged = loaded
            else:
                for bench in loaded.get_benchmarks():
                    merged.add_benchmark(bench)
        assert merged is not None
        merged.dump(str(Path(folder) / "suite.json"))
        enqueue = Path(folder) / "enqueue.json"
        run("-m", "kpurgatory.bench.enqueue", "--mode", mode, "--out", str(enqueue))
        waits = Path(folder) / "asyncio.json"
        run("-m", "kpurgatory.bench.aiocost", "--mode", mode, "--out", str(waits))
        return {
            "build": label.read_text(encoding="utf-8"),
            "python": python,
            "suite": json.loads((Path(folder) / "suite.json").read_text(encoding="utf-8")),
            "enqueue": json.loads(enqueue.read_text(encoding="utf-8")),
            "asyncio": json.loads(waits.read_text(encoding="utf-8")),
        }


def _commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=root, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _configuration(mode: str) -> str:
    sizes = suite.SIZES[mode]
    sweep = SWEEPS[mode]
    waits = aiocost.SIZES[mode]
    options = "; ".join(
        f"{group}: {' '.join(opts)}" for group, opts in suite.GROUP_OPTIONS[mode].items()
    )
    return (
        f"add+cancel with {', '.join(f'{n:,}' for n in sizes['add-cancel'])} pending; "
        f"lifecycle and memory at {', '.join(f'{n:,}' for n in sizes['lifecycle'])} tasks; "
        f"long-poll {suite.LONG_POLL['waits']:,} waits on {suite.LONG_POLL['keys']:,} keys "
        f"(timeout {suite.LONG_POLL['timeout_ms']} ms); enqueue sweep "
        f"{', '.join(sweep.cases)}-timeout at {', '.join(f'{r:,.0f}' for r in sweep.rates)} "
        f"requests/s, {sweep.seconds_per_point} s of requests per point; an asyncio wait: "
        f"CPU and memory at {waits['waits']:,.0f} waits, heartbeat at {waits['lag']:,.0f} "
        f"pending for {waits['seconds']:g} s, {waits['pause']:,.0f} overdue after a pause; "
        f"pyperf options per group: {options}."
    )


def _command(args: argparse.Namespace) -> str:
    parts = ["kpurgatory", "bench", f"--{args.mode}"]
    for flag in ("out", "report", "compiled_python"):
        if getattr(args, flag) is not None:
            parts += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return " ".join(parts)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One run: this interpreter's build, then the ``--compiled-python`` one."""
    results: dict[str, Any] = {
        "command": _command(args),
        "mode": args.mode,
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version()},
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "configuration": _configuration(args.mode),
        "builds": {},
    }
    pythons = [sys.executable] + ([args.compiled_python] if args.compiled_python else [])
    for python in pythons:
        python = str(Path(python).absolute()) if os.sep in python else python
        build = run_build(python, args.mode)
        if python != sys.executable and build["build"] != "compiled":
            raise SystemExit(
                f"--compiled-python {python} runs a {build['build']} build of kpurgatory "
                "(make compiled-venv builds a compiled one)"
            )
        results["builds"][build["build"]] = build
    results["load_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


def compare(old: dict[str, Any], new: dict[str, Any]) -> None:
    """pyperf compare_to per build present in both runs, then the enqueue plateaus."""
    with tempfile.TemporaryDirectory(prefix="kpurgatory-compare-") as folder:
        for build in [b for b in new["builds"] if b in old["builds"]]:
            files = []
            for name, run in (("old", old), ("new", new)):
                files.append(Path(folder) / f"{build}-{name}.json")
                files[-1].write_text(json.dumps(run["builds"][build]["suite"]), encoding="utf-8")
            print(f"\n{build} build: {old['commit']} (old) against {new['commit']} (new)")
            command = [sys.executable, "-m", "pyperf", "compare_to", *map(str, files), "--table"]
            subprocess.run(command, check=False)
            before, after = (run["builds"][build]["enqueue"]["plateau"] for run in (old, new))
            for case in [case for case in after if case in before]:
                for design, figure in after[case].items():
                    was = before[case][design]["plateau"]
                    print(
                        f"enqueue plateau {case} {design}: {was:,.0f}/s -> "
                        f"{figure['plateau']:,.0f}/s ({figure['plateau'] / was - 1:+.0%}; "
                        "one sweep each, no significance test)"
                    )


def _run(args: argparse.Namespace) -> int:
    from kpurgatory.bench.report import render, write_charts
    from kpurgatory.bench.tables import markdown, tables

    if (args.report or args.report_only) and args.out is None:
        args.parser.error("--report and --report-only need --out DIR")
    if args.report_only and not (args.out / "results.json").is_file():
        args.parser.error(f"--report-only: no results.json in {args.out}")
    if args.compare_to is not None and not args.compare_to.is_file():
        args.parser.error(f"--compare-to: no such file {args.compare_to}")
    if args.report_only:
        results = json.loads((args.out / "results.json").read_text(encoding="utf-8"))
    else:
        results = measure(args)
        print()
        for table in tables(results):
            print("\n".join(markdown(table)))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(
            json.dumps(results, indent=1) + "\n", encoding="utf-8"
        )
        charts = write_charts(results, args.out)
        if args.report is not None:
            analysis = args.out / "analysis.md"
            text = analysis.read_text(encoding="utf-8") if analysis.exists() else None
            args.report.write_text(
                render(results, [c.name for c in charts], text), encoding="utf-8"
            )
            charts.append(args.report)
        for path in [args.out / "results.json", *charts]:
            print(f"wrote {path}")
    if args.compare_to is not None:
        compare(json.loads(args.compare_to.read_text(encoding="utf-8")), results)
    return 0


DESCRIPTION = """\
What kpurgatory costs on this machine, against what you would use instead: timer
add+cancel against asyncio's call_at and a heapq timer, the full lifecycle of many
timers and their memory, long-poll CPU against plain asyncio, the enqueue plateau of
Kafka's purgatory benchmark against Kafka 0.8's design, and what one asyncio wait with
a deadline costs (CPU, memory, how long the loop stalls with many pending) against a
Future + call_at and asyncio.timeout_at. Prints a table per question.

--quick (default, under a minute) is a smoke run at small sizes; --reduced answers
every question at reduced sizes; --full is the recorded measurement. --compiled-python
runs everything again in a mypyc build. Nothing is written without --out DIR.

examples:
  kpurgatory bench
  kpurgatory bench --full --out docs/perf --report docs/performance.md \\
      --compiled-python build/compiled/venv/bin/python
  kpurgatory bench --quick --compare-to docs/perf/results.json
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kpurgatory bench``."""
    parser = add_command(
        subparsers,
        "bench",
        help="what kpurgatory costs here against asyncio, heapq and Kafka 0.8's design",
        description=DESCRIPTION,
    )
    mode = parser.add_mutually_exclusive_group()
    for name, text in (
        ("quick", "smoke run at small sizes, under a minute (default)"),
        ("reduced", "every question at reduced sizes and repetitions"),
        ("full", "the recorded measurement (make bench; run it on a quiet machine)"),
    ):
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name, help=text)
    parser.set_defaults(mode="quick", func=_run, parser=parser)
    parser.add_argument("--out", type=Path, metavar="DIR", help="write results.json and charts")
    parser.add_argument("--report", type=Path, metavar="FILE", help="write the markdown page")
    parser.add_argument("--report-only", action="store_true", help="page from DIR/results.json")
    parser.add_argument("--compiled-python", metavar="PYTHON", help="also run in this build")
    parser.add_argument("--compare-to", type=Path, metavar="OLD.json", help="compare with a run")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kpurgatory.bench.cli ARGS`` (the same as ``kpurgatory bench ARGS``)."""
    from kpurgatory.cli import build_parser

    arguments = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(["bench", *arguments])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
