"""``kpurgatory conformance --threads``: the command line of the threads mode.

``prepare_threads`` checks the options (a bad value is a ``ValueError`` naming the
option, before the adapter starts) and returns the function the CLI runs once the
adapter answered its ``init``: it refuses a port that declares no threads mode, runs
``run_threads`` and prints ``format_threads``, writes a failing program to a replay
file and prints how to run it again and how to repeat the whole run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from kpurgatory.conformance.adapter_process import AdapterProcess
from kpurgatory.conformance.threads_protocol import FORMAT, program_from_json
from kpurgatory.conformance.threads_report import format_threads, replay_document
from kpurgatory.conformance.threads_run import (
    DEFAULT_HISTORIES,
    KAFKA_RACE_NOTES,
    run_threads,
    shape_for,
)
from kpurgatory.history.program import Program

__all__ = ["parse_thread_count", "prepare_threads"]

MAX_THREADS = 8
"""The most threads a program may have (the search grows fast with them)."""

_CONFLICTS = ("stateful", "search_only", "timer_only", "vectors")


def parse_thread_count(text: str) -> tuple[int, int]:
    """``--threads``'s value: ``N`` or ``LOW-HIGH`` with 1 <= LOW <= HIGH <= 8."""
    low, _, high = text.partition("-")
    try:
        bounds = (int(low), int(high or low))
    except ValueError:
        raise ValueError(
            f"--threads must be N or LOW-HIGH (threads per program), got {text!r}"
        ) from None
    if not 1 <= bounds[0] <= bounds[1] <= MAX_THREADS:
        raise ValueError(
            f"--threads must be within 1..{MAX_THREADS} with LOW <= HIGH, got {text!r}"
        )
    return bounds


def prepare_threads(
    args: argparse.Namespace,
) -> Callable[[AdapterProcess, argparse.Namespace], int]:
    """Check the threads mode's options; the function that runs it."""
    for name in _CONFLICTS:
        if getattr(args, name):
            raise ValueError(f"--{name.replace('_', '-')} does not go with --threads")
    args.thread_count = parse_thread_count(args.threads)
    if args.histories is None:
        args.histories = DEFAULT_HISTORIES
    for name, least in (
        ("histories", 1),
        ("budget", 1),
        ("retry_budget", 0),
        ("shrink_attempts", 0),
    ):
        value = getattr(args, name)
        if value < least:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {least}, got {value}")
    args.replay_program = None
    if args.replay is not None:
        args.replay_program = read_replay(args.replay)
    return run_mode


def read_replay(path: Path) -> Program:
    """The program of a threads replay file; ``ValueError`` naming the file and field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--replay {path}: cannot read a JSON document: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(
            f"--replay {path}: with --threads, a file the threads mode wrote (format "
            f"{FORMAT!r}) is expected; a JSON-lines step sequence is replayed without --threads"
        )
    try:
        return program_from_json(data.get("program"))
    except ValueError as exc:
        raise ValueError(f"--replay {path}: {exc}") from None


def run_mode(adapter: AdapterProcess, args: argparse.Namespace) -> int:
    """Run the threads mode through the started adapter; print the report."""
    capabilities = adapter.capabilities
    if not capabilities.has("threads"):
        print(
            "kpurgatory conformance: error: the port declares it has no threads mode "
            "(capabilities without threads), so nothing was checked",
            file=sys.stderr,
        )
        return 2
    names = {part.strip() for part in (args.allow or "").split(",")}
    allowed = tuple(difference.id for difference in args.allowed)
    if "kafka" in names:
        allowed += KAFKA_RACE_NOTES
    shape = shape_for(capabilities, allowed, args.thread_count)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    program = args.replay_program
    result = run_threads(
        adapter,
        histories=args.histories,
        seed=seed,
        budget=args.budget,
        shape=shape,
        serial=args.serial,
        shrink_attempts=args.shrink_attempts,
        programs=(lambda _: program) if program is not None else None,
        late_watches="kafka" in names,
        retry_budget=args.retry_budget,
    )
    if program is not None:
        print(f"replaying the program of {args.replay} {args.histories} times")
    print(format_threads(result, args.adapter, serial=args.serial))
    command = ["kpurgatory", "conformance", "--adapter", args.adapter, "--threads", args.threads]
    if args.allow:
        command += ["--allow", args.allow]
    if result.failure is not None:
        path = args.out
        if path is None:
            descriptor, name = tempfile.mkstemp(prefix="kpurgatory-threads-", suffix=".json")
            os.close(descriptor)
            path = Path(name)
        document = replay_document(result.failure, args.adapter)
        path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        print(f"  the failing program is in {path}; run it again with:")
        print("    " + shlex.join([*command, "--replay", str(path)]))
        if program is None:
            print("  repeat this whole run with:")
            print(
                "    "
                + shlex.join([*command, "--seed", str(seed), "--histories", str(args.histories)])
            )
    if result.passed:
        print(f"threads: PASS ({result.explained} histories, every one explained)")
        return 0
    parts = []
    if result.rejected:
        parts.append(f"{result.rejected} rejected")
    if result.undecided:
        parts.append(f"{result.undecided} undecided")
    if result.broken:
        parts.append("an answer that is not a history")
    print(f"threads: FAIL ({', '.join(parts)} of {result.histories} histories; seed {seed})")
    return 1
