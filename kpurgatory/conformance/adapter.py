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
is ``compare_observations``, the same one the in-process replay uses, through a
``Judge`` that may accept named known differences (``--allow``).
"""

from __future__ import annotations

import collections
import contextlib
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

from kpurgatory.conformance.capabilities import Capabilities
from kpurgatory.conformance.differences import PURGATORY_STATE_FIELDS, Judge, report_json
from kpurgatory.conformance.driver import Observation
from kpurgatory.conformance.steps import TIMER_STEP_KINDS, Add, Init, Step, step_to_json
from kpurgatory.conformance.vectors import SCHEMA_PATH, load_vector, vector_steps
from kpurgatory.spec.known_differences import KnownDifference

__all__ = [
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

DEFAULT_STEP_TIMEOUT_S = 10.0
"""How long the client waits for one answer before declaring the adapter stuck."""

DEFAULT_VECTORS_DIR = SCHEMA_PATH.parents[1] / "vectors"
"""The committed vectors: package data of an installed wheel, else a checkout's
``conformance/vectors`` (``kpurgatory.conformance.vectors.conformance_root``)."""

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
            raise AdapterError(self._silence_message(), answered=False) from None
        if line is _EOF:
            raise AdapterError(self._exit_message("without answering"), answered=False)
        assert isinstance(line, str)
        self.answers += 1
        if step.get("step") == "init":
            self._read_capabilities(line)
        observation, self.last_absent = _parse_answer(line, timer_only=self.timer_only)
        self.absent_seen |= self.last_absent
        return observation

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


UNEXPOSED_STATE_NAMES = ("watched_keys", "num_purged", "estimated_total_operations")
"""State fields a port may declare absent by answering null (upstream Kafka does not
expose them); they then read as 0 and are not compared, and the report lists them."""


def _parse_answer(line: str, *, timer_only: bool = False) -> tuple[Observation, frozenset[str]]:
    """The observation in one answer line and the state fields it declared absent (as
    ``state.<name>``); ``AdapterError`` (answered) if the line is not an observation.

    ``timer_only``: a missing purgatory state field reads as 0 (``--timer-only`` does
    not compare them). A null in ``UNEXPOSED_STATE_NAMES`` reads as 0 and is returned."""
    text = line.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdapterError(f"answer is not JSON ({exc}): {_clip(text)}", answered=True) from None
    if isinstance(data, dict):
        data.pop("capabilities", None)  # read by AdapterProcess at init
    if isinstance(data, dict) and set(data) == {"error"}:
        raise AdapterError(f"the adapter reported an error: {data['error']}", answered=True)
    if not isinstance(data, dict):
        raise AdapterError(f"answer is not a JSON object: {_clip(text)}", answered=True)
    absent: set[str] = set()
    if isinstance(data.get("state"), dict):
        state = data["state"]
        if timer_only:
            for name in PURGATORY_STATE_FIELDS:
                state.setdefault(name.removeprefix("state."), 0)
        for name in UNEXPOSED_STATE_NAMES:
            if name in state and state[name] is None:
                state[name] = 0
                absent.add(f"state.{name}")
    try:
        return Observation.from_json(data), frozenset(absent)
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


@dataclass
class VectorResult:
    """What happened to one vector: ``status`` is ``passed``, ``failed`` or ``not consumed``.

    ``failed``: the adapter answered every step up to ``step_index`` (0-based; reports
    print step numbers from 1) and that answer disagrees with the reference
    (``message``, ``expected`` and ``actual`` say how). ``not consumed``: the adapter
    stopped answering at ``step_index`` (exit, timeout, ``{"error": ...}``, malformed
    answer), the vector itself could not be read, or it was not sent (``--timer-only``
    and the vector uses purgatory steps). ``accepted`` maps each known difference the
    comparison accepted (``--allow``) to the step numbers where it did.
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
    description: str = ""
    rules: tuple[str, ...] = ()
    before: list[dict[str, Any]] = field(default_factory=list)
    accepted: dict[str, list[int]] = field(default_factory=dict)
    sent: bool = True
    absent: set[str] = field(default_factory=set)  # state fields answered null


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


def _replay_one(adapter: AdapterProcess, path: Path, judge: Judge) -> VectorResult:
    try:
        vector = load_vector(path)
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
            result.actual = report_json(actual, timer_only=judge.timer_only)
            return result
    return result


BEFORE_TAIL = 15
"""How many of the steps just before a failing one a report prints (plus the ``init``
and every step whose task performs ``on_run`` steps, whose effects show much later)."""


def earlier_steps(before: Sequence[dict[str, Any]]) -> list[str]:
    """Report lines for the steps before a failing one, numbered from 1.

    All of them if there are few; otherwise the ``init``, every ``add`` with ``on_run``
    steps, and the last ``BEFORE_TAIL``, with the gaps marked.
    """
    keep = {
        index
        for index, step in enumerate(before)
        if index == 0 or index >= len(before) - BEFORE_TAIL or step.get("on_run")
    }
    lines: list[str] = []
    previous = -1
    for index in sorted(keep):
        if index > previous + 1:
            lines.append(f"      ... steps {previous + 2}-{index} (see the vector file)")
        lines.append(f"      {index + 1:>4}  {json.dumps(before[index])}")
        previous = index
    return lines


def format_report(
    results: Sequence[VectorResult],
    command: str,
    *,
    allow: Sequence[KnownDifference] = (),
    timer_only: bool = False,
    capabilities: Capabilities | None = None,
) -> str:
    """The text report of a vector replay: one line per vector, details for each failure,
    the known differences accepted, then the completeness section (vectors not consumed,
    step kinds never answered). Step numbers start at 1, like the ``N of M`` they sit in."""
    lines = [f"conformance: {len(results)} vectors through adapter {command!r}"]
    if allow:
        lines.append("accepting known differences: " + ", ".join(d.id for d in allow))
    if timer_only:
        lines.append("timer steps only (--timer-only): vectors with purgatory steps are not sent")
    caps = Capabilities() if capabilities is None else capabilities
    if caps.describe():
        lines.append(f"port capabilities: {caps.describe()}; vectors that need more are not sent")
    for result in results:
        accepted = "".join(
            f"; accepted {ident} at step{'s' if len(at) > 1 else ''} {_numbers(at)}"
            for ident, at in sorted(result.accepted.items())
        )
        if result.status == "passed":
            lines.append(f"PASS {result.name} ({result.steps} steps{accepted})")
            continue
        label = "FAIL" if result.status == "failed" else "NOT CONSUMED"
        if result.step_index is None:
            lines.append(f"{label} {result.name}: {result.message}")
            continue
        lines.append(
            f"{label} {result.name}: step {result.step_index + 1} of {result.steps}"
            + (f" ({result.step['step']})" if result.step else "")
            + f": {result.message}"
        )
        if result.description or result.rules:
            lines.append(f"    vector:   {result.description} (rules: {', '.join(result.rules)})")
        if accepted:
            lines.append(f"    accepted: {accepted.removeprefix('; accepted ')}")
        if result.before:
            lines.append(f"    before:   steps 1-{len(result.before)}:")
            lines.extend(earlier_steps(result.before))
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
    if allow:
        lines.append("known differences accepted:")
        for difference in allow:
            where = [
                f"{result.name} ({_numbers(result.accepted[difference.id])})"
                for result in results
                if difference.id in result.accepted
            ]
            lines.append(
                f"  {difference.id} ({difference.rule}, {difference.summary}): "
                + ("; ".join(where) if where else "never needed")
            )
    lines.append("completeness:")
    if unconsumed:
        lines.append(
            "  vectors not consumed: "
            + ", ".join(
                f"{r.name} (answered {r.answered}/{r.steps}{'' if r.sent else ', not sent'})"
                for r in unconsumed
            )
        )
    else:
        lines.append("  every vector was consumed to its end or to its first divergence")
    answered = set().union(*(result.kinds_answered for result in results)) if results else set()
    kinds = [kind for kind in STEP_KINDS if not timer_only or kind in TIMER_STEP_KINDS]
    missing = [kind for kind in kinds if kind not in answered and caps.has(kind)]
    lines.append("  step kinds never answered: " + (", ".join(missing) if missing else "none"))
    if caps.describe():
        lines.append(f"  not checked: {caps.describe()}")
    absent = set().union(*(result.absent for result in results)) if results else set()
    if absent:
        lines.append("  " + absent_line(absent))
    return "\n".join(lines)


def absent_line(absent: Iterable[str]) -> str:
    """The report line naming the state fields an adapter declared absent."""
    names = sorted(name.removeprefix("state.") for name in absent)
    return f"state fields declared absent (answered null, not compared): {', '.join(names)}"


def _numbers(at: Sequence[int], limit: int = 8) -> str:
    """``1, 4, 9`` (step numbers), cut after ``limit`` with a count of the rest."""
    text = ", ".join(str(number) for number in at[:limit])
    return text if len(at) <= limit else f"{text}, ... ({len(at)} steps)"
