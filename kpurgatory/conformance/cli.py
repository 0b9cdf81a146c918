"""``kpurgatory conformance``: check a port (or a Python implementation) through its adapter.

Four modes (docs/conformance.md): the first three compare the adapter's answers with
the reference implementation step by step, the fourth checks real-thread histories
against the spec's atomic steps:

- default: replay every committed vector (``--vectors``, default the vectors shipped
  in the package, or a checkout's ``conformance/vectors``) and report pass/fail per
  vector with the first divergence, then list what the port did not consume;
- ``--stateful`` (the full check, what a port must pass): first replay the vectors as
  the default mode does, then let Hypothesis generate step sequences, run each on the
  in-process reference and on the adapter, and print the shrunk failing sequence as JSON
  lines (``--search-only`` skips the vectors);
- ``--replay FILE``: run one JSON-lines step sequence (for example a shrunk one saved
  from ``--stateful``) and report its first divergence.
- ``--threads`` (the concurrent check): send seeded programs of 2-4 threads (``--threads
  N`` or ``LOW-HIGH``) to the adapter, which runs them on real threads against one
  purgatory and answers with the calls' times, results and callbacks; each history is
  searched for an interleaving of the spec's atomic steps that explains it
  (``--histories``, ``--budget``, ``--seed``); a rejected one is shrunk, printed with
  the rule it breaks and saved for ``--threads --replay FILE``. ``--serial`` runs each
  program's threads one after another (a race then cannot show).

Options for every mode: ``--without NAMES`` and ``--async-run`` declare what the port
lacks (an adapter may declare it in its ``init`` answer instead): nothing it lacks is
sent, and the report says what was not checked. ``--allow kafka`` (or comma-separated ids of
``kpurgatory.spec.known_differences``) accepts upstream Kafka's documented differences
and reports each one it accepted (with ``--threads`` it leaves out of the programs
the calls an allowed difference touches, and lists them); ``--timer-only`` checks a
port of the timer alone (only timer steps are generated or sent; vectors with
purgatory steps are listed as not consumed and do not fail the run).

Before anything else the adapter is started and sent one ``init``: an adapter that
cannot start, exits at once or never answers (a buffered stdout) is one error.

Hypothesis keeps its files (``.hypothesis/``) in a temporary directory that is removed
afterwards, so nothing is written into the working directory, unless the environment
variable ``HYPOTHESIS_STORAGE_DIRECTORY`` names a place for them.

Exit status: 0 if everything agreed (and every vector sent was consumed), 1 otherwise,
2 on a usage error or an adapter that never answers.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from kpurgatory.conformance.adapter import (
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_VECTORS_DIR,
    STEP_KINDS,
    AdapterError,
    AdapterProcess,
    absent_line,
    format_report,
    probe,
    replay_vectors,
    vector_paths,
)
from kpurgatory.conformance.adapter_process import step_kinds
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.driver import sequence_error
from kpurgatory.conformance.steps import TIMER_STEP_KINDS, Step, step_from_json
from kpurgatory.conformance.threads_cli import prepare_threads
from kpurgatory.conformance.threads_run import DEFAULT_HISTORIES, DEFAULT_RETRY_BUDGET
from kpurgatory.conformance.vectors import FORMAT
from kpurgatory.history.search import DEFAULT_BUDGET
from kpurgatory.spec.known_differences import KnownDifference, resolve

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
    mode.add_argument(
        "--stateful",
        action="store_true",
        help="the full check: the vectors, then sequences generated with Hypothesis",
    )
    mode.add_argument(
        "--replay", type=Path, metavar="FILE", help="run one JSON-lines step sequence"
    )
    parser.add_argument(
        "--threads",
        nargs="?",
        const="2-4",
        default=None,
        metavar="N|LOW-HIGH",
        help="the concurrent check: programs of N (default 2-4) threads run at once by the "
        "adapter, each history checked against the spec's model (with --replay FILE: run "
        "a saved failing program again)",
    )
    parser.add_argument(
        "--histories",
        type=int,
        default=None,
        metavar="N",
        help=f"threads: histories to check (default {DEFAULT_HISTORIES})",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"threads: search nodes per history before it counts as undecided "
        f"(default {DEFAULT_BUDGET})",
    )
    parser.add_argument(
        "--retry-budget",
        type=int,
        default=DEFAULT_RETRY_BUDGET,
        metavar="N",
        help=f"threads: search nodes for a second search of an undecided history "
        f"(default {DEFAULT_RETRY_BUDGET}; 0: none)",
    )
    parser.add_argument(
        "--serial",
        action="store_true",
        help="threads: run each program's threads one after another (no race can show)",
    )
    parser.add_argument(
        "--shrink-attempts",
        type=int,
        default=20,
        metavar="N",
        help="threads: runs of each smaller program while shrinking a failure (0: none; 20)",
    )
    parser.add_argument(
        "--vectors",
        type=Path,
        action="append",
        metavar="PATH",
        help=f"vector file or directory (repeatable; default {DEFAULT_VECTORS_DIR})",
    )
    parser.add_argument(
        "--search-only",
        action="store_true",
        help="stateful: skip the vectors, only search (a quicker loop while fixing a bug)",
    )
    parser.add_argument(
        "--max-examples", type=int, default=100, metavar="N", help="stateful: runs (100)"
    )
    parser.add_argument(
        "--steps", type=int, default=50, metavar="N", help="stateful: steps per run (50)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="stateful, threads: a fixed seed (default: a fresh one, printed)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="stateful: also write the shrunk sequence here; threads: write the failing "
        "program here (default: a new file in the temporary directory)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_STEP_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for each answer (default {DEFAULT_STEP_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--allow",
        metavar="IDS",
        help="accept known differences: 'kafka' (all of upstream Kafka's) or comma-separated "
        "ids from kpurgatory.spec.known_differences; each accepted one is reported",
    )
    parser.add_argument(
        "--timer-only",
        action="store_true",
        help="check a port of the timer alone: only timer steps are sent or generated",
    )
    parser.add_argument(
        "--without",
        metavar="NAMES",
        default="",
        help="what the port lacks (it may also declare it in its init answer): "
        "comma-separated step kinds (cancel, next_due_time, ...) or the features re_add, "
        "on_run, callbacks, nested_advance, negative_time, size (and, for --threads, "
        "threads, abandon, safe_try_complete, maybe_try_complete); "
        "never sent, and reported as not checked",
    )
    parser.add_argument(
        "--async-run",
        action="store_true",
        help="the port runs expired tasks after the flush, on another thread (it answers "
        "a step once they ran): each step's tasks are compared in any order, no on_run",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the chosen mode; print the report; return the exit status."""
    try:
        adapter = AdapterProcess(args.adapter, step_timeout_s=args.timeout)
    except (TypeError, ValueError) as exc:
        print(f"kpurgatory conformance: error: --adapter/--timeout: {exc}", file=sys.stderr)
        return 2
    try:
        args.allowed = resolve(args.allow) if args.allow is not None else ()
    except ValueError as exc:
        print(f"kpurgatory conformance: error: --allow: {exc}", file=sys.stderr)
        return 2
    try:
        adapter.flags = Capabilities(Capabilities.parse_without(args.without), args.async_run)
    except ValueError as exc:
        print(f"kpurgatory conformance: error: --without: {exc}", file=sys.stderr)
        return 2
    try:  # the mode's own inputs first: a usage error never starts the adapter
        mode = _prepare(args)
    except _UsageError as exc:
        print(f"kpurgatory conformance: error: {exc}", file=sys.stderr)
        return 2
    adapter.timer_only = args.timer_only
    with adapter:
        unusable = probe(adapter)
        if unusable is not None:
            print(
                f"kpurgatory conformance: error: adapter {args.adapter!r} did not answer "
                f"its first step (an init), so nothing was checked: {unusable}",
                file=sys.stderr,
            )
            return 2
        if adapter.capabilities.describe():
            print(f"port capabilities: {adapter.capabilities.describe()}")
        return mode(adapter, args)


class _UsageError(ValueError):
    """A bad option value or input file (exit 2, before the adapter starts)."""


Mode = Callable[[AdapterProcess, argparse.Namespace], int]


def _prepare(args: argparse.Namespace) -> Mode:
    """Check the chosen mode's inputs and return the function that runs it."""
    if args.threads is not None:
        try:
            return prepare_threads(args)
        except ValueError as exc:
            raise _UsageError(str(exc)) from None
    for name in ("histories", "serial"):
        if getattr(args, name) not in (None, False):
            raise _UsageError(f"--{name} goes with --threads")
    if args.stateful:
        for name, value in (("max_examples", args.max_examples), ("steps", args.steps)):
            if value < 1:
                raise _UsageError(f"{name} must be >= 1, got {value}")
        try:
            args.stateful_module = importlib.import_module("kpurgatory.conformance.stateful")
        except ImportError as exc:
            raise _UsageError(
                f"--stateful needs Hypothesis (pip install 'kpurgatory[conformance]'): {exc}"
            ) from None
        if not args.search_only:
            args.vector_files = _vector_files(args)
        return _stateful
    if args.search_only:
        raise _UsageError("--search-only goes with --stateful")
    if args.replay is not None:
        try:
            args.replay_steps, args.replay_lines = _read_steps(args.replay)
        except (OSError, ValueError, TypeError) as exc:
            raise _UsageError(f"--replay {args.replay}: {exc}") from None
        return _replay
    args.vector_files = _vector_files(args)
    return _vectors


def _vector_files(args: argparse.Namespace) -> list[Path]:
    if not args.vectors and not DEFAULT_VECTORS_DIR.is_dir():
        raise _UsageError(
            f"the committed vectors are not installed (no {DEFAULT_VECTORS_DIR}); "
            f"reinstall kpurgatory from a wheel or pass --vectors"
        )
    try:
        return vector_paths(args.vectors or [DEFAULT_VECTORS_DIR])
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


def _vectors(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    paths = args.vector_files
    results = replay_vectors(adapter, paths, allow=args.allowed, timer_only=args.timer_only)
    print(
        format_report(
            results,
            args.adapter,
            allow=args.allowed,
            timer_only=args.timer_only,
            capabilities=adapter.capabilities,
        )
    )
    return 0 if all(result.status == "passed" for result in results if result.sent) else 1


@contextlib.contextmanager
def hypothesis_storage() -> Iterator[None]:
    """Hypothesis's files go to a temporary directory (removed on exit), not ``.hypothesis/``
    in the working directory, unless ``HYPOTHESIS_STORAGE_DIRECTORY`` names a place."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    configuration = importlib.import_module("hypothesis.configuration")
    with tempfile.TemporaryDirectory(prefix="kpurgatory-hypothesis-") as home:
        configuration.set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(None)


def _reference() -> object:
    return importlib.import_module("kpurgatory.reference")


def _stateful(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    vectors_status = 0
    if not args.search_only:
        vectors_status = _vectors(adapter, args)
        print()
    with hypothesis_storage():
        search_status = _search(adapter, args)
    if search_status == 2:
        return 2
    if not args.search_only:  # one verdict for the two halves, as the last line
        halves = (("vectors", vectors_status), ("search", search_status))
        verdict = "PASS" if not (vectors_status or search_status) else "FAIL"
        print(
            f"\nconformance: {verdict} ("
            + "; ".join(f"{name}: {'FAIL' if status else 'PASS'}" for name, status in halves)
            + ")"
        )
    return max(vectors_status, search_status)


def _search(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    stateful = args.stateful_module
    try:
        failure, stats = stateful.run_stateful(
            stateful.AdapterSide(adapter),
            reference=_reference(),
            max_examples=args.max_examples,
            step_count=args.steps,
            seed=args.seed,
            allow=args.allowed,
            timer_only=args.timer_only,
            capabilities=adapter.capabilities,
        )
    except (TypeError, ValueError) as exc:
        print(f"kpurgatory conformance: error: {exc}", file=sys.stderr)
        return 2
    sent = [
        kind
        for kind in STEP_KINDS
        if (not args.timer_only or kind in TIMER_STEP_KINDS) and adapter.capabilities.has(kind)
    ]
    kinds = ", ".join(f"{kind} {stats.kinds.get(kind, 0)}" for kind in sent)
    only = " (timer steps only)" if args.timer_only else ""
    print(f"stateful: {stats.runs} sequences, {stats.steps} steps through {args.adapter!r}{only}")
    print(f"  steps by kind: {kinds}")
    nested = ", ".join(f"{kind} {count}" for kind, count in sorted(stats.nested.items()))
    print(f"  steps callbacks perform, by kind: {nested or 'none'}")
    never = [kind for kind in sent if not stats.kinds.get(kind) and not stats.nested.get(kind)]
    print("  step kinds never sent: " + (", ".join(never) if never else "none"))
    if adapter.capabilities.describe():
        print(f"  not checked: {adapter.capabilities.describe()}")
    _print_accepted(args.allowed, stats.accepted)
    if adapter.absent_seen:
        print("  " + absent_line(adapter.absent_seen))
    if failure is None:
        print("PASS stateful: no difference from the reference")
        return 0
    print(stateful.format_failure(failure, args.adapter))
    if args.out is not None:
        args.out.write_text("\n".join(failure.json_lines()) + "\n", encoding="utf-8")
        print(f"(written to {args.out})")
    return 1


def _replay(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    steps = args.replay_steps
    stateful = importlib.import_module("kpurgatory.conformance.stateful")
    accepted: dict[str, int] = {}
    excluded = _excluded(
        steps, args.replay_lines, timer_only=args.timer_only, capabilities=adapter.capabilities
    )
    if excluded is not None:
        print(f"kpurgatory conformance: error: --replay {args.replay}: {excluded}", file=sys.stderr)
        return 2
    try:
        failure = stateful.check_sequence(
            steps,
            stateful.AdapterSide(adapter),
            _reference(),
            allow=args.allowed,
            timer_only=args.timer_only,
            accepted=accepted,
            capabilities=adapter.capabilities,
        )
    except AdapterError as exc:  # pragma: no cover - check_sequence turns these into failures
        print(f"FAIL replay: {exc}")
        return 1
    except ValueError as exc:  # a StepError the file check did not foresee: still no traceback
        print(f"kpurgatory conformance: error: --replay {args.replay}: {exc}", file=sys.stderr)
        return 2
    _print_accepted(args.allowed, accepted)
    if adapter.absent_seen:
        print("  " + absent_line(adapter.absent_seen))
    if failure is None:
        print(f"PASS replay: {len(steps)} steps agree with the reference")
        return 0
    print(stateful.format_failure(failure, args.adapter, shrunk=False))
    return 1


def _print_accepted(allowed: tuple[KnownDifference, ...], accepted: dict[str, int]) -> None:
    """The known differences a stateful search or replay accepted, one line each."""
    if not allowed:
        return
    print("  known differences accepted:")
    for difference in allowed:
        count = accepted.get(difference.id, 0)
        print(
            f"    {difference.id} ({difference.rule}, {difference.summary}): "
            + (f"{count} step{'s' if count != 1 else ''}" if count else "never needed")
        )


def _read_steps(path: Path) -> tuple[list[Step], list[int]]:
    """The steps of a JSON-lines file (blank lines ignored) and the line number of each;
    every error names its line (a line that is not UTF-8 or not JSON, a step that is
    not one, a label used before it is defined).

    A conformance vector (one JSON document, not one step per line) is refused with a
    pointer to ``--vectors``, which is how vectors are run.
    """
    lines: list[str] = []
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"line {number}: not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})"
            ) from None
    text = "\n".join(lines)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and (whole.get("format") == FORMAT or "steps" in whole):
        raise ValueError(
            f"this is a conformance vector, not a JSON-lines step sequence: "
            f"run it with --vectors {path}"
        )
    steps: list[Step] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
        try:
            steps.append(step_from_json(data))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"line {number}: {exc}") from None
        numbers.append(number)
    if not steps:
        raise ValueError("no steps in the file")
    problem = sequence_error(steps)
    if problem is not None:
        index, why = problem
        raise ValueError(f"line {numbers[index]}: {why}")
    return steps, numbers


def _excluded(
    steps: list[Step], numbers: list[int], *, timer_only: bool, capabilities: Capabilities
) -> str | None:
    """Why the first step of a replay file the run excludes cannot be sent (naming its
    line), or None: a purgatory step under ``--timer-only`` (a task's ``on_run`` too), a
    step or feature the port declares it lacks. Such a step is refused before it reaches
    the port, which would otherwise be failed for not answering it."""
    for step, number in zip(steps, numbers, strict=True):
        if timer_only:
            kinds = sorted(step_kinds(step) - TIMER_STEP_KINDS)
            if kinds:
                return (
                    f"line {number}: a {', '.join(kinds)} step, which --timer-only excludes "
                    f"(a port of the timer alone is sent {', '.join(sorted(TIMER_STEP_KINDS))} "
                    f"only); remove it, or replay without --timer-only"
                )
        missing = capabilities.missing([step])
        if missing:
            return (
                f"line {number}: the step needs {', '.join(missing)}, which the port declares "
                f"it lacks; remove it, or declare the port has it"
            )
    return None
