"""The proposal's enqueue benchmark: Kafka's TestPurgatoryPerformance, with Scala semantics.

One *point* runs ``num`` requests against a fresh purgatory of one design
(``DelayedOperationPurgatory("fake purgatory")``: reaper on, real clock, tick 1 ms,
wheel 20, purge interval 1000), exactly as the Scala harness does:

- a generator thread draws an inter-arrival interval (exponential at the target rate,
  truncated to whole ms with the remainder carried, as Kafka's ``IntervalSamples``) and
  a completion latency (log-normal from its 50th and 75th percentiles, truncated to ms),
  sleeps until the request's arrival time if that is in the future, creates a
  ``FakeOperation`` (timeout 200 ms, ``completes_at = now + latency``), hands it to the
  completion queue when ``latency < timeout``, and calls ``try_complete_else_watch``
  with the same 3 keys (drawn once from a key space of 100);
- a completion thread (Kafka's ``CompletionQueue``, a delay queue polled with a 100 ms
  timeout) calls ``force_complete`` on each queued operation at its ``completes_at``;
- the rest expire in the purgatory's timer; nobody calls ``check_and_complete``.

Recorded per point: Kafka's *target* rate (requests over the planned arrival span),
the *achieved* enqueue rate (requests over the generator's real span), elapsed time
until every request completed or expired, process CPU time, peak RSS, and garbage
collections. A design *saturates* when achieved < 95 % of target. Kafka drew from
1,000,000 precomputed samples; here each point precomputes its own sequence from a seed
(the same for every design at that point), so all designs see identical workloads.

``replay`` runs the same workload single-threaded in virtual time (``ManualClock``):
the CPU cost per request without sleeps or thread switches, used for profiling.
"""

from __future__ import annotations

import functools
import gc
import heapq
import itertools
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.bench.harness import DirectExecutor, GcTimer, JsonResult, PeakRss
from kpurgatory.clock import ManualClock, MonotonicClock

__all__ = [
    "CASES",
    "KEY_SPACE",
    "NUM_KEYS",
    "TIMEOUT_MS",
    "EnqueueCase",
    "EnqueuePoint",
    "Workload",
    "fake_operation_class",
    "make_workload",
    "replay",
    "run_point",
]

TIMEOUT_MS = 200
"""Every request's timeout (the operation's ``delay_ms``), as in the proposal."""

NUM_KEYS = 3
"""Watch keys per request (Kafka's ``--keys`` default)."""

KEY_SPACE = 100
"""Keys are drawn from ``fakeKey0 .. fakeKey99`` (Kafka's ``--key-space-size`` default)."""

SATURATION_FRACTION = 0.95
"""A point is saturated when achieved < this fraction of the target rate."""

PCT75_Z = 0.674490
"""The 75th percentile of the standard normal distribution (Kafka's constant)."""


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


@dataclass
class EnqueuePoint(JsonResult):
    """The result of one point: one design, one case, one target rate."""

    design: str
    case: str
    requested_rate: float
    num: int
    enqueued: int
    target_rate: float
    achieved_rate: float
    enqueue_ms: float
    elapsed_ms: float
    cpu_s: float
    rss_start_mb: float
    rss_peak_mb: float
    gc_collections: int
    gc_s: float
    expired: int
    unfinished: int
    truncated: bool
    DERIVED = ("saturated",)

    @property
    def saturated(self) -> bool:
        """Achieved below ``SATURATION_FRACTION`` of target, or stopped by the time budget."""
        return self.truncated or self.achieved_rate < SATURATION_FRACTION * self.target_rate


def run_point(
    impl: ModuleType,
    design: str,
    case: EnqueueCase,
    workload: Workload,
    requested_rate: float,
    *,
    max_seconds: float,
    drain_seconds: float = 30.0,
    profiler: Any = None,
) -> EnqueuePoint:
    """Run one point on a real clock with real threads; return what it measured.

    The generator stops early (``truncated``) once ``max_seconds`` have passed, so a
    saturated design cannot stall a sweep. ``profiler`` (a pyinstrument ``Profiler``,
    optional) is started and stopped inside the generator thread.
    """
    operation_class = fake_operation_class(impl)
    num = workload.num
    latch = Latch(num)
    gc.collect()
    purgatory = impl.DelayedOperationPurgatory("fake purgatory")
    completion = CompletionQueue()
    keys = workload.keys
    intervals = workload.intervals
    latencies = workload.latencies
    outcome: dict[str, float] = {}

    def generate() -> None:
        if profiler is not None:
            profiler.start()
        start = _now_ms()
        arrival = start
        budget_end = time.monotonic() + max_seconds
        enqueued = 0
        try:
            for index in range(num):
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
            outcome["end_ns"] = time.perf_counter_ns()
            outcome["enqueued"] = enqueued
            outcome["planned_ms"] = max(arrival - start, 1)
            if profiler is not None:
                profiler.stop()

    gc_timer = GcTimer()
    with PeakRss() as rss, gc_timer.installed():
        cpu_start = time.process_time()
        start_ns = time.perf_counter_ns()
        generator = threading.Thread(target=generate, name="generator")
        generator.start()
        generator.join()
        enqueued = int(outcome["enqueued"])
        truncated = enqueued < num
        if truncated:
            latch.set_count(enqueued, num - latch.remaining)
        finished = latch.wait(drain_seconds)
        done_ns = time.perf_counter_ns()
        cpu_s = time.process_time() - cpu_start
    completion.stop()
    purgatory.shutdown()
    enqueue_ms = (outcome["end_ns"] - start_ns) / 1e6
    return EnqueuePoint(
        design=design,
        case=case.name,
        requested_rate=requested_rate,
        num=num,
        enqueued=enqueued,
        target_rate=enqueued * 1000.0 / outcome["planned_ms"],
        achieved_rate=enqueued * 1000.0 / max(enqueue_ms, 1e-3),
        enqueue_ms=enqueue_ms,
        elapsed_ms=(done_ns - start_ns) / 1e6,
        cpu_s=cpu_s,
        rss_start_mb=rss.start / 2**20,
        rss_peak_mb=rss.peak / 2**20,
        gc_collections=gc_timer.collections,
        gc_s=gc_timer.seconds,
        expired=latch.expired,
        unfinished=0 if finished else latch.remaining,
        truncated=truncated,
    )


@dataclass
class ReplayResult(JsonResult):
    """One single-threaded virtual-time replay: requests and the CPU they took."""

    design: str
    case: str
    num: int
    cpu_s: float
    completed_early: int
    expired: int
    unfinished: int
    DERIVED = ("requests_per_cpu_s",)

    @property
    def requests_per_cpu_s(self) -> float:
        """Requests handled per CPU second (enqueue, completion and expiry included)."""
        return self.num / max(self.cpu_s, 1e-9)


def _complete_due(
    purgatory: Any, pending: list[tuple[int, int, Any]], now: Callable[[], int], until: float
) -> int:
    """Force-complete the queued operations due by ``until``, earliest first, each once the
    purgatory's clock has reached its ``completes_at``; return how many completed early."""
    completed = 0
    while pending and pending[0][0] <= until:
        completes_at, _, operation = heapq.heappop(pending)
        if completes_at > now():
            purgatory.advance_clock(completes_at - now())
        if operation.force_complete():
            completed += 1
    return completed


def replay(impl: ModuleType, design: str, case: EnqueueCase, workload: Workload) -> ReplayResult:
    """Run ``workload`` in one thread on a ``ManualClock``: the CPU cost of the same work.

    Time moves only to the next event: a completion (``force_complete`` at its
    ``completes_at``, after the timer has expired what was due before it) or the next
    arrival, through the purgatory's ``advance_clock`` (timer drain plus purge check, as
    one reaper step). Tasks run on a ``DirectExecutor``.
    """
    operation_class = fake_operation_class(impl)
    clock = ManualClock(0)
    timer = impl.SystemTimer("replay", clock=clock, executor=DirectExecutor())
    purgatory = impl.DelayedOperationPurgatory("replay", timer=timer, reaper_enabled=False)
    latch = Latch(workload.num)
    pending: list[tuple[int, int, Any]] = []
    keys = workload.keys
    now = clock.now_ms
    completed_early = 0
    gc.collect()
    cpu_start = time.process_time()
    arrival = 0
    for index in range(workload.num):
        arrival += workload.intervals[index]
        completed_early += _complete_due(purgatory, pending, now, arrival)
        if arrival > now():
            purgatory.advance_clock(arrival - now())
        latency = workload.latencies[index]
        operation = operation_class(TIMEOUT_MS, latency, latch, now)
        if latency < TIMEOUT_MS:
            heapq.heappush(pending, (operation.completes_at, index, operation))
        purgatory.try_complete_else_watch(operation, keys)
    completed_early += _complete_due(purgatory, pending, now, math.inf)
    purgatory.advance_clock(TIMEOUT_MS + 1)
    cpu_s = time.process_time() - cpu_start
    purgatory.shutdown()
    return ReplayResult(
        design, case.name, workload.num, cpu_s, completed_early, latch.expired, latch.remaining
    )
