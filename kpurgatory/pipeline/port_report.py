"""What a run through a port's adapter found: agreement counts, differences per rule, files.

``port_summary`` reads the stream table of a ``pipeline run --adapter`` run, writes one
JSON-lines step file per diverged stream into ``OUT/counterexamples/`` (the shrunk steps
for a wrong answer, the steps up to the unanswered one when the adapter stopped
answering) and returns the report's lines: how many streams and steps agreed, then per
rule the first differences with the command that reproduces each one, and the commands
by stream for the report's counterexample list.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpurgatory.pipeline.ports import Port

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COUNTEREXAMPLE_DIR", "FIRST_PER_RULE", "conformance_command", "port_summary"]

COUNTEREXAMPLE_DIR = "counterexamples"
"""The folder under ``--out`` that holds the step files."""

FIRST_PER_RULE = 3
"""How many differences the report shows for each rule."""


def conformance_command(port: Port, path: Path) -> str:
    """``kpurgatory conformance --adapter CMD --replay FILE`` (with the port's options)."""
    command = f"kpurgatory conformance --adapter {shlex.quote(port.command)} --replay {path}"
    if port.allow:
        command += f" --allow {shlex.quote(port.allow)}"
    if port.step_timeout_s != Port.step_timeout_s:
        command += f" --timeout {port.step_timeout_s:g}"
    return command


def port_summary(
    streams: pd.DataFrame, port: Port, out: Path
) -> tuple[list[str], dict[tuple[Any, ...], str]]:
    """The report lines of a port's run, and the replay command of each diverged stream
    (keyed by scenario, preset, seed, shard); writes the step files (module docstring)."""
    folder = out / COUNTEREXAMPLE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jsonl"):  # a file from an earlier run would mislead
        old.unlink()
    total_steps = int(streams["steps"].sum()) if len(streams) else 0
    agreed_steps = int(streams["agreed_steps"].sum()) if len(streams) else 0
    diverged = streams[streams["divergence_step"].notna()].sort_values(
        ["scenario", "preset", "seed", "shard"]
    )
    lines = [
        f"Port `{port.command}` against the reference: {len(streams) - len(diverged)} of "
        f"{len(streams)} streams agreed at every step; {agreed_steps:,} of {total_steps:,} "
        "steps agreed before each stream's first difference.",
    ]
    commands: dict[tuple[Any, ...], str] = {}
    per_rule: dict[str, list[str]] = {}
    for row in diverged.to_dict("records"):
        key = (row["scenario"], row["preset"], int(row["seed"]), int(row["shard"]))
        name = f"{key[0]}-{key[1]}-seed{key[2]}-shard{key[3]}.jsonl"
        shrunk = row.get("shrunk")
        command = ""
        if isinstance(shrunk, str) and shrunk:
            path = folder / name
            path.write_text(shrunk, encoding="utf-8")
            command = conformance_command(port, path)
            commands[key] = command
        steps = shrunk.count("\n") if isinstance(shrunk, str) else 0
        how = (
            f"shrunk to {steps} steps in {int(row['shrink_runs'])} runs"
            if row.get("shrink_runs")
            else f"{steps} steps, not shrunk"
        )
        first_line = str(row["divergence"]).splitlines()[0]
        entry = f"  - {key[0]} / {key[1]} / seed {key[2]} / shard {key[3]}: {first_line} ({how})"
        if command:
            entry += f"\n    reproduce: {command}"
        else:
            commands[key] = "(none: the stream was not sent to the adapter, see the reason)"
        per_rule.setdefault(str(row.get("rule") or "protocol"), []).append(entry)
    if per_rule:
        lines.append("First differences per rule (protocol: the adapter did not answer properly):")
    for rule in sorted(per_rule, key=lambda r: (not r.startswith("R"), len(r), r)):
        entries = per_rule[rule]
        lines.append(f"- {rule}: {len(entries)} stream(s)")
        lines.extend(entries[:FIRST_PER_RULE])
        if len(entries) > FIRST_PER_RULE:
            lines.append(f"  - ... {len(entries) - FIRST_PER_RULE} more (counterexamples.parquet)")
    return lines, commands
