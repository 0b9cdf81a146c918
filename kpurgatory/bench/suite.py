"""The pyperf benchmarks: ``python -m kpurgatory.bench.suite --mode M --group G [pyperf options]``.

pyperf does the running: worker processes, warm-ups, loop calibration, the values'
spread, JSON results (``-o FILE``) and ``compare_to``. ``kpurgatory bench`` starts this
module once per group and build, with the group's pyperf options (``GROUP_OPTIONS``);
it can also be run by hand. Groups: ``add-cancel`` (timer add+cancel with many
pending), ``lifecycle`` (n tasks through their whole life), ``memory`` (the same
lifecycles under ``--tracemalloc``: the traced peak), ``long-poll`` and ``asyncio-wait``
(the CPU of one wait with a deadline: ``kpurgatory.aio`` against asyncio's own timers).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from kpurgatory.bench import aiocost, longpoll, timers

__all__ = ["GROUPS", "GROUP_OPTIONS", "LONG_POLL", "SEED", "SIZES", "benchmarks", "main"]

SEED = 2015
"""Seed of every drawn delay and schedule (the same for every design)."""

GROUPS: tuple[str, ...] = ("add-cancel", "lifecycle", "memory", "long-poll", "asyncio-wait")

SIZES: dict[str, dict[str, tuple[int, ...]]] = {
    "quick": {"add-cancel": (1000, 100_000), "lifecycle": (2000, 20_000, 100_000)},
    "reduced": {"add-cancel": (1000, 1_000_000), "lifecycle": (2000, 20_000, 200_000)},
    "full": {"add-cancel": (1000, 1_000_000), "lifecycle": (2000, 200_000, 1_000_000)},
}
"""Pending counts (add+cancel) and task counts (lifecycle, memory) per mode."""

LONG_POLL = {"waits": 10_000, "keys": 2_500, "timeout_ms": 50}
"""The long-poll pattern, the same in every mode."""


def _measuring(many: int, few: int) -> dict[str, tuple[str, ...]]:
    """The options of a measuring mode: ``many`` worker processes for the short
    benchmarks (pyperf calibrates their loops), ``few`` for those that take one loop per
    value (the large lifecycles); 3 values after 1 warm-up in each process."""
    runs = ("-n", "3", "-w", "1")
    short = ("-p", str(many), *runs)
    long = ("-p", str(few), *runs, "-l", "1")
    return {
        "add-cancel": short,
        "lifecycle": long,
        "memory": _ONCE,
        "long-poll": short,
        "asyncio-wait": long,
    }


_QUICK = ("-p", "1", "-n", "3", "-w", "1", "--min-time", "0.02")
_ONCE = ("-p", "1", "-n", "1", "-w", "0", "-l", "1", "--tracemalloc")
GROUP_OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "quick": {
        "add-cancel": _QUICK,
        "lifecycle": _QUICK,
        "memory": _ONCE,
        "long-poll": _QUICK,
        "asyncio-wait": ("-p", "1", "-n", "2", "-w", "1", "-l", "1"),
    },
    "reduced": _measuring(4, 3),
    "full": _measuring(10, 5),
}
"""pyperf's options per mode and group: processes, values per process, warm-ups, loops.
``quick`` is a smoke run; the large lifecycles take one loop per value."""

Benchmark = tuple[str, Callable[..., float], tuple[Any, ...], dict[str, Any]]


def benchmarks(mode: str, group: str) -> list[Benchmark]:
    """The group's benchmarks: (name, time function, its arguments, metadata)."""
    sizes = SIZES[mode]
    if group == "add-cancel":
        return [
            (
                f"timer add+cancel, {design}, {pending:,} pending",
                timers.add_cancel_time,
                (design, pending, SEED),
                {"question": group, "design": design, "size": pending},
            )
            for pending in sizes[group]
            for design in ("optimized", "bare-heap", "asyncio")
        ]
    if group in ("lifecycle", "memory"):
        label = "lifecycle" if group == "lifecycle" else "lifecycle peak memory"
        return [
            (
                f"{label}, {design}, {n:,} tasks",
                timers.lifecycle_time,
                (design, n, SEED),
                {"question": group, "design": design, "size": n},
            )
            for n in sizes["lifecycle"]
            for design in ("optimized", "bare-heap")
        ]
    if group == "long-poll":
        waits, keys, timeout = LONG_POLL["waits"], LONG_POLL["keys"], LONG_POLL["timeout_ms"]
        return [
            (
                f"long-poll, {approach}, {waits:,} waits on {keys:,} keys",
                longpoll.long_poll_time,
                (approach, waits, keys, timeout),
                {"question": group, "design": approach, "size": waits},
            )
            for approach in longpoll.APPROACHES
        ]
    if group == "asyncio-wait":
        waits = int(aiocost.SIZES[mode]["waits"])
        return [
            (
                f"asyncio wait, {mechanism}, {outcome}, {waits:,} waits",
                aiocost.wait_cpu_time,
                (mechanism, outcome, waits),
                {"question": group, "design": f"{mechanism}|{outcome}", "size": waits},
            )
            for outcome in aiocost.OUTCOMES
            for mechanism in aiocost.MECHANISMS
        ]
    raise ValueError(f"group must be one of {GROUPS}, got {group!r}")


def _worker_args(command: list[str], args: argparse.Namespace) -> None:
    command += ["--mode", args.mode, "--group", args.group]


def main() -> None:
    """Run one group under pyperf (its command line; ``-o FILE`` writes the results)."""
    import pyperf

    runner = pyperf.Runner(
        program_args=("-m", "kpurgatory.bench.suite"), add_cmdline_args=_worker_args
    )
    runner.argparser.add_argument("--mode", choices=sorted(SIZES), default="quick")
    runner.argparser.add_argument("--group", choices=GROUPS, required=True)
    args = runner.parse_args()
    if args.group == "memory":  # drawn before tracemalloc starts: not the timer's memory
        for n in SIZES[args.mode]["lifecycle"]:
            timers.lifecycle_schedule(n, SEED)
    for name, function, arguments, metadata in benchmarks(args.mode, args.group):
        inner = metadata["size"] if args.group == "asyncio-wait" else None
        runner.bench_time_func(name, function, *arguments, metadata=metadata, inner_loops=inner)


if __name__ == "__main__":
    main()
