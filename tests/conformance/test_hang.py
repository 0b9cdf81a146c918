"""A hang is a verdict: a port that deadlocks in a call back in fails, naming the callback and rule.

The port is the Python port of the catalogue with a plain, non-re-entrant operation lock
(``operation-lock-not-reentrant``, Go's ``sync.Mutex``), served through the subprocess
adapter as a port in another language is. It deadlocks in the committed vector
``r63-reentrant-lock`` (a ``try_complete`` that sweeps its own key) and in the search;
each time the kit stops it after the answer timeout and reports a failure naming the
step, the callback it was in and R63, within a bounded time. ``hang_diagnosis`` itself is
checked on the other rules a hang is traced to (R64, R66, R69) and on a step that makes
no call back in (no diagnosis: the plain timeout stands).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from kpurgatory.cli import main
from kpurgatory.conformance.adapter import DEFAULT_VECTORS_DIR, AdapterProcess, replay_vectors
from kpurgatory.conformance.hang import hang_diagnosis
from kpurgatory.conformance.stateful import AdapterSide, format_failure, run_stateful
from kpurgatory.conformance.steps import (
    Add,
    Advance,
    CancelForKey,
    ForceComplete,
    Init,
    Shutdown,
    Step,
    Watch,
    step_to_json,
)
from tests.support import load, needs_python_source

pytestmark = needs_python_source()

PORT_ADAPTER = Path(__file__).resolve().parent / "ports" / "adapter.py"
TIMEOUT_S = 2.0
"""The answer timeout the tests give the hanging port (the CLI's default is 10 s)."""


def _command(bug: str) -> str:
    return shlex.join([sys.executable, str(PORT_ADAPTER), "--bug", bug])


def test_a_non_reentrant_lock_fails_the_vector_naming_step_callback_and_r63() -> None:
    started = time.perf_counter()
    with AdapterProcess(
        _command("operation-lock-not-reentrant"), step_timeout_s=TIMEOUT_S
    ) as adapter:
        (result,) = replay_vectors(adapter, [DEFAULT_VECTORS_DIR / "r63-reentrant-lock.json"])
    elapsed = time.perf_counter() - started
    assert result.status == "failed", result
    assert result.step_index == 2 and result.step is not None and result.step["step"] == "watch"
    message = result.message or ""
    assert "no answer within 2 s" in message, message
    assert "the try_complete of operation 'sweeper'" in message, message
    assert 'check_and_complete("k")' in message and message.endswith("(R63)"), message
    assert elapsed < 10 * TIMEOUT_S, elapsed  # the timeout, the stop, the replay: bounded


def test_the_port_without_the_bug_passes_the_vectors_of_calls_back_in() -> None:
    paths = sorted(DEFAULT_VECTORS_DIR.glob("r6[3-9]-*.json"))
    assert len(paths) >= 10
    with AdapterProcess(_command("none")) as adapter:
        results = replay_vectors(adapter, paths)
    assert all(result.status == "passed" for result in results), results


def test_the_search_reports_a_hang_at_once_unshrunk_with_the_rule() -> None:
    started = time.perf_counter()
    with AdapterProcess(
        _command("operation-lock-not-reentrant"), step_timeout_s=TIMEOUT_S
    ) as adapter:
        failure, _ = run_stateful(AdapterSide(adapter), reference=load("reference"), seed=1)
    elapsed = time.perf_counter() - started
    assert failure is not None and failure.hung
    assert failure.message.startswith("no answer: no answer within 2 s"), failure.message
    assert "(R63)" in failure.message and "the port hangs in " in failure.message
    report = format_failure(failure, "port")
    assert "failing sequence (not shrunk: every try of a port that hangs costs the timeout)" in (
        report
    )
    assert elapsed < 60, elapsed  # one hang, no shrinking


def test_replay_of_a_hanging_sequence_fails_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps: list[Step] = [
        Init(tick_ms=1, wheel_size=4),
        Watch("a", 10, ("k",)),
        Watch("b", 10, ("k",), on_try=(CancelForKey("k"),)),
    ]
    path = tmp_path / "hang.jsonl"
    path.write_text("".join(json.dumps(step_to_json(step)) + "\n" for step in steps))
    args = ["--adapter", _command("operation-lock-not-reentrant"), "--timeout", "2"]
    code = main(["conformance", *args, "--replay", str(path)])
    out = capsys.readouterr().out
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith("FAIL replay: step 3 (watch) of the sequence below: no answer"), out
    assert "the try_complete of operation 'b', which calls cancel_for_key(\"k\")" in first
    assert first.endswith("(R63)"), first


# ---- the diagnosis on the reference alone ---------------------------------------------------


def test_no_call_back_in_no_diagnosis() -> None:
    assert hang_diagnosis([Init(), Add("t", 1), Advance(1)]) is None
    assert hang_diagnosis([Add("t", 1)]) is None  # not a run


def test_a_shutdown_from_on_complete_is_traced_to_r64() -> None:
    steps: list[Step] = [
        Init(),
        Watch("o", 5, ("k",), on_complete=(Shutdown(),)),
        ForceComplete("o"),
    ]
    diagnosis = hang_diagnosis(steps)
    assert diagnosis is not None
    assert "the on_complete of operation 'o', which calls shutdown()" in diagnosis
    assert diagnosis.endswith("(R64)"), diagnosis


def test_cancel_for_key_of_another_key_from_a_try_is_traced_to_r66() -> None:
    steps: list[Step] = [Init(), Watch("o", 5, ("k",), on_try=(CancelForKey("other"),))]
    diagnosis = hang_diagnosis(steps)
    assert diagnosis is not None and diagnosis.endswith("(R66)"), diagnosis
    assert "(the library holds the lock of 'o')" in diagnosis


def test_any_other_call_back_in_is_traced_to_r69() -> None:
    steps: list[Step] = [Init(), Watch("p", 9, ("j",)), Add("t", 0, on_run=(ForceComplete("p"),))]
    diagnosis = hang_diagnosis(steps)
    assert diagnosis == (
        "the port hangs in the run of task 't', which calls force_complete(\"p\"): "
        "a callback may make this call (R69)"
    )


def test_a_nested_drain_is_named_before_the_other_calls_and_traced_to_r74() -> None:
    """A task that adds and then advances its own timer: a port running tasks under its
    timer's lock waits in the advance (Kafka's classes run inline do, inside add), so the
    diagnosis names the advance, not the add before it."""
    steps: list[Step] = [
        Init(),
        Add("t", 0, on_run=(Add("u", 4), Advance(14))),
    ]
    diagnosis = hang_diagnosis(steps)
    assert diagnosis == (
        "the port hangs in the run of task 't', which calls advance(14, \"main\"): "
        "a task or callback may drain a timer, nested in the drain or add that runs it "
        "(R69, R74)"
    )
