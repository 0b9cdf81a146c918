"""Instructions per operation of the optimized purgatory, counted by valgrind.

Three workloads: the acks=all loop (submit on a key, complete it with
``check_and_complete``), the full lifecycle (two keys per operation; completed by key,
abandoned or expired on a manual clock) and ``make run``'s replay (four streams of 2,000
steps through the conformance driver). Each is run twice under cachegrind, with and
without its loops, and the difference divided by the operations, so start-up drops out.
Instruction counts do not move with the machine's load, which timings here do; they are
how docs/algorithm.md ("One protocol, two builds") compares two trees.

    python scripts/protocol_cost.py --python build/compiled/venv/bin/python
    python scripts/protocol_cost.py --python .venv/bin/python --path /other/checkout

``--path`` goes first on the child's ``PYTHONPATH`` (a checkout to measure in place of
the installed package). Needs valgrind on ``PATH``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

OPERATIONS = 2_000  # per loop
LOOPS = 6
REPLAY_PASSES = 2


def _operation_class() -> Any:
    """An optimized operation that completes once its ``ready`` flag is set."""
    from kpurgatory import optimized

    class Operation(optimized.DelayedOperation):
        __slots__ = ("ready",)

        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.ready = False

        def try_complete(self) -> bool:
            return self.ready and self.force_complete()

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    return Operation


def _acks(loops: int) -> None:
    from kpurgatory import optimized

    produce = _operation_class()
    purgatory: Any = optimized.DelayedOperationPurgatory("Produce", reaper_enabled=False)
    key = ("topic", 0)
    for _ in range(loops * OPERATIONS):
        operation = produce(30_000)
        purgatory.try_complete_else_watch(operation, (key,))
        operation.ready = True
        purgatory.check_and_complete(key)
    purgatory.shutdown()


def _lifecycle(loops: int) -> None:
    from kpurgatory import optimized
    from kpurgatory.clock import ManualClock
    from kpurgatory.executors import InlineExecutor

    operation_class = _operation_class()
    clock = ManualClock()
    timer = optimized.SystemTimer("timer", clock=clock, executor=InlineExecutor())
    purgatory: Any = optimized.DelayedOperationPurgatory("Life", timer, reaper_enabled=False)
    for index in range(loops * OPERATIONS):
        first = ("a", index % 7)
        operation = operation_class(10 + index % 50)
        purgatory.try_complete_else_watch(operation, (first, ("b", index % 5)))
        if index % 3 == 0:
            operation.ready = True
            purgatory.check_and_complete(first)
        elif index % 3 == 1:
            purgatory.abandon(operation)
        if index % 10 == 9:
            clock.advance(3)
            purgatory.advance_clock(0)
    clock.advance(100)
    purgatory.advance_clock(0)
    purgatory.shutdown()


def _replay(passes: int) -> None:
    from kpurgatory import optimized
    from kpurgatory.conformance.driver import Driver
    from kpurgatory.workloads import stream_steps

    scenarios = [
        ("produce_acks_all", "kafka"),
        ("fetch_long_poll", "tiny"),
        ("mixed_cancel", "tick5"),
        ("adversarial", "tiny"),
    ]
    streams = [stream_steps(scenario, profile, 3, 0, OPERATIONS) for scenario, profile in scenarios]
    for _ in range(passes):
        for steps in streams:
            driver = Driver(optimized, state_every=32)
            for step in steps:
                driver.execute_compact(step)
            driver.close()


WORKLOADS = {
    "acks": (_acks, LOOPS, LOOPS * OPERATIONS),
    "lifecycle": (_lifecycle, LOOPS, LOOPS * OPERATIONS),
    "replay": (_replay, REPLAY_PASSES, REPLAY_PASSES),
}
"""name -> (function of its repetitions, repetitions counted, the divisor: per op or pass)."""


def _instructions(python: str, path: str | None, workload: str, repetitions: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    command += [python, os.path.abspath(__file__), "--run", workload, str(repetitions)]
    with tempfile.TemporaryDirectory() as directory:  # no checkout on the path by accident
        done = subprocess.run(command, env=env, cwd=directory, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{workload} failed under valgrind:\n{done.stderr[-2000:]}")
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    parser.add_argument("--path", help="a checkout to put first on PYTHONPATH")
    parser.add_argument("--run", nargs=2, metavar=("WORKLOAD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:  # the child: run one workload N times
        function, _, _ = WORKLOADS[args.run[0]]
        function(int(args.run[1]))
        return
    for name, (_, repetitions, divisor) in WORKLOADS.items():
        _instructions(args.python, args.path, name, 1)  # compiles any .pyc first
        idle = _instructions(args.python, args.path, name, 0)
        busy = _instructions(args.python, args.path, name, repetitions)
        unit = "operation" if divisor > REPLAY_PASSES else "pass"
        print(f"{name}: {(busy - idle) // divisor:,} instructions per {unit}")


if __name__ == "__main__":
    main()
