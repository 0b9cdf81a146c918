"""The kit on upstream Apache Kafka's own classes, where a Kafka source tree is given.

``conformance/examples/java-kafka`` compiles Kafka's timer (and, from Kafka 4.0's Java
sources, its purgatory) with a few shims into a temporary directory and serves them
through the adapter protocol. These tests run it through the CLI as a porter would:

- Kafka's timer, driven with an inline executor (``--inline``: tasks run inside Kafka's
  drain, bucket by bucket, and perform their ``on_run`` steps), passes the committed
  vectors and ``--stateful --allow kafka`` timer-only on each seed of the battery 1-10,
  and fails without ``--allow kafka``; on its own executor thread (``async_run``) it
  passes seed 1;
- without ``--allow kafka`` it fails on its documented differences, and the report
  names them once they are allowed;
- the adapter speaks the protocol line by line (a negative timeout does not raise: Kafka);
- where the tree has the purgatory's Java sources (Kafka 4.0+), Kafka's timer and
  DelayedOperationPurgatory together pass the same check with an inline executor on
  each seed 1-10 (on Kafka's executor thread on seed 1), and fail without
  ``--allow kafka`` on the purgatory's documented differences.

They run only where ``KAFKA_SOURCE`` names a Kafka source tree (3.6 or later) and a JDK
is installed; nothing of Kafka is in this repository. docs/conformance.md says how.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.cli import main
from tests.conformance.support import passes_with_allow_kafka

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "conformance" / "examples" / "java-kafka" / "run_adapter.sh"
KAFKA_SOURCE = os.environ.get("KAFKA_SOURCE", "")
SEEDS = range(1, 11)
EXECUTORS = ("--inline", "")
"""How the adapter runs Kafka's tasks: on an inline executor (the kit's check) or on
SystemTimer's own thread (declared ``async_run``)."""
WITHOUT = [
    "next_due_time",
    "close",
    "executor_shutdown",
    "callbacks",
    "negative_time",
    "nested_advance",
]
"""What the adapter declares Kafka's classes (and the adapter) lack."""
TIMEOUT = "120"  # seconds for one answer: the first one waits for javac on a loaded machine

needs_kafka = pytest.mark.skipif(
    not KAFKA_SOURCE
    or not Path(KAFKA_SOURCE).is_dir()
    or shutil.which("javac") is None
    or shutil.which("java") is None,
    reason="needs KAFKA_SOURCE (a Kafka source tree) and a JDK (javac, java)",
)


PURGATORY_SOURCE = (
    Path(KAFKA_SOURCE)
    / "server-common/src/main/java/org/apache/kafka/server/purgatory/DelayedOperationPurgatory.java"
)
needs_purgatory = pytest.mark.skipif(
    not KAFKA_SOURCE or not PURGATORY_SOURCE.is_file(),
    reason="needs a Kafka tree with the purgatory's Java sources (Kafka 4.0 or later)",
)


def adapter(*options: str) -> str:
    return shlex.join(["sh", str(LAUNCHER), *(option for option in options if option)])


def conformance(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["conformance", "--timeout", TIMEOUT, *args])
    return code, capsys.readouterr().out


def test_the_launcher_refuses_to_start_without_a_kafka_tree(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "KAFKA_SOURCE"}
    done = subprocess.run(
        ["sh", str(LAUNCHER)], input="", capture_output=True, text=True, env=environment
    )
    assert done.returncode == 2 and "set KAFKA_SOURCE" in done.stderr
    done = subprocess.run(
        ["sh", str(LAUNCHER)],
        input="",
        capture_output=True,
        text=True,
        env={**environment, "KAFKA_SOURCE": str(tmp_path)},
    )
    assert done.returncode == 2 and "util/timer/Timer.java not found" in done.stderr
    done = subprocess.run(["sh", str(LAUNCHER), "--fast"], input="", capture_output=True, text=True)
    assert done.returncode == 2 and "unknown option --fast" in done.stderr


def _answers(lines: Sequence[object], *options: str) -> list[dict[str, Any]]:
    """What the Kafka adapter (``LAUNCHER`` with ``options``) answers to ``lines``."""
    done = subprocess.run(
        ["sh", str(LAUNCHER), *options],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


@needs_kafka
def test_kafkas_timer_speaks_the_protocol_line_by_line() -> None:
    lines = [
        {"step": "init", "tick_ms": 2, "timers": ["main"]},
        {"step": "add", "task": "a", "delay_ms": 3, "on_run": []},
        {"step": "advance", "ms": -1},
        {"step": "advance", "ms": 4},
        {"step": "clock_advance", "ms": -1},
        {"step": "next_due_time"},
    ]
    answers = _answers(lines, "--timer-only")
    assert answers[0]["capabilities"] == {"without": WITHOUT, "async_run": True}
    assert answers[1]["state"] == {"clock_ms": 0, "timer_sizes": {"main": 1}}
    # kafka-negative-timeout: advanceClock(-1) polls the delay queue and returns
    assert answers[2]["raised"] is None and answers[2]["result"] is False
    assert answers[3]["result"] is True
    assert answers[3]["events"] == [
        {"kind": "task_ran", "task": "a", "at_ms": 4, "unit": "a", "due_ms": 2}
    ]
    assert answers[4]["raised"] == "ValueError"  # the adapter's manual clock never goes back
    assert "error" in answers[5]


@needs_kafka
def test_kafkas_timer_fails_without_its_documented_differences(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = conformance(capsys, "--adapter", adapter("--timer-only"), "--timer-only")
    assert code == 1, out
    # the current time moves only to a dequeued bucket's expiration (kafka-stale-current-time)
    assert "FAIL r02-current-time: step 6 of 8 (add)" in out, out
    # advanceClock is true iff it dequeued a bucket (kafka-advance-result)
    assert "FAIL r09-cancel-readd: step 8 of 12 (advance): result: expected false, got true" in out
    code, out = conformance(
        capsys, "--adapter", adapter("--timer-only"), "--timer-only", "--allow", "kafka"
    )
    assert code == 0, out
    assert "PASS r02-current-time (8 steps; accepted kafka-stale-current-time at steps 6" in out
    assert "PASS r09-cancel-readd (12 steps; accepted kafka-advance-result at step 8)" in out
    assert (
        "not checked: declared without callbacks, close, executor_shutdown, negative_time, "
        "nested_advance, next_due_time; "
        "tasks run asynchronously" in out
    ), out


NESTED_DRAINS_KAFKA_CANNOT_TAKE_INLINE = {
    "in-add": [
        # t4 is due at its add: it runs under add's read lock, and its advance waits for
        # the write lock for ever
        {"step": "init", "tick_ms": 1, "wheel_size": 8, "start_ms": 12, "clock_ms": 7},
        {"step": "advance", "ms": 5},
        {
            "step": "add",
            "task": "t4",
            "delay_ms": -3,
            "on_run": [{"step": "add", "task": "t1", "delay_ms": 4}, {"step": "advance", "ms": 14}],
        },
    ],
    "in-a-flush": [
        # t4 runs in a flush; its drain moves the wheel past the flushed bucket's slot, and
        # the flush re-adds an entry to the bucket it is emptying, for ever
        {"step": "init", "tick_ms": 1, "wheel_size": 8, "start_ms": 12, "clock_ms": 7},
        {"step": "clock_advance", "ms": 14},
        {
            "step": "add",
            "task": "t12",
            "delay_ms": 10,
            "on_run": [{"step": "advance", "ms": 6}, {"step": "add", "task": "t9", "delay_ms": 1}],
        },
        {
            "step": "add",
            "task": "t4",
            "delay_ms": -3,
            "on_run": [{"step": "add", "task": "t1", "delay_ms": 4}, {"step": "advance", "ms": 14}],
        },
        {"step": "advance", "ms": 16},
    ],
}
"""Tasks that advance their own timer, where Kafka's classes run inline hang (search seed
10 on them, shrunk by dropping steps while the adapter still hangs)."""


@needs_kafka
@pytest.mark.parametrize("where", sorted(NESTED_DRAINS_KAFKA_CANNOT_TAKE_INLINE))
def test_kafkas_timer_run_inline_hangs_on_a_nested_drain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    """Run inline, Kafka's tasks run under the timer's lock, so a task's advance of its
    own timer hangs: inside add, on a read lock never upgraded; inside a flush, in a
    re-add loop. With ``--nested-advance`` (the adapter no longer declares
    ``nested_advance`` absent) the kit says so within its timeout, naming the task, the
    call and R74; with ``--inline`` alone the declaration keeps the step from the port:
    the replay file is refused at the line that has it."""
    steps = NESTED_DRAINS_KAFKA_CANNOT_TAKE_INLINE[where]
    replay = tmp_path / "steps.jsonl"
    replay.write_text("".join(json.dumps(step) + "\n" for step in steps))
    options = ("--timer-only", "--allow", "kafka", "--replay", str(replay), "--timeout", "20")
    code, out = conformance(
        capsys, "--adapter", adapter("--timer-only", "--inline", "--nested-advance"), *options
    )
    assert code == 1, out
    assert "the port hangs in the run of task 't4', which calls advance(14, \"main\"): " in out
    assert "nested in the drain or add that runs it (R69, R74)" in out, out
    code = main(["conformance", "--adapter", adapter("--timer-only", "--inline"), *options])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert "nested_advance" in captured.err, captured.err


@needs_kafka
@pytest.mark.parametrize(("executor", "seed"), [("--inline", seed) for seed in SEEDS] + [("", 1)])
def test_kafkas_timer_passes_the_kit_with_allow_kafka(
    capsys: pytest.CaptureFixture[str], executor: str, seed: int
) -> None:
    timer = adapter("--timer-only", executor)
    out = passes_with_allow_kafka(capsys, timer, "--timer-only", "--timeout", TIMEOUT, seed=seed)
    kinds = next(line for line in out.splitlines() if "steps by kind:" in line)
    for kind in ("add", "cancel", "advance", "clock_advance"):
        assert f" {kind} " in kinds, kinds


@needs_kafka
@needs_purgatory
def test_kafkas_purgatory_fails_without_its_documented_differences(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = conformance(capsys, "--adapter", adapter())
    assert code == 1, out
    # a duplicate watch key watches the operation twice (kafka-duplicate-keys)
    assert "FAIL r24-keys: step 2 of 7 (watch): state: watched: expected 2, got 5" in out, out
    # advanceClock with a negative timeout does not raise (kafka-negative-timeout)
    assert 'FAIL r35-inputs: step 2 of 6 (advance): raised: expected "ValueError", got null' in out
    # a second submission is not refused (kafka-resubmission)
    assert (
        'FAIL repeated-watch: step 3 of 5 (watch): raised: expected "ValueError", got null' in out
    )
    code, out = conformance(capsys, "--adapter", adapter(), "--allow", "kafka")
    assert code == 0, out
    assert "PASS r24-keys (7 steps; accepted kafka-duplicate-keys at steps 2, 3" in out
    assert "accepted kafka-negative-timeout at steps 2, 4, 6)" in out
    assert "accepted kafka-resubmission at steps 3, 4, 5)" in out
    assert "state fields declared absent (answered null, not compared): num_purged" in out


@needs_kafka
@needs_purgatory
@pytest.mark.parametrize(("executor", "seed"), [("--inline", seed) for seed in SEEDS] + [("", 1)])
def test_kafkas_purgatory_passes_the_kit_with_allow_kafka(
    capsys: pytest.CaptureFixture[str], executor: str, seed: int
) -> None:
    out = passes_with_allow_kafka(capsys, adapter(executor), "--timeout", TIMEOUT, seed=seed)
    kinds = next(line for line in out.splitlines() if "steps by kind:" in line)
    for kind in ("watch", "check_and_complete", "cancel_for_key", "purgatory_advance", "shutdown"):
        assert f" {kind} " in kinds, kinds


@needs_kafka
@pytest.mark.parametrize("whole", [False, True], ids=["timer-only", "whole"])
def test_kafka_with_an_inline_executor_fails_the_search_without_allow_kafka(
    capsys: pytest.CaptureFixture[str], whole: bool
) -> None:
    """Tasks run inside Kafka's drain and perform their on_run steps: the kit compares the
    order of hand-overs and what each run did; without ``--allow kafka`` Kafka's
    differences fail both halves of the check."""
    if whole and not PURGATORY_SOURCE.is_file():
        pytest.skip("needs a Kafka tree with the purgatory's Java sources (Kafka 4.0 or later)")
    options = () if whole else ("--timer-only",)
    code, out = conformance(
        capsys, "--adapter", adapter("--inline", *options), *options, "--stateful", "--seed", "1"
    )
    assert code == 1, out
    assert out.rstrip().endswith("conformance: FAIL (vectors: FAIL; search: FAIL)"), out
    assert "tasks run asynchronously" not in out, out
    kinds = next(line for line in out.splitlines() if "steps by kind:" in line)
    assert " add " in kinds, kinds


@needs_kafka
def test_kafka_with_an_inline_executor_runs_on_run_steps_inside_the_drain() -> None:
    """The protocol line by line: a task due in a drain runs inside it and its on_run steps
    act there; a task it adds due by the drain reading is bucketed at the flushed bucket's
    expiration and handed over later in the same drain, as a unit of its own (Kafka's
    kafka-flush-current-time)."""
    lines = [
        {"step": "init", "tick_ms": 1, "wheel_size": 4, "timers": ["main"]},
        {"step": "add", "task": "b", "delay_ms": 3, "on_run": []},
        {
            "step": "add",
            "task": "a",
            "delay_ms": 2,
            "on_run": [
                {"step": "cancel", "task": "b"},
                {"step": "add", "task": "c", "delay_ms": 0, "on_run": []},
            ],
        },
        {"step": "advance", "ms": 5},
    ]
    answers = _answers(lines, "--timer-only", "--inline")
    assert answers[0]["capabilities"] == {"without": WITHOUT, "async_run": False}
    assert answers[3]["events"] == [
        {"kind": "task_ran", "task": "a", "at_ms": 5, "unit": "a", "due_ms": 2},
        {"kind": "task_ran", "task": "c", "at_ms": 5, "unit": "c", "due_ms": 5},
    ]
    assert answers[3]["state"]["timer_sizes"] == {"main": 0}  # b was cancelled before its turn
