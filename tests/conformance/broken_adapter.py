"""Deliberately broken conformance adapters, for tests of the failure reports.

``python tests/conformance/broken_adapter.py --bug BUG`` speaks the adapter protocol
(docs/conformance.md) but misbehaves in one way:

- ``late``: the reference with a timer that drains one tick behind the clock, so tasks
  fire a tick late (R4/R5 broken the way a stale wheel clock breaks them);
- ``miscount``: the reference with a ``check_and_complete`` that also counts operations
  it found already completed (R25 broken);
- ``no-purgatory``: answers the timer steps correctly but ``{"error": ...}`` to every
  purgatory step (a port that is half done);
- ``timer-port``: ``no-purgatory`` that also leaves the purgatory's state fields out of
  its answers (a port of the timer alone, for ``--timer-only``);
- ``late-timer-port``: ``late`` answering like ``timer-port`` (no purgatory state
  fields): a wrong timer-only port;
- ``async-run``: the reference answering each step's events in reverse order (a port
  that runs tasks on other threads, for ``--async-run``);
- ``async-lossy``: ``async-run`` that also loses one task of every step that ran two;
- ``unexposed``: the reference answering null for ``watched_keys``, ``num_purged`` and
  ``estimated_total_operations`` (a port whose API hides them, like upstream Kafka's);
- ``late-unexposed``: ``late`` answering like ``unexposed``: a wrong port whose failure
  report must show the hidden fields as the nulls it answered;
- ``crash``: answers correctly, then exits with code 3 in the middle of its fourth run;
- ``silent``: reads steps and never answers;
- ``stall``: answers correctly, then stops answering at the third step of its third run
  (a port stuck in one call);
- ``deadlock``: as ``stall``, but stuck for good: it no longer reads its input, so even
  the end of its stdin does not stop it (a port deadlocked in one call);
- ``buffered``: answers correctly but never flushes stdout (C stdio, Python without
  ``-u``): its answers come out only when it exits, once stdin is closed;
- ``exit``: exits with code 3 at once, before reading anything;
- ``garbage``: answers the first step of every run with a line that is not JSON;
- ``sorted-keys``: the reference, writing every JSON object with its keys sorted (what
  Go's encoder does with a map): ``timer_sizes`` of two timers in another order than
  ``init`` declared them. Not a bug: objects compare as objects;
- ``kafka``: a Kafka-like variant (``tests/conformance/kafka_like.py``) reproducing the
  known differences named by ``--differences`` (comma-separated ids, default all).

The first two are real implementations with a bug (a mutant module served by
``python_adapter.serve``); the others break the protocol itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import types
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import IO

from kpurgatory import reference
from kpurgatory.conformance.python_adapter import serve
from kpurgatory.conformance.steps import TIMER_STEP_KINDS
from kpurgatory.spec.protocols import Clock

NextDue = Callable[[], int | None]
"""What a clock's ``wait`` asks for the next due time."""

BUGS = (
    "late",
    "miscount",
    "no-purgatory",
    "timer-port",
    "late-timer-port",
    "async-run",
    "async-lossy",
    "unexposed",
    "late-unexposed",
    "crash",
    "silent",
    "stall",
    "deadlock",
    "buffered",
    "exit",
    "garbage",
    "sorted-keys",
    "kafka",
)


class LaggingClock:
    """Wraps the run's clock; ``wait`` returns a drain reading one tick in the past."""

    def __init__(self, inner: Clock, tick_ms: int) -> None:
        self.inner, self.tick_ms = inner, tick_ms

    def now_ms(self) -> int:
        """The wrapped clock's reading (adds compute due times correctly)."""
        return self.inner.now_ms()

    def wait(self, condition: threading.Condition, timeout_ms: int, next_due: NextDue) -> int:
        """Let time pass on the wrapped clock, then report a reading one tick behind."""
        return self.inner.wait(condition, timeout_ms, next_due) - self.tick_ms


class LateTimer(reference.SystemTimer):
    """The reference timer, draining one tick behind its clock."""

    def __init__(
        self,
        executor_name: str,
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int | None = None,
        **kwargs: object,
    ) -> None:
        clock = kwargs.pop("clock", None)
        if isinstance(clock, Clock):
            kwargs["clock"] = LaggingClock(clock, tick_ms)
        super().__init__(executor_name, tick_ms, wheel_size, start_ms, **kwargs)  # type: ignore[arg-type]


class MiscountingPurgatory(reference.DelayedOperationPurgatory[reference.DelayedOperation]):
    """The reference purgatory, counting already-completed operations in check_and_complete."""

    def check_and_complete(self, key: Hashable) -> int:
        """The reference count plus the already-completed operations it unlinked."""
        with self._lock:
            already = sum(op.is_completed for op in self._watchers.get(key, ()))
        return super().check_and_complete(key) + already


def mutant(bug: str) -> types.ModuleType:
    """An implementation module equal to the reference except for ``bug``."""
    module = types.ModuleType(f"broken_{bug}")
    module.TimerTask = reference.TimerTask  # type: ignore[attr-defined]
    module.DelayedOperation = reference.DelayedOperation  # type: ignore[attr-defined]
    module.SystemTimer = LateTimer if bug == "late" else reference.SystemTimer  # type: ignore[attr-defined]
    module.DelayedOperationPurgatory = (  # type: ignore[attr-defined]
        MiscountingPurgatory if bug == "miscount" else reference.DelayedOperationPurgatory
    )
    return module


class _FilteredInput:
    """stdin as ``serve`` sees it, with the protocol-level bug applied around it.

    ``silent`` swallows every line; ``crash`` exits mid-run; ``garbage`` answers an
    ``init`` itself with a non-JSON line; ``no-purgatory`` answers purgatory steps with
    an error. Anything else passes through to ``serve``.
    """

    def __init__(self, bug: str, stdin: IO[str], stdout: IO[str]) -> None:
        self.bug, self.stdin, self.stdout = bug, stdin, stdout
        self.runs = 0
        self.steps_in_run = 0

    def readline(self) -> str:
        """The next line ``serve`` should answer ("" at end of input)."""
        while True:
            line = self.stdin.readline()
            if not line:
                return line
            kind = _kind(line)
            if kind == "init":
                self.runs += 1
                self.steps_in_run = 0
            self.steps_in_run += 1
            if self.bug == "silent" or (
                self.bug == "stall" and self.runs == 3 and self.steps_in_run >= 3
            ):
                continue
            if self.bug == "deadlock" and self.runs == 3 and self.steps_in_run >= 3:
                time.sleep(3600)
            if self.bug == "crash" and self.runs == 4 and self.steps_in_run == 3:
                self.stdout.flush()
                sys.exit(3)
            if self.bug == "garbage" and kind == "init":
                self.stdout.write("<<not an observation>>\n")
                self.stdout.flush()
                return "\n"  # serve skips blank lines: this step gets the garbage answer
            if self.bug in ("no-purgatory", "timer-port") and kind not in TIMER_STEP_KINDS:
                self.stdout.write(f'{{"error": "unsupported step kind {kind}"}}\n')
                self.stdout.flush()
                continue
            return line


def _kind(line: str) -> str:
    """The step kind named by a line, or "" if the line is not a step."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return ""
    kind = data.get("step") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else ""


class _StateRewriter:
    """stdout that rewrites the state of each answer line with ``rewrite``."""

    def __init__(
        self, inner: IO[str], rewrite: Callable[[dict[str, object]], dict[str, object]]
    ) -> None:
        self.inner, self.rewrite = inner, rewrite

    def write(self, text: str) -> int:
        """Rewrite one answer line (``serve`` writes each line whole)."""
        data = json.loads(text)
        if isinstance(data.get("state"), dict):
            data["state"] = self.rewrite(data["state"])
        return self.inner.write(json.dumps(data) + "\n")

    def flush(self) -> None:
        """Flush the real stdout."""
        self.inner.flush()


def _timer_state_only(state: dict[str, object]) -> dict[str, object]:
    return {name: state[name] for name in ("clock_ms", "timer_sizes")}


def _declare_absent(state: dict[str, object]) -> dict[str, object]:
    return {**state, "watched_keys": None, "num_purged": None, "estimated_total_operations": None}


def _sorted_keys(state: dict[str, object]) -> dict[str, object]:
    sizes = state["timer_sizes"]
    assert isinstance(sizes, dict)
    return {**state, "timer_sizes": dict(sorted(sizes.items()))}


class _EventRewriter:
    """stdout that reverses each answer's events (and loses one if ``lossy``)."""

    def __init__(self, inner: IO[str], *, lossy: bool) -> None:
        self.inner, self.lossy = inner, lossy

    def write(self, text: str) -> int:
        """Rewrite one answer line (``serve`` writes each line whole)."""
        data = json.loads(text)
        events = data.get("events")
        if isinstance(events, list):
            events.reverse()
            if self.lossy and len(events) >= 2:
                events.pop()
        return self.inner.write(json.dumps(data) + "\n")

    def flush(self) -> None:
        """Flush the real stdout."""
        self.inner.flush()


class _HoldingStdout:
    """stdout that ignores ``flush``: everything written stays buffered until ``release``."""

    def __init__(self, inner: IO[str]) -> None:
        self.inner = inner
        self.held: list[str] = []

    def write(self, text: str) -> int:
        """Buffer ``text``."""
        self.held.append(text)
        return len(text)

    def flush(self) -> None:
        """Do nothing: the bug."""

    def release(self) -> None:
        """Write and flush what was held (what a C program's exit does)."""
        self.inner.write("".join(self.held))
        self.inner.flush()


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--bug BUG``; serves stdin to stdout until end of input."""
    parser = argparse.ArgumentParser(description="a deliberately broken conformance adapter")
    parser.add_argument("--bug", choices=BUGS, required=True)
    parser.add_argument("--differences", default="kafka", help="kafka: which differences")
    args = parser.parse_args(argv)
    if args.bug == "exit":
        return 3
    if args.bug == "kafka":
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script
        from tests.conformance.kafka_like import kafka_like

        serve(kafka_like(args.differences), sys.stdin, sys.stdout)
        return 0
    impl = mutant(args.bug) if args.bug in ("late", "miscount") else reference
    if args.bug == "late-timer-port":
        stdin = _FilteredInput("timer-port", sys.stdin, sys.stdout)
        serve(mutant("late"), stdin, _StateRewriter(sys.stdout, _timer_state_only))  # type: ignore[arg-type]
        return 0
    if args.bug in ("unexposed", "late-unexposed"):
        impl = mutant("late") if args.bug == "late-unexposed" else impl
        serve(impl, sys.stdin, _StateRewriter(sys.stdout, _declare_absent))  # type: ignore[arg-type]
        return 0
    if args.bug in ("async-run", "async-lossy"):
        rewriter = _EventRewriter(sys.stdout, lossy=args.bug == "async-lossy")
        serve(impl, sys.stdin, rewriter)  # type: ignore[arg-type]
        return 0
    if args.bug == "sorted-keys":
        serve(impl, sys.stdin, _StateRewriter(sys.stdout, _sorted_keys))  # type: ignore[arg-type]
        return 0
    if args.bug == "timer-port":
        stdin = _FilteredInput(args.bug, sys.stdin, sys.stdout)
        serve(impl, stdin, _StateRewriter(sys.stdout, _timer_state_only))  # type: ignore[arg-type]
        return 0
    if args.bug == "buffered":
        held = _HoldingStdout(sys.stdout)
        try:
            serve(impl, sys.stdin, held)  # type: ignore[arg-type]
        finally:
            held.release()
        return 0
    stdin = _FilteredInput(args.bug, sys.stdin, sys.stdout)
    serve(impl, stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
