"""Replaying the committed vectors through a port's adapter (the subprocess side of the kit).

``replay_vectors`` sends each vector's steps to an ``AdapterProcess``
(``kpurgatory.conformance.adapter_process``: the protocol's client) and returns one
``VectorResult`` per vector (passed, failed at a step, or not consumed), which
``format_report`` (``kpurgatory.conformance.vector_report``) turns into the text
``kpurgatory conformance`` prints. The comparison is ``compare_observations``, the same
one the in-process replay uses, through a ``Judge`` that may accept named known
differences (``--allow``). The client's and the report's names are importable from here
too, as docs/conformance.md shows them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kpurgatory.conformance.adapter_process import (
    DEFAULT_STEP_TIMEOUT_S,
    FLUSH_HINT,
    STEP_KINDS,
    AdapterError,
    AdapterProcess,
    step_kinds,
)
from kpurgatory.conformance.differences import Judge, report_json
from kpurgatory.conformance.hang import hang_diagnosis
from kpurgatory.conformance.steps import TIMER_STEP_KINDS, Init, step_to_json
from kpurgatory.conformance.vector_report import (
    BEFORE_TAIL,
    VectorResult,
    absent_line,
    earlier_steps,
    format_report,
)
from kpurgatory.conformance.vectors import SCHEMA_PATH, load_vector, vector_steps
from kpurgatory.spec.known_differences import KnownDifference

__all__ = [
    "BEFORE_TAIL",
    "DEFAULT_STEP_TIMEOUT_S",
    "DEFAULT_VECTORS_DIR",
    "FLUSH_HINT",
    "STEP_KINDS",
    "AdapterError",
    "AdapterProcess",
    "VectorResult",
    "absent_line",
    "earlier_steps",
    "format_report",
    "probe",
    "replay_vectors",
    "step_kinds",
    "vector_paths",
]

DEFAULT_VECTORS_DIR = SCHEMA_PATH.parents[1] / "vectors"
"""The committed vectors: package data of an installed wheel, else a checkout's
``conformance/vectors`` (``kpurgatory.conformance.vectors.conformance_root``)."""


def probe(adapter: AdapterProcess) -> str | None:
    """Start ``adapter`` and send it one ``init``; None if it answered, else why not.

    Any answer counts, even ``{"error": ...}``: the adapter runs and speaks lines. No
    answer at all (it cannot start, exits at once, or stays silent: a buffered stdout)
    makes every later step fail the same way, so the CLI reports it once (exit 2)
    instead of once per vector.
    """
    try:
        adapter.start()
        adapter.send(Init())
    except AdapterError as exc:
        if exc.answered:
            return None
        tail = adapter.stderr_tail().rstrip().splitlines()[-5:]
        adapter.close()
        return str(exc) + "".join(f"\n    stderr: {line}" for line in tail)
    return None


def vector_paths(sources: Sequence[Path]) -> list[Path]:
    """The vector files named by ``sources`` (files, or directories of ``*.json``), sorted."""
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found.extend(sorted(source.glob("*.json")))
        elif source.is_file():
            found.append(source)
        else:
            raise ValueError(f"vectors: {source} is neither a file nor a directory")
    if not found:
        raise ValueError(f"vectors: no *.json vector files in {[str(s) for s in sources]}")
    return found


def replay_vectors(
    adapter: AdapterProcess,
    paths: Iterable[Path],
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
) -> list[VectorResult]:
    """Replay each vector file through ``adapter``; one ``VectorResult`` per file, in order.

    Steps are sent one at a time and each answer is compared with the vector's
    expectation before the next step goes out; a vector stops at its first divergence.
    ``allow`` lists the known differences (``kpurgatory.spec.known_differences``) the
    comparison accepts. ``timer_only`` sends only the vectors made of timer steps and
    compares only the timer part of the state. An adapter that dies or stalls is
    restarted for the next vector, so one crash does not hide the other results.
    """
    results: list[VectorResult] = []
    for path in paths:
        judge = Judge(allow, timer_only=timer_only, capabilities=adapter.capabilities)
        try:
            results.append(_replay_one(adapter, path, judge))
        finally:
            judge.close()  # the Kafka models it ran, if any
    return results


def _read_vector(path: Path) -> dict[str, Any]:
    """``load_vector``, with a file that is not UTF-8 or not JSON refused by line (and
    column): ``ValueError`` with a message for the porter."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValueError(
            f"line {line}: not UTF-8 (byte {data[exc.start]:#04x} at column {column})"
        ) from None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {exc.lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
    return load_vector(path)


QUERY_STEP_KINDS: frozenset[str] = frozenset({"next_due_time"})
"""Steps that only read the port's state: a vector can leave out the ones a port
declares absent and still check every other step, whose answers they cannot change."""


def _without_absent_queries(
    steps: Sequence[Any], expected: Sequence[Any], judge: Judge
) -> tuple[list[Any], list[Any], int]:
    """``steps`` and ``expected`` without the read-only steps the port declares absent,
    and how many were left out."""
    absent = {kind for kind in QUERY_STEP_KINDS if not judge.capabilities.has(kind)}
    kept = [
        (step, expect)
        for step, expect in zip(steps, expected, strict=True)
        if step.STEP not in absent
    ]
    return [step for step, _ in kept], [expect for _, expect in kept], len(steps) - len(kept)


def _replay_one(adapter: AdapterProcess, path: Path, judge: Judge) -> VectorResult:
    try:
        vector = _read_vector(path)
        name = str(vector.get("name", path.stem))
        steps, expected = vector_steps(vector)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return VectorResult(
            path.stem, path, "not consumed", 0, 0, None, f"cannot read the vector: {exc}"
        )
    result = VectorResult(name, path, "passed", len(steps), 0)
    result.description = str(vector.get("description", ""))
    result.rules = tuple(str(rule) for rule in vector.get("rules", ()))
    if judge.timer_only:
        others = sorted(set().union(*map(step_kinds, steps)) - TIMER_STEP_KINDS)
        if others:
            result.status, result.sent = "not consumed", False
            result.message = f"not sent (--timer-only): it uses {', '.join(others)}"
            return result
    steps, expected, skipped = _without_absent_queries(steps, expected, judge)
    if skipped:
        result.steps = len(steps)
        result.skipped = skipped
    missing = judge.capabilities.missing(steps)
    if missing:
        result.status, result.sent = "not consumed", False
        result.message = f"not sent: the port declares no {', '.join(missing)}"
        return result
    if not adapter.running:
        try:
            adapter.start()
        except AdapterError as exc:
            result.status, result.step_index, result.message = "not consumed", 0, str(exc)
            return result
    for index, (step, expect) in enumerate(zip(steps, expected, strict=True)):
        try:
            actual = adapter.send(step)
        except AdapterError as exc:
            result.status = "not consumed"
            result.step_index, result.message = index, str(exc)
            diagnosis = hang_diagnosis(steps[: index + 1]) if exc.timed_out else None
            if diagnosis is not None:  # a hang in a call back in: a verdict, not a lost vector
                result.status, result.message = "failed", f"{exc}: {diagnosis}"
            result.step = step_to_json(step)
            result.before = [step_to_json(earlier) for earlier in steps[:index]]
            result.stderr = adapter.stderr_tail()
            if not exc.answered:
                adapter.close()  # dead or stuck: the next vector starts a fresh one
            return result
        result.answered = index + 1
        result.kinds_answered |= step_kinds(step)
        message, accepted = judge.judge(step, expect, actual, absent=adapter.last_absent)
        result.absent |= adapter.last_absent
        for difference in accepted:
            result.accepted.setdefault(difference, []).append(index + 1)
        if message is not None:
            result.status = "failed"
            result.step_index, result.message = index, message
            result.step = step_to_json(step)
            result.before = [step_to_json(earlier) for earlier in steps[:index]]
            shown = judge.expected if judge.expected is not None else expect
            result.expected = report_json(shown, timer_only=judge.timer_only)
            result.actual = report_json(
                actual, timer_only=judge.timer_only, absent=adapter.last_absent
            )
            return result
    return result
