"""Run a history-checking campaign from the command line (make history, CI).

``python -m kpurgatory.history --implementation both --seconds 120`` records and checks
random real-thread histories of each implementation for that long, prints the counts,
shrinks every rejected history and prints it, searches every undecided one again with
``--retry-budget`` nodes and prints it if still not explained (and writes them under
``--failures-dir``). Exit status 1 if any history was rejected, or undecided after the
second search (or rejected by it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kpurgatory.history.campaign import run_campaign
from kpurgatory.history.format import format_history
from kpurgatory.history.recorder import IMPLEMENTATIONS, implementation
from kpurgatory.history.search import DEFAULT_BUDGET, EXPLAINED, check
from kpurgatory.history.shrink import shrink


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kpurgatory.history", description=__doc__)
    parser.add_argument("--implementation", choices=(*IMPLEMENTATIONS, "both"), default="both")
    parser.add_argument("--seconds", type=float, default=None, help="per implementation")
    parser.add_argument("--histories", type=int, default=None, help="per implementation")
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="search nodes")
    parser.add_argument(
        "--retry-budget",
        type=int,
        default=4_000_000,
        help="search nodes for a second search of an undecided history",
    )
    parser.add_argument("--yield-chance", type=float, default=0.05)
    parser.add_argument("--failures-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.seconds is None and args.histories is None:
        parser.error("give --seconds or --histories: a campaign needs an end")
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}, GIL {'on' if gil else 'off'}")
    names = IMPLEMENTATIONS if args.implementation == "both" else (args.implementation,)
    bad = 0
    for name in names:
        result = run_campaign(
            name,
            histories=args.histories,
            seconds=args.seconds,
            seed=args.seed,
            budget=args.budget,
            yield_chance=args.yield_chance,
        )
        print(result.summary(), flush=True)
        bad += result.rejected
        for failure in result.over_budget:
            again = check(failure.history, budget=args.retry_budget)
            print(
                f"undecided history (seed {failure.seed}) searched again with "
                f"{args.retry_budget} nodes: {again.outcome} after {again.nodes}",
                flush=True,
            )
            if again.outcome == EXPLAINED:
                continue
            bad += 1
            text = format_history(failure.history, again)
            print(f"\nundecided history (seed {failure.seed}), as recorded:\n{text}\n", flush=True)
            if args.failures_dir is not None:
                args.failures_dir.mkdir(parents=True, exist_ok=True)
                path = args.failures_dir / f"{name}-{failure.seed}-undecided.txt"
                path.write_text(text + "\n")
        for failure in result.failures:
            shrunk = shrink(
                failure.history.program,
                implementation(name),
                failure.history,
                failure.verdict,
                budget=args.budget,
                yield_chance=args.yield_chance,
                seed=failure.seed,
            )
            text = format_history(shrunk.history, shrunk.verdict)
            print(f"\nrejected history (seed {failure.seed}), shrunk:\n{text}\n", flush=True)
            if args.failures_dir is not None:
                args.failures_dir.mkdir(parents=True, exist_ok=True)
                path = args.failures_dir / f"{name}-{failure.seed}.txt"
                path.write_text(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
