"""What one asyncio wait costs: ``kpurgatory.aio`` against asyncio's own timers.

Three questions, each answered side by side in one process per mechanism:

- **CPU per wait** (process CPU, median of rounds): ``n`` tasks each wait for an event
  with a deadline; either every event comes first (``completed``) or none does
  (``expired``). Mechanisms (``kpurgatory.bench.waits``): ``future+call_at`` (a
  ``Future`` and a ``loop.call_at`` that resolves it, cancelled when the event wins),
  ``timeout_at`` (``asyncio.timeout_at`` around the ``Future``), ``aio wait`` (``await
  purgatory.wait(op, [key])``) and ``aio submit`` (``purgatory.submit``, no task per
  wait).
- **Memory per pending wait**: ``tracemalloc`` bytes and ``gc``-tracked objects per wait
  while ``n`` waits are pending (each mechanism with its task and everything it needs).
- **Heartbeat lag at scale**: ``n`` pending waits, delays uniform over 1-20 s, 90 %
  answered at a random time before their deadline and 10 % expiring; a 1 ms heartbeat
  (``asyncio.sleep(0.001)`` in a loop) records how late it wakes, for ``seconds``.
- **Heartbeat lag after a pause**: ``n`` waits due within 5.0-5.1 s, and the process
  blocks (a long garbage collection, a blocking call) until 5.2 s, so all of them are
  overdue at once; the heartbeat's lag until the last one has expired.

For both lag questions, besides the wall-clock lag (which a loaded machine inflates),
the CPU time the loop's thread spent between two heartbeats: the stall the loop
itself causes, whatever else the machine runs.

``--max-hand-overs`` sets the aio purgatory's bound per firing (R70; default: its own).

``kpurgatory bench`` asks these questions in every mode: the CPU per wait through pyperf
(``wait_cpu_time``, group ``asyncio-wait`` of ``kpurgatory.bench.suite``), memory and
the two lags through ``--mode M --out FILE`` (``collect``: each mechanism in a fresh
process, at the sizes of ``SIZES``). Run ``python -m kpurgatory.bench.aiocost --help``.
Benchmarks, not tests: the numbers depend on the machine and its load (print
``os.getloadavg`` beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from kpurgatory.aio import Outcome
from kpurgatory.bench.waits import MECHANISMS, Waits

__all__ = [
    "MECHANISMS",
    "OUTCOMES",
    "SIZES",
    "collect",
    "cpu_per_wait",
    "heartbeat_lag",
    "lag_after_pause",
    "main",
    "memory_per_wait",
    "wait_cpu_time",
]

OUTCOMES: tuple[str, ...] = ("completed", "expired")

SIZES: dict[str, dict[str, float]] = {
    "quick": {"waits": 2_000, "lag": 10_000, "seconds": 1.0, "pause": 2_000, "due_s": 1.0},
    "reduced": {"waits": 10_000, "lag": 100_000, "seconds": 5.0, "pause": 20_000, "due_s": 3.0},
    "full": {"waits": 10_000, "lag": 1_000_000, "seconds": 20.0, "pause": 100_000, "due_s": 8.0},
}
"""Per ``kpurgatory bench`` mode: waits per CPU round and per memory count, pending
waits of the heartbeat at scale and its seconds of beats, waits overdue at once after
the pause and when they fall due."""


async def _cpu_round(mechanism: str, n: int, outcome: str) -> float:
    setup = Waits(mechanism)
    delay_ms = 5 if outcome == "expired" else 60_000
    await asyncio.sleep(0)
    started = time.process_time()
    waits = [setup.start(key, delay_ms) for key in range(n)]
    await asyncio.sleep(0)  # every task starts waiting
    if outcome == "completed":
        for key in range(n):
            setup.answer(key)
    results = await asyncio.gather(*waits)
    spent = time.process_time() - started
    expected = {True, Outcome.COMPLETED} if outcome == "completed" else {False, Outcome.EXPIRED}
    if not set(results) <= expected:
        raise AssertionError(f"{mechanism} {outcome}: unexpected results {set(results)}")
    setup.close()
    return spent / n * 1e6


def wait_cpu_time(loops: int, mechanism: str, outcome: str, n: int) -> float:
    """pyperf time function: process CPU seconds of ``loops`` rounds of ``n`` waits
    (run it with ``inner_loops=n`` for the CPU per wait)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be 'completed' or 'expired', not {outcome!r}")
    return sum(asyncio.run(_cpu_round(mechanism, n, outcome)) for _ in range(loops)) * n / 1e6


def cpu_per_wait(mechanism: str, n: int, outcome: str, rounds: int) -> float:
    """Median process CPU per wait in microseconds over ``rounds`` rounds of ``n`` waits."""
    if outcome not in ("completed", "expired"):
        raise ValueError(f"outcome must be 'completed' or 'expired', not {outcome!r}")
    return statistics.median(asyncio.run(_cpu_round(mechanism, n, outcome)) for _ in range(rounds))


async def _memory(mechanism: str, n: int) -> tuple[float, float]:
    setup = Waits(mechanism)
    gc.collect()
    objects_before = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    waits = [setup.start(key, 600_000) for key in range(n)]
    await asyncio.sleep(0)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    objects_after = len(gc.get_objects())
    for key in range(n):
        setup.answer(key)
    await asyncio.gather(*waits)
    setup.close()
    return (after - before) / n, (objects_after - objects_before) / n


def memory_per_wait(mechanism: str, n: int) -> tuple[float, float]:
    """(bytes, gc-tracked objects) per pending wait, ``n`` waits pending."""
    return asyncio.run(_memory(mechanism, n))


async def _setup_seconds(setup: Waits, n: int) -> float:
    """How long starting ``n`` waits takes on this machine now: 1,000 throwaway waits
    timed (then cancelled), scaled to ``n``, times 3 for a load that changes, plus 1 s."""
    sample = max(1, min(n, 1_000))
    began = time.perf_counter()
    waits = [setup.start(-1 - key, 600_000) for key in range(sample)]
    await asyncio.sleep(0)
    spent = time.perf_counter() - began
    for wait in waits:
        wait.cancel()
    await asyncio.gather(*waits, return_exceptions=True)
    return 1.0 + 3 * spent * n / sample


async def _heartbeat(
    mechanism: str, n: int, seconds: float, seed: int, offset_s: float | None
) -> dict[str, float]:
    rng = random.Random(seed)
    setup = Waits(mechanism)
    loop = setup.loop
    offset_ms = int(1000 * (await _setup_seconds(setup, n) if offset_s is None else offset_s))
    answers: list[tuple[float, int]] = []
    waits = []
    began = loop.time()
    for key in range(n):
        delay_ms = offset_ms + rng.randint(1_000, 20_000)
        waits.append(setup.start(key, delay_ms))
        if rng.random() < 0.9:
            answers.append((rng.uniform(0, (delay_ms - offset_ms) / 1000 - 0.05), key))
    answers.sort()
    await asyncio.sleep(0)  # every task has started waiting
    start = began + offset_ms / 1000  # nothing is due before start + 1 s
    if loop.time() > start:
        raise RuntimeError(f"setting up {n} waits took over {offset_ms} ms: raise the offset")
    await asyncio.sleep(start - loop.time())
    lags: list[float] = []
    stop = start + seconds

    async def answer_in_time() -> None:
        index = 0
        while loop.time() < stop:
            now = loop.time() - start
            while index < len(answers) and answers[index][0] <= now:
                setup.answer(answers[index][1])
                index += 1
            await asyncio.sleep(0.001)

    stalls: list[float] = []

    async def beat() -> None:
        while True:
            expected = loop.time() + 0.001
            spent = time.thread_time()
            await asyncio.sleep(0.001)
            stalls.append(time.thread_time() - spent)
            lags.append(loop.time() - expected)
            if loop.time() >= stop:
                return

    gc_pauses: list[float] = []
    with _GcTimer(gc_pauses):
        cpu = time.process_time()
        await asyncio.gather(beat(), answer_in_time())
        cpu = time.process_time() - cpu
    for wait in waits:
        wait.cancel()  # a task or a Waiter: either abandons what is left
    await asyncio.gather(*waits, return_exceptions=True)
    setup.close()
    lags.sort()
    stalls.sort()
    return {
        "max_ms": lags[-1] * 1000,
        "p999_ms": lags[int(len(lags) * 0.999)] * 1000,
        "p99_ms": lags[int(len(lags) * 0.99)] * 1000,
        "max_cpu_between_beats_ms": stalls[-1] * 1000,
        "p999_cpu_between_beats_ms": stalls[int(len(stalls) * 0.999)] * 1000,
        "max_gc_ms": max(gc_pauses, default=0.0) * 1000,
        "gc_s": sum(gc_pauses),
        "beats": float(len(lags)),
        "cpu_s": cpu,
    }


def heartbeat_lag(
    mechanism: str, n: int, seconds: float, seed: int = 1, offset_s: float | None = None
) -> dict[str, float]:
    """Heartbeat lag (max, 99.9th and 99th percentile, ms) with ``n`` waits pending.

    The waits fall due ``offset_s`` + 1-20 s after they start (default offset: three
    times the set-up time measured on 1,000 waits, scaled to ``n``, plus 1 s, so the
    set-up ends first however loaded the machine); the heartbeat runs from the offset
    on, for ``seconds``."""
    return asyncio.run(_heartbeat(mechanism, n, seconds, seed, offset_s))


class _GcTimer:
    """Records the CPU time of each garbage collection while the block runs."""

    def __init__(self, pauses: list[float]) -> None:
        self.pauses = pauses
        self.started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.thread_time()
        else:
            self.pauses.append(time.thread_time() - self.started)

    def __enter__(self) -> _GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)


async def _pause(
    mechanism: str, n: int, max_hand_overs: int | None, due_s: float
) -> dict[str, float]:
    rng = random.Random(1)
    setup = Waits(mechanism, max_hand_overs)
    loop = setup.loop
    due_s = max(due_s, await _setup_seconds(setup, n))
    began = loop.time()
    due_ms = int(due_s * 1000)
    waits = [setup.start(key, rng.randint(due_ms, due_ms + 100)) for key in range(n)]
    await asyncio.sleep(0)
    lags: list[float] = []
    done = asyncio.gather(*waits)

    resumed = [float("inf")]  # when the pause ended: beats armed before it are not counted

    async def beat() -> None:
        while not done.done():
            expected = loop.time() + 0.001
            await asyncio.sleep(0.001)
            if expected >= resumed[0]:
                lags.append(loop.time() - expected)

    stalls: list[float] = []

    async def beat_cpu() -> None:
        while not done.done():
            spent = time.thread_time()
            await asyncio.sleep(0.001)
            stalls.append(time.thread_time() - spent)

    heart = loop.create_task(beat())
    heart_cpu = loop.create_task(beat_cpu())
    await asyncio.sleep(0.05)
    if loop.time() > began + due_s:
        raise RuntimeError(f"setting up {n} waits took over {due_s} s: use fewer")
    time.sleep(began + due_s + 0.2 - loop.time())  # the pause: all overdue after it
    resumed[0] = loop.time()
    stalls.clear()
    cpu = time.process_time()
    await done
    cpu = time.process_time() - cpu
    await heart
    await heart_cpu
    setup.close()
    lags.sort()
    return {
        "max_ms": lags[-1] * 1000,
        "max_cpu_between_beats_ms": max(stalls) * 1000,
        "beats": float(len(lags)),
        "cpu_s": cpu,
    }


def lag_after_pause(
    mechanism: str, n: int, max_hand_overs: int | None = None, due_s: float = 5.0
) -> dict[str, float]:
    """The heartbeat's worst lag (ms) while ``n`` waits, due ``due_s`` to ``due_s`` +
    0.1 s after they start, all expire at once after a pause until ``due_s`` + 0.2 s
    (``due_s`` is raised to the set-up time measured as for ``heartbeat_lag``)."""
    return asyncio.run(_pause(mechanism, n, max_hand_overs, due_s))


def _child(args: argparse.Namespace) -> dict[str, Any]:
    if args.what == "pause":
        return lag_after_pause(args.mechanism, args.n, args.max_hand_overs, args.due_s)
    if args.what == "cpu":
        return {
            outcome: cpu_per_wait(args.mechanism, args.n, outcome, args.rounds)
            for outcome in ("completed", "expired")
        }
    if args.what == "memory":
        size, objects = memory_per_wait(args.mechanism, args.n)
        return {"bytes": size, "objects": objects}
    return heartbeat_lag(args.mechanism, args.n, args.seconds, offset_s=args.offset_s)


def _run_child(what: str, mechanism: str, n: int, options: list[str]) -> dict[str, Any]:
    """One question for one mechanism in a fresh process; its figures, or the error
    (its last line) if it failed: a 1M-wait set-up slower than its offset, say."""
    command = [
        sys.executable,
        "-m",
        "kpurgatory.bench.aiocost",
        f"--what={what}",
        f"--mechanism={mechanism}",
        f"--n={n}",
        *options,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    row: dict[str, Any] = {"what": what, "mechanism": mechanism, "n": n}
    try:
        row.update(json.loads(done.stdout))
    except ValueError:  # no figures at all: the child died (its last words)
        lines = (done.stderr or f"exit {done.returncode}").strip().splitlines()
        row["error"] = lines[-1] if lines else f"exit {done.returncode}"
    row["load"] = os.getloadavg()[0]
    return row


def collect(mode: str, say: Any = None) -> dict[str, Any]:
    """Memory per pending wait, heartbeat lag at scale and after a pause, for every
    mechanism with a task, each in a fresh process at ``SIZES[mode]``: what ``kpurgatory
    bench`` records beside its pyperf suite."""
    sizes = SIZES[mode]
    rows = []
    plan: list[tuple[str, str, int, list[str]]] = [
        ("memory", mechanism, int(sizes["waits"]), []) for mechanism in MECHANISMS
    ]
    with_tasks = [m for m in MECHANISMS if m != "aio submit"]
    plan += [("lag", m, int(sizes["lag"]), [f"--seconds={sizes['seconds']}"]) for m in with_tasks]
    plan += [("pause", m, int(sizes["pause"]), [f"--due-s={sizes['due_s']}"]) for m in with_tasks]
    for what, mechanism, n, options in plan:
        if say is not None:
            say(f"asyncio wait: {what}, {mechanism}, {n:,} waits")
        rows.append(_run_child(what, mechanism, n, options))
    return {"mode": mode, "sizes": sizes, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    """Run every question for every mechanism, each in a fresh process; print JSON lines
    (``--mode M --out FILE``: ``collect``'s figures as JSON in FILE)."""
    parser = argparse.ArgumentParser(prog="python -m kpurgatory.bench.aiocost")
    parser.add_argument("--what", choices=("cpu", "memory", "lag", "pause", "all"), default="all")
    parser.add_argument("--mechanism", choices=MECHANISMS)
    parser.add_argument("--n", type=int, default=10_000, help="waits (cpu, memory)")
    parser.add_argument("--lag-n", type=int, default=100_000, help="pending waits (lag)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-hand-overs", type=int, default=None)
    parser.add_argument("--offset-s", type=float, default=None, help="lag: set-up time")
    parser.add_argument("--due-s", type=float, default=5.0, help="pause: when waits fall due")
    parser.add_argument("--mode", choices=sorted(SIZES), help="with --out: collect's figures")
    parser.add_argument("--out", help="with --mode: write collect's figures (JSON) here")
    args = parser.parse_args(argv)
    if (args.mode is None) != (args.out is None):
        parser.error("--mode and --out go together")
    if args.mode is not None:
        figures = collect(args.mode, say=lambda text: print(text, flush=True))
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(figures, out)
        return 0
    if args.mechanism is not None and args.what != "all":
        try:
            figures = _child(args)
        except Exception as exc:  # reported as the row's error by the parent
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            return 1
        print(json.dumps(figures))
        return 0
    questions = ("cpu", "memory", "lag", "pause") if args.what == "all" else (args.what,)
    for what in questions:
        for mechanism in MECHANISMS:
            if what in ("lag", "pause") and mechanism == "aio submit":
                continue
            n = args.lag_n if what == "lag" else args.n
            options = [f"--rounds={args.rounds}", f"--seconds={args.seconds}"]
            if what == "pause":
                options.append(f"--due-s={args.due_s}")
            if what == "lag" and args.offset_s is not None:
                options.append(f"--offset-s={args.offset_s}")
            if args.max_hand_overs is not None:
                options.append(f"--max-hand-overs={args.max_hand_overs}")
            row = _run_child(what, mechanism, n, options)
            row["max_hand_overs"] = args.max_hand_overs
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
