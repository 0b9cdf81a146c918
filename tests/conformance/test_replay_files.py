"""An input file's mistakes are the file's, named by line; a replay's never reach the port.

- every input error names its line (a replay file, a vector file): a line that is not
  UTF-8, not JSON (with the column), not a step (the field, the JSON it had);
- a step the run excludes (a purgatory step under ``--timer-only``, in a task's
  ``on_run`` too; a step the port declares it lacks) is refused with its line before the
  replay sends anything of the file to the port, instead of being reported as the port's
  failure.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from kpurgatory.cli import main

INIT = '{"step": "init"}'
PYTHON_ADAPTER = shlex.join([sys.executable, "-m", "kpurgatory.conformance.python_adapter"])


def _replay(
    capsys: pytest.CaptureFixture[str], path: Path, *options: str, adapter: str = "x"
) -> tuple[int, str]:
    code = main(["conformance", "--adapter", adapter, "--replay", str(path), *options])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (b"\xff\xfe", "line 2: not UTF-8 (byte 0xff at column 1)"),
        (b'{"step": add}', "line 2: not JSON (Expecting value at column 10)"),
        (b'{"step": "add", "task": "t"}', 'line 2: add: missing required field(s) ["delay_ms"]'),
        (b'{"step": "add", "task": 1, "delay_ms": 0}', "line 2: add.task must be a string, got 1"),
        (b'{"step": "warp"}', 'line 2: step: unknown step kind "warp"; expected one of ["add"'),
        (b'{"step": "cancel", "task": "t"}', "line 2: cancel: unknown task or operation label"),
    ],
)
def test_every_input_error_names_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, second: bytes, message: str
) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_bytes(INIT.encode() + b"\n" + second + b"\n")
    code, err = _replay(capsys, path)
    assert code == 2, err
    assert f"--replay {path}: {message}" in err, err
    assert "Traceback" not in err and "NoneType" not in err, err


def test_a_purgatory_step_in_a_timer_only_replay_is_refused_before_the_port_sees_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "steps.jsonl"
    seen = tmp_path / "seen.jsonl"
    path.write_text(
        INIT
        + "\n\n"
        + '{"step": "add", "task": "t", "delay_ms": 1, "on_run": '
        + '[{"step": "check_and_complete", "key": "k"}]}\n',
        encoding="utf-8",
    )
    recording = shlex.join(["sh", "-c", f"tee {shlex.quote(str(seen))} | {PYTHON_ADAPTER}"])
    code, err = _replay(capsys, path, "--timer-only", adapter=recording)
    assert code == 2, err
    assert (
        f"--replay {path}: line 3: a check_and_complete step, which --timer-only excludes"
    ) in err, err
    assert "remove it, or replay without --timer-only" in err
    assert "check_and_complete" not in seen.read_text(encoding="utf-8")
    code, err = _replay(capsys, path, adapter=PYTHON_ADAPTER)
    assert code == 0, err  # the same file, with the purgatory: replayed


def test_a_step_the_port_declares_it_lacks_is_refused_with_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text(INIT + '\n{"step": "clock_advance", "ms": 1}\n{"step": "next_due_time"}\n')
    code, err = _replay(capsys, path, "--without", "next_due_time", adapter=PYTHON_ADAPTER)
    assert code == 2, err
    assert (
        f"--replay {path}: line 3: the step needs next_due_time, which the port declares it lacks"
    ) in err, err


@pytest.mark.parametrize(
    ("third", "message"),
    [
        (b" \xff ]}", "line 3: not UTF-8 (byte 0xff at column 2)"),
        (b" nope ]}", "line 3: not JSON (Expecting value at column 2)"),
    ],
)
def test_a_vector_file_that_cannot_be_read_names_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, third: bytes, message: str
) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(b'{"format": "kpurgatory-conformance-vector",\n "steps": [\n' + third + b"\n")
    code = main(["conformance", "--adapter", PYTHON_ADAPTER, "--vectors", str(path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"NOT CONSUMED broken: cannot read the vector: {message}" in out, out
