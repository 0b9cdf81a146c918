"""Declared capabilities: a port says what it lacks, and the kit checks everything else.

- a port without ``next_due_time`` and cancel (the JavaScript example adapter, which
  declares it in its ``init`` answer) gets a verdict on everything else: the vectors
  that need those steps are listed as not sent, the search never sends them, and the
  report says what was not checked;
- ``--without`` declares the same from the command line; unknown names are usage errors,
  and a bad declaration in an ``init`` answer is reported;
- ``--async-run``: a port that runs tasks on other threads is compared on each step's
  events in any order, and still fails when it loses a task.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kpurgatory.conformance.adapter import AdapterProcess
from kpurgatory.conformance.capabilities import Capabilities, needed
from kpurgatory.conformance.stateful import AdapterSide, run_stateful
from kpurgatory.conformance.steps import Add, Advance, Cancel, Init, NextDueTime, Step
from tests.conformance.support import ROOT, python_adapter
from tests.conformance.support import broken_adapter as broken
from tests.conformance.support import conformance_and_errors as conformance
from tests.support import load

JS_ADAPTER = ROOT / "conformance" / "examples" / "javascript" / "timer_adapter.mjs"
NODE = shutil.which("node")


# ---- the declaration ------------------------------------------------------------------------


def test_capabilities_name_step_kinds_and_features_only() -> None:
    assert Capabilities.parse_without("cancel, next_due_time") == {"cancel", "next_due_time"}
    with pytest.raises(ValueError, match="unknown capability 'stop'"):
        Capabilities.parse_without("cancel,stop")
    with pytest.raises(ValueError, match="unknown field 'asnyc'"):
        Capabilities.from_json({"asnyc": True})
    with pytest.raises(ValueError, match="async_run must be true or false"):
        Capabilities.from_json({"async_run": "yes"})
    assert Capabilities.from_json({"without": ["size"], "async_run": True}) == Capabilities(
        frozenset({"size"}), True
    )


def test_what_a_sequence_needs() -> None:
    steps: list[Step] = [
        Init(),
        Add("t", 5, on_run=(Cancel("t"),)),
        Add("t", 5, on_run=(Cancel("t"),)),
    ]
    assert needed(steps) == {"add", "cancel", "on_run", "re_add"}
    assert needed([Init(), Add("t", 1), Init(), Add("t", 1), NextDueTime()]) == {
        "add",
        "next_due_time",
    }
    assert Capabilities(async_run=True).missing(steps) == ["on_run"]
    assert Capabilities(frozenset({"advance"})).missing([Init(), Advance(1)]) == ["advance"]
    # a drain from a task is nested_advance; a negative reading at init is negative_time
    assert needed([Init(), Add("t", 1, on_run=(Advance(1),))]) == {
        "add",
        "advance",
        "on_run",
        "nested_advance",
    }
    assert needed([Init(start_ms=-5, clock_ms=-5), Advance(1)]) == {"advance", "negative_time"}
    assert needed([Init(clock_ms=-1)]) == {"negative_time"}


def test_a_vector_is_sent_without_the_next_due_time_steps_a_port_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """next_due_time only reads the timer: a vector that needs nothing else the port lacks
    is still checked, on all its other steps."""
    args = ["--adapter", python_adapter(), "--without", "next_due_time", "--timer-only"]
    code, out, _ = conformance(capsys, *args)
    assert code == 0, out
    assert (
        "PASS r44-next-due-time (7 steps; left out 7 next_due_time steps (declared absent))" in out
    )
    code, out, _ = conformance(capsys, *args, "--without", "next_due_time,cancel")
    assert "NOT CONSUMED r44-next-due-time: not sent: the port declares no cancel" in out, out


def test_an_unknown_name_for_without_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = conformance(capsys, "--adapter", python_adapter(), "--without", "stop")
    assert code == 2 and "--without: unknown capability 'stop'" in err


def test_without_from_the_command_line_is_never_sent(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--adapter", python_adapter(), "--without", "cancel,next_due_time", "--timer-only"]
    code, out, _ = conformance(capsys, *args)
    assert code == 0, out
    assert "NOT CONSUMED r44-next-due-time: not sent: the port declares no cancel\n" in out
    assert "not checked: declared without cancel, next_due_time" in out
    code, out, _ = conformance(
        capsys, *args, "--stateful", "--search-only", "--seed", "1", "--max-examples", "20"
    )
    assert code == 0, out
    kinds = next(line for line in out.splitlines() if "steps by kind:" in line)
    assert "cancel" not in kinds and "next_due_time" not in kinds and "add " in kinds


def test_a_replay_needing_a_declared_absent_step_is_one_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text('{"step": "init"}\n{"step": "next_due_time"}\n', encoding="utf-8")
    code, _, err = conformance(
        capsys, "--adapter", python_adapter(), "--without", "next_due_time", "--replay", str(path)
    )
    assert code == 2 and "needs next_due_time, which the port declares it lacks" in err


# ---- a port in another language ----------------------------------------------------------------


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_javascript_example_declares_what_it_lacks_and_passes_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    adapter = shlex.join([str(NODE), str(JS_ADAPTER)])
    code, out, _ = conformance(
        capsys,
        "--adapter",
        adapter,
        "--timer-only",
        "--stateful",
        "--seed",
        "1",
        "--max-examples",
        "40",
    )
    assert code == 0, out
    assert out.startswith("port capabilities: declared without cancel, next_due_time\n"), out
    assert "NOT CONSUMED r44-next-due-time: not sent: the port declares no cancel" in out
    assert "PASS r06-hand-over-order" in out and "PASS bucket-shapes" not in out
    assert out.count("not checked: declared without cancel, next_due_time") == 2
    kinds = next(line for line in out.splitlines() if "steps by kind:" in line)
    assert "cancel" not in kinds and "next_due_time" not in kinds
    assert out.rstrip().endswith("conformance: PASS (vectors: PASS; search: PASS)")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_javascript_example_speaks_the_protocol_line_by_line() -> None:
    lines = [
        {"step": "init", "tick_ms": 2, "timers": ["main"]},
        {
            "step": "add",
            "task": "a",
            "delay_ms": 3,
            "on_run": [{"step": "add", "task": "b", "delay_ms": 0}],
        },
        {"step": "advance", "ms": -1},
        {"step": "advance", "ms": 4},
        {"step": "cancel", "task": "a"},
    ]
    done = subprocess.run(
        [str(NODE), str(JS_ADAPTER)],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["capabilities"] == {"without": ["cancel", "next_due_time"]}
    assert answers[2]["raised"] == "ValueError"
    assert answers[3]["result"] is True
    assert [(e["task"], e["unit"], e["due_ms"]) for e in answers[3]["events"]] == [
        ("a", "a", 2),
        ("b", "a", 2),
    ]
    assert "error" in answers[4]


# ---- tasks run on other threads -------------------------------------------------------------


def test_an_async_port_passes_only_with_async_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = conformance(capsys, "--adapter", broken("async-run"), "--timer-only")
    assert code == 1 and "FAIL r06-hand-over-order" in out, out
    code, out, _ = conformance(
        capsys, "--adapter", broken("async-run"), "--timer-only", "--async-run"
    )
    assert code == 0, out
    assert "NOT CONSUMED r11-cancel-before-turn: not sent: the port declares no on_run" in out
    assert "tasks run asynchronously (the order within a step and on_run are not checked)" in out


def test_an_async_port_that_loses_a_task_fails_with_async_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = conformance(
        capsys, "--adapter", broken("async-lossy"), "--timer-only", "--async-run"
    )
    assert code == 1 and "FAIL " in out, out
    with AdapterProcess(broken("async-lossy")) as adapter:
        failure, _ = run_stateful(
            AdapterSide(adapter),
            reference=load("reference"),
            seed=1,
            shrink=False,
            capabilities=Capabilities(async_run=True),
        )
    assert failure is not None and failure.message.startswith("events differ"), failure


def test_a_bad_declaration_in_an_init_answer_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    answer: dict[str, object] = {
        "result": None,
        "raised": None,
        "events": [],
        "tries": {},
        "state": {"clock_ms": 0, "timer_sizes": {"main": 0}},
        "capabilities": {"without": ["stop"]},
    }
    script = (
        f"import sys\nfor line in sys.stdin: print({json.dumps(json.dumps(answer))}, flush=True)\n"
    )
    adapter = shlex.join([sys.executable, "-c", script])
    vector = ROOT / "conformance" / "vectors" / "r01-due-time.json"
    code, out, _ = conformance(capsys, "--adapter", adapter, "--vectors", str(vector))
    assert code == 1, out
    assert "the init answer declares bad capabilities: unknown capability 'stop'" in out, out
