"""The client of a port's adapter: a subprocess that answers steps with observations.

A port exposes an **adapter**: a command that reads one step per line on stdin (the
JSON of ``kpurgatory.conformance.steps``) and writes one observation per line on
stdout (the JSON of ``kpurgatory.conformance.driver.Observation``), in order, one
answer per step. An ``init`` line starts a new run, so one process replays many runs.
A step it cannot execute is answered with ``{"error": "<message>"}``. docs/conformance.md
is the protocol's description for porters. ``AdapterProcess`` starts the command, sends
steps, and reads answers with a per-step timeout, keeping the tail of the adapter's
stderr for reports.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import typing
from pathlib import Path
from typing import IO, Any

from kpurgatory.conformance.answer import UNEXPOSED_STATE_NAMES, AnswerError, parse_answer
from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.driver import Observation
from kpurgatory.conformance.steps import Step, nested_steps, step_to_json

__all__ = [
    "DEFAULT_STEP_TIMEOUT_S",
    "FLUSH_HINT",
    "STEP_KINDS",
    "UNEXPOSED_STATE_NAMES",
    "AdapterError",
    "AdapterProcess",
    "step_kinds",
]

DEFAULT_STEP_TIMEOUT_S = 10.0
"""How long the client waits for one answer before declaring the adapter stuck."""

STEP_KINDS: tuple[str, ...] = tuple(cls.STEP for cls in typing.get_args(Step))
"""Every step kind of the language, in declaration order."""

FLUSH_HINT = (
    "Write each answer as one line and flush stdout after it (C: fflush(stdout); "
    "Python: print(..., flush=True) or python -u; Java: System.out.flush(); "
    "Go: an unbuffered os.Stdout or Flush on a bufio.Writer; Rust: io::stdout().flush())."
)
"""The advice printed when an adapter does not answer its first step."""


class AdapterError(RuntimeError):
    """The adapter did not answer a step properly: exited, timed out, or wrote garbage.

    ``answered`` says whether the step got any answer at all (an ``{"error": ...}``
    answer or a malformed line counts as answered; an exit or timeout does not);
    ``timed_out`` whether the adapter was stopped for not answering in time (a hang).
    """

    def __init__(self, message: str, *, answered: bool, timed_out: bool = False) -> None:
        super().__init__(message)
        self.answered = answered
        self.timed_out = timed_out


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
        self.timer_only = False  # --timer-only: answers may omit the purgatory's state fields
        self.flags = Capabilities()  # what the command line declared (--without, --async-run)
        self.declared = Capabilities()  # what the adapter declared in an init answer
        self.last_absent: frozenset[str] = frozenset()  # fields the last answer declared null
        self.absent_seen: set[str] = set()  # every field any answer declared null
        self.starts = 0
        self.answers = 0  # answer lines read from the current process
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
                # its own process group, so a stop reaches what a wrapper started
                # (``sh run.sh`` running java, ``go run``, ``npm start``)
                start_new_session=os.name == "posix",
            )
        except OSError as exc:
            raise AdapterError(
                f"cannot start adapter {self.command!r}: {exc}", answered=False
            ) from None
        self._process = process
        self.starts += 1
        self.answers = 0
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

    @property
    def capabilities(self) -> Capabilities:
        """What the port has: the command line's declaration and the adapter's own."""
        return self.flags.merged(self.declared)

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
        line = self._exchange(step)
        if step.get("step") == "init":
            self._read_capabilities(line)
        observation, self.last_absent = _parse_answer(
            line, timer_only=self.timer_only, sizes_absent=not self.capabilities.has("size")
        )
        self.absent_seen |= self.last_absent
        return observation

    def exchange(self, message: dict[str, Any]) -> object:
        """Send one message that is not a step (the threads mode's ``threads``) and
        return its answer as parsed JSON; ``AdapterError`` as ``send``, also for an
        answer that is not JSON (it shows the line)."""
        line = self._exchange(message)
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            raise AdapterError(
                f"answer is not JSON ({exc}): {_clip(line.strip())}", answered=True
            ) from None

    def _exchange(self, step: dict[str, Any]) -> str:
        """Write one line, return the answer line (``AdapterError`` if none comes)."""
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
            raise AdapterError(self._silence_message(), answered=False, timed_out=True) from None
        if line is _EOF:
            raise AdapterError(self._exit_message("without answering"), answered=False)
        assert isinstance(line, str)
        self.answers += 1
        return line

    # -- internals ----------------------------------------------------------------------

    def _read_capabilities(self, line: str) -> None:
        """Take the ``capabilities`` an ``init`` answer declares (``AdapterError`` if bad)."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            return  # _parse_answer reports it
        if isinstance(data, dict) and "capabilities" in data:
            try:
                self.declared = Capabilities.from_json(data.pop("capabilities"))
            except ValueError as exc:
                raise AdapterError(
                    f"the init answer declares bad capabilities: {exc}", answered=True
                ) from None

    def _silence_message(self) -> str:
        """Why no answer came, after stopping the adapter.

        If the process never answered anything, its stdin is closed first: a program
        that buffers its stdout writes what it held back as it exits, which shows. (A
        process that answered before does not buffer; it is just slow or stuck.)
        """
        first = self.answers == 0
        process = self._process
        flushed_at_exit = False
        if first and process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            try:
                line = self._lines.get(timeout=min(2.0, self.step_timeout_s))
                flushed_at_exit = line is not _EOF
            except queue.Empty:
                pass
        self._reap()
        message = f"no answer within {self.step_timeout_s:g} s (the adapter was stopped)"
        if flushed_at_exit:
            return (
                f"{message}; its answer arrived only once its stdin was closed: the adapter "
                f"buffers its stdout. {FLUSH_HINT}"
            )
        if first:
            return f"{message}; it never answered a step. {FLUSH_HINT}"
        return message

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
            _kill_group(process)
            process.wait(timeout=5)
        for thread in self._threads:
            thread.join(timeout=2)
        if any(thread.is_alive() for thread in self._threads):
            _kill_group(process)  # a child of the command still holds its output open
            for thread in self._threads:
                thread.join(timeout=5)
        for stream in (process.stdout, process.stderr):
            if stream is not None and not any(thread.is_alive() for thread in self._threads):
                stream.close()  # closing a stream a thread still reads would wait for it


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the adapter and everything it started (its process group on POSIX)."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


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


def _parse_answer(
    line: str, *, timer_only: bool = False, sizes_absent: bool = False
) -> tuple[Observation, frozenset[str]]:
    """``kpurgatory.conformance.answer.parse_answer``, its mistakes as ``AdapterError``
    (answered: the adapter did answer, with something that is not an observation)."""
    try:
        return parse_answer(line, timer_only=timer_only, sizes_absent=sizes_absent)
    except AnswerError as exc:
        raise AdapterError(str(exc), answered=True) from None


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def step_kinds(step: Step) -> set[str]:
    """The kinds a step exercises: its own and those of the steps its callbacks perform (a
    task's ``on_run``, an operation's ``on_try``, ``on_complete``, ``on_expiration``)."""
    kinds = {step.STEP}
    for _, inner in nested_steps(step):
        kinds |= step_kinds(inner)
    return kinds
