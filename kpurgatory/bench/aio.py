"""Benchmarks of ``kpurgatory.aio`` (issue 12): the purgatory on an event loop, no thread.

* ``long_poll``: the long-poll pattern: ``waiters`` handler tasks on ``keys`` keys, each
  waiting for an event on its key with a timeout; events come for 90 % of the keys (so
  90 % of the waiters are answered by an event) and the rest time out. CPU time of the
  whole pattern (process time: every thread counted), per waiter, for three approaches
  run side by side in one process, interleaved, best of ``repeat``:

  - ``plain``: plain asyncio: ``loop.call_later`` + a future per waiter + a dict of
    waiter lists per key (what a user writes without a purgatory);
  - ``aio``: ``AsyncPurgatory`` (optimized): ``await purgatory.wait(op, [key])``, events
    through ``check_and_complete``;
  - ``threaded``: the default purgatory (reaper and executor threads), each answer
    hopping back through ``call_soon_threadsafe``.

* ``enqueue``: the proposal's enqueue benchmark (kpurgatory.bench.enqueue: same
  workloads, FakeOperation semantics, high-timeout case) on one event loop, real
  clock, no thread: the generator is a coroutine that, per request, completes the
  requests whose completion time has come, sleeps until the request's arrival if that
  is ahead (or until an earlier completion is due), and submits it, yielding to the
  loop at least every 64 requests when behind schedule (as a server reading requests
  from sockets would). As in Kafka's harness, a request is not awaited: design
  ``aio-optimized`` submits with ``AsyncPurgatory.try_complete_else_watch`` (no waiter)
  a plain optimized operation, and completes requests from the generator's own queue
  of completion times (a heap, standing in for the harness's completion thread and
  its delay queue) instead of a ``loop.call_at`` per request; expiries are the
  purgatory's, on its loop driver. Design ``aio-futures`` is the same with
  ``AsyncPurgatory.submit`` (a ``Waiter`` future per request, awaitable operations):
  what awaiting would add. Side by side with the threaded ``run_point`` of the
  optimized purgatory at the same target rates.

* ``lateness``: during each loop enqueue point, every expiry records ``fired - due`` in
  ms (real clock, loop under the generator's load); p50 and p99 per point.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kpurgatory import DelayedOperation as ThreadedOperation
from kpurgatory import DelayedOperationPurgatory
from kpurgatory.aio import AsyncPurgatory
from kpurgatory.aio import DelayedOperation as AioOperation
from kpurgatory.bench import enqueue
from kpurgatory.bench.designs import load_design
from kpurgatory.bench.harness import GcTimer, JsonResult, PeakRss, interleaved
from kpurgatory.clock import MonotonicClock
from kpurgatory.optimized import DelayedOperation as OptimizedOperation

__all__ = [
    "AIO_PLANS",
    "AioPlan",
    "goals",
    "long_poll",
    "LOOP_DESIGNS",
    "loop_enqueue_point",
    "report_section",
    "run",
]

ANSWERED_FRACTION = 0.9
"""Share of the keys (hence of the waiters) that get an event."""

APPROACHES: tuple[str, ...] = ("plain", "aio", "threaded")

_now_ms = MonotonicClock().now_ms
"""The purgatory's real clock (``MonotonicClock``), in ms."""

_monotonic_ns = time.monotonic_ns
"""``MonotonicClock.now_ms`` is ``monotonic_ns() // 1_000_000``: the hot paths of the
loop benchmark read it so, without the method's Python frame (same reading)."""


@dataclass(frozen=True)
class AioPlan(JsonResult):
    """Sizes of the aio benchmarks for one mode."""

    waiters: int
    keys: int
    timeout_ms: int
    repeat: int
    rates: list[float]
    seconds_per_point: float
    max_seconds_per_point: float


AIO_PLANS: dict[str, AioPlan] = {
    "quick": AioPlan(2000, 100, 50, 1, [2000.0], 0.3, 3.0),
    "full": AioPlan(
        50_000, 1000, 100, 3, [20_000.0, 40_000.0, 70_000.0, 105_000.0, 140_000.0], 2.0, 6.0
    ),
}


# -- long poll ------------------------------------------------------------------------


class _Versions:
    """The event source: a version per key; a waiter wants a version above what it saw."""

    def __init__(self, keys: int) -> None:
        self.version = [0] * keys


class _AioWaiter(AioOperation):
    __slots__ = ("key", "versions")

    def __init__(self, delay_ms: int, versions: _Versions, key: int) -> None:
        super().__init__(delay_ms)
        self.versions, self.key = versions, key

    def try_complete(self) -> bool:
        return self.versions.version[self.key] > 0 and self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class _ThreadedWaiter(ThreadedOperation):
    def __init__(
        self,
        delay_ms: int,
        versions: _Versions,
        key: int,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[bool],
    ) -> None:
        super().__init__(delay_ms)
        self.versions, self.key, self.loop, self.future = versions, key, loop, future

    def try_complete(self) -> bool:
        return self.versions.version[self.key] > 0 and self.force_complete()

    def on_complete(self) -> None:
        self.loop.call_soon_threadsafe(_resolve, self.future)

    def on_expiration(self) -> None:
        pass


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


async def _long_poll_once(approach: str, plan: AioPlan) -> dict[str, Any]:
    """One run of the pattern with ``approach``; CPU and wall time from first task to last."""
    loop = asyncio.get_running_loop()
    versions = _Versions(plan.keys)
    answered_keys = int(plan.keys * ANSWERED_FRACTION)
    timeout_s = plan.timeout_ms / 1000
    handler: Callable[[int], Any]
    close: Callable[[], None]
    notify: Callable[[int], Any]
    if approach == "plain":
        waiting: dict[int, list[asyncio.Future[bool]]] = {}

        async def plain_handler(key: int) -> None:
            future = loop.create_future()
            timer = loop.call_later(timeout_s, _expire, future)
            waiting.setdefault(key, []).append(future)
            try:
                await future
            finally:
                timer.cancel()

        def plain_notify(key: int) -> None:
            for future in waiting.pop(key, ()):
                _resolve(future)

        handler, notify, close = plain_handler, plain_notify, lambda: None
    elif approach == "aio":
        purgatory: AsyncPurgatory[_AioWaiter] = AsyncPurgatory("long-poll")

        async def aio_handler(key: int) -> None:
            await purgatory.wait(_AioWaiter(plan.timeout_ms, versions, key), (key,))

        handler, notify, close = aio_handler, purgatory.check_and_complete, purgatory.shutdown
    else:
        threaded: DelayedOperationPurgatory[_ThreadedWaiter] = DelayedOperationPurgatory(
            "long-poll"
        )

        async def threaded_handler(key: int) -> None:
            future: asyncio.Future[bool] = loop.create_future()
            operation = _ThreadedWaiter(plan.timeout_ms, versions, key, loop, future)
            threaded.try_complete_else_watch(operation, (key,))
            await future

        handler, notify, close = threaded_handler, threaded.check_and_complete, threaded.shutdown
    gc.collect()
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    tasks = [loop.create_task(handler(i % plan.keys)) for i in range(plan.waiters)]
    await asyncio.sleep(0)  # every handler starts waiting
    await asyncio.sleep(0)
    for key in range(answered_keys):
        versions.version[key] += 1
        notify(key)
    await asyncio.wait(tasks)
    cpu_s = time.process_time() - cpu_start
    wall_s = time.perf_counter() - wall_start
    close()
    return {"approach": approach, "cpu_s": cpu_s, "wall_s": wall_s}


def long_poll(plan: AioPlan, say: Callable[[str], None]) -> dict[str, Any]:
    """The long-poll pattern, every approach, interleaved; best CPU of ``repeat`` each."""
    runs: list[dict[str, Any]] = []
    for index in range(plan.repeat):
        for approach in interleaved(APPROACHES, index):
            say(f"aio long-poll {approach}: {plan.waiters:,} waiters on {plan.keys:,} keys")
            runs.append(asyncio.run(_long_poll_once(approach, plan)))
    best = {a: min(r["cpu_s"] for r in runs if r["approach"] == a) for a in APPROACHES}
    return {
        "waiters": plan.waiters,
        "keys": plan.keys,
        "timeout_ms": plan.timeout_ms,
        "runs": runs,
        "best_cpu_s": best,
        "cpu_us_per_waiter": {a: best[a] / plan.waiters * 1e6 for a in APPROACHES},
        "ratio_aio_to_plain": best["aio"] / best["plain"],
        "ratio_threaded_to_plain": best["threaded"] / best["plain"],
    }


# -- enqueue on the loop ----------------------------------------------------------------


class _LoopLatch:
    """Counts completions and expiries on the loop; ``done`` resolves when all finished."""

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.remaining = count
        self.expired = 0
        self.done = loop.create_future()
        self.lateness_ms: list[float] = []

    def count_down(self) -> None:
        self.remaining -= 1
        if self.remaining == 0 and not self.done.done():
            self.done.set_result(None)


class _LoopFakeOperation(OptimizedOperation):
    """Kafka's FakeOperation on the plain optimized base; records its expiry lateness.

    ``now`` is the generator's clock reading at creation (one reading per request)."""

    __slots__ = ("completes_at", "expires_at", "latch")

    def __init__(self, delay_ms: int, latency_ms: int, latch: _LoopLatch, now: int) -> None:
        super().__init__(delay_ms)
        self.completes_at = now + latency_ms
        self.expires_at = now + delay_ms
        self.latch = latch

    def try_complete(self) -> bool:
        return _monotonic_ns() // 1_000_000 >= self.completes_at and self.force_complete()

    def on_complete(self) -> None:
        self.latch.count_down()

    def on_expiration(self) -> None:
        latch = self.latch
        latch.expired += 1
        latch.lateness_ms.append(time.monotonic_ns() / 1e6 - self.expires_at)


class _LoopFakeAwaitable(_LoopFakeOperation, AioOperation):
    """The same, awaitable (``AsyncPurgatory.submit``): design ``aio-futures``."""

    __slots__ = ()


def _percentile(values: Sequence[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _complete_due(pending: list[tuple[int, int, _LoopFakeOperation]], now: int) -> None:
    """``force_complete`` every queued request whose completion time has come."""
    while pending and pending[0][0] <= now:
        heapq.heappop(pending)[2].force_complete()


async def _loop_point(
    workload: enqueue.Workload, max_seconds: float, *, futures: bool
) -> tuple[dict[str, float], _LoopLatch]:
    loop = asyncio.get_running_loop()
    latch = _LoopLatch(loop, workload.num)
    purgatory: AsyncPurgatory[Any] = AsyncPurgatory("fake purgatory")
    keys = tuple(workload.keys)  # a tuple of distinct keys: each operation keeps it as is
    operation_class = _LoopFakeAwaitable if futures else _LoopFakeOperation
    submit: Callable[[Any, tuple[str, ...]], object] = (
        purgatory.submit if futures else purgatory.try_complete_else_watch
    )
    pending: list[tuple[int, int, _LoopFakeOperation]] = []  # (completes_at, index, op)
    push = heapq.heappush
    latencies, intervals = workload.latencies, workload.intervals
    timeout = enqueue.TIMEOUT_MS
    start_ns = time.perf_counter_ns()
    start = _now_ms()
    arrival = start
    budget_end = time.monotonic() + max_seconds
    enqueued = 0
    for index in range(workload.num):
        latency = latencies[index]
        arrival += intervals[index]
        now = _monotonic_ns() // 1_000_000
        slept = False
        while True:
            if pending and pending[0][0] <= now:  # _complete_due's test: a call less
                _complete_due(pending, now)
            if arrival <= now:
                break
            wake = min(arrival, pending[0][0]) if pending else arrival
            await asyncio.sleep((wake - now) / 1000.0)
            slept = True
            now = _monotonic_ns() // 1_000_000
        if (index & 63) == 0:
            if not slept:
                await asyncio.sleep(0)  # behind schedule: still let due timers run (I/O would)
            if time.monotonic() > budget_end:
                break
        operation = operation_class(timeout, latency, latch, now)
        if latency < timeout:
            push(pending, (operation.completes_at, index, operation))
        submit(operation, keys)
        enqueued += 1
    end_ns = time.perf_counter_ns()
    while pending:  # the completions still to come (the harness's completion thread)
        now = _now_ms()
        _complete_due(pending, now)
        if pending:
            await asyncio.sleep((pending[0][0] - now) / 1000.0)
    if enqueued < workload.num:
        latch.remaining -= workload.num - enqueued
        if latch.remaining <= 0 and not latch.done.done():
            latch.done.set_result(None)
    finished = True
    try:
        await asyncio.wait_for(asyncio.shield(latch.done), 30.0)
    except TimeoutError:
        finished = False
    done_ns = time.perf_counter_ns()
    purgatory.shutdown()
    return {
        "enqueued": enqueued,
        "planned_ms": max(arrival - start, 1),
        "enqueue_ms": (end_ns - start_ns) / 1e6,
        "elapsed_ms": (done_ns - start_ns) / 1e6,
        "finished": finished,
    }, latch


def loop_enqueue_point(
    case: enqueue.EnqueueCase,
    workload: enqueue.Workload,
    requested_rate: float,
    *,
    max_seconds: float,
    futures: bool = False,
) -> dict[str, Any]:
    """One enqueue point on a fresh event loop (real clock): the ``EnqueuePoint`` fields
    plus the expiry lateness p50/p99 (ms). ``futures``: design ``aio-futures``."""
    gc.collect()
    gc_timer = GcTimer()
    with PeakRss() as rss, gc_timer.installed():
        cpu_start = time.process_time()
        outcome, latch = asyncio.run(_loop_point(workload, max_seconds, futures=futures))
        cpu_s = time.process_time() - cpu_start
    enqueued = int(outcome["enqueued"])
    point = enqueue.EnqueuePoint(
        design="aio-futures" if futures else "aio-optimized",
        case=case.name,
        requested_rate=requested_rate,
        num=workload.num,
        enqueued=enqueued,
        target_rate=enqueued * 1000.0 / outcome["planned_ms"],
        achieved_rate=enqueued * 1000.0 / max(outcome["enqueue_ms"], 1e-3),
        enqueue_ms=outcome["enqueue_ms"],
        elapsed_ms=outcome["elapsed_ms"],
        cpu_s=cpu_s,
        rss_start_mb=rss.start / 2**20,
        rss_peak_mb=rss.peak / 2**20,
        gc_collections=gc_timer.collections,
        gc_s=gc_timer.seconds,
        expired=latch.expired,
        unfinished=0 if outcome["finished"] else latch.remaining,
        truncated=enqueued < workload.num,
    ).to_json()
    point["lateness_p50_ms"] = _percentile(latch.lateness_ms, 0.5)
    point["lateness_p99_ms"] = _percentile(latch.lateness_ms, 0.99)
    point["lateness_samples"] = len(latch.lateness_ms)
    return point


LOOP_DESIGNS: tuple[str, ...] = ("aio-optimized", "aio-futures", "optimized")
"""The enqueue designs compared: on the loop without and with a future per request, and
the threaded optimized purgatory."""


def loop_enqueue(plan: AioPlan, seed: int, say: Callable[[str], None]) -> dict[str, Any]:
    """High-timeout enqueue points, the loop designs and the threaded optimized purgatory
    interleaved at each target rate (same workload for all)."""
    case = enqueue.CASES["high"]
    points: list[dict[str, Any]] = []
    for index, rate in enumerate(plan.rates):
        num = max(300, int(rate * plan.seconds_per_point))
        workload = enqueue.make_workload(case, rate, num, seed + index)
        for design in interleaved(LOOP_DESIGNS, index):
            say(f"aio enqueue {case.name} {design} target {rate:,.0f}/s ({num:,} requests)")
            if design.startswith("aio-"):
                points.append(
                    loop_enqueue_point(
                        case,
                        workload,
                        rate,
                        max_seconds=plan.max_seconds_per_point,
                        futures=design == "aio-futures",
                    )
                )
            else:
                points.append(
                    enqueue.run_point(
                        load_design("optimized"),
                        "optimized",
                        case,
                        workload,
                        rate,
                        max_seconds=plan.max_seconds_per_point,
                    ).to_json()
                )
    plateau = {
        design: max((p["achieved_rate"] for p in points if p["design"] == design), default=0.0)
        for design in LOOP_DESIGNS
    }
    return {"points": points, "plateau": plateau}


def run(mode: str, seed: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Every aio benchmark for ``mode`` ("quick" or "full")."""
    plan = AIO_PLANS[mode]
    return {
        "plan": plan.to_json(),
        "long_poll": long_poll(plan, say),
        "enqueue": loop_enqueue(plan, seed, say),
    }


def goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 12's goals, measured in ``runs`` (ratios from within one run)."""
    cpu: list[dict[str, Any]] = []
    rate: list[dict[str, Any]] = []
    for run_ in runs:
        result = run_.get("aio")
        if result is None:
            continue
        build = run_.get("build", "pure")
        poll = result["long_poll"]
        per = poll["cpu_us_per_waiter"]
        cpu.append(
            {
                "run": f"{build} build",
                "value": poll["ratio_aio_to_plain"],
                "detail": f"aio {per['aio']:.2f} us vs plain {per['plain']:.2f} us per waiter "
                f"(threaded {per['threaded']:.2f})",
                "limit": 1.0 if build == "compiled" else 1.5,
            }
        )
        plateau = result["enqueue"]["plateau"]
        rate.append(
            {
                "run": f"{build} build",
                "value": plateau["aio-optimized"],
                "detail": f"loop {plateau['aio-optimized']:,.0f}/s (with a future per request "
                f"{plateau.get('aio-futures', 0.0):,.0f}/s) vs threaded "
                f"{plateau['optimized']:,.0f}/s",
            }
        )
    return [
        {
            "goal": "Long-poll CPU per waiter, aio purgatory / plain asyncio",
            "target": "<= 1.5 pure, <= 1.0 compiled",
            "measurements": cpu,
            "met": all(m["value"] <= m["limit"] for m in cpu) if cpu else None,
            "note": "50,000 waiters on 1,000 keys, 90 % answered by an event, 10 % timing out",
        },
        {
            "goal": "Enqueue plateau on the loop (aio purgatory), high-timeout case",
            "target": ">= 105,000/s compiled",
            "measurements": rate,
            "met": (
                any(m["value"] >= 105_000 for m in rate if m["run"].startswith("compiled"))
                if any(m["run"].startswith("compiled") for m in rate)
                else None
            ),
            "note": "the proposal's workload on one loop, real clock: submitted without a "
            "waiter, completed from the generator's own queue, expired by the loop driver",
        },
    ]


def report_section(result: dict[str, Any], build: str) -> list[str]:
    """Markdown lines for one run's aio results (docs/performance.md, "asyncio")."""
    poll = result["long_poll"]
    per = poll["cpu_us_per_waiter"]
    lines = [
        f"### asyncio purgatory, {build} build (issue 12)",
        "",
        f"Long-poll pattern: {poll['waiters']:,} waiters on {poll['keys']:,} keys, "
        f"{ANSWERED_FRACTION:.0%} answered by an event, the rest timing out after "
        f"{poll['timeout_ms']} ms; process CPU time per waiter, best of the interleaved runs.",
        "",
        "| approach | CPU per waiter | / plain asyncio |",
        "|---|---|---|",
    ]
    for approach in APPROACHES:
        ratio = per[approach] / per["plain"]
        lines.append(f"| {approach} | {per[approach]:.1f} us | {ratio:.2f} |")
    enqueue_points = result["enqueue"]["points"]
    lines += [
        "",
        "Enqueue benchmark, high-timeout case, real clock: the generator as a coroutine on "
        "one loop submitting without awaiting and completing requests from its own queue "
        "(aio-optimized), the same with a Waiter future per request (aio-futures), and "
        "the threaded optimized purgatory (optimized), same workloads.",
        "",
        "| design | target/s | achieved/s | CPU per request | saturated | expiry lateness "
        "p50 / p99 |",
        "|---|---|---|---|---|---|",
    ]
    for point in enqueue_points:
        late = (
            f"{point['lateness_p50_ms']:.1f} / {point['lateness_p99_ms']:.1f} ms"
            if point.get("lateness_p50_ms") is not None
            else "n/a"
        )
        lines.append(
            f"| {point['design']} | {point['target_rate']:,.0f} | {point['achieved_rate']:,.0f} "
            f"| {point['cpu_s'] / max(point['enqueued'], 1) * 1e6:.1f} us "
            f"| {'yes' if point['saturated'] else 'no'} | {late} |"
        )
    plateau = result["enqueue"]["plateau"]
    lines += [
        "",
        f"Plateau (highest achieved rate): aio-optimized {plateau['aio-optimized']:,.0f}/s, "
        f"aio-futures {plateau.get('aio-futures', 0.0):,.0f}/s, "
        f"threaded optimized {plateau['optimized']:,.0f}/s.",
        "",
    ]
    return lines
