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

import dataclasses
import time
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from kpurgatory.pipeline.builds import optimized_build, worker_name
from kpurgatory.pipeline.ports import GIVE_UP_AFTER, Port, not_replayed, replay_through_port
from kpurgatory.pipeline.replay import (
    COUNTER_NAMES,
    IMPL_COUNTER_NAMES,
    StreamReplay,
    replay_stream,
)
from kpurgatory.workloads import stream_steps

__all__ = [
    "COLUMNS",
    "GRID_COLUMNS",
    "KEY_COLUMNS",
    "OUTCOME_COLUMNS",
    "STREAM_COLUMNS",
    "append_stream",
    "replay_row",
    "replay_rows",
    "replay_rows_through_port",
    "stream_row",
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
    ("agreed_steps", "long"),
    ("rule", "string"),
    ("shrunk", "string"),
    ("shrink_runs", "long"),
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
_STREAM_ONLY_NAMES = tuple(name for name, _ in _STREAM_ONLY)
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
    grid_row = (scenario, preset, seed, shard, n_ops)
    columns = replay_rows([grid_row], impl_a, impl_b, state_every=state_every)
    count = len(columns["kind"])
    return [
        {name: values[i] for name, values in columns.items() if values[i] is not None}
        for i in range(count)
    ]


def stream_row(
    key: dict[str, Any],
    n_ops: int,
    names: tuple[str, str],
    result: StreamReplay,
    cpu_seconds: float,
) -> dict[str, Any]:
    """The stream row of one replayed stream (the columns of ``_STREAM_ONLY`` plus the key)."""
    divergence = result.divergence
    return {
        "kind": "stream",
        **key,
        "n_ops": n_ops,
        "impl_a": names[0],
        "impl_b": names[1],
        "divergence_step": None if divergence is None else divergence[0],
        "divergence": None if divergence is None else divergence[1],
        "seconds": result.seconds,
        "cpu_seconds": cpu_seconds,
        "build": optimized_build(),
        "worker": worker_name(),
        "agreed_steps": result.agreed_steps,
        **result.counters,
        **{f"impl_{name}": value for name, value in result.impl_counters.items()},
    }


def append_stream(
    columns: dict[str, list[Any]],
    key: dict[str, Any],
    names: tuple[str, str],
    result: StreamReplay,
    stream: dict[str, Any],
) -> None:
    """Append one stream's outcome rows (both sides) and its ``stream`` row to ``columns``.

    Built column by column: a row dict per operation cost more than the replay's diff.
    """
    sides = (("a", names[0], result.outcomes_a), ("b", names[1], result.outcomes_b))
    count = len(result.outcomes_a) + len(result.outcomes_b)
    for name in _STREAM_ONLY_NAMES:
        columns[name] += [None] * count
    columns["kind"] += ["outcome"] * count
    for name in KEY_COLUMNS:
        columns[name] += [key[name]] * count
    for side, impl, outcomes in sides:
        n = len(outcomes)
        columns["side"] += [side] * n
        columns["impl"] += [impl] * n
        columns["op"] += [o.op for o in outcomes]
        columns["arrival_ms"] += [o.arrival_ms for o in outcomes]
        columns["delay_ms"] += [o.delay_ms for o in outcomes]
        columns["deadline_ms"] += [o.arrival_ms + o.delay_ms for o in outcomes]
        columns["outcome"] += [o.outcome for o in outcomes]
        columns["at_ms"] += [o.at_ms for o in outcomes]
        columns["via"] += [o.via for o in outcomes]
        columns["wheel_level"] += [o.level for o in outcomes]
        columns["op_cascades"] += [o.cascades for o in outcomes]
    for name in _NAMES:
        columns[name].append(stream.get(name))


def replay_rows_through_port(
    grid_rows: Iterable[tuple[str, str, int, int, int]],
    port: Port,
    reference: tuple[str, ModuleType],
) -> dict[str, list[Any]]:
    """``replay_rows`` with side b a port behind its adapter (``kpurgatory.pipeline.ports``):
    one adapter process for all these grid rows, closed at the end. A diverged stream's
    row carries the rule it breaks and its shrunk steps (``rule``, ``shrunk`` as JSON
    lines, ``shrink_runs``); a stream the adapter stopped answering has no outcome rows.
    After ``GIVE_UP_AFTER`` such streams in a row the rest are failed without being sent."""
    columns: dict[str, list[Any]] = {name: [] for name in _NAMES}
    names = (reference[0], f"adapter: {port.command}")
    unanswered: list[str] = []
    with port.adapter() as adapter:
        for scenario, preset, seed, shard, n_ops in grid_rows:
            cpu_started = time.process_time()
            steps = stream_steps(scenario, preset, seed, shard, n_ops)
            if len(unanswered) >= GIVE_UP_AFTER:
                found = not_replayed(
                    steps,
                    f"the adapter stopped answering {len(unanswered)} streams in a row in "
                    f"this task (the last: {unanswered[-1]})",
                )
            else:
                found = replay_through_port(steps, adapter, port, reference[1])
                divergence = found.replay.divergence
                if found.replay.stopped and divergence is not None:
                    unanswered.append(divergence[1])
            result = found.replay
            if result.stopped:
                result = dataclasses.replace(result, outcomes_a=[], outcomes_b=[])
            else:
                unanswered.clear()  # only failures in a row give up
            key = {"scenario": scenario, "preset": preset, "seed": seed, "shard": shard}
            stream = stream_row(key, n_ops, names, result, time.process_time() - cpu_started)
            stream.update(
                rule=found.rule, shrunk=found.shrunk_json_lines(), shrink_runs=found.shrink_runs
            )
            append_stream(columns, key, names, result, stream)
    return columns


def replay_rows(
    grid_rows: Iterable[tuple[str, str, int, int, int]],
    impl_a: tuple[str, ModuleType],
    impl_b: tuple[str, ModuleType],
    *,
    state_every: int = 32,
) -> dict[str, list[Any]]:
    """Replay each grid row; all their output rows as columns (name -> list), ready for Arrow.

    Per stream: one outcome row per operation and side, then the stream row (see the
    module docstring). ``impl_a`` and ``impl_b`` are ``(name, module)`` pairs;
    ``impl_a`` is the expectation (normally the reference).
    """
    columns: dict[str, list[Any]] = {name: [] for name in _NAMES}
    names = (impl_a[0], impl_b[0])
    for scenario, preset, seed, shard, n_ops in grid_rows:
        cpu_started = time.process_time()
        steps = stream_steps(scenario, preset, seed, shard, n_ops)
        result = replay_stream(steps, impl_a[1], impl_b[1], state_every=state_every)
        cpu_seconds = time.process_time() - cpu_started
        key = {"scenario": scenario, "preset": preset, "seed": seed, "shard": shard}
        stream = stream_row(key, n_ops, names, result, cpu_seconds)
        append_stream(columns, key, names, result, stream)
    return columns
