"""Replaying the grid through a port's conformance adapter, and shrinking what differs.

``pipeline run --adapter CMD`` replays every stream on the reference (in process, side a)
and on a port behind its adapter (side b: a subprocess speaking the kit's line protocol,
``kpurgatory.conformance.adapter.AdapterProcess``, one process per executor task),
judged step by step by the kit's ``Judge`` (``--allow`` accepts named known differences).

A stream that differs is shrunk here, in the executor that found it, by delta debugging
over its steps (``shrink``: drop chunks of operations and other steps, halving the
chunk size, while the shorter run still differs from the reference; the ``init`` always
stays first, a candidate the reference refuses as invalid is skipped). The shrunk steps
travel back in the stream row; the driver writes them as a JSON-lines file that
``kpurgatory conformance --adapter CMD --replay FILE`` reproduces. A stream on which the
adapter stopped answering (exit, timeout, garbage) is not shrunk: its steps up to the
unanswered one are written as they are. After ``GIVE_UP_AFTER`` such failures in a row
in one task, its remaining streams are failed at once with the last reason, so an adapter that
hangs costs a few step timeouts per task, never the whole job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kpurgatory.conformance.adapter import AdapterError, AdapterProcess
from kpurgatory.conformance.differences import Judge
from kpurgatory.conformance.driver import Driver, StepError
from kpurgatory.conformance.observation import Compact, compact, to_observation
from kpurgatory.conformance.steps import ClockAdvance, PurgatoryAdvance, Step, step_to_json
from kpurgatory.pipeline.replay import (
    Compare,
    SideStopped,
    StreamReplay,
    replay_sides,
)
from kpurgatory.spec.known_differences import resolve

__all__ = [
    "GIVE_UP_AFTER",
    "AdapterSide",
    "Port",
    "PortResult",
    "diverges",
    "judge",
    "not_replayed",
    "replay_through_port",
    "rule_of",
    "shrink",
    "unit_of",
    "without",
]

GIVE_UP_AFTER = 2
"""Unanswered streams after which a task fails its remaining streams without trying."""


@dataclass(frozen=True)
class Port:
    """What the executors need to drive a port: its adapter command, the known
    differences accepted (``--allow``, as the kit spells them, or None), the per-step
    timeout, and the shrinking budget (candidate runs per stream and seconds)."""

    command: str
    allow: str | None = None
    step_timeout_s: float = 10.0
    shrink_runs: int = 400
    shrink_seconds: float = 60.0

    def adapter(self) -> AdapterProcess:
        """A (not yet started) adapter process for this port."""
        return AdapterProcess(self.command, step_timeout_s=self.step_timeout_s)


class AdapterSide:
    """Side b of ``replay_sides``: the port behind ``adapter`` (started if need be)."""

    purgatory: Any = None  # a port's purgatory is not readable from here

    def __init__(self, adapter: AdapterProcess) -> None:
        self.adapter = adapter
        self.absent: frozenset[str] = frozenset()

    def execute_compact(self, step: Step) -> Compact:
        """The adapter's answer to ``step``; ``SideStopped`` if it gives none."""
        try:
            observation = self.adapter.send(step)
        except AdapterError as exc:
            if not exc.answered:
                self.adapter.close()  # dead or stuck: the next stream starts a fresh one
            raise SideStopped(f"the adapter did not answer properly: {exc}") from None
        self.absent = self.adapter.last_absent
        return compact(observation)

    def state_compact(self) -> tuple[Any, ...]:  # pragma: no cover - compare_final is off for ports
        raise NotImplementedError("a port's state is read from its answers")

    def close(self) -> None:
        """Nothing: the task that owns the adapter closes it."""


def judge(port: Port, side: AdapterSide) -> Compare:
    """A ``Compare`` for one run: the kit's ``Judge`` with the port's accepted differences
    and the state fields its last answer declared absent."""
    verdicts = Judge(resolve(port.allow) if port.allow else ())

    def compare(step: Step, obs_a: Compact, obs_b: Compact) -> str | None:
        message, _ = verdicts.judge(
            step, to_observation(obs_a), to_observation(obs_b), absent=side.absent
        )
        return message

    return compare


def diverges(
    steps: Sequence[Step], adapter: AdapterProcess, port: Port, reference: ModuleType
) -> int | None:
    """The index of the first step of ``steps`` where the port differs from the reference,
    None if they agree, if ``steps`` is not a valid run (the reference refuses it), or if
    the adapter stopped answering (the difference being shrunk is a wrong answer)."""
    side = AdapterSide(adapter)
    try:
        result = replay_sides(
            steps,
            Driver(reference),
            side,
            judge(port, side),
            compare_final=False,
        )
    except StepError:
        return None
    if result.divergence is None or result.stopped:  # a crash is not the difference shrunk
        return None
    return result.divergence[0]


def unit_of(step: Step) -> str | None:
    """The operation a step belongs to (a watch names it, a set_ready or force_complete
    refers to it), else None: removing an operation's steps together keeps a run valid."""
    label = getattr(step, "operation", None)
    return label if isinstance(label, str) else None


def without(steps: Sequence[Step], keys: Sequence[object], removed: set[object]) -> list[Step]:
    """``steps`` (an ``init``, then steps whose units are ``keys``) without the units in
    ``removed``, time kept: each run of removed steps that moved the clock becomes one
    step moving it as far (a ``purgatory_advance`` if any of them drained, else a
    ``clock_advance``), so every step kept happens at the same virtual time."""
    out = [steps[0]]
    carried, drains = 0, False
    for step, key in zip(steps[1:], keys, strict=True):
        if key in removed:
            if isinstance(step, ClockAdvance | PurgatoryAdvance) and step.ms >= 0:
                carried += step.ms
                drains = drains or isinstance(step, PurgatoryAdvance)
            continue
        if carried or drains:
            out.append(PurgatoryAdvance(carried) if drains else ClockAdvance(carried))
            carried, drains = 0, False
        out.append(step)
    if carried or drains:
        out.append(PurgatoryAdvance(carried) if drains else ClockAdvance(carried))
    return out


def shrink(
    steps: Sequence[Step],
    fails: Callable[[list[Step]], int | None],
    *,
    max_runs: int = 400,
    max_seconds: float = 60.0,
) -> tuple[list[Step], int]:
    """The shortest run found that still fails, by delta debugging over ``steps``.

    ``fails(candidate)`` returns the index of the step where ``candidate`` fails, or
    None. ``steps`` must fail; its first step (the ``init``) is kept. The steps after it
    form *units*: all the steps of one operation (``unit_of``), or one other step. Each
    pass tries removing one of ``n`` chunks of units (``n`` doubling from 2 up to one
    unit per chunk, later chunks first) with the time they let pass kept (``without``);
    a shorter candidate that still fails is cut after its failing step and becomes the
    run. Stops when no single unit can go, or after
    ``max_runs`` candidates or ``max_seconds``. Returns the run and the candidates tried.
    """
    first = fails(list(steps))
    if first is None:
        raise ValueError("steps: the run given to shrink does not fail")
    best = list(steps[: first + 1])
    runs, started = 1, time.monotonic()
    chunks = 2
    while len(best) > 2:
        keys = [unit_of(step) or index for index, step in enumerate(best[1:])]
        units = list(dict.fromkeys(keys))
        chunks = min(chunks, len(units))
        size = -(-len(units) // chunks)
        reduced = False
        for start in reversed(range(0, len(units), size)):  # later chunks first
            if runs >= max_runs or time.monotonic() - started > max_seconds:
                return best, runs
            candidate = without(best, keys, set(units[start : start + size]))
            if len(candidate) >= len(best):
                continue
            runs += 1
            index = fails(candidate)
            if index is not None:
                best = candidate[: index + 1]
                reduced = True
                break
        if reduced:
            chunks = max(2, chunks - 1)
        elif size == 1:
            break
        else:
            chunks = min(len(units), chunks * 2)
    return best, runs


RESULT_RULES = {
    "watch": "R23",
    "check_and_complete": "R25",
    "cancel_for_key": "R29",
    "force_complete": "R16",
    "advance": "R8",
}
EVENT_RULES = {
    "watch": "R22",
    "check_and_complete": "R25",
    "cancel_for_key": "R29",
    "force_complete": "R16",
    "set_ready": "R22",
}
STATE_RULES = {
    "clock_ms": "R7",
    "timer_sizes": "R12",
    "watched": "R27",
    "num_delayed": "R28",
    "watched_keys": "R26",
    "num_purged": "R30",
    "estimated_total_operations": "R30",
}


def rule_of(kind: str, message: str, expected: Compact | None, actual: Compact | None) -> str:
    """The spec rule a difference on a ``kind`` step most directly breaks (a rule id), or
    ``protocol`` when the adapter gave no answer. For events on a drain: an expiry the
    port reports that the reference does not is early (R4), one it lacks is late (R5),
    the same ones in another order break R6."""
    if expected is None or actual is None or message.startswith("the adapter did not answer"):
        return "protocol"
    if message.startswith("raised"):
        return "R36" if kind == "watch" else "R35"
    if message.startswith("result"):
        return RESULT_RULES.get(kind, "R8")
    if message.startswith("events"):
        if kind in EVENT_RULES:
            return EVENT_RULES[kind]
        fired_a = {(e[1], e[2]) for e in expected[2] if e[0] == "expired"}
        fired_b = {(e[1], e[2]) for e in actual[2] if e[0] == "expired"}
        if fired_b - fired_a and not fired_a - fired_b:
            return "R4"
        if fired_a - fired_b:
            return "R5"
        return "R6"
    if message.startswith("tries"):
        return "R22" if kind == "watch" else "R25" if kind == "check_and_complete" else "R18"
    if message.startswith("state: "):
        return STATE_RULES.get(message.removeprefix("state: ").split(":", 1)[0], "R12")
    return "R22"


@dataclass
class PortResult:
    """One stream through a port: the replay, the rule its first difference breaks, and
    the shrunk steps reproducing it (None when the stream agreed), with how many
    candidate runs shrinking took (0: not shrunk, the adapter stopped answering)."""

    replay: StreamReplay
    rule: str | None = None
    shrunk: list[Step] | None = None
    shrink_runs: int = 0

    def shrunk_json_lines(self) -> str | None:
        """The shrunk steps as JSON lines (the ``--replay`` file's content), or None."""
        if self.shrunk is None:
            return None
        return "\n".join(json.dumps(step_to_json(step)) for step in self.shrunk) + "\n"


def replay_through_port(
    steps: Sequence[Step], adapter: AdapterProcess, port: Port, reference: ModuleType
) -> PortResult:
    """Replay ``steps`` on the reference and through ``adapter``; shrink a difference."""
    side = AdapterSide(adapter)
    compare = judge(port, side)
    seen: dict[str, Any] = {}

    def remembering(step: Step, obs_a: Compact, obs_b: Compact) -> str | None:
        message = compare(step, obs_a, obs_b)
        if message is not None and "message" not in seen:
            seen.update(kind=step.STEP, message=message, expected=obs_a, actual=obs_b)
        return message

    replay = replay_sides(steps, Driver(reference), side, remembering, compare_final=False)
    if replay.divergence is None:
        return PortResult(replay)
    index = replay.divergence[0]
    if replay.stopped:
        return PortResult(replay, "protocol", list(steps[: index + 1]), 0)
    rule = rule_of(seen["kind"], seen["message"], seen["expected"], seen["actual"])
    shrunk, runs = shrink(
        steps[: index + 1],
        lambda candidate: diverges(candidate, adapter, port, reference),
        max_runs=port.shrink_runs,
        max_seconds=port.shrink_seconds,
    )
    return PortResult(replay, rule, shrunk, runs)


def not_replayed(steps: Sequence[Step], reason: str) -> PortResult:
    """A stream a task gave up on before sending it (the adapter kept failing)."""
    replay = StreamReplay([], [], (0, f"step 0 init: not replayed: {reason}"), {}, {}, 0.0, True)
    replay.counters = {"steps": len(steps), "ops": 0}
    return PortResult(replay, "protocol", None, 0)
