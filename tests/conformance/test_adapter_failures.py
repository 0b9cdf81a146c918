"""The adapter path when an adapter fails the protocol: ``kpurgatory conformance`` lists
unsupported steps, restarts a crashed adapter, stops a silent or stuck one (and a stalled
child of a wrapper command), quotes a garbage answer, and reports an adapter that cannot
start, an unreadable vector or a bad replay file as one error (usage errors exit 2).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import pytest

from kpurgatory.cli import main
from kpurgatory.conformance.adapter import (
    DEFAULT_VECTORS_DIR,
    FLUSH_HINT,
)
from tests.conformance.support import (
    VECTOR_NAMES,
    VECTORS,
    broken_adapter,
    conformance,
    python_adapter,
)

# ---- completeness and protocol failures ---------------------------------------------------


def test_unsupported_steps_are_listed_as_not_consumed(capsys: pytest.CaptureFixture[str]) -> None:
    """A half-done port: each purgatory vector and each step kind it never answered is named."""
    code, out = conformance(capsys, "--adapter", broken_adapter("no-purgatory"))
    assert code == 1
    assert "NOT CONSUMED r22-watch-sequence: step 2 of 8 (watch): the adapter reported an " in out
    assert "error: unsupported step kind watch" in out
    assert "PASS r01-due-time" in out
    not_consumed = next(line for line in out.splitlines() if "vectors not consumed:" in line)
    assert "r22-watch-sequence (answered 1/8)" in not_consumed
    never = next(line for line in out.splitlines() if "step kinds never answered:" in line)
    kinds = set(never.split(": ", 1)[1].split(", "))
    assert {"watch", "check_and_complete", "purgatory_advance", "shutdown"} <= kinds
    assert not {"init", "add", "advance", "cancel"} & kinds


def test_a_crashing_adapter_is_restarted_and_its_vectors_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The adapter exits in its fourth run: that vector is listed, the next ones still run.

    The kit's probe (one init before the vectors) is the first process's first run."""
    names = ["r01-due-time", "r02-current-time", "r06-hand-over-order", "r08-advance-result"]
    names += ["r09-cancel-readd", "r11-cancel-before-turn", "r16-force-and-expiry"]
    names += ["r22-watch-sequence"]
    files = [str(DEFAULT_VECTORS_DIR / f"{name}.json") for name in names]
    args = [arg for path in files for arg in ("--vectors", path)]
    code, out = conformance(capsys, "--adapter", broken_adapter("crash"), *args)
    assert code == 1
    crashed = [line for line in out.splitlines() if line.startswith("NOT CONSUMED")]
    assert [line.split(":")[0] for line in crashed] == [
        "NOT CONSUMED r06-hand-over-order",  # run 4 of the first process (after the probe)
        "NOT CONSUMED r16-force-and-expiry",  # run 4 of the restarted one
    ]
    assert all(": step 3 of " in line for line in crashed)
    assert all("the adapter exited with code 3 without answering" in line for line in crashed)
    assert "summary: 6 passed, 0 failed, 2 not consumed (of 8)" in out
    assert "r06-hand-over-order (answered 2/11)" in out


def test_a_silent_adapter_is_one_error_naming_the_flush(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No answer to the very first step: one error (exit 2) that says to flush, not a
    timeout per vector."""
    code = main(["conformance", "--adapter", broken_adapter("silent"), "--timeout", "0.3"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "did not answer its first step (an init), so nothing was checked" in captured.err
    assert "no answer within 0.3 s" in captured.err and "it never answered a step" in captured.err
    assert FLUSH_HINT in captured.err


def test_an_adapter_stuck_in_a_later_step_is_stopped_and_the_next_vector_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Only a silence from the very start is blamed on buffering; a stall later is a
    timeout of that vector (the probe is run 1, so the second vector is run 3)."""
    names = ["r01-due-time", "r02-current-time", "r06-hand-over-order"]
    args = [
        arg for name in names for arg in ("--vectors", str(DEFAULT_VECTORS_DIR / f"{name}.json"))
    ]
    # 3 s, not less: a restarted adapter's first answer takes Python's start-up time,
    # over a second on a loaded 2-core machine, and that must not read as a stall.
    code, out = conformance(capsys, "--adapter", broken_adapter("stall"), "--timeout", "3", *args)
    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("NOT CONSUMED"))
    assert line.startswith("NOT CONSUMED r02-current-time: step 3 of 8 (add): no answer within")
    assert FLUSH_HINT not in out
    assert "PASS r01-due-time" in out and "PASS r06-hand-over-order" in out


@pytest.mark.skipif(os.name != "posix", reason="a shell wrapper and process groups")
def test_a_stalled_child_of_a_wrapper_command_is_stopped_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An adapter command is often a wrapper (``sh run.sh`` starting java, ``go run``,
    ``npm start``): its child holds the output open after the wrapper is killed. The kit
    stops the whole process group, reports the stall and goes on to the next vector
    instead of waiting for the child for ever."""
    names = ["r01-due-time", "r02-current-time", "r06-hand-over-order"]
    args = [
        arg for name in names for arg in ("--vectors", str(DEFAULT_VECTORS_DIR / f"{name}.json"))
    ]
    wrapper = shlex.join(["sh", "-c", f"{broken_adapter('deadlock')}; exit 0"])
    started = time.monotonic()
    code, out = conformance(capsys, "--adapter", wrapper, "--timeout", "3", *args)
    assert time.monotonic() - started < 60, out
    assert code == 1
    assert "NOT CONSUMED r02-current-time: step 3 of 8 (add): no answer within" in out
    assert "PASS r01-due-time" in out and "PASS r06-hand-over-order" in out


def test_an_adapter_that_does_not_flush_is_told_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Its answer comes out when its stdin closes: the report says the stdout is buffered."""
    started = time.monotonic()
    code = main(["conformance", "--adapter", broken_adapter("buffered"), "--timeout", "0.5"])
    elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "its answer arrived only once its stdin was closed" in captured.err
    assert "buffers its stdout" in captured.err and FLUSH_HINT in captured.err
    assert elapsed < 10 * 0.5 * len(VECTORS)  # not a timeout per vector


def test_an_unreadable_vector_is_listed_and_the_rest_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    args = ["--vectors", str(broken), "--vectors", str(VECTORS[0])]
    code, out = conformance(capsys, "--adapter", python_adapter("reference"), *args)
    assert code == 1
    assert "NOT CONSUMED broken: cannot read the vector: " in out
    assert f"PASS {VECTOR_NAMES[0]} (" in out


def test_a_garbage_answer_is_quoted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = conformance(
        capsys, "--adapter", broken_adapter("garbage"), "--vectors", str(VECTORS[1])
    )
    assert code == 1
    assert "(init): answer is not JSON" in out and "<<not an observation>>" in out


@pytest.mark.parametrize("mode", [[], ["--stateful"], ["--replay", "STEPS"]])
def test_an_adapter_that_cannot_start_is_one_usage_error(
    mode: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    steps = tmp_path / "steps.jsonl"
    steps.write_text('{"step": "init"}\n', encoding="utf-8")
    missing = str(tmp_path / "no-such-adapter")
    args = [str(steps) if arg == "STEPS" else arg for arg in mode]
    code = main(["conformance", "--adapter", missing, *args])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("error:") == 1
    assert "cannot start adapter" in captured.err and "No such file" in captured.err


def test_an_adapter_that_exits_at_once_is_one_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["conformance", "--adapter", broken_adapter("exit")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "exited with code 3" in captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--adapter", ""], "command must name a program"),
        (["--adapter", "x", "--timeout", "0"], "step_timeout_s must be > 0"),
        (["--adapter", "x", "--vectors", "/nonexistent/vectors"], "neither a file nor"),
        (["--adapter", "x", "--replay", "/nonexistent.jsonl"], "--replay"),
        (["--adapter", "x", "--stateful", "--max-examples", "0"], "max_examples must be >= 1"),
        (["--adapter", "x", "--allow", "kafka-nonsense"], "unknown known difference"),
        (["--adapter", "x", "--allow", ","], "--allow needs 'kafka'"),
        (
            ["--adapter", "x", "--replay", str(DEFAULT_VECTORS_DIR / "r01-due-time.json")],
            "is a conformance vector, not a JSON-lines step sequence: run it with --vectors",
        ),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", *args]) == 2
    assert message in capsys.readouterr().err


def test_missing_committed_vectors_are_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An install without the packaged vectors says so instead of a path error."""
    from kpurgatory.conformance import cli

    monkeypatch.setattr(cli, "DEFAULT_VECTORS_DIR", tmp_path / "nowhere")
    assert main(["conformance", "--adapter", python_adapter("reference")]) == 2
    assert "the committed vectors are not installed" in capsys.readouterr().err


def test_replay_file_errors_name_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": "init"}\n\n{"step": "advance", "ms": "1"}\n', encoding="utf-8")
    assert main(["conformance", "--adapter", "x", "--replay", str(bad)]) == 2
    assert "line 3: advance.ms must be an integer" in capsys.readouterr().err
