"""``kpurgatory replay``: reproduce one pipeline stream locally, without Spark.

The command around ``kpurgatory.pipeline.replay`` (the differential replay of one stream,
which the Spark executors run for every stream of a grid).

Given the grid row a counterexample names (scenario, preset, seed, shard, operations),
it regenerates the step stream, replays it through the implementation under test and the
expectation with every observation compared (state read after every step), and prints
the first divergence with its context: the steps just before it, the step itself, and
the expected and actual observations as JSON. Exit status 1 if the runs diverge, 0 if
they agree, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kpurgatory.cli import add_command, at_least
from kpurgatory.conformance.driver import run_steps
from kpurgatory.conformance.steps import step_to_json
from kpurgatory.pipeline.replay import replay_stream, resolve_impl
from kpurgatory.workloads import PRESETS, SCENARIOS, stream_steps

__all__ = ["add_parser", "main", "replay"]

DESCRIPTION = """\
Reproduce one pipeline stream locally, without Spark. Given the grid row a counterexample
names (scenario, preset, seed, shard, operations), regenerate its steps, replay them
through the implementation checked and the expectation, compare every observation, and
print the first divergence with the steps before it. Exit status: 0 if the runs agree,
1 if they diverge, 2 on bad arguments.
"""

IMPL_HELP = (
    "implementation checked: reference, optimized (default), or the module path of a "
    "package exporting the public API, e.g. mypkg.port"
)

HELP = "reproduce one pipeline stream without Spark and print the first divergence"
"""``kpurgatory replay``'s line in ``kpurgatory --help``."""

CONTEXT_STEPS = 5
"""How many steps before the divergent one are printed."""


def add_parser(subparsers: Any) -> None:
    """Register ``kpurgatory replay``."""
    parser = add_command(subparsers, "replay", help=HELP, description=DESCRIPTION)
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS), help="workload")
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS), help="timer preset")
    parser.add_argument("--seed", required=True, type=int, help="the stream's seed")
    parser.add_argument("--shard", type=at_least(0), default=0, help="the stream's shard (0)")
    parser.add_argument(
        "--ops", type=at_least(1), default=2000, help="operations in the stream (2000)"
    )
    parser.add_argument("--impl", default="optimized", metavar="IMPL", help=IMPL_HELP)
    parser.add_argument(
        "--against", default="reference", metavar="IMPL", help="the expectation (reference)"
    )
    parser.set_defaults(func=main)


def replay(
    scenario: str,
    preset: str,
    seed: int,
    shard: int,
    n_ops: int,
    impl: str,
    against: str,
) -> tuple[int, list[str]]:
    """Replay one stream; returns (exit status, lines to print)."""
    steps = stream_steps(scenario, preset, seed, shard, n_ops)
    expected_impl, actual_impl = resolve_impl(against), resolve_impl(impl)
    result = replay_stream(steps, expected_impl, actual_impl, state_every=1)
    head = (
        f"stream {scenario} / {preset} / seed {seed} / shard {shard}: {len(steps)} steps, "
        f"{result.counters['ops']} operations; {against} (expected) vs {impl}"
    )
    if result.divergence is None:
        return 0, [head, "no divergence: every observation agrees"]
    index, why = result.divergence
    lines = [head, f"FIRST DIVERGENCE at step {index}: {why}", ""]
    if index >= len(steps):
        return 1, lines
    start = max(0, index - CONTEXT_STEPS)
    lines.append(f"steps {start}..{index} (the last one diverges):")
    for number in range(start, index + 1):
        lines.append(f"  [{number}] {json.dumps(step_to_json(steps[number]))}")
    prefix = steps[: index + 1]
    expected = run_steps(expected_impl, prefix)[-1].to_json()
    actual = run_steps(actual_impl, prefix)[-1].to_json()
    lines += [
        "",
        f"expected ({against}): {json.dumps(expected)}",
        f"actual   ({impl}): {json.dumps(actual)}",
    ]
    return 1, lines


def main(args: argparse.Namespace) -> int:
    """The command's handler."""
    try:
        status, lines = replay(
            args.scenario, args.preset, args.seed, args.shard, args.ops, args.impl, args.against
        )
    except ValueError as exc:
        print(f"kpurgatory replay: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return status
