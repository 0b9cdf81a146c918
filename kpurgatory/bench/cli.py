"""``kpurgatory bench [--quick|--full] [--out DIR]``: run the benchmarks, print the goals.

``--quick`` (the default) is a smoke run of every code path with tiny sizes, at rates
capped far below any saturation point: its goal lines say so and are not a measurement.
``--full`` is the measurement (about 30 minutes; run it on a quiet machine). Nothing is
written unless ``--out DIR`` is given: then DIR receives results.json, the plots and the
profile trees, and the markdown report goes to ``--report`` (default DIR/performance.md).
``make bench`` runs ``--full --out docs/perf --report docs/performance.md`` with a second
pass in the compiled build's interpreter (``--compiled-python``). Profiling needs
pyinstrument (the ``bench`` extra); without it the profile benchmark is skipped with a note.
``--report-only`` regenerates the markdown and plots from DIR/results.json
(``--add-runs PATH`` merges in the runs of another, e.g. a later ``--only versus`` run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kpurgatory.bench.runner import BENCHMARKS, DEFAULT_SEED, PLANS, goals, run_all

__all__ = ["add_parser", "main"]

REPORT_NAME = "performance.md"
"""The report's file name in ``--out`` when ``--report`` is not given."""

ANALYSIS_NAME = "analysis.md"
"""A hand-written reading of the results, in the output folder, included in the report."""


@contextmanager
def _progress(plain: bool) -> Iterator[Callable[[str], None]]:
    """A ``say`` callback: a rich status line with elapsed time, or plain lines."""
    started = time.monotonic()
    if not plain:
        try:
            from rich.console import Console
        except ImportError:
            plain = True
    if plain:

        def say_plain(text: str) -> None:
            print(f"[{time.monotonic() - started:7.1f} s] {text}", flush=True)

        yield say_plain
        return
    console = Console(stderr=True)
    with console.status("starting") as status:

        def say_rich(text: str) -> None:
            stamp = f"[{time.monotonic() - started:7.1f} s]"
            console.print(f"{stamp} {text}", markup=False, highlight=False)  # no file:line
            status.update(f"{stamp} {text}")

        yield say_rich


def _command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this run, rebuilt from the parsed arguments."""
    parts = ["kpurgatory", "bench", f"--{args.mode}"]
    if args.out is not None:
        parts += ["--out", str(args.out)]
    if args.report is not None:
        parts += ["--report", str(args.report)]
    if args.designs:
        parts += ["--designs", ",".join(args.designs)]
    if list(args.only) != list(BENCHMARKS):
        parts += ["--only", ",".join(args.only)]
    if args.seed != DEFAULT_SEED:
        parts += ["--seed", str(args.seed)]
    if args.compiled_python:
        parts += ["--compiled-python", args.compiled_python]
    return " ".join(shlex.quote(part) for part in parts)


def _compiled_pass(python: str, args: argparse.Namespace, say: Callable[[str], None]) -> Any:
    """Run the same benchmarks in ``python`` (a compiled build) and return its run."""
    if os.sep in python:  # a path: make it absolute, the pass runs from a temporary folder
        python = str(Path(python).absolute())
    with tempfile.TemporaryDirectory(prefix="kpurgatory-bench-") as folder:
        out = Path(folder) / "run.json"
        command = [
            python,
            "-m",
            "kpurgatory",
            "bench",
            f"--{args.mode}",
            "--plain",
            "--json-only",
            str(out),
            "--seed",
            str(args.seed),
            "--only",
            ",".join(args.only),
        ]
        if args.designs:
            command += ["--designs", ",".join(args.designs)]
        say(f"compiled pass: {' '.join(command)}")
        # Without PYTHONPATH: a source tree on it (a developer's checkout) would shadow the
        # compiled build installed in that interpreter, and the pass would measure pure code.
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        subprocess.run(command, check=True, cwd=tempfile.gettempdir(), env=env)
        data = json.loads(out.read_text(encoding="utf-8"))
        if data.get("build") != "compiled":
            raise SystemExit(
                f"--compiled-python {python} ran a {data.get('build')} build of kpurgatory "
                "(is it a mypyc build, e.g. from make compiled-venv?)"
            )
        profile_texts = data.pop("_profile_texts", {})
        return data, profile_texts


def write_outputs(
    results: dict[str, Any], out_dir: Path, report: Path | None, texts: dict[str, str]
) -> list[Path]:
    """Write results.json, the profile trees, the plots and (unless None) the report."""
    from kpurgatory.bench.report import render, write_plots

    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "results.json"]
    written[0].write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for stem, text in texts.items():
        path = out_dir / f"profile-{stem}.txt"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    plots = write_plots(results["runs"], out_dir)
    written += plots
    if report is not None:
        analysis_path = out_dir / ANALYSIS_NAME
        analysis = analysis_path.read_text(encoding="utf-8") if analysis_path.exists() else None
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(render(results, [p.name for p in plots], analysis), encoding="utf-8")
        written.append(report)
    return written


def _runs_to_add(path: Path, present: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of another results.json (e.g. a ``--only versus`` run), each labelled with
    the command that made it; a run already present (same build, commit, date) is skipped."""
    other = json.loads(path.read_text(encoding="utf-8"))
    seen = {
        (r.get("build"), r["machine"].get("git_commit"), r["machine"].get("date")) for r in present
    }
    added = []
    for run in other["runs"]:
        key = (run.get("build"), run["machine"].get("git_commit"), run["machine"].get("date"))
        if key not in seen:
            added.append({**run, "command": other["command"]})
    return added


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _goal_lines(results: dict[str, Any], plan_rates: list[float]) -> list[str]:
    """One line per goal; a quick run's verdicts are marked as capped, not measured."""
    lines = []
    for goal in results["goals"]:
        if results["mode"] == "quick":
            verdict = (
                f"not a measurement (quick run: tiny sizes, rates capped at "
                f"{max(plan_rates):,.0f}/s)"
            )
        else:
            verdict = {True: "met", False: "NOT met", None: "not measured"}[goal["met"]]
        values = ", ".join(
            f"{m['run']}: {m['value']:.2f}" if m["value"] is not None else f"{m['run']}: n/a"
            for m in goal["measurements"]
        )
        lines.append(f"goal {goal['target']:>8}  {verdict:<12} {goal['goal']}  [{values}]")
    return lines


def _without_missing_profiler(only: list[str], say: Callable[[str], None]) -> list[str]:
    """``only`` minus ``profile`` if pyinstrument is not installed (with a note)."""
    if "profile" in only and importlib.util.find_spec("pyinstrument") is None:
        say("pyinstrument is not installed: the profile benchmark is skipped (bench extra)")
        return [name for name in only if name != "profile"]
    return only


def _run(args: argparse.Namespace) -> int:
    out_dir: Path | None = args.out
    if out_dir is None and (args.report is not None or args.report_only):
        flag = "--report" if args.report is not None else "--report-only"
        args.parser.error(f"{flag} needs --out DIR (bench writes only under an explicit --out)")
    report: Path | None = None
    if out_dir is not None and not args.no_report:
        report = args.report or out_dir / REPORT_NAME
    if args.report_only:
        assert out_dir is not None
        results = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
        for path in args.add_runs or []:
            results["runs"] += _runs_to_add(path, results["runs"])
        results["goals"] = goals(results["runs"])
        for path in write_outputs(results, out_dir, report, {}):
            print(f"wrote {path}")
        return 0
    unknown = [name for name in args.only if name not in BENCHMARKS]
    if unknown:
        args.parser.error(f"--only: unknown benchmark(s) {unknown}; choose from {BENCHMARKS}")
    plan = PLANS[args.mode]
    with _progress(args.plain) as say:
        args.only = _without_missing_profiler(list(args.only), say)
        run, texts = run_all(
            plan, designs=args.designs or None, only=args.only, seed=args.seed, say=say
        )
        if args.json_only is not None:
            run["_profile_texts"] = texts
            args.json_only.write_text(json.dumps(run) + "\n", encoding="utf-8")
            return 0
        runs = [run]
        all_texts = {f"{run['build']}-{stem}": text for stem, text in texts.items()}
        if args.compiled_python:
            compiled, compiled_texts = _compiled_pass(args.compiled_python, args, say)
            runs.append(compiled)
            all_texts.update({f"{compiled['build']}-{k}": v for k, v in compiled_texts.items()})
    results = {
        "schema": run["schema"],
        "mode": args.mode,
        "command": _command_line(args),
        "runs": runs,
        "goals": goals(runs),
    }
    if out_dir is None:
        print("nothing written: pass --out DIR to write results.json, plots and the report")
    else:
        for path in write_outputs(results, out_dir, report, all_texts):
            print(f"wrote {path}")
    for line in _goal_lines(results, [rate for rates in plan.rates.values() for rate in rates]):
        print(line)
    return 0


DESCRIPTION = """\
Run the benchmarks (enqueue saturation, timer scaling, idle cost, profiles) and print
each goal's verdict.

--quick (the default) is a smoke run of every code path with tiny sizes and capped
rates: its goal lines are not a measurement. --full is the measurement (about 30
minutes; run it on a quiet machine). Nothing is written unless --out DIR is given.
Profiling needs pyinstrument (the bench extra); without it that benchmark is skipped.

examples:
  kpurgatory bench
  kpurgatory bench --full --out docs/perf --report docs/performance.md
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kpurgatory bench``."""
    parser = subparsers.add_parser(
        "bench",
        help="run the benchmarks and print the goals (--quick by default)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        dest="mode",
        action="store_const",
        const="quick",
        help="smoke run with tiny sizes and capped rates (default)",
    )
    mode.add_argument(
        "--full",
        dest="mode",
        action="store_const",
        const="full",
        help="the measurement (about 30 minutes)",
    )
    parser.set_defaults(mode="quick")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write results.json, plots and profiles here (default: write nothing)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help="the markdown report (default: DIR/performance.md; needs --out)",
    )
    parser.add_argument("--no-report", action="store_true", help="do not write the markdown")
    parser.add_argument(
        "--designs",
        type=_split,
        default=[],
        metavar="LIST",
        help="comma-separated designs (default: all)",
    )
    parser.add_argument(
        "--only",
        type=_split,
        default=list(BENCHMARKS),
        metavar="LIST",
        help=f"comma-separated benchmarks among {','.join(BENCHMARKS)} (default: all)",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"workload seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--compiled-python",
        metavar="PYTHON",
        help="also run in this interpreter (a mypyc build of kpurgatory) and merge its run",
    )
    parser.add_argument("--json-only", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="regenerate the report and plots from DIR/results.json (needs --out)",
    )
    parser.add_argument(
        "--add-runs",
        type=Path,
        action="append",
        help="with --report-only: merge the runs of this results.json into the report "
        "(and into the results file), e.g. a separate --only versus run",
    )
    parser.add_argument("--plain", action="store_true", help="plain progress lines (no rich)")
    parser.set_defaults(func=_run, parser=parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kpurgatory bench`` with ``argv`` (for ``python -m kpurgatory.bench.cli``)."""
    from kpurgatory.cli import build_parser

    arguments = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(["bench", *arguments])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
