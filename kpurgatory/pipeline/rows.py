"""The pipeline's tables as plain Python columns: what one grid row replays into.

``replay_row`` expands a grid row into its step stream, replays it through two
implementations (``kpurgatory.pipeline.replay``) and returns its output rows: one
*outcome* row per operation and implementation, and one *stream* row with the cost
counters and the first divergence. The Spark executors call exactly this function and
only convert its rows to Arrow, pandas or tuples, so running the same grid rows without
Spark gives the same rows (the tests check it row for row).

Both tables share one column layout (``COLUMNS``) with a ``kind`` column ("outcome" or
"stream") so a single ``mapInArrow`` pass can emit both; ``side`` is "a" for the
expectation (normally the reference) and "b" for the implementation under test, so a
run of the reference against itself still joins cleanly; ``OUTCOME_COLUMNS`` and
``STREAM_COLUMNS`` select each table's columns. Each stream row also records which
build of ``kpurgatory.optimized`` replayed it (``build``: compiled or pure) and in which
Python worker (``worker``: host:pid), so a run's report can say what it measured, and
the CPU time the worker spent on it (``cpu_seconds``: expanding and replaying the
stream), a throughput measure that other processes on the machine do not inflate.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from kpurgatory.pipeline.builds import optimized_build, worker_name
from kpurgatory.pipeline.replay import (
    COUNTER_NAMES,
    IMPL_COUNTER_NAMES,
    replay_stream,
)
from kpurgatory.workloads import stream_steps

__all__ = [
    "COLUMNS",
    "GRID_COLUMNS",
    "KEY_COLUMNS",
    "OUTCOME_COLUMNS",
    "STREAM_COLUMNS",
    "replay_row",
    "replay_rows",
]

GRID_COLUMNS: tuple[tuple[str, str], ...] = (
    ("scenario", "string"),
    ("preset", "string"),
    ("seed", "long"),
    ("shard", "long"),
    ("n_ops", "long"),
)
"""The grid table: one row per stream (name, Spark type)."""

KEY_COLUMNS: tuple[str, ...] = ("scenario", "preset", "seed", "shard")
"""The columns that identify a stream."""

_OUTCOME_ONLY: tuple[tuple[str, str], ...] = (
    ("side", "string"),
    ("impl", "string"),
    ("op", "string"),
    ("arrival_ms", "long"),
    ("delay_ms", "long"),
    ("deadline_ms", "long"),
    ("outcome", "string"),
    ("at_ms", "long"),
    ("via", "string"),
    ("wheel_level", "long"),
    ("op_cascades", "long"),
)

_STREAM_ONLY: tuple[tuple[str, str], ...] = (
    ("n_ops", "long"),
    ("impl_a", "string"),
    ("impl_b", "string"),
    ("divergence_step", "long"),
    ("divergence", "string"),
    ("seconds", "double"),
    ("cpu_seconds", "double"),
    ("build", "string"),
    ("worker", "string"),
    *((name, "long") for name in COUNTER_NAMES),
    *((f"impl_{name}", "long") for name in IMPL_COUNTER_NAMES),
)

COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "string"),
    ("scenario", "string"),
    ("preset", "string"),
    ("seed", "long"),
    ("shard", "long"),
    *_OUTCOME_ONLY,
    *_STREAM_ONLY,
)
"""Every output column (name, Spark type), in order; all nullable."""

OUTCOME_COLUMNS: tuple[str, ...] = (*KEY_COLUMNS, *(name for name, _ in _OUTCOME_ONLY))
"""The outcome table's columns."""

STREAM_COLUMNS: tuple[str, ...] = (*KEY_COLUMNS, *(name for name, _ in _STREAM_ONLY))
"""The stream table's columns."""

_NAMES = tuple(name for name, _ in COLUMNS)
if len(set(_NAMES)) != len(_NAMES):  # pragma: no cover - a guard for edits of the layout
    raise AssertionError("pipeline output columns must have distinct names")


def replay_row(
    scenario: str,
    preset: str,
    seed: int,
    shard: int,
    n_ops: int,
    impl_a: tuple[str, ModuleType],
    impl_b: tuple[str, ModuleType],
    *,
    state_every: int = 32,
) -> list[dict[str, Any]]:
    """The output rows of one grid row (each a dict over ``COLUMNS``; missing means null).

    ``impl_a`` and ``impl_b`` are ``(name, module)`` pairs; ``impl_a`` is the
    expectation (normally the reference).
    """
    cpu_started = time.process_time()
    steps = stream_steps(scenario, preset, seed, shard, n_ops)
    result = replay_stream(steps, impl_a[1], impl_b[1], state_every=state_every)
    cpu_seconds = time.process_time() - cpu_started
    key = {"scenario": scenario, "preset": preset, "seed": seed, "shard": shard}
    rows: list[dict[str, Any]] = []
    sides = (("a", impl_a[0], result.outcomes_a), ("b", impl_b[0], result.outcomes_b))
    for side, name, outcomes in sides:
        for o in outcomes:
            rows.append(
                {
                    "kind": "outcome",
                    **key,
                    "side": side,
                    "impl": name,
                    "op": o.op,
                    "arrival_ms": o.arrival_ms,
                    "delay_ms": o.delay_ms,
                    "deadline_ms": o.arrival_ms + o.delay_ms,
                    "outcome": o.outcome,
                    "at_ms": o.at_ms,
                    "via": o.via,
                    "wheel_level": o.level,
                    "op_cascades": o.cascades,
                }
            )
    divergence = result.divergence
    rows.append(
        {
            "kind": "stream",
            **key,
            "n_ops": n_ops,
            "impl_a": impl_a[0],
            "impl_b": impl_b[0],
            "divergence_step": None if divergence is None else divergence[0],
            "divergence": None if divergence is None else divergence[1],
            "seconds": result.seconds,
            "cpu_seconds": cpu_seconds,
            "build": optimized_build(),
            "worker": worker_name(),
            **result.counters,
            **{f"impl_{name}": value for name, value in result.impl_counters.items()},
        }
    )
    return rows


def replay_rows(
    grid_rows: Iterable[tuple[str, str, int, int, int]],
    impl_a: tuple[str, ModuleType],
    impl_b: tuple[str, ModuleType],
    *,
    state_every: int = 32,
) -> dict[str, list[Any]]:
    """``replay_row`` over many grid rows, as columns (name -> list), ready for Arrow."""
    columns: dict[str, list[Any]] = {name: [] for name in _NAMES}
    for scenario, preset, seed, shard, n_ops in grid_rows:
        for row in replay_row(
            scenario, preset, seed, shard, n_ops, impl_a, impl_b, state_every=state_every
        ):
            for name in _NAMES:
                columns[name].append(row.get(name))
    return columns
