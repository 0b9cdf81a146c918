"""A user's type checker trusts kpurgatory: mypy --strict on typed user programs, from outside.

The programs (tests/typing/user_program.py for the core, aio_user_program.py for
``kpurgatory.aio``) and the README's example are copied to a
temporary folder and checked with ``mypy --strict`` run there, so mypy finds kpurgatory
the way a user's checker does: installed (a wheel, or an editable install whose mode
type checkers can follow, see the Makefile), never through this repository as the
current folder. If mypy cannot find kpurgatory, or sees it as ``Any``, or stops flagging
one of the program's deliberate mistakes, the check fails.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ["user_program.py", "aio_user_program.py"]
HERE = Path(__file__).resolve().parent
README = ROOT / "README.md"


def readme_example() -> str:
    """The first ``python`` block of README.md (the library example)."""
    match = re.search(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    assert match, "README.md has no python example"
    return match.group(1)


def run_mypy(folder: Path, *files: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict files`` run in ``folder`` with its own cache and no project config."""
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "MYPY_CACHE_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "",
         "--cache-dir", str(folder / ".mypy_cache"), *files],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_user_program_and_readme_example_pass_mypy_strict(tmp_path: Path) -> None:
    """Typed use checks clean, kpurgatory's types are seen (assert_type), each mistake is
    flagged (an ignore that suppresses nothing fails under --strict), and the README's
    example checks without a type argument (DelayedOperationPurgatory's PEP 696 default)."""
    for name in PROGRAMS:
        (tmp_path / name).write_text((HERE / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "readme_example.py").write_text(readme_example(), encoding="utf-8")
    done = run_mypy(tmp_path, *PROGRAMS, "readme_example.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no issues found in {len(PROGRAMS) + 1} source files" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mistakes_are_flagged_with_the_expected_codes(tmp_path: Path) -> None:
    """Without their ignore comments the programs have exactly one error per marked line,
    with the code the comment names (so the clean run above is not clean by accident)."""
    marked: dict[tuple[str, int], str] = {}
    for name in PROGRAMS:
        source = (HERE / name).read_text(encoding="utf-8")
        for number, line in enumerate(source.splitlines(), start=1):
            if found := re.search(r"# type: ignore\[([\w-]+)\]", line):
                marked[(name, number)] = found.group(1)
        stripped = re.sub(r"  # type: ignore\[[\w-]+\]", "", source)
        (tmp_path / name).write_text(stripped, encoding="utf-8")
    assert len(marked) >= 20
    done = run_mypy(tmp_path, *PROGRAMS)
    errors = {
        (line.split(":")[0], int(line.split(":")[1])): line.rsplit("[", 1)[1].rstrip("]")
        for line in done.stdout.splitlines()
        if ": error:" in line
    }
    assert errors == marked, done.stdout
