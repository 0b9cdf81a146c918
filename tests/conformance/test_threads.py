"""The threads mode of the kit (``kpurgatory conformance --threads``), quick tier.

The honest Python adapters pass a few histories of seed 1 through the real command
line; every way an adapter can get the mode wrong gets one clear report (a declared
absence, an adapter that predates the mode, a missing field, a malformed answer); a
deterministic failure (an adapter that reports one ``on_complete`` twice) is shrunk,
named by its rule, saved, and fails again from its replay file; bad options are usage
errors naming the option. The plants of the port-bug catalogue, seeds 1 to 10:
``tests/conformance/ports/test_threads.py`` (slow tier).
"""

from __future__ import annotations

import json
import random
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from kpurgatory.conformance.threads_protocol import (
    FORMAT,
    ThreadsAnswerError,
    history_from_answer,
    program_from_json,
    program_message,
    program_to_json,
)
from kpurgatory.history import random_program
from tests.conformance.support import ROOT, python_adapter
from tests.conformance.support import conformance_and_errors as conformance

pytestmark = pytest.mark.realtime

BROKEN = ROOT / "tests" / "conformance" / "threads_broken_adapter.py"


def broken(bug: str) -> str:
    return shlex.join([sys.executable, str(BROKEN), "--bug", bug])


@pytest.mark.parametrize("impl", ["reference", "optimized"])
def test_the_python_adapters_pass_a_few_histories_of_seed_1(
    capsys: pytest.CaptureFixture[str], impl: str
) -> None:
    code, out, err = conformance(
        capsys, "--adapter", python_adapter(impl), "--threads", "--seed", "1", "--histories", "25"
    )
    assert code == 0, out + err
    assert "explained 25, rejected 0, undecided 0" in out
    assert "threads: PASS (25 histories, every one explained)" in out


def test_an_undecided_history_is_never_a_pass_and_is_searched_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--adapter", python_adapter("optimized"), "--threads", "--seed", "1"]
    args += ["--histories", "10", "--budget", "20"]
    code, out, _ = conformance(capsys, *args, "--retry-budget", "0")
    assert code == 1
    assert "UNDECIDED" in out and "they are not passes" in out
    assert "threads: FAIL (" in out and "undecided of 10 histories" in out
    code, out, _ = conformance(capsys, *args)
    assert code == 0, out
    assert "of the explained histories needed a second search with up to 4000000 nodes" in out


def test_a_serial_run_is_one_thread_after_another(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = conformance(
        capsys,
        "--adapter",
        python_adapter("optimized"),
        "--threads",
        "3",
        "--serial",
        "--seed",
        "1",
        "--histories",
        "5",
    )
    assert code == 0
    assert "histories of 3 threads run one after another (--serial)" in out


def test_a_port_that_declares_no_threads_mode_is_one_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = conformance(capsys, "--adapter", broken("no-threads"), "--threads")
    assert code == 2
    assert "declares it has no threads mode" in err and "nothing was checked" in err


def test_an_adapter_without_the_mode_is_told_how_to_declare_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = conformance(capsys, "--adapter", broken("unknown"), "--threads")
    assert code == 1
    assert "unknown step kind 'threads'" in out
    assert '"capabilities": {"without": ["threads"]}' in out
    assert "Traceback" not in out + err


def test_a_missing_field_is_named_with_the_json_got(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = conformance(
        capsys, "--adapter", broken("no-return"), "--threads", "--seed", "1"
    )
    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("ERROR threads"))
    assert "threads[0][0].return_ns: missing from {" in line
    assert '"invoke_ns": ' in line and "expected an integer >= 0" in line
    assert "Traceback" not in out + err


def test_a_rejected_history_is_shrunk_named_saved_and_replayed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    saved = tmp_path / "failing.json"
    args = ["--adapter", broken("twice"), "--threads", "--seed", "1", "--shrink-attempts", "2"]
    code, out, _ = conformance(capsys, *args, "--out", str(saved))
    assert code == 1
    assert "FAIL threads: history 0 of seed 1" in out
    assert "rule: R16: on_complete of op" in out and "exactly once" in out
    assert "shrunk from" in out and "verdict: rejected" in out
    assert f"--replay {saved}" in out and "--seed 1 --histories 2000" in out
    document = json.loads(saved.read_text())
    assert document["format"] == FORMAT and document["seed"] == 1
    code, out, _ = conformance(
        capsys, "--adapter", broken("twice"), "--threads", "--replay", str(saved),
        "--histories", "3",
    )  # fmt: skip
    assert code == 1
    assert f"replaying the program of {saved} 3 times" in out
    assert "rule: R16" in out


def test_an_adapter_that_never_answers_a_history_is_a_rejected_hang(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = conformance(
        capsys, "--adapter", broken("hang"), "--threads", "--seed", "1", "--timeout", "1"
    )
    assert code == 1
    assert "rule: R63/R37: T0, T1" in out and "a deadlock or a hang" in out
    assert "did not finish" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "--threads must be within 1..8"),
        (["--threads", "two"], "--threads must be N or LOW-HIGH"),
        (["--threads", "--histories", "0"], "--histories must be >= 1"),
        (["--threads", "--budget", "0"], "--budget must be >= 1"),
        (["--threads", "--stateful"], "--stateful does not go with --threads"),
        (["--histories", "3"], "--histories goes with --threads"),
    ],
)
def test_bad_threads_options_are_usage_errors_naming_the_option(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = conformance(capsys, "--adapter", python_adapter("reference"), *args)
    assert code == 2
    assert message in err


def test_a_replay_file_that_is_not_a_threads_program_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text('{"step": "init"}\n')
    code, _, err = conformance(
        capsys, "--adapter", python_adapter("reference"), "--threads", "--replay", str(steps)
    )
    assert code == 2
    assert "a file the threads mode wrote" in err


# ---- the answer, field by field ---------------------------------------------------------------


def _program_and_answer() -> tuple[Any, dict[str, Any]]:
    from kpurgatory import reference
    from kpurgatory.conformance.threads_adapter import answer_threads

    program = random_program(random.Random(3))
    message = program_message(program, 0, 0, serial=True)
    return program, json.loads(json.dumps(answer_threads(reference, message)))


def test_a_program_survives_its_json() -> None:
    program = random_program(random.Random(5))
    assert program_from_json(json.loads(json.dumps(program_to_json(program)))) == program


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda a: a["threads"][0][0].update(result="yes"), "threads[0][0]."),
        (lambda a: a["threads"][0].pop(), "threads[0]: got"),
        (lambda a: a["final"]["outcomes"].update(op0="done"), "final.outcomes.op0"),
        (lambda a: a.pop("callbacks"), "callbacks: got null"),
        (lambda a: a["callbacks"].append({"callback": "on_fire"}), 'callback: got "on_fire"'),
        (
            lambda a: a["callbacks"].append(
                {
                    "thread": 0,
                    "operation": "op0",
                    "callback": "on_complete",
                    "start_ns": 1,
                    "end_ns": 2,
                }
            ),
            "thread: got 0, expected a thread with a call in flight",
        ),
    ],
)
def test_a_malformed_answer_names_its_field(change: Any, field: str) -> None:
    program, answer = _program_and_answer()
    history_from_answer(program, answer, "x")  # the honest answer reads
    change(answer)
    with pytest.raises(ThreadsAnswerError, match="expected") as raised:
        history_from_answer(program, answer, "x")
    assert field in str(raised.value)


def test_a_library_threads_callbacks_go_in_a_call_that_can_hand_an_expiry_over() -> None:
    """An expiry reported on ``"executor"`` is placed in a ``purgatory_advance`` or
    ``watch`` in flight around it; with two candidates there are two histories, and
    with none the answer names the field."""
    from kpurgatory.conformance.threads_protocol import histories_from_answer
    from kpurgatory.history.program import Call, OpSpec, Program, cleanup_calls

    program = Program(
        (OpSpec(1, ("a",), 0),),
        ("a",),
        ((Call("submit", op=0), Call("advance", ms=2)), (Call("advance", ms=1),)),
    )
    cleanup = [
        {"invoke_ns": 100 + 10 * i, "return_ns": 105 + 10 * i, "result": None, "raised": None}
        for i in range(len(cleanup_calls(program)))
    ]
    cleanup[1]["result"], cleanup[2]["result"] = False, 0
    answer: dict[str, Any] = {
        "threads": [
            [
                {"invoke_ns": 0, "return_ns": 10, "result": False, "raised": None},
                {"invoke_ns": 20, "return_ns": 60, "result": None, "raised": None},
            ],
            [{"invoke_ns": 25, "return_ns": 70, "result": None, "raised": None}],
        ],
        "cleanup": cleanup,
        "callbacks": [
            {"thread": 0, "operation": "op0", "callback": "try_complete", "start_ns": 1,
             "end_ns": 2, "ready": False, "returned": False},
            {"thread": 0, "operation": "op0", "callback": "try_complete", "start_ns": 3,
             "end_ns": 4, "ready": False, "returned": False},
            {"thread": "executor", "operation": "op0", "callback": "on_complete",
             "start_ns": 30, "end_ns": 31},
            {"thread": "executor", "operation": "op0", "callback": "on_expiration",
             "start_ns": 32, "end_ns": 33},
        ],
        "final": {"watched": 0, "watched_keys": 0, "num_delayed": 0,
                  "outcomes": {"op0": "completed"}},
    }  # fmt: skip
    histories = histories_from_answer(program, answer, "x")
    assert len(histories) == 2
    owners = {
        thread
        for history in histories
        for thread, points in enumerate(history.points)
        if any(point.kind == "oe" for point in points)
    }
    assert owners == {0, 1}
    answer["callbacks"][2]["start_ns"] = 15  # between T0's watch and its advance
    with pytest.raises(ThreadsAnswerError, match="can hand an expiry over"):
        histories_from_answer(program, answer, "x")


def test_an_answer_with_a_hung_thread_is_a_rejected_history() -> None:
    from kpurgatory.history import check
    from kpurgatory.history.program import Call, OpSpec, Program

    program = Program(
        (OpSpec(1, ("a",), 0), OpSpec(1, ("a",), 1)),
        ("a",),
        ((Call("submit", op=0),), (Call("submit", op=1), Call("check", key="a"))),
    )
    answer = {
        "threads": [
            [{"invoke_ns": 0, "return_ns": 10, "result": False, "raised": None}],
            [
                {"invoke_ns": 1, "return_ns": 9, "result": False, "raised": None},
                {"invoke_ns": 11, "return_ns": None},
            ],
        ],
        "hung": [1],
        "cleanup": [],
        "callbacks": [],
        "final": None,
    }
    history = history_from_answer(program, answer, "x")
    assert history.hung == (1,) and history.final is None
    verdict = check(history)
    assert verdict.outcome == "rejected" and "T1 did not finish" in verdict.reason


_JUNK: list[object] = [None, True, 0, -1, 2**40, "x", "op0", "op99", "executor", [], {}, [1], 1.5]


def _mutated(answer: Any, rng: random.Random) -> Any:
    """``answer`` with one value somewhere inside replaced by junk or removed."""
    node = answer
    for _ in range(rng.randint(1, 4)):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = rng.choice(keys)
        child = node[key]
        if rng.random() < 0.5 or not isinstance(child, dict | list) or not child:
            if isinstance(node, dict) and rng.random() < 0.2:
                del node[key]
            else:
                node[key] = rng.choice(_JUNK)
            break
        node = child
    return answer


def test_a_broken_answer_is_always_a_threads_answer_error_never_another_exception() -> None:
    """Random damage to honest answers (a value replaced by junk, a field removed) is
    always reported as a ``ThreadsAnswerError`` naming a field, or read: never a bare
    Python exception a porter would see."""
    from kpurgatory import reference
    from kpurgatory.conformance.threads_adapter import answer_threads
    from kpurgatory.conformance.threads_protocol import histories_from_answer

    rng = random.Random(1)
    for seed in range(30):
        program = random_program(random.Random(seed))
        message = program_message(program, seed, seed, serial=True)
        honest = json.dumps(answer_threads(reference, message))
        for _ in range(10):
            damaged = _mutated(json.loads(honest), rng)
            try:
                histories_from_answer(program, damaged, "x")
            except ThreadsAnswerError as exc:
                assert ": got " in str(exc) or "missing from" in str(exc) or "overlaps" in str(exc)
