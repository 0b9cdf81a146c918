"""The proposal's enqueue benchmark (Kafka's TestPurgatoryPerformance), on a real clock.

Custom code, because no benchmark runner does this: it is a throughput sweep against
a real clock with several threads, where pyperf times a function in a loop. One
*point* sends ``num`` requests to a fresh purgatory (reaper on, real clock, tick 1 ms,
wheel 20, purge interval 1000) exactly as the Scala harness does: a generator thread
draws exponential inter-arrival intervals at the target rate and log-normal completion
latencies, sleeps until each request's arrival, creates a ``FakeOperation`` (timeout
200 ms, 3 watch keys out of 100), hands it to a completion thread when its latency is
below the timeout, and calls ``try_complete_else_watch``; the rest expire in the
purgatory. The *achieved* rate is requests over the generator's real span; a point is
saturated when it falls below 95 % of the target. The sweep raises the target rate
until each design has saturated twice without climbing: its plateau. Designs:
``optimized`` (the timing wheel) and ``old`` (Kafka 0.8's delay queue,
``kpurgatory.bench.kafka08``), on identical workloads, alternating at each point.

``python -m kpurgatory.bench.enqueue --mode quick|reduced|full --out FILE`` runs the
sweep in the interpreter it is started with (so in the build installed there).
"""

from __future__ import annotations

import argparse
import functools
import gc
import heapq
import importlib
import itertools
import json
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kpurgatory.clock import MonotonicClock

__all__ = ["CASES", "DESIGNS", "SWEEPS", "Sweep", "make_workload", "run_point", "sweep"]

TIMEOUT_MS = 200
"""Every request's timeout, as in the proposal."""

NUM_KEYS, KEY_SPACE = 3, 100
"""Watch keys per request, drawn once from ``fakeKey0 .. fakeKey99`` (Kafka's defaults)."""

SATURATION_FRACTION = 0.95
"""A point is saturated when achieved < this fraction of the target rate."""

PCT75_Z = 0.674490
"""The 75th percentile of the standard normal distribution (Kafka's constant)."""

DESIGNS: dict[str, str] = {"optimized": "kpurgatory.optimized", "old": "kpurgatory.bench.kafka08"}


@dataclass(frozen=True)
class EnqueueCase:
    """A latency distribution: the 50th and 75th percentiles of completion latency, in ms."""

    name: str
    pct50: float
    pct75: float


CASES: dict[str, EnqueueCase] = {
    "low": EnqueueCase("low-timeout", 20.0, 60.0),
    "high": EnqueueCase("high-timeout", 200.0, 400.0),
}
"""The proposal's two cases: few timeouts (p50 20, p75 60) and many (p50 200, p75 400)."""


@dataclass(frozen=True)
class Workload:
    """The precomputed requests of one point: intervals and latencies in ms, and the keys."""

    intervals: list[int]
    latencies: list[int]
    keys: list[str]

    @property
    def num(self) -> int:
        """Number of requests."""
        return len(self.intervals)


def make_workload(case: EnqueueCase, rate: float, num: int, seed: int) -> Workload:
    """Draw ``num`` requests for ``case`` at ``rate`` requests/s, reproducibly from ``seed``.

    Intervals: exponential with mean ``1000 / rate`` ms, truncated to ms with the
    remainder carried into the next one (so the mean rate is kept). Latencies:
    ``exp(N(mu, sigma))`` truncated to ms with ``mu = ln(pct50)`` and
    ``sigma = (ln(pct75) - mu) / 0.674490``.
    """
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if num < 1:
        raise ValueError(f"num must be >= 1, got {num}")
    rng = random.Random(seed)
    mu = math.log(case.pct50)
    sigma = (math.log(case.pct75) - mu) / PCT75_Z
    per_ms = rate / 1000.0
    intervals: list[int] = []
    residue = 0.0
    for _ in range(num):
        interval = rng.expovariate(per_ms) + residue
        whole = int(interval)
        residue = interval - whole
        intervals.append(whole)
    latencies = [int(math.exp(rng.gauss(mu, sigma))) for _ in range(num)]
    keys = [f"fakeKey{rng.randrange(KEY_SPACE)}" for _ in range(NUM_KEYS)]
    return Workload(intervals, latencies, keys)


class Latch:
    """Kafka's ``CountDownLatch`` of completions, plus a count of expirations."""

    def __init__(self, count: int) -> None:
        self._lock = threading.Lock()
        self._remaining = count
        self.expired = 0
        self._done = threading.Event()
        if count <= 0:
            self._done.set()

    def count_down(self) -> None:
        """One operation completed (early or by expiry)."""
        with self._lock:
            self._remaining -= 1
            if self._remaining <= 0:
                self._done.set()

    def expire(self) -> None:
        """One operation expired."""
        with self._lock:
            self.expired += 1

    def set_count(self, count: int, completed_so_far: int) -> None:
        """Lower the target to ``count`` operations (the generator stopped early)."""
        with self._lock:
            self._remaining = count - completed_so_far
            if self._remaining <= 0:
                self._done.set()

    @property
    def remaining(self) -> int:
        """Operations still to complete."""
        return self._remaining

    def wait(self, timeout_s: float) -> bool:
        """Block until every operation completed, at most ``timeout_s``; whether they did."""
        return self._done.wait(timeout_s)


@functools.cache
def fake_operation_class(impl: ModuleType) -> type[Any]:
    """Kafka's ``FakeOperation`` as a subclass of ``impl.DelayedOperation``.

    ``try_complete`` completes iff the clock has reached ``completes_at``;
    ``on_complete`` counts the latch down; ``on_expiration`` counts an expiry.
    """

    class FakeOperation(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        def __init__(
            self, delay_ms: int, latency_ms: int, latch: Latch, now: Callable[[], int]
        ) -> None:
            super().__init__(delay_ms)
            self.completes_at = now() + latency_ms
            self.latch = latch
            self.now = now

        def try_complete(self) -> bool:
            if self.now() >= self.completes_at:
                return bool(self.force_complete())
            return False

        def on_complete(self) -> None:
            self.latch.count_down()

        def on_expiration(self) -> None:
            self.latch.expire()

    FakeOperation.__name__ = FakeOperation.__qualname__ = f"FakeOperation[{impl.__name__}]"
    return FakeOperation


_now_ms = MonotonicClock().now_ms
"""The real clock, in ms: the one every design's timer reads by default."""


class CompletionQueue:
    """Kafka's ``CompletionQueue``: a delay queue of operations and a thread completing them.

    The thread sleeps until the earliest ``completes_at`` (at most 100 ms, Kafka's poll
    timeout), then calls ``force_complete`` on every operation due, outside the lock.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any]] = []
        self._seq = itertools.count()
        self._condition = threading.Condition(threading.Lock())
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="completion-queue", daemon=True)
        self._thread.start()

    def add(self, operation: Any) -> None:
        """Queue ``operation`` for completion at its ``completes_at``."""
        with self._condition:
            item = (operation.completes_at, next(self._seq), operation)
            heapq.heappush(self._heap, item)
            if self._heap[0] is item:
                self._condition.notify()

    def _run(self) -> None:
        heap = self._heap
        condition = self._condition
        while True:
            with condition:
                if self._stopped:
                    return
                now = _now_ms()
                due = []
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap)[2])
                if not due:
                    wait_ms = min(100, heap[0][0] - now) if heap else 100
                    condition.wait(wait_ms / 1000.0)
                    continue
            for operation in due:
                operation.force_complete()

    def stop(self) -> None:
        """Stop and join the thread (operations still queued are left alone)."""
        with self._condition:
            self._stopped = True
            self._condition.notify()
        self._thread.join()


def _generate(
    purgatory: Any,
    operation_class: Any,
    workload: Workload,
    completion: CompletionQueue,
    latch: Latch,
    max_seconds: float,
    outcome: dict[str, float],
) -> None:
    """The generator thread of ``run_point``: enqueue ``workload``'s requests at their
    arrival times, stopping after ``max_seconds``; record in ``outcome`` when it ended,
    how many it enqueued and the planned duration (ms)."""
    keys, intervals, latencies = workload.keys, workload.intervals, workload.latencies
    start = arrival = _now_ms()
    budget_end = time.monotonic() + max_seconds
    enqueued = 0
    try:
        for index in range(workload.num):
            latency = latencies[index]
            arrival += intervals[index]
            now = _now_ms()
            if arrival > now:
                time.sleep((arrival - now) / 1000.0)
            if (index & 63) == 0 and time.monotonic() > budget_end:
                break
            operation = operation_class(TIMEOUT_MS, latency, latch, _now_ms)
            if latency < TIMEOUT_MS:
                completion.add(operation)
            purgatory.try_complete_else_watch(operation, keys)
            enqueued += 1
    finally:
        outcome.update(end_ns=time.perf_counter_ns(), enqueued=enqueued)
        outcome["planned_ms"] = max(arrival - start, 1)


def run_point(
    impl: ModuleType, case: EnqueueCase, workload: Workload, *, max_seconds: float
) -> dict[str, Any]:
    """One point on a real clock with real threads. The generator stops early
    (``truncated``) after ``max_seconds``, so a saturated design cannot stall a sweep."""
    operation_class = fake_operation_class(impl)
    num = workload.num
    latch = Latch(num)
    gc.collect()
    purgatory = impl.DelayedOperationPurgatory("fake purgatory")
    completion = CompletionQueue()
    outcome: dict[str, float] = {}

    cpu_start = time.process_time()
    start_ns = time.perf_counter_ns()
    generator = threading.Thread(
        target=_generate,
        args=(purgatory, operation_class, workload, completion, latch, max_seconds, outcome),
        name="generator",
    )
    generator.start()
    generator.join()
    enqueued = int(outcome["enqueued"])
    if enqueued < num:
        latch.set_count(enqueued, num - latch.remaining)
    finished = latch.wait(30.0)
    cpu_s = time.process_time() - cpu_start
    completion.stop()
    purgatory.shutdown()
    purgatory.await_termination(5.0)  # no reaper step left running after the point
    target = enqueued * 1000.0 / outcome["planned_ms"]
    achieved = enqueued * 1000.0 / max((outcome["end_ns"] - start_ns) / 1e6, 1e-3)
    return {
        "case": case.name,
        "enqueued": enqueued,
        "target_rate": target,
        "achieved_rate": achieved,
        "cpu_us_per_request": cpu_s * 1e6 / max(enqueued, 1),
        "expired": latch.expired,
        "unfinished": 0 if finished else latch.remaining,
        "saturated": enqueued < num or achieved < SATURATION_FRACTION * target,
    }


@dataclass(frozen=True)
class Sweep:
    """Target rates per case, seconds of requests per point, the generator's time cap."""

    cases: tuple[str, ...]
    rates: tuple[float, ...]
    seconds_per_point: float
    max_seconds: float


SWEEPS: dict[str, Sweep] = {
    "quick": Sweep(("high",), (2000.0,), 0.3, 3.0),
    "reduced": Sweep(("high",), (2000.0, 5000.0, 10_000.0, 20_000.0, 40_000.0, 70_000.0), 1.0, 4.0),
    "full": Sweep(
        ("high", "low"),
        (
            1000.0,
            2000.0,
            3500.0,
            5000.0,
            7000.0,
            10000.0,
            14000.0,
            20000.0,
            28000.0,
            40000.0,
            55000.0,
            70000.0,
            105000.0,
        ),
        3.0,
        8.0,
    ),
}
"""The proposal's sweep; ``quick`` is a smoke run of the code path, not a measurement."""

STALLED_POINTS, PLATEAU_GROWTH = 2, 1.1
"""A design leaves the sweep after two saturated points in a row that did not raise its
best achieved rate by more than 10 %: its plateau is measured."""


def sweep(plan: Sweep, seed: int, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Every case of ``plan``, both designs alternating at each target rate; the points
    and, per case and design, the plateau (highest achieved rate) and whether it
    saturated (a plateau that never saturated is a lower bound)."""
    points: list[dict[str, Any]] = []
    for case in (CASES[key] for key in plan.cases):
        stalled = dict.fromkeys(DESIGNS, 0)
        best = dict.fromkeys(DESIGNS, 0.0)
        for index, rate in enumerate(plan.rates):
            num = max(300, int(rate * plan.seconds_per_point))
            workload = make_workload(case, rate, num, seed + index)
            order = list(DESIGNS)[index % 2 :] + list(DESIGNS)[: index % 2]
            for design in order:
                if stalled[design] >= STALLED_POINTS:
                    continue
                say(f"enqueue {case.name} {design} target {rate:,.0f}/s ({num:,} requests)")
                impl = importlib.import_module(DESIGNS[design])
                point: dict[str, Any] = {"design": design, "requested_rate": rate}
                point.update(run_point(impl, case, workload, max_seconds=plan.max_seconds))
                points.append(point)
                grew = point["achieved_rate"] > PLATEAU_GROWTH * best[design]
                stalled[design] = stalled[design] + 1 if point["saturated"] and not grew else 0
                best[design] = max(best[design], point["achieved_rate"])
    plateau = {
        case.name: {
            design: {
                "plateau": max(p["achieved_rate"] for p in mine),
                "saturated": any(p["saturated"] for p in mine),
            }
            for design in DESIGNS
            if (mine := [p for p in points if p["design"] == design and p["case"] == case.name])
        }
        for case in (CASES[key] for key in plan.cases)
    }
    return {"points": points, "plateau": plateau}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kpurgatory.bench.enqueue --mode MODE --out FILE [--seed N]``."""
    parser = argparse.ArgumentParser(prog="python -m kpurgatory.bench.enqueue")
    parser.add_argument("--mode", choices=sorted(SWEEPS), default="quick")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=2015)
    args = parser.parse_args(argv)
    result = sweep(SWEEPS[args.mode], args.seed, lambda text: print(text, flush=True))
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
