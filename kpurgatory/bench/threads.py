"""Threads benchmark: ``python -m kpurgatory.bench.threads [pyperf options]``.

The acks=all pattern (a thread submits an operation on a key, the key's event completes
it) for both implementations, by one thread and by two on disjoint keys, the timer's
single lock under one and two threads adding and cancelling, and a control: a pure-Python
loop of the same kinds of work (objects, a dict, a lock) that shares nothing between its
threads, i.e. what two threads of this interpreter can gain at all on this machine. Each
value is the time of one operation, so two threads beating one shows as a smaller value.
Run it under each interpreter (a free-threaded one with ``PYTHON_GIL=0`` and
``PYTHON_GIL=1``; pyperf's workers inherit the variable through ``--inherit-environ
PYTHON_GIL``); ``python -m kpurgatory.bench.threads report RESULTS.json...`` prints the
times and the goals' ratios. ``make bench-threads`` does both; docs/performance.md
("Threads") records one run. ``--contention`` prints, for two threads on the acks=all
loop, how often each lock the threads share was found held, and what Kafka's read-write
split would cost per ``add`` against one lock (no pyperf).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Hashable
from types import ModuleType
from typing import Any

from kpurgatory.bench.locks import CountingLock, lock_costs

__all__ = [
    "DELAY_MS",
    "OPERATIONS",
    "TIMER_LAYOUTS",
    "acks_all_time",
    "benchmarks",
    "contention",
    "control_time",
    "lock_costs",
    "inner_loops",
    "main",
    "report",
    "timer_time",
]

DELAY_MS = 30_000
"""Every operation's timeout: far beyond a run, so none expires while it is measured."""

OPERATIONS = 2_000
"""Operations per thread and loop (the time function's loop count multiplies it)."""


def _implementation(name: str) -> ModuleType:
    if name == "reference":
        import kpurgatory.reference as reference

        return reference
    if name == "optimized":
        import kpurgatory.optimized as optimized

        return optimized
    raise ValueError(f"implementation must be 'reference' or 'optimized', got {name!r}")


def _operation_class(impl: ModuleType) -> type[Any]:
    """An operation that completes once its ``ready`` flag is set (a replica's ack)."""

    class Produce(impl.DelayedOperation):  # type: ignore[misc,name-defined]
        __slots__ = ("ready",)

        def __init__(self) -> None:
            super().__init__(DELAY_MS)
            self.ready = False

        def try_complete(self) -> bool:
            return bool(self.ready) and bool(self.force_complete())

        def on_complete(self) -> None:
            pass

        def on_expiration(self) -> None:
            pass

    return Produce


def _in_threads(threads: int, work: Callable[[int], None]) -> float:
    """Run ``work(index)`` on ``threads`` threads started together; the wall time."""
    if threads == 1:
        start = time.perf_counter()
        work(0)
        return time.perf_counter() - start
    barrier = threading.Barrier(threads + 1)

    def body(index: int) -> None:
        barrier.wait()
        work(index)

    workers = [threading.Thread(target=body, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start


def acks_all_time(loops: int, implementation: str, threads: int) -> float:
    """Seconds for ``threads`` threads each submitting ``loops * OPERATIONS`` operations on
    its own key (``try_complete_else_watch``) and completing each (``check_and_complete``):
    ``inner_loops(threads)`` operations per loop."""
    impl = _implementation(implementation)
    produce = _operation_class(impl)
    purgatory = impl.DelayedOperationPurgatory("Produce", reaper_enabled=False)
    count = loops * OPERATIONS

    def work(index: int) -> None:
        key: Hashable = ("topic", index)
        keys = (key,)
        submit = purgatory.try_complete_else_watch
        complete = purgatory.check_and_complete
        for _ in range(count):
            operation = produce()
            submit(operation, keys)
            operation.ready = True
            complete(key)

    try:
        elapsed = _in_threads(threads, work)
        if purgatory.num_completed != count * threads or purgatory.watched:
            raise AssertionError(f"{implementation}: an operation was lost or left watched")
    finally:
        purgatory.shutdown()
    return elapsed


def control_time(loops: int, threads: int) -> float:
    """Seconds for ``threads`` threads each running ``loops * OPERATIONS`` rounds of plain
    Python that shares nothing with the other threads: build an object of the thread's own
    class, store it in the thread's own dict and drop an older one, holding the thread's
    own re-entrant lock. The kinds of work an acks=all operation does, with no shared
    object, so two threads against one here is the interpreter's and the machine's ceiling
    for the acks=all figures."""
    count = loops * OPERATIONS

    def work(index: int) -> None:
        own_class = type(f"Own{index}", (), {"__slots__": ("value", "lock")})
        lock = threading.RLock()
        table: dict[int, object] = {}
        for round_ in range(count):
            item = own_class()
            item.value = round_
            lock.acquire()
            try:
                table[round_ & 255] = item
                table.pop((round_ + 1) & 255, None)
                item.lock = lock
            finally:
                lock.release()

    return _in_threads(threads, work)


TIMER_LAYOUTS = ("one timer", "a timer each", "a timer and lock each")
"""How ``timer_time``'s threads share timers: all on one, each on its own timer (the
timers still share the process-wide lock), or each on its own timer built with its own
lock (the module's lock rebound while it is built: what per-timer locks would give, a
measurement only, valid because no task moves between these timers)."""


def _timers(impl: ModuleType, count: int, own_locks: bool) -> list[Any]:
    """``count`` timers of ``impl``; with ``own_locks`` each gets a lock of its own."""
    if not own_locks:
        return [impl.SystemTimer(f"Produce-{index}") for index in range(count)]
    import kpurgatory.optimized.timer as timer_module
    from kpurgatory import sync

    shared = timer_module._TIMER_LOCK
    timers = []
    try:
        for index in range(count):
            timer_module._TIMER_LOCK = sync.new_lock()
            timers.append(impl.SystemTimer(f"Produce-{index}"))
    finally:
        timer_module._TIMER_LOCK = shared
    return timers


def timer_time(loops: int, implementation: str, threads: int, layout: str = "one timer") -> float:
    """Seconds for ``threads`` threads each adding and cancelling ``loops * OPERATIONS``
    tasks (keeping 100 of its own pending) on timers laid out as ``layout`` says
    (``TIMER_LAYOUTS``): ``inner_loops(threads)`` add+cancel pairs per loop."""
    if layout not in TIMER_LAYOUTS:
        raise ValueError(f"layout must be one of {TIMER_LAYOUTS}, got {layout!r}")
    impl = _implementation(implementation)
    produce = _operation_class(impl)
    count = 1 if layout == "one timer" else threads
    timers = _timers(impl, count, own_locks=layout == "a timer and lock each")
    loops_per_thread = loops * OPERATIONS

    def work(index: int) -> None:
        timer = timers[index % count]
        pending = [produce() for _ in range(100)]
        for task in pending:
            timer.add(task)
        add = timer.add
        for _ in range(loops_per_thread):
            task = produce()
            add(task)
            task.cancel()
        for task in pending:
            task.cancel()

    try:
        elapsed = _in_threads(threads, work)
        if any(timer.size for timer in timers):
            raise AssertionError(f"{implementation}: a task was left in a timer")
    finally:
        for timer in timers:
            timer.close()
    return elapsed


def contention(threads: int = 2, operations: int = 20_000) -> dict[str, tuple[float, float]]:
    """Run the optimized acks=all loop on ``threads`` threads (disjoint keys, one
    purgatory) with every lock the threads share replaced by a counting one; per lock,
    (acquisitions per operation, share of them that found it held by another thread).
    The locks: the timer's and the flags' (process-wide), the purgatory's counters lock
    and its shard locks (the threads' keys fall in different shards). The counting costs
    a Python call per acquisition, which slows the loop: the shares are an upper bound on
    what an unwrapped run would see."""
    import kpurgatory.optimized as optimized
    import kpurgatory.optimized.operation as operation_module
    import kpurgatory.optimized.timer as timer_module

    tallies = threading.local()
    every: list[dict[str, list[int]]] = []

    def counting(name: str) -> Any:
        return CountingLock(name, tallies, every)

    saved = (timer_module._TIMER_LOCK, operation_module._FLAGS_LOCK)
    timer_module._TIMER_LOCK = counting("timer (process-wide)")
    operation_module._FLAGS_LOCK = counting("flags (process-wide)")
    try:
        purgatory = optimized.DelayedOperationPurgatory("Produce", reaper_enabled=False)
        purgatory._counters_lock = counting("purgatory counters")
        for shard in purgatory._shards:
            shard.lock = counting("shards")
        produce = _operation_class(optimized)

        def work(index: int) -> None:
            key: Hashable = ("topic", index)
            keys = (key,)
            for _ in range(operations):
                operation = produce()
                purgatory.try_complete_else_watch(operation, keys)
                operation.ready = True
                purgatory.check_and_complete(key)

        every.clear()
        tallies.counts = None  # one thread runs ``work`` on this one: count it afresh
        _in_threads(threads, work)
        totals: dict[str, list[int]] = {}
        for tally in every:  # the workers' counts only (not the shutdown's below)
            for name, (taken, held) in tally.items():
                total = totals.setdefault(name, [0, 0])
                total[0] += taken
                total[1] += held
        if purgatory.num_completed != threads * operations:
            raise AssertionError("contention: an operation was lost")
        purgatory.shutdown()
    finally:
        timer_module._TIMER_LOCK, operation_module._FLAGS_LOCK = saved
    done = threads * operations
    return {name: (taken / done, held / taken) for name, (taken, held) in sorted(totals.items())}


def inner_loops(threads: int) -> int:
    """Operations per loop of a time function run on ``threads`` threads (pyperf divides
    by it, so each value is the time of one operation)."""
    return OPERATIONS * threads


Benchmark = tuple[str, Callable[..., float], tuple[Any, ...], dict[str, Any]]


def _gil() -> str:
    """``on`` or ``off``: whether this interpreter runs with its GIL."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return "on" if is_enabled is None or is_enabled() else "off"


def benchmarks() -> list[Benchmark]:
    """Every benchmark: (name, time function, its arguments, metadata)."""
    gil = _gil()
    found: list[Benchmark] = []
    for threads in (1, 2):
        for implementation in ("reference", "optimized"):
            found.append(
                (
                    f"acks=all, {implementation}, {threads} thread(s), GIL {gil}",
                    acks_all_time,
                    (implementation, threads),
                    {"question": "acks-all", "design": implementation, "size": threads},
                )
            )
    for threads in (1, 2):
        found.append(
            (
                f"control, nothing shared, {threads} thread(s), GIL {gil}",
                control_time,
                (threads,),
                {"question": "control", "design": "nothing shared", "size": threads},
            )
        )
    for threads, layout in ((1, "one timer"), *((2, layout) for layout in TIMER_LAYOUTS)):
        found.append(
            (
                f"timer add+cancel, optimized, {threads} thread(s), {layout}, GIL {gil}",
                timer_time,
                ("optimized", threads, layout),
                {"question": "timer-lock", "design": layout, "size": threads},
            )
        )
    return found


def main() -> None:
    """Run every benchmark under pyperf (``-o FILE`` writes the results)."""
    import pyperf

    runner = pyperf.Runner(program_args=("-m", "kpurgatory.bench.threads"))
    runner.argparser.description = __doc__.splitlines()[0] if __doc__ else None
    runner.parse_args()
    for name, function, arguments, metadata in benchmarks():
        runner.bench_time_func(
            name,
            function,
            *arguments,
            metadata=metadata,
            inner_loops=inner_loops(metadata["size"]),
        )


def _mean_us(bench: Any) -> float:
    return float(bench.mean()) * 1e6


def report(paths: list[str]) -> str:
    """The goals' ratios from pyperf result files of this module (one per interpreter
    and GIL setting), as Markdown: per-operation times and the ratios derived from them."""
    import pyperf

    lines = ["| run | benchmark | us/op |", "|---|---|---:|"]
    ratios: list[str] = []
    one_thread: dict[tuple[str, str], dict[str, float]] = {}
    for path in paths:
        suite = pyperf.BenchmarkSuite.load(path)
        times = {bench.get_name(): _mean_us(bench) for bench in suite.get_benchmarks()}
        python = suite.get_metadata().get("python_implementation", "")
        version = suite.get_metadata().get("python_version", "")
        run = f"{python} {version}".strip() or path
        gil = "off" if any(name.endswith("GIL off") for name in times) else "on"
        run = f"{run}, GIL {gil}"
        for name, value in times.items():
            lines.append(f"| {run} | {name.rsplit(', GIL', 1)[0]} | {value:.2f} |")

        def time_of(prefix: str, times: dict[str, float] = times, gil: str = gil) -> float:
            return times[f"{prefix}, GIL {gil}"]

        for threads in (1, 2):
            ref = time_of(f"acks=all, reference, {threads} thread(s)")
            opt = time_of(f"acks=all, optimized, {threads} thread(s)")
            ratios.append(
                f"- {run}: optimized / reference throughput, {threads} thread(s): {ref / opt:.2f}x"
            )
        for design in ("reference", "optimized"):
            one = time_of(f"acks=all, {design}, 1 thread(s)")
            two = time_of(f"acks=all, {design}, 2 thread(s)")
            ratios.append(f"- {run}: 2 threads / 1 thread throughput, {design}: {one / two:.2f}x")
        one = time_of("control, nothing shared, 1 thread(s)")
        two = time_of("control, nothing shared, 2 thread(s)")
        ratios.append(
            f"- {run}: 2 threads / 1 thread throughput, control (nothing shared): {one / two:.2f}x"
        )
        one_thread[(version, gil)] = {
            name.rsplit(", GIL", 1)[0]: value
            for name, value in times.items()
            if ", 1 thread(s)" in name
        }
        one = time_of("timer add+cancel, optimized, 1 thread(s), one timer")
        for layout in TIMER_LAYOUTS:
            two = time_of(f"timer add+cancel, optimized, 2 thread(s), {layout}")
            ratios.append(
                f"- {run}: timer add+cancel, 2 threads ({layout}) / 1 thread throughput: "
                f"{one / two:.2f}x"
            )
    for (version, gil), off in one_thread.items():
        on = one_thread.get((version, "on"))
        if gil != "off" or on is None:
            continue
        for name in sorted(off.keys() & on.keys()):
            if name.startswith(("acks=all", "control")):
                ratios.append(
                    f"- {version}: GIL off / GIL on throughput, one thread, {name}: "
                    f"{on[name] / off[name]:.2f}x"
                )
    return "\n".join([*lines, "", *ratios])


def _self_check(argv: list[str]) -> int:
    """``--check``: one short pass of every benchmark without pyperf (a smoke test)."""
    parser = argparse.ArgumentParser(prog="kpurgatory.bench.threads --check")
    parser.add_argument("--check", action="store_true")
    parser.parse_args(argv)
    for name, function, arguments, metadata in benchmarks():
        per_operation = function(1, *arguments) / inner_loops(metadata["size"])
        print(f"{name}: {per_operation * 1e6:.2f} us/op")
    return 0


def _print_contention() -> int:
    gil = _gil()
    costs = lock_costs()
    for name, seconds in costs.items():
        print(f"GIL {gil}, 1 thread: {name}: {seconds * 1e9:.0f} ns per add's locking")
    ratio = costs["read side + bucket lock"] / costs["one RLock"]
    print(f"GIL {gil}: read-write split / one lock: {ratio:.1f}x")
    for name, (per_operation, held) in contention().items():
        print(
            f"GIL {gil}, 2 threads: {name}: {per_operation:.2f} acquisitions/op, "
            f"found held {held:.2%}"
        )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--contention"]:
        sys.exit(_print_contention())
    if sys.argv[1:2] == ["report"]:
        print(report(sys.argv[2:]))
        sys.exit(0)
    if "--check" in sys.argv[1:]:
        sys.exit(_self_check(sys.argv[1:]))
    main()
