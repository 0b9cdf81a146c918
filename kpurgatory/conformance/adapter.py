"""The subprocess side of conformance: talk to a port's adapter, replay vectors through it.

A port exposes an **adapter**: a command that reads one step per line on stdin (the
JSON of ``kpurgatory.conformance.steps``) and writes one observation per line on
stdout (the JSON of ``kpurgatory.conformance.driver.Observation``), in order, one
answer per step. An ``init`` line starts a new run, so one process replays many runs.
A step it cannot execute is answered with ``{"error": "<message>"}``. docs/conformance.md
is the protocol's description for porters.

``AdapterProcess`` is the client: it starts the command, sends steps, and reads
answers with a per-step timeout, keeping the tail of the adapter's stderr for reports.
``replay_vectors`` replays committed vectors through it and returns one
``VectorResult`` per vector (passed, failed at a step, or not consumed), which
``format_report`` turns into the text ``kpurgatory conformance`` prints. The comparison
is ``compare_observations``, the same one the in-process replay uses.
"""

from __future__ import annotations

import collections
import json
import queue
import shlex
import subprocess
import threading
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kpurgatory.conformance.driver import Observation, compare_observations
from kpurgatory.conformance.steps import Add, Step, step_to_json
from kpurgatory.conformance.vectors import SCHEMA_PATH, load_vector, vector_steps

__all__ = [
    "DEFAULT_STEP_TIMEOUT_S",
    "DEFAULT_VECTORS_DIR",
    "STEP_KINDS",
    "AdapterError",
    "AdapterProcess",
    "VectorResult",
    "format_report",
    "replay_vectors",
    "step_kinds",
    "vector_paths",
]

DEFAULT_STEP_TIMEOUT_S = 10.0
"""How long the client waits for one answer before declaring the adapter stuck."""

DEFAULT_VECTORS_DIR = SCHEMA_PATH.parents[1] / "vectors"
"""The committed vectors: package data of an installed wheel, else a checkout's
``conformance/vectors`` (``kpurgatory.conformance.vectors.conformance_root``)."""

STEP_KINDS: tuple[str, ...] = tuple(cls.STEP for cls in typing.get_args(Step))
"""Every step kind of the language, in declaration order."""


class AdapterError(RuntimeError):
    """The adapter did not answer a step properly: exited, timed out, or wrote garbage.

    ``answered`` says whether the step got any answer at all (an ``{"error": ...}``
    answer or a malformed line counts as answered; an exit or timeout does not).
    """

    def __init__(self, message: str, *, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


_EOF = object()
"""Put on the stdout queue when the adapter closes its stdout."""


class AdapterProcess:
    """A running adapter command: ``send(step)`` returns its ``Observation``.

    ``command`` is split like a shell would (``shlex.split``) and run without a shell,
    in ``cwd``, on the first ``send`` (or ``start``). Each answer must arrive within
    ``step_timeout_s``. ``restart`` kills and starts the command again; ``close`` closes
    its stdin, waits briefly, then kills it; a later ``send`` starts it again. Also a
    context manager that closes on exit.
    """

    def __init__(
        self,
        command: str,
        *,
        step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
        cwd: Path | None = None,
    ) -> None:
        if not isinstance(command, str):
            raise TypeError(f"command must be a str, not {type(command).__name__}")
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("command must name a program, got an empty string")
        if isinstance(step_timeout_s, bool) or not isinstance(step_timeout_s, int | float):
            raise TypeError("step_timeout_s must be a number")
        if step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s must be > 0, got {step_timeout_s}")
        self.command = command
        self.step_timeout_s = float(step_timeout_s)
        self.cwd = cwd
        self.starts = 0
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._threads: list[threading.Thread] = []

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the command (no-op if it is running). ``AdapterError`` if it cannot start."""
        if self._process is not None and self._process.poll() is None:
            return
        self._reap()
        try:
            process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                bufsize=1,
                cwd=self.cwd,
            )
        except OSError as exc:
            raise AdapterError(
                f"cannot start adapter {self.command!r}: {exc}", answered=False
            ) from None
        self._process = process
        self.starts += 1
        self._lines = queue.Queue()
        self._stderr.clear()
        assert process.stdout is not None and process.stderr is not None
        self._threads = [
            threading.Thread(target=_pump_lines, args=(process.stdout, self._lines), daemon=True),
            threading.Thread(target=_pump_stderr, args=(process.stderr, self._stderr), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def restart(self) -> None:
        """Kill the adapter (if running) and start it again."""
        self._reap()
        self.start()

    def close(self) -> None:
        """Close stdin, give the adapter a moment to exit, then kill it; idempotent."""
        self._reap()

    def __enter__(self) -> AdapterProcess:
        """The adapter itself; it starts on the first ``send`` (or ``start``)."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """Whether the adapter process is alive."""
        return self._process is not None and self._process.poll() is None

    def stderr_tail(self) -> str:
        """The last lines the adapter wrote on stderr (for failure reports)."""
        return "".join(self._stderr)

    # -- talking ------------------------------------------------------------------------

    def send(self, step: Step) -> Observation:
        """Send one step and return the adapter's observation of it.

        ``AdapterError`` if the adapter exits, does not answer within the timeout,
        answers ``{"error": ...}``, or writes something that is not an observation.
        """
        return self.send_json(step_to_json(step))

    def send_json(self, step: dict[str, Any]) -> Observation:
        """``send`` for a step already in its JSON form."""
        self.start()
        process = self._process
        assert process is not None and process.stdin is not None
        try:
            process.stdin.write(json.dumps(step) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise AdapterError(
                self._exit_message("before reading the step"), answered=False
            ) from None
        try:
            line = self._lines.get(timeout=self.step_timeout_s)
        except queue.Empty:
            self._reap()
            raise AdapterError(
                f"no answer within {self.step_timeout_s:g} s (the adapter was stopped)",
                answered=False,
            ) from None
        if line is _EOF:
            raise AdapterError(self._exit_message("without answering"), answered=False)
        assert isinstance(line, str)
        return _parse_answer(line)

    # -- internals ----------------------------------------------------------------------

    def _exit_message(self, what: str) -> str:
        process = self._process
        code = None
        if process is not None:
            try:
                code = process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
        status = "closed its stdout" if code is None else f"exited with code {code}"
        return f"the adapter {status} {what}"

    def _reap(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        try:
            if process.stdin is not None:
                process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        for thread in self._threads:
            thread.join(timeout=2)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _pump_lines(stream: IO[str], lines: queue.Queue[object]) -> None:
    """Copy the adapter's stdout lines into ``lines``; ``_EOF`` at the end."""
    try:
        for line in stream:
            if line.strip():
                lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(_EOF)


def _pump_stderr(stream: IO[str], tail: collections.deque[str]) -> None:
    try:
        for line in stream:
            tail.append(line)
    except (OSError, ValueError):
        pass


def _parse_answer(line: str) -> Observation:
    """The observation in one answer line; ``AdapterError`` (answered) if it is not one."""
    text = line.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdapterError(f"answer is not JSON ({exc}): {_clip(text)}", answered=True) from None
    if isinstance(data, dict) and set(data) == {"error"}:
        raise AdapterError(f"the adapter reported an error: {data['error']}", answered=True)
    if not isinstance(data, dict):
        raise AdapterError(f"answer is not a JSON object: {_clip(text)}", answered=True)
    try:
        return Observation.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdapterError(
            f"answer is not an observation ({type(exc).__name__}: {exc}): {_clip(text)}",
            answered=True,
        ) from None


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def step_kinds(step: Step) -> set[str]:
    """The kinds a step exercises: its own and those of the steps a task runs (``on_run``)."""
    kinds = {step.STEP}
    if isinstance(step, Add):
        for inner in step.on_run:
            kinds |= step_kinds(inner)
    return kinds


# ---- replaying vectors ------------------------------------------------------------------


@dataclass
class VectorResult:
    """What happened to one vector: ``status`` is ``passed``, ``failed`` or ``not consumed``.

    ``failed``: the adapter answered every step up to ``step_index`` and that answer
    disagrees with the reference (``message``, ``expected`` and ``actual`` say how).
    ``not consumed``: the adapter stopped answering at ``step_index`` (exit, timeout,
    ``{"error": ...}``, malformed answer, or the vector itself could not be read).
    """

    name: str
    path: Path
    status: str
    steps: int
    answered: int  # steps answered with an observation (right or wrong)
    step_index: int | None = None
    message: str = ""
    step: dict[str, Any] | None = None
    expected: dict[str, Any] | None = None
    actual: dict[str, Any] | None = None
    stderr: str = ""
    kinds_answered: set[str] = field(default_factory=set)


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


def replay_vectors(adapter: AdapterProcess, paths: Iterable[Path]) -> list[VectorResult]:
    """Replay each vector file through ``adapter``; one ``VectorResult`` per file, in order.

    Steps are sent one at a time and each answer is compared with the vector's
    expectation before the next step goes out; a vector stops at its first divergence.
    An adapter that dies or stalls is restarted for the next vector, so one crash
    does not hide the other results.
    """
    results = []
    for path in paths:
        results.append(_replay_one(adapter, path))
    return results


def _replay_one(adapter: AdapterProcess, path: Path) -> VectorResult:
    try:
        vector = load_vector(path)
        name = str(vector.get("name", path.stem))
        steps, expected = vector_steps(vector)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return VectorResult(
            path.stem, path, "not consumed", 0, 0, 0, f"cannot read the vector: {exc}"
        )
    result = VectorResult(name, path, "passed", len(steps), 0)
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
            result.step = step_to_json(step)
            result.stderr = adapter.stderr_tail()
            if not exc.answered:
                adapter.close()  # dead or stuck: the next vector starts a fresh one
            return result
        result.answered = index + 1
        result.kinds_answered |= step_kinds(step)
        message = compare_observations(expect, actual)
        if message is not None:
            result.status = "failed"
            result.step_index, result.message = index, message
            result.step = step_to_json(step)
            result.expected, result.actual = expect.to_json(), actual.to_json()
            return result
    return result


def format_report(results: Sequence[VectorResult], command: str) -> str:
    """The text report of a vector replay: one line per vector, details for each failure,
    then the completeness section (vectors not consumed, step kinds never answered)."""
    lines = [f"conformance: {len(results)} vectors through adapter {command!r}"]
    for result in results:
        if result.status == "passed":
            lines.append(f"PASS {result.name} ({result.steps} steps)")
            continue
        label = "FAIL" if result.status == "failed" else "NOT CONSUMED"
        lines.append(
            f"{label} {result.name}: step {result.step_index} of {result.steps}"
            + (f" ({result.step['step']})" if result.step else "")
            + f": {result.message}"
        )
        if result.step is not None:
            lines.append(f"    step:     {json.dumps(result.step)}")
        if result.expected is not None:
            lines.append(f"    expected: {json.dumps(result.expected)}")
        if result.actual is not None:
            lines.append(f"    actual:   {json.dumps(result.actual)}")
        if result.stderr:
            tail = result.stderr.rstrip().splitlines()[-5:]
            lines.extend(f"    stderr: {line}" for line in tail)
        lines.append(
            f"    replay:   kpurgatory conformance --adapter {shlex.quote(command)} "
            f"--vectors {shlex.quote(str(result.path))}"
        )
    passed = sum(result.status == "passed" for result in results)
    failed = sum(result.status == "failed" for result in results)
    unconsumed = [result for result in results if result.status == "not consumed"]
    lines.append(
        f"summary: {passed} passed, {failed} failed, {len(unconsumed)} not consumed "
        f"(of {len(results)})"
    )
    lines.append("completeness:")
    if unconsumed:
        lines.append(
            "  vectors not consumed: "
            + ", ".join(f"{r.name} (answered {r.answered}/{r.steps})" for r in unconsumed)
        )
    else:
        lines.append("  every vector was consumed to its end or to its first divergence")
    answered = set().union(*(result.kinds_answered for result in results)) if results else set()
    missing = [kind for kind in STEP_KINDS if kind not in answered]
    lines.append("  step kinds never answered: " + (", ".join(missing) if missing else "none"))
    return "\n".join(lines)
