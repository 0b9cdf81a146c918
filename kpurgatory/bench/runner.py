"""Runs every benchmark of a plan (quick or full) and computes the goals from the results.

``run_all`` returns one *run*: a JSON-ready dict with the machine, the build (pure or
compiled optimized package), every measurement, and nothing derived from absolute times
of another run. ``goals`` then reads one or more runs (the pure one, and the compiled
one made by the same command in the compiled build's interpreter) and states each goal
of issues 5 and 13 as measured, met or not; every ratio in it comes from designs interleaved in
the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kpurgatory.bench import aio, enqueue, idle, profiling, scaling, versus
from kpurgatory.bench.designs import available_designs, build_label, load_design
from kpurgatory.bench.harness import JsonResult, interleaved, machine_info

__all__ = ["DEFAULT_SEED", "FULL", "PLANS", "QUICK", "Plan", "goals", "run_all"]

SCHEMA_VERSION = 1
"""Version of the results JSON layout."""

DEFAULT_SEED = 2015
"""The workload seed unless told otherwise."""

BENCHMARKS: tuple[str, ...] = ("enqueue", "scaling", "versus", "idle", "profile", "aio")
"""The benchmark groups, in the order they run."""

STALLED_POINTS = 2
"""A design leaves the sweep after this many saturated points in a row that did not raise
its best achieved rate by more than ``PLATEAU_GROWTH``: its plateau is measured."""

PLATEAU_GROWTH = 1.1
"""Growth of the best achieved rate that still counts as climbing."""

SCALING_DESIGNS: tuple[str, ...] = ("optimized", "heap", "reference")
"""Timer-level benchmarks compare these: ``old`` is a purgatory design whose timer keeps
dead entries until the purgatory purges it, so it has no meaningful timer-only figure."""


@dataclass(frozen=True)
class Plan(JsonResult):
    """How much of each benchmark to run."""

    mode: str
    rates: dict[str, list[float]]
    seconds_per_point: float
    min_requests: int
    max_seconds_per_point: float
    replay_rate: float
    replay_requests: int
    pending: list[int]
    reference_pending_cap: int
    ops: int
    repeat: int
    memory_pending: int
    lifecycle_n: int
    reference_lifecycle_n: int
    idle_window_s: float
    profile_rate: float
    profile_requests: int
    profile_case: str
    versus_n: list[int]
    versus_pending: list[int]
    versus_ops: int
    versus_round_tasks: int


QUICK = Plan(
    mode="quick",
    rates={"low": [2000.0], "high": [2000.0]},
    seconds_per_point=0.3,
    min_requests=300,
    max_seconds_per_point=3.0,
    replay_rate=5000.0,
    replay_requests=2000,
    pending=[1000, 10_000],
    reference_pending_cap=10_000,
    ops=2000,
    repeat=1,
    memory_pending=5000,
    lifecycle_n=10_000,
    reference_lifecycle_n=2000,
    idle_window_s=1.5,
    profile_rate=5000.0,
    profile_requests=2000,
    profile_case="high",
    versus_n=[2000, 10_000],
    versus_pending=[1000, 10_000],
    versus_ops=2000,
    versus_round_tasks=4000,
)
"""A smoke run (about 20 s): every code path, numbers too small to mean anything."""

FULL = Plan(
    mode="full",
    rates={
        case: [
            1000.0,
            2000.0,
            3500.0,
            5000.0,
            7000.0,
            10_000.0,
            14_000.0,
            20_000.0,
            28_000.0,
            40_000.0,
            55_000.0,
            70_000.0,
            105_000.0,
        ]
        for case in ("low", "high")
    },
    seconds_per_point=3.0,
    min_requests=3000,
    max_seconds_per_point=8.0,
    replay_rate=50_000.0,
    replay_requests=100_000,
    pending=[1000, 10_000, 100_000, 1_000_000],
    reference_pending_cap=100_000,
    ops=50_000,
    repeat=3,
    memory_pending=100_000,
    lifecycle_n=1_000_000,
    reference_lifecycle_n=20_000,
    idle_window_s=60.0,
    profile_rate=50_000.0,
    profile_requests=100_000,
    profile_case="high",
    versus_n=[2000, 200_000, 1_000_000],
    versus_pending=[1000, 1_000_000],
    versus_ops=50_000,
    versus_round_tasks=2_000_000,
)
"""The measurement run (about 12 minutes per build on the 2-core machine). The profile
runs above the saturation rate, so the generator never sleeps and its profile shows what
bounds the enqueue rate."""

PLANS: dict[str, Plan] = {"quick": QUICK, "full": FULL}

Progress = Callable[[str], None]
"""Called with a one-line description before each measurement."""


def _quiet(_: str) -> None:
    return None


def _run_enqueue(plan: Plan, designs: Sequence[str], seed: int, say: Progress) -> dict[str, Any]:
    points: list[dict[str, Any]] = []
    replays: list[dict[str, Any]] = []
    for case_key, rates in plan.rates.items():
        case = enqueue.CASES[case_key]
        stalled = dict.fromkeys(designs, 0)
        best = dict.fromkeys(designs, 0.0)
        for index, rate in enumerate(rates):
            num = max(plan.min_requests, int(rate * plan.seconds_per_point))
            workload = enqueue.make_workload(case, rate, num, seed + index)
            for design in interleaved(designs, index):
                if stalled[design] >= STALLED_POINTS:
                    continue  # its plateau is measured: higher targets only cost time
                say(f"enqueue {case.name} {design} target {rate:,.0f}/s ({num:,} requests)")
                point = enqueue.run_point(
                    load_design(design),
                    design,
                    case,
                    workload,
                    rate,
                    max_seconds=plan.max_seconds_per_point,
                )
                points.append(point.to_json())
                grew = point.achieved_rate > PLATEAU_GROWTH * best[design]
                stalled[design] = stalled[design] + 1 if point.saturated and not grew else 0
                best[design] = max(best[design], point.achieved_rate)
        workload = enqueue.make_workload(case, plan.replay_rate, plan.replay_requests, seed)
        for design in interleaved(designs, len(rates)):
            say(f"replay {case.name} {design} ({plan.replay_requests:,} requests)")
            result = enqueue.replay(load_design(design), design, case, workload)
            replays.append(result.to_json())
    return {
        "points": points,
        "replay": replays,
        "replay_rate": plan.replay_rate,
        "saturation": saturation(points),
    }


def saturation(points: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per case and design: the plateau (highest achieved rate) and whether it saturated.

    ``kept_up_to`` is the highest target rate reached without saturating. When a design
    never saturated, its plateau is only a lower bound of its saturation rate.
    """
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for point in points:
        entry = table.setdefault(point["case"], {}).setdefault(
            point["design"], {"plateau": 0.0, "kept_up_to": 0.0, "saturated": False}
        )
        entry["plateau"] = max(entry["plateau"], point["achieved_rate"])
        if point["saturated"]:
            entry["saturated"] = True
        else:
            entry["kept_up_to"] = max(entry["kept_up_to"], point["target_rate"])
    return table


def _run_scaling(plan: Plan, designs: Sequence[str], seed: int, say: Progress) -> dict[str, Any]:
    timer_designs = [design for design in designs if design in SCALING_DESIGNS]
    per_op: list[dict[str, Any]] = []
    for index, pending in enumerate(plan.pending):
        for design in interleaved(timer_designs, index):
            if design == "reference" and pending > plan.reference_pending_cap:
                continue
            say(f"per-op cost {design} with {pending:,} pending")
            result = scaling.per_op_costs(
                load_design(design),
                design,
                pending,
                ops=plan.ops,
                repeat=plan.repeat,
                seed=seed + index,
            )
            per_op.append(result.to_json())
    memory = []
    for design in timer_designs:
        say(f"memory per task {design} ({plan.memory_pending:,} pending)")
        memory.append(
            scaling.memory_per_task(
                load_design(design), design, plan.memory_pending, seed=seed
            ).to_json()
        )
    lifecycle = []
    schedules = {
        plan.lifecycle_n: scaling.lifecycle_schedule(plan.lifecycle_n, seed),
        plan.reference_lifecycle_n: scaling.lifecycle_schedule(plan.reference_lifecycle_n, seed),
    }
    for n in sorted(schedules):
        for design in interleaved(timer_designs, n):
            if design == "reference" and n > plan.reference_lifecycle_n:
                continue
            say(f"lifecycle {design} with {n:,} tasks")
            lifecycle.append(scaling.lifecycle(load_design(design), design, schedules[n]).to_json())
    return {
        "per_op": per_op,
        "memory": memory,
        "lifecycle": lifecycle,
        "reference_pending_cap": plan.reference_pending_cap,
        "reference_lifecycle_n": plan.reference_lifecycle_n,
    }


def _run_versus(plan: Plan, designs: Sequence[str], seed: int, say: Progress) -> dict[str, Any]:
    """Issue 13: the optimized timer against a bare heapq timer and asyncio's call_at."""
    if "optimized" not in designs:
        return {}
    impl = load_design("optimized")
    rows: list[dict[str, Any]] = []
    for n in plan.versus_n:
        schedule = scaling.lognormal_schedule(n, seed)
        # enough rounds that every design handles about versus_round_tasks tasks (at least 3)
        repeat = max(3, plan.versus_round_tasks // n)
        say(f"lifecycle optimized vs bare heap with {n:,} tasks ({repeat} rounds)")
        rows += [r.to_json() for r in versus.lifecycles(impl, "optimized", schedule, repeat)]
        if build_label() == "pure":  # the floor timer is interpreted in every build
            rows.append(versus.api_floor(impl, schedule, repeat).to_json())
    add_cancel: list[dict[str, Any]] = []
    for index, pending in enumerate(plan.versus_pending):
        say(f"add+cancel optimized vs asyncio call_at+cancel with {pending:,} pending")
        results = versus.add_cancel(
            impl,
            "optimized",
            pending,
            ops=plan.versus_ops,
            repeat=max(3, plan.repeat),
            seed=seed + index,
        )
        add_cancel += [r.to_json() for r in results]
    return {"lifecycle": rows, "add_cancel": add_cancel}


def _run_idle(plan: Plan, designs: Sequence[str], say: Progress) -> dict[str, Any]:
    say(f"idle: {len(designs)} purgatories side by side for {plan.idle_window_s:g} s")
    results, process_cpu = idle.idle_costs(
        {design: load_design(design) for design in designs}, plan.idle_window_s
    )
    return {
        "window_s": plan.idle_window_s,
        "process_cpu_s": process_cpu,
        "results": [result.to_json() for result in results],
    }


def _run_profile(
    plan: Plan, designs: Sequence[str], seed: int, say: Progress
) -> tuple[dict[str, Any], dict[str, str]]:
    design = "optimized" if "optimized" in designs else designs[0]
    case = enqueue.CASES[plan.profile_case]
    impl = load_design(design)
    say(f"profile {design}: generator thread of a real run at {plan.profile_rate:,.0f}/s")
    generator, generator_text = profiling.profile_generator(
        impl,
        design,
        case,
        plan.profile_rate,
        plan.profile_requests,
        seed=seed,
        max_seconds=plan.max_seconds_per_point * 2,
    )
    say(f"profile {design}: single-threaded replay of {plan.profile_requests:,} requests")
    replay, replay_text = profiling.profile_replay(
        impl, design, case, plan.profile_rate, plan.profile_requests, seed=seed
    )
    summary = {"design": design, "case": case.name, "generator": generator, "replay": replay}
    return summary, {"generator": generator_text, "replay": replay_text}


def run_all(
    plan: Plan,
    *,
    designs: Sequence[str] | None = None,
    only: Sequence[str] = BENCHMARKS,
    seed: int = DEFAULT_SEED,
    say: Progress = _quiet,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Run the benchmarks in ``only`` for ``designs`` (default: all available).

    Returns the run (JSON-ready) and the profiles' text trees (file stem -> text).
    """
    unknown = [name for name in only if name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"only must name benchmarks of {BENCHMARKS}, got {unknown}")
    present = available_designs()
    chosen = list(present if designs is None else designs)
    missing = [name for name in chosen if name not in present]
    if missing:
        raise ValueError(f"designs not available here: {missing} (available: {present})")
    if not chosen:
        raise ValueError("designs must name at least one design")
    run: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "mode": plan.mode,
        "build": build_label(),
        "designs": chosen,
        "seed": seed,
        "plan": plan.to_json(),
        "machine": machine_info(),
    }
    texts: dict[str, str] = {}
    if "enqueue" in only:
        run["enqueue"] = _run_enqueue(plan, chosen, seed, say)
    if "scaling" in only:
        run["scaling"] = _run_scaling(plan, chosen, seed, say)
    if "versus" in only:
        run["versus"] = _run_versus(plan, chosen, seed, say)
    if "idle" in only:
        run["idle"] = _run_idle(plan, chosen, say)
    if "profile" in only:
        run["profile"], texts = _run_profile(plan, chosen, seed, say)
    if "aio" in only:
        run["aio"] = aio.run(plan.mode, seed, say)  # issue 12: kpurgatory.bench.aio
    return run, texts


# -- goals --------------------------------------------------------------------------


def _measurement(run: dict[str, Any], value: float | None, detail: str) -> dict[str, Any]:
    """One measured figure of a goal, labelled with the build of the run it comes from."""
    return {"run": f"{run.get('build', 'pure')} build", "value": value, "detail": detail}


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _goal(
    name: str,
    target: str,
    measurements: list[dict[str, Any]],
    met: Callable[[list[float]], bool],
    note: str,
) -> dict[str, Any]:
    """The goal's entry; ``met`` judges the measured values (None when none was measured)."""
    values = [m["value"] for m in measurements if m["value"] is not None]
    return {
        "goal": name,
        "target": target,
        "measurements": measurements,
        "met": met(values) if values else None,
        "note": note,
    }


def _saturation_goal(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    measurements: list[dict[str, Any]] = []
    for run in runs:
        table = run.get("enqueue", {}).get("saturation", {}).get("high-timeout", {})
        optimized, old = table.get("optimized"), table.get("old")
        if optimized is None or old is None:
            continue
        ratio = _ratio(optimized["plateau"], old["plateau"])
        bound = "" if optimized["saturated"] else " (optimized never saturated: lower bound)"
        if not old["saturated"]:
            ratio, bound = None, " (old never saturated: the sweep did not reach its limit)"
        detail = f"optimized {optimized['plateau']:,.0f}/s vs old {old['plateau']:,.0f}/s{bound}"
        measurements.append(_measurement(run, ratio, detail))
    return _goal(
        "Saturation rate optimized / old, high-timeout case",
        ">= 5",
        measurements,
        lambda values: max(values) >= 5,
        "plateau = highest achieved enqueue rate over the sweep (the proposal: about 4.2 "
        "on the JVM)",
    )


def _lifecycle_by_design(run: dict[str, Any]) -> tuple[int, dict[str, dict[str, Any]]]:
    results = run.get("scaling", {}).get("lifecycle", [])
    largest = max((r["n"] for r in results if r["design"] != "reference"), default=0)
    return largest, {r["design"]: r for r in results if r["n"] == largest}


def _lifecycle_goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    throughput: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    for run in runs:
        n, table = _lifecycle_by_design(run)
        optimized, heap = table.get("optimized"), table.get("heap")
        if optimized is None or heap is None:
            continue
        throughput.append(
            _measurement(
                run,
                _ratio(optimized["tasks_per_s"], heap["tasks_per_s"]),
                f"n = {n:,}: optimized {optimized['tasks_per_s']:,.0f} tasks/s vs "
                f"heap {heap['tasks_per_s']:,.0f} tasks/s",
            )
        )
        memory.append(
            _measurement(
                run,
                _ratio(optimized["peak_bytes_per_task"], heap["peak_bytes_per_task"]),
                f"n = {n:,}: optimized {optimized['peak_bytes_per_task'] or 0:,.0f} B "
                f"vs heap {heap['peak_bytes_per_task'] or 0:,.0f} B per task (traced peak)",
            )
        )
    return [
        _goal(
            "Full-lifecycle throughput optimized (best build) / heap, 1e6 pending",
            ">= 1.5",
            throughput,
            lambda values: max(values) >= 1.5,
            "add all, then 90 % cancelled before their due time and 10 % expired as the clock "
            "walks in 10 ms steps; garbage collector on",
        ),
        _goal(
            "Peak memory per pending task, optimized / heap",
            "<= 0.6",
            memory,
            lambda values: min(values) <= 0.6,
            "tracemalloc peak over the whole lifecycle divided by n (task objects included)",
        ),
    ]


def _flatness_goal(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return _per_op_flatness(
        runs,
        lambda run: [
            r for r in run.get("scaling", {}).get("per_op", []) if r["design"] == "optimized"
        ],
        "Per-operation cost at the largest / smallest pending count, optimized",
    )


def _per_op_flatness(
    runs: Sequence[dict[str, Any]],
    rows_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
    title: str,
) -> dict[str, Any]:
    """The <= 1.3 goal on the optimized rows ``rows_of(run)`` picks: add+cancel and
    add+expire cost at the largest pending count over the smallest, in each run."""
    measurements: list[dict[str, Any]] = []
    for run in runs:
        rows = rows_of(run)
        if len(rows) < 2:
            continue
        small = min(rows, key=lambda r: r["pending"])
        large = max(rows, key=lambda r: r["pending"])
        for kind in ("add_cancel_s", "add_expire_s"):
            measurements.append(
                _measurement(
                    run,
                    _ratio(large[kind], small[kind]),
                    f"{kind[:-2].replace('_', '+')}: {large[kind] * 1e6:.2f} us at "
                    f"{large['pending']:,} vs {small[kind] * 1e6:.2f} us at {small['pending']:,}",
                )
            )
    return _goal(
        title,
        "<= 1.3",
        measurements,
        lambda values: max(values) <= 1.3,
        "met only if every measured ratio (both kinds, every build) is <= 1.3",
    )


def _absolute_goal(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    measurements: list[dict[str, Any]] = []
    for run in runs:
        table = run.get("enqueue", {}).get("saturation", {})
        for case, designs in sorted(table.items()):
            optimized = designs.get("optimized")
            if optimized is None:
                continue
            state = "saturated" if optimized["saturated"] else "never saturated"
            measurements.append(
                _measurement(
                    run,
                    optimized["plateau"],
                    f"{case}: highest achieved {optimized['plateau']:,.0f} requests/s "
                    f"({state}; kept up to {optimized['kept_up_to']:,.0f}/s)",
                )
            )
    return _goal(
        "Absolute enqueue rate of the optimized purgatory on this machine",
        "about 105,000 requests/s (the proposal's JVM figure)",
        measurements,
        lambda values: max(values) >= 105_000,
        "for the record; the JVM figure is from different hardware",
    )


def _versus_lifecycle_goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    every: list[dict[str, Any]] = []
    largest_pure: list[dict[str, Any]] = []
    largest_compiled: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    for run in runs:
        rows = run.get("versus", {}).get("lifecycle", [])
        sizes = sorted({r["n"] for r in rows})
        for n in sizes:
            table = {r["design"]: r for r in rows if r["n"] == n}
            optimized, bare = table.get("optimized"), table.get(versus.BARE_HEAP)
            if optimized is None or bare is None:
                continue
            measurement = _measurement(
                run,
                _ratio(optimized["tasks_per_s"], bare["tasks_per_s"]),
                f"n = {n:,}: optimized {optimized['tasks_per_s']:,.0f} tasks/s vs "
                f"bare heap {bare['tasks_per_s']:,.0f} tasks/s",
            )
            if run.get("build", "pure") == "pure":
                every.append(measurement)
            if n == sizes[-1]:
                compiled = run.get("build") == "compiled"
                (largest_compiled if compiled else largest_pure).append(measurement)
                memory.append(
                    _measurement(
                        run,
                        _ratio(optimized["peak_bytes_per_task"], bare["peak_bytes_per_task"]),
                        f"n = {n:,}: optimized {optimized['peak_bytes_per_task'] or 0:,.0f} B "
                        f"vs bare heap {bare['peak_bytes_per_task'] or 0:,.0f} B per task",
                    )
                )
    note = (
        "log-normal delays (median 200 ms), 90 % cancelled before due, the rest expire as "
        "a manual clock walks in 5 ms steps; best of alternating rounds; collector on"
    )
    return [
        _goal(
            "Issue 13: lifecycle optimized / bare heap, pure build, every size",
            ">= 1.0",
            every,
            lambda values: min(values) >= 1.0,
            note,
        ),
        _goal(
            "Issue 13: lifecycle optimized / bare heap, pure build, largest size",
            ">= 1.5",
            largest_pure,
            lambda values: min(values) >= 1.5,
            note,
        ),
        _goal(
            "Issue 13: lifecycle optimized / bare heap, compiled build, largest size",
            ">= 3.0",
            largest_compiled,
            lambda values: min(values) >= 3.0,
            note,
        ),
        _goal(
            "Issue 13: lifecycle peak memory per task, optimized / bare heap, every build",
            "<= 0.6",
            memory,
            lambda values: max(values) <= 0.6,
            "tracemalloc peak over the lifecycle divided by n (task objects included)",
        ),
    ]


def _versus_add_cancel_goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by_build: dict[str, list[dict[str, Any]]] = {"pure": [], "compiled": []}
    for run in runs:
        rows = run.get("versus", {}).get("add_cancel", [])
        for pending in sorted({r["pending"] for r in rows}):
            table = {r["design"]: r for r in rows if r["pending"] == pending}
            optimized, loop = table.get("optimized"), table.get(versus.ASYNCIO)
            if optimized is None or loop is None:
                continue
            by_build.setdefault(run.get("build", "pure"), []).append(
                _measurement(
                    run,
                    _ratio(optimized["add_cancel_s"], loop["add_cancel_s"]),
                    f"{pending:,} pending: optimized {optimized['add_cancel_s'] * 1e6:.2f} us "
                    f"vs asyncio {loop['add_cancel_s'] * 1e6:.2f} us",
                )
            )
    note = "CPU per add+cancel against loop.call_at + TimerHandle.cancel in a running loop"
    return [
        _goal(
            "Issue 13: add+cancel optimized / asyncio call_at+cancel, pure build",
            "<= 0.6",
            by_build["pure"],
            lambda values: max(values) <= 0.6,
            note,
        ),
        _goal(
            "Issue 13: add+cancel optimized / asyncio call_at+cancel, compiled build",
            "<= 0.2",
            by_build["compiled"],
            lambda values: max(values) <= 0.2,
            note,
        ),
    ]


def _versus_flatness_goal(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return _per_op_flatness(
        runs,
        lambda run: [
            r
            for r in run.get("versus", {}).get("add_cancel", [])
            if r["design"] == "optimized" and r.get("add_expire_s") is not None
        ],
        "Issue 13: per-operation cost at the largest / smallest pending count, optimized",
    )


def goals(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every goal of issues 5 and 13, measured in ``runs`` (each ratio from within one run).

    Issue 5 reproduces the benchmark of Kafka's "Purgatory Redesign Proposal" (the wiki
    page that introduced the timing wheel, measured on the JVM); issue 13 compares the
    optimized timer with the timers a Python user would pick (a bare heapq timer,
    asyncio's ``call_at``).
    """
    return [
        _saturation_goal(runs),
        *_lifecycle_goals(runs),
        _flatness_goal(runs),
        _absolute_goal(runs),
        *_versus_lifecycle_goals(runs),
        *_versus_add_cancel_goals(runs),
        _versus_flatness_goal(runs),
        *aio.goals(runs),
    ]
