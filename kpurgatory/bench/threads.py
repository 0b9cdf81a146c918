"""Threads benchmark: ``python -m kpurgatory.bench.threads [-r ROUNDS] [-n OPS] [-o FILE]``.

The acks=all pattern (a thread submits an operation on its own key, marks it ready and
completes it with ``check_and_complete``) on 1, 2, 4 and 8 threads, for both
implementations, in three layouts (``LAYOUTS``):

* *shared*: one purgatory (with its timer) and one operation class, built by the
  calling thread, used by every thread: what a server's handler threads do;
* *class shared*: the control, one operation class built by the calling thread, but
  each thread builds its own purgatory and timer: what the interpreter costs when
  threads share only the user's class (3.13t counts a reference to an object's class
  on every instance created and freed);
* *nothing shared*: each thread builds its own class, purgatory and timer: the
  ceiling (what remains shared is process-wide: the library's code and its
  module-level locks, the interpreter).

So shared / nothing shared is what the shared purgatory costs in all; class shared /
nothing shared is the interpreter's part (the shared class), and shared / class shared
the library's part. Throughput is operations per second of all threads together (every
thread, even a lone one, is a worker thread started for the measurement; the time runs
from the first thread's start to the last one's end).

Interleaved, not pyperf: pyperf runs each benchmark in its own worker processes, one
benchmark after the other, so a ratio of two of its benchmarks compares different
minutes of a machine whose load moves; here every round measures every layout at every
thread count in turn (the order of the layouts reversed every other round), and a
figure is the median over the rounds, so a ratio divides figures taken seconds apart.
Run it under each interpreter (a free-threaded one with ``PYTHON_GIL=0`` and
``PYTHON_GIL=1``); ``python -m kpurgatory.bench.threads report RESULTS.json...`` prints
the tables and the goals. ``make bench-threads`` does both; docs/performance.md
("Threads") records one run. ``compare --before DIR`` times one thread on the shared
purgatory against another tree's code (subprocesses alternating between the two);
``--contention`` prints how often each lock the threads share was found held.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from types import ModuleType
from typing import Any

from kpurgatory.bench.locks import CountingLock, lock_costs

__all__ = [
    "DELAY_MS",
    "IMPLEMENTATIONS",
    "LAYOUTS",
    "THREAD_COUNTS",
    "acks_all_measure",
    "acks_all_rate",
    "compare",
    "contention",
    "lock_costs",
    "main",
    "report",
    "run",
]

DELAY_MS = 30_000
"""Every operation's timeout: far beyond a run, so none expires while it is measured."""

LAYOUTS = ("shared", "class shared", "nothing shared")
"""What the threads share: see the module docstring."""

THREAD_COUNTS = (1, 2, 4, 8)
IMPLEMENTATIONS = ("reference", "optimized")


def _implementation(name: str) -> ModuleType:
    if name == "reference":
        import kpurgatory.reference as reference

        return reference
    if name == "optimized":
        import kpurgatory.optimized as optimized

        return optimized
    raise ValueError(f"implementation must be 'reference' or 'optimized', got {name!r}")


def _operation_class(impl: ModuleType) -> type[Any]:
    """A fresh operation class that completes once its ``ready`` flag is set (an ack)."""

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


def _acks_all(purgatory: Any, produce: type[Any], index: int, operations: int) -> None:
    """One thread's loop: submit on its own key, mark ready, complete through the key."""
    key: Hashable = ("topic", index)
    keys = (key,)
    submit = purgatory.try_complete_else_watch
    complete = purgatory.check_and_complete
    for _ in range(operations):
        operation = produce()
        submit(operation, keys)
        operation.ready = True
        complete(key)


def acks_all_rate(implementation: str, layout: str, threads: int, operations: int) -> float:
    """Operations per second of ``threads`` worker threads each running ``operations``
    acks=all rounds in ``layout`` (``LAYOUTS``). Checks that every operation completed
    and nothing was left watched."""
    return acks_all_measure(implementation, layout, threads, operations)[0]


def acks_all_measure(
    implementation: str, layout: str, threads: int, operations: int, timer: bool = True
) -> tuple[float, float]:
    """``acks_all_rate``, and the CPU time the threads spent per operation (seconds,
    each thread's own ``time.thread_time``): a machine busy with other work delays the
    threads (wall time) but does not add to their CPU time, while threads that fight
    over shared memory or spin on a lock do. ``timer=False`` builds every purgatory with
    ``timer_enabled=False`` (an ablation: what the timer's part of the gap is)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if threads < 1 or operations < 1:
        raise ValueError(f"threads and operations must be >= 1, got {threads}, {operations}")
    impl = _implementation(implementation)

    def new_purgatory() -> Any:
        return impl.DelayedOperationPurgatory("Produce", reaper_enabled=False, timer_enabled=timer)

    shared_class = _operation_class(impl) if layout != "nothing shared" else None
    shared = new_purgatory() if layout == "shared" else None
    purgatories: list[Any] = [] if shared is None else [shared]
    start = threading.Barrier(threads)
    spans: list[tuple[float, float]] = []
    cpus: list[float] = []
    failures: list[BaseException] = []

    def body(index: int) -> None:
        try:  # the thread's own objects are built in the thread (it owns them)
            produce = _operation_class(impl) if shared_class is None else shared_class
            purgatory = new_purgatory() if shared is None else shared
            if shared is None:
                purgatories.append(purgatory)
            start.wait()
            began, cpu = time.perf_counter(), time.thread_time()
            _acks_all(purgatory, produce, index, operations)
            spans.append((began, time.perf_counter()))
            cpus.append(time.thread_time() - cpu)
        except BaseException as exc:
            failures.append(exc)
            start.abort()

    workers = [threading.Thread(target=body, args=(index,)) for index in range(threads)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if failures:
            raise failures[0]
        completed = sum(purgatory.num_completed for purgatory in purgatories)
        if completed != threads * operations or any(p.watched for p in purgatories):
            raise AssertionError(f"{implementation}, {layout}: an operation was lost or left")
    finally:
        for purgatory in purgatories:
            purgatory.shutdown()
    elapsed = max(end for _, end in spans) - min(began for began, _ in spans)
    return threads * operations / elapsed, sum(cpus) / (threads * operations)


def _gil() -> str:
    """``on`` or ``off``: whether this interpreter runs with its GIL."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return "on" if is_enabled is None or is_enabled() else "off"


def _build() -> str:
    """``compiled`` if the optimized package was loaded from an extension, else ``pure``."""
    import kpurgatory.optimized.timer as timer_module

    return "pure" if timer_module.__file__.endswith(".py") else "compiled"


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def run(
    rounds: int = 5,
    operations: int = 2_000,
    thread_counts: Sequence[int] = THREAD_COUNTS,
    implementations: Sequence[str] = IMPLEMENTATIONS,
    progress: Callable[[str], None] | None = None,
    timer: bool = True,
) -> dict[str, Any]:
    """Every layout at every thread count for each implementation, ``rounds`` times
    interleaved; the samples (ops/s), the CPU time per operation and the conditions of
    the run, as JSON-ready data. ``timer=False``: the ablation of ``acks_all_measure``."""
    load_start = _load()
    began = time.strftime("%Y-%m-%d %H:%M:%S %z")
    for implementation in implementations:  # warm-up: imports, first allocations
        acks_all_measure(implementation, "nothing shared", 1, operations, timer)
    samples: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for round_ in range(rounds):
        for threads in thread_counts:
            for implementation in implementations:
                order = LAYOUTS if round_ % 2 == 0 else LAYOUTS[::-1]
                for layout in order:
                    rate, per_op = acks_all_measure(
                        implementation, layout, threads, operations, timer
                    )
                    key = f"{implementation}|{layout}|{threads}"
                    samples.setdefault(key, []).append(rate)
                    cpu.setdefault(key, []).append(per_op)
        if progress is not None:
            progress(f"round {round_ + 1}/{rounds} done, load {_load()}")
    return {
        "python": f"{sys.implementation.name} {sys.version.split()[0]}",
        "free_threaded": hasattr(sys, "_is_gil_enabled"),
        "gil": _gil(),
        "build": _build(),
        "cpus": os.cpu_count(),
        "began": began,
        "ended": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "load_start": load_start,
        "load_end": _load(),
        "rounds": rounds,
        "operations": operations,
        "timer": timer,
        "samples": samples,
        "cpu": cpu,
    }


def _median(
    data: dict[str, Any], implementation: str, layout: str, threads: int, what: str = "samples"
) -> float:
    values: list[float] = data[what][f"{implementation}|{layout}|{threads}"]
    return statistics.median(values)


def _run_label(data: dict[str, Any]) -> str:
    free = "t" if data["free_threaded"] else ""
    ablation = "" if data.get("timer", True) else ", timer off (ablation)"
    return f"{data['python']}{free}, GIL {data['gil']}, {data['build']}{ablation}"


def report(paths: Sequence[str]) -> str:
    """Markdown from result files of ``run`` (one per interpreter and GIL setting): per
    run and implementation, the medians (ops/s) and the ratios; then the goals."""
    lines: list[str] = []
    goals: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
        label = _run_label(data)
        lines += [
            f"**{label}** (separate experiment, {data['began']} to {data['ended']}, load average "
            f"{data['load_start']} at the start and {data['load_end']} at the end, "
            f"{data['cpus']} CPUs; median of {data['rounds']} interleaved rounds, "
            f"{data['operations']:,} operations per thread)",
            "",
            "| implementation | threads | shared, ops/s | class shared | nothing shared "
            "| shared / nothing | class / nothing (interpreter) | shared / class (library) "
            "| shared, vs 1 thread | CPU us/op: shared / nothing (ratio) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        counts = sorted({int(key.rsplit("|", 1)[1]) for key in data["samples"]})
        for implementation in IMPLEMENTATIONS:
            if f"{implementation}|shared|{counts[0]}" not in data["samples"]:
                continue
            one = _median(data, implementation, "shared", counts[0])
            for threads in counts:
                shared, cls, nothing = (
                    _median(data, implementation, layout, threads) for layout in LAYOUTS
                )
                cpu_shared, cpu_nothing = (
                    _median(data, implementation, layout, threads, "cpu") * 1e6
                    for layout in (LAYOUTS[0], LAYOUTS[2])
                )
                lines.append(
                    f"| {implementation} | {threads} | {shared:,.0f} | {cls:,.0f} | "
                    f"{nothing:,.0f} | {shared / nothing:.2f} | {cls / nothing:.2f} | "
                    f"{shared / cls:.2f} | {shared / one:.2f}x | {cpu_shared:.1f} / "
                    f"{cpu_nothing:.1f} ({cpu_nothing / cpu_shared:.2f}) |"
                )
                goals += _goals(data, label, implementation, threads, shared / nothing, one)
        lines.append("")
    return "\n".join([*lines, "Goals:", "", *goals])


def _goals(
    data: dict[str, Any], label: str, implementation: str, threads: int, ratio: float, one: float
) -> list[str]:
    """The goal lines one (run, implementation, thread count) answers."""

    def verdict(met: bool) -> str:
        return "met" if met else "NOT met"

    found: list[str] = []
    if not data.get("timer", True):  # an ablation answers no goal
        return found
    targets = {2: 0.85, 4: 0.75}
    if data["gil"] == "off" and implementation == "optimized" and threads in targets:
        found.append(
            f"- {label}, optimized, shared / nothing shared at {threads} threads "
            f"(>= {targets[threads]}): {ratio:.2f}, {verdict(ratio >= targets[threads])}"
        )
    if data["gil"] == "on" and threads == 2:
        two = _median(data, implementation, "shared", 2) / one
        found.append(
            f"- {label}, {implementation}, shared, 2 threads / 1 thread (>= 0.9): "
            f"{two:.2f}, {verdict(two >= 0.9)}"
        )
    return found


_COMPARE_SNIPPET = """
import json, sys, threading, time
import kpurgatory.optimized as impl
import kpurgatory.optimized.timer as timer_module

class Produce(impl.DelayedOperation):
    __slots__ = ("ready",)
    def __init__(self):
        super().__init__(30000)
        self.ready = False
    def try_complete(self):
        return bool(self.ready) and bool(self.force_complete())
    def on_complete(self):
        pass
    def on_expiration(self):
        pass

def measure(operations):
    purgatory = impl.DelayedOperationPurgatory("Produce", reaper_enabled=False)
    span = []
    def body():
        key = ("topic", 0)
        keys = (key,)
        began = time.perf_counter()
        for _ in range(operations):
            operation = Produce()
            purgatory.try_complete_else_watch(operation, keys)
            operation.ready = True
            purgatory.check_and_complete(key)
        span.append(time.perf_counter() - began)
    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert purgatory.num_completed == operations and not purgatory.watched
    purgatory.shutdown()
    return operations / span[0]

operations = int(sys.argv[1])
measure(operations)
print(json.dumps({"rate": measure(operations), "module": timer_module.__file__}))
"""


def compare(
    before: str,
    after: str | None = None,
    python: str = sys.executable,
    rounds: int = 7,
    operations: int = 5_000,
) -> dict[str, Any]:
    """One thread on the shared optimized purgatory (the snippet above uses only the
    public API, so any tree runs it): ``python`` with ``PYTHONPATH=before`` against
    ``PYTHONPATH=after`` (None: the package as installed), in fresh processes that
    alternate, each measuring once after a warm-up. Returns both sides' rates, the
    modules they imported and the ratio of the medians (after / before)."""
    rates: dict[str, list[float]] = {"before": [], "after": []}
    modules: dict[str, str] = {}
    for round_ in range(rounds):
        sides = ("before", "after") if round_ % 2 == 0 else ("after", "before")
        for side in sides:
            env = dict(os.environ)
            path = before if side == "before" else after
            env.pop("PYTHONPATH", None)
            if path is not None:
                env["PYTHONPATH"] = path
            done = subprocess.run(  # -P: no working directory (a tree) ahead of PYTHONPATH
                [python, "-P", "-c", _COMPARE_SNIPPET, str(operations)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            if path is not None and not answer["module"].startswith(os.path.realpath(path)):
                raise RuntimeError(f"{side}: imported {answer['module']}, not from {path}")
            rates[side].append(answer["rate"])
            modules[side] = answer["module"]
    ratio = statistics.median(rates["after"]) / statistics.median(rates["before"])
    return {"rates": rates, "modules": modules, "ratio": ratio}


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
        start = threading.Barrier(threads)

        def work(index: int) -> None:
            start.wait()
            _acks_all(purgatory, produce, index, operations)

        every.clear()
        workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
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


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--contention"]:
        return _print_contention()
    if args[:1] == ["report"]:
        print(report(args[1:]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m kpurgatory.bench.threads")
    if args[:1] == ["compare"]:
        parser.add_argument("compare")
        parser.add_argument("--before", required=True, help="PYTHONPATH of the old code")
        parser.add_argument("--after", help="PYTHONPATH of the new code (default: installed)")
        parser.add_argument("--python", default=sys.executable)
        parser.add_argument("-r", "--rounds", type=int, default=7)
        parser.add_argument("-n", "--operations", type=int, default=5_000)
        options = parser.parse_args(args)
        found = compare(options.before, options.after, options.python, options.rounds,
                        options.operations)  # fmt: skip
        print(json.dumps(found, indent=1))
        return 0
    parser.add_argument("-r", "--rounds", type=int, default=5)
    parser.add_argument("-n", "--operations", type=int, default=2_000, help="per thread")
    parser.add_argument("-t", "--threads", default="1,2,4,8", help="thread counts")
    parser.add_argument("-o", "--output", help="write the results (JSON) here")
    parser.add_argument(
        "--timer-off", action="store_true", help="ablation: purgatories without their timer"
    )
    options = parser.parse_args(args)
    counts = tuple(int(count) for count in options.threads.split(","))
    data = run(options.rounds, options.operations, counts, progress=print,
               timer=not options.timer_off)  # fmt: skip
    if options.output:
        with open(options.output, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=1)
    print(json.dumps({key: value for key, value in data.items() if key not in ("samples", "cpu")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
