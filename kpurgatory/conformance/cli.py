"""``kpurgatory conformance``: check a port (or a Python implementation) through its adapter.

Three modes, all comparing the adapter's answers with the reference implementation
step by step (docs/conformance.md):

- default: replay every committed vector (``--vectors``, default
  ``conformance/vectors``) and report pass/fail per vector with the first divergence,
  then list what the port did not consume;
- ``--stateful``: let Hypothesis generate step sequences, run each on the in-process
  reference and on the adapter, and print the shrunk failing sequence as JSON lines;
- ``--replay FILE``: run one JSON-lines step sequence (for example a shrunk one saved
  from ``--stateful``) and report its first divergence.

Exit status: 0 if everything agreed (and every vector was consumed), 1 otherwise, 2
on a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from kpurgatory.conformance.adapter import (
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_VECTORS_DIR,
    STEP_KINDS,
    AdapterError,
    AdapterProcess,
    format_report,
    replay_vectors,
    vector_paths,
)
from kpurgatory.conformance.steps import Step, step_from_json

__all__ = ["add_parser", "run"]

PYTHON_ADAPTER = "python -m kpurgatory.conformance.python_adapter --impl reference"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kpurgatory conformance``."""
    parser = subparsers.add_parser(
        "conformance",
        help="check an implementation through its stdin/stdout adapter",
        description=__doc__.split("\n", 2)[2].replace("``", "") if __doc__ else None,
        epilog=f"example: kpurgatory conformance --adapter {PYTHON_ADAPTER!r}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--adapter",
        required=True,
        metavar="CMD",
        help="the adapter command line (split like a shell would, run without a shell)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--stateful", action="store_true", help="generate sequences with Hypothesis")
    mode.add_argument(
        "--replay", type=Path, metavar="FILE", help="run one JSON-lines step sequence"
    )
    parser.add_argument(
        "--vectors",
        type=Path,
        action="append",
        metavar="PATH",
        help=f"vector file or directory (repeatable; default {DEFAULT_VECTORS_DIR})",
    )
    parser.add_argument(
        "--max-examples", type=int, default=100, metavar="N", help="stateful: runs (100)"
    )
    parser.add_argument(
        "--steps", type=int, default=50, metavar="N", help="stateful: steps per run (50)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, metavar="N", help="stateful: a fixed seed"
    )
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="stateful: also write the shrunk sequence here"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_STEP_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for each answer (default {DEFAULT_STEP_TIMEOUT_S:g})",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen mode; print the report; return the exit status."""
    try:
        adapter = AdapterProcess(args.adapter, step_timeout_s=args.timeout)
    except (TypeError, ValueError) as exc:
        print(f"kpurgatory conformance: error: --adapter/--timeout: {exc}", file=sys.stderr)
        return 2
    with adapter:
        if args.stateful:
            return _stateful(adapter, args)
        if args.replay is not None:
            return _replay(adapter, args)
        return _vectors(adapter, args)


def _vectors(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    try:
        paths = vector_paths(args.vectors or [DEFAULT_VECTORS_DIR])
    except ValueError as exc:
        print(f"kpurgatory conformance: error: {exc}", file=sys.stderr)
        return 2
    results = replay_vectors(adapter, paths)
    print(format_report(results, args.adapter))
    return 0 if all(result.status == "passed" for result in results) else 1


def _reference() -> object:
    return importlib.import_module("kpurgatory.reference")


def _stateful(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    try:
        stateful = importlib.import_module("kpurgatory.conformance.stateful")
    except ImportError as exc:
        print(
            f"kpurgatory conformance: error: --stateful needs Hypothesis "
            f"(pip install 'kpurgatory[dev]'): {exc}",
            file=sys.stderr,
        )
        return 2
    try:
        failure, stats = stateful.run_stateful(
            stateful.AdapterSide(adapter),
            reference=_reference(),
            max_examples=args.max_examples,
            step_count=args.steps,
            seed=args.seed,
        )
    except (TypeError, ValueError) as exc:
        print(f"kpurgatory conformance: error: {exc}", file=sys.stderr)
        return 2
    kinds = ", ".join(f"{kind} {stats.kinds.get(kind, 0)}" for kind in STEP_KINDS)
    print(f"stateful: {stats.runs} sequences, {stats.steps} steps through {args.adapter!r}")
    print(f"  steps by kind: {kinds}")
    never = [kind for kind in STEP_KINDS if not stats.kinds.get(kind)]
    print("  step kinds never sent: " + (", ".join(never) if never else "none"))
    if failure is None:
        print("PASS stateful: no difference from the reference")
        return 0
    print(stateful.format_failure(failure, args.adapter))
    if args.out is not None:
        args.out.write_text("\n".join(failure.json_lines()) + "\n", encoding="utf-8")
        print(f"(written to {args.out})")
    return 1


def _replay(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    try:
        steps = _read_steps(args.replay)
    except (OSError, ValueError, TypeError) as exc:
        print(f"kpurgatory conformance: error: --replay {args.replay}: {exc}", file=sys.stderr)
        return 2
    stateful = importlib.import_module("kpurgatory.conformance.stateful")
    try:
        failure = stateful.check_sequence(steps, stateful.AdapterSide(adapter), _reference())
    except AdapterError as exc:  # pragma: no cover - check_sequence turns these into failures
        print(f"FAIL replay: {exc}")
        return 1
    if failure is None:
        print(f"PASS replay: {len(steps)} steps agree with the reference")
        return 0
    print(stateful.format_failure(failure, args.adapter, shrunk=False))
    return 1


def _read_steps(path: Path) -> list[Step]:
    """The steps of a JSON-lines file (blank lines ignored); errors name the line."""
    steps: list[Step] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            steps.append(step_from_json(json.loads(line)))
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"line {number}: {exc}") from None
    if not steps:
        raise ValueError("no steps in the file")
    return steps
