"""Profiles (pyinstrument) of a design under the enqueue benchmark: what dominates its cost.

Two views of the same workload:

- ``generator``: the generator thread of a real run (real clock, reaper and completion
  threads running): where the time of ``try_complete_else_watch`` and operation
  creation goes, i.e. what bounds the achieved enqueue rate.
- ``replay``: the single-threaded virtual-time replay (``enqueue.replay``), which does
  all of the work (enqueue, completion, expiry, purge) in one thread, so one profile
  covers the timer and the purgatory.

Each profile is summarized as the functions with the most *self* time (time in the
function's own code, not its callees) and as self time per source file.
"""

from __future__ import annotations

from collections import defaultdict
from types import ModuleType
from typing import Any

from kpurgatory.bench.enqueue import EnqueueCase, make_workload, replay, run_point
from kpurgatory.bench.harness import JsonResult

__all__ = ["profile_generator", "profile_replay", "summarize"]

SAMPLE_INTERVAL_S = 0.0005
"""pyinstrument's sampling interval."""


def summarize(session: Any, limit: int = 15) -> dict[str, Any]:
    """The top ``limit`` functions and files by self time in a pyinstrument session."""
    root = session.root_frame()
    by_function: dict[tuple[str, str, int], float] = defaultdict(float)
    by_file: dict[str, float] = defaultdict(float)
    total = 0.0
    stack = [root] if root is not None else []
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        if frame.is_synthetic:
            continue
        self_time = float(frame.total_self_time)
        if self_time <= 0:
            continue
        total += self_time
        key = (str(frame.function), str(frame.file_path_short), int(frame.line_no or 0))
        by_function[key] += self_time
        by_file[str(frame.file_path_short)] += self_time
    total = max(total, 1e-12)
    functions = [
        {
            "function": function,
            "location": f"{path}:{line}",
            "self_s": seconds,
            "share": seconds / total,
        }
        for (function, path, line), seconds in sorted(
            by_function.items(), key=lambda item: item[1], reverse=True
        )[:limit]
    ]
    files = [
        {"file": path, "self_s": seconds, "share": seconds / total}
        for path, seconds in sorted(by_file.items(), key=lambda item: item[1], reverse=True)[:limit]
    ]
    return {"sampled_s": total, "functions": functions, "files": files}


def _profiler() -> Any:
    from pyinstrument import Profiler

    return Profiler(interval=SAMPLE_INTERVAL_S)


def _outcome(profiler: Any, key: str, result: JsonResult) -> tuple[dict[str, Any], str]:
    """The last session's summary, with ``result`` under ``key``, and its text tree."""
    summary = summarize(profiler.last_session)
    summary[key] = result.to_json()
    return summary, str(profiler.output_text(unicode=False, color=False, show_all=False))


def profile_generator(
    impl: ModuleType,
    design: str,
    case: EnqueueCase,
    rate: float,
    num: int,
    *,
    seed: int,
    max_seconds: float,
) -> tuple[dict[str, Any], str]:
    """Profile the generator thread of one real enqueue point; (summary, text tree)."""
    profiler = _profiler()
    point = run_point(
        impl,
        design,
        case,
        make_workload(case, rate, num, seed),
        rate,
        max_seconds=max_seconds,
        profiler=profiler,
    )
    return _outcome(profiler, "point", point)


def profile_replay(
    impl: ModuleType, design: str, case: EnqueueCase, rate: float, num: int, *, seed: int
) -> tuple[dict[str, Any], str]:
    """Profile the single-threaded replay of the same workload; (summary, text tree)."""
    workload = make_workload(case, rate, num, seed)
    profiler = _profiler()
    profiler.start()
    result = replay(impl, design, case, workload)
    profiler.stop()
    return _outcome(profiler, "replay", result)
