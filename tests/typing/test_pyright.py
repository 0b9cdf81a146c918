"""A user's pyright trusts kpurgatory: ``pyright --strict`` on the typed user programs.

As tests/typing/test_user_program.py does for mypy: the programs (user_program.py for
the core, aio_user_program.py for ``kpurgatory.aio``) are copied to a temporary folder
and checked there by pyright in strict mode, against the interpreter running the tests
(so pyright finds kpurgatory installed, as a user's does). Each deliberate mistake
carries a ``# pyright: ignore[rule]`` comment; type-ignore comments are switched off and
unnecessary pyright ignores are errors, so a mistake pyright stops flagging fails the
check, and so does any ``Unknown`` (strict mode reports partially unknown types).

pyright comes from the ``pyright`` PyPI package (dev extra), whose wheel carries
pyright's JavaScript; it runs it on the machine's Node.js (``node`` on PATH, v14 or
later), fetching nothing when Node is there.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PROGRAMS = ["user_program.py", "aio_user_program.py"]
CONFIG = {
    "typeCheckingMode": "strict",
    "enableTypeIgnoreComments": False,
    "reportUnnecessaryTypeIgnoreComment": "error",
    "pythonVersion": "3.11",
}
PYRIGHT_IGNORE = re.compile(r"  # pyright: ignore\[([\w, ]+)\]")
TYPE_IGNORE = re.compile(r"  # type: ignore\[[\w-]+\]")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyright") is None, reason="pyright is not installed (dev extra)"
)


def run_pyright(folder: Path, *files: str) -> dict[str, Any]:
    """``pyright --outputjson files`` in ``folder`` (strict config written there)."""
    (folder / "pyrightconfig.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable,
         *files],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"pyright did not run (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return report


def errors_by_line(report: dict[str, Any]) -> dict[tuple[str, int], set[str]]:
    """{(file name, 1-based line): pyright rules reported there} for the errors."""
    found: dict[tuple[str, int], set[str]] = {}
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            where = (Path(diagnostic["file"]).name, diagnostic["range"]["start"]["line"] + 1)
            found.setdefault(where, set()).add(diagnostic.get("rule", diagnostic["message"]))
    return found


def test_user_programs_pass_pyright_strict(tmp_path: Path) -> None:
    """Typed use checks clean with no Unknown, kpurgatory's types are seen (assert_type),
    and every pyright ignore suppresses an error (an unnecessary one is reported)."""
    for name in PROGRAMS:
        (tmp_path / name).write_text((HERE / name).read_text(encoding="utf-8"), encoding="utf-8")
    report = run_pyright(tmp_path, *PROGRAMS)
    assert report["summary"]["filesAnalyzed"] == len(PROGRAMS)
    assert errors_by_line(report) == {}, json.dumps(report["generalDiagnostics"], indent=1)


def test_mistakes_are_flagged_with_the_expected_rules(tmp_path: Path) -> None:
    """Without the ignore comments pyright reports exactly the marked rules on exactly the
    marked lines (so the clean run above is not clean by accident)."""
    marked: dict[tuple[str, int], set[str]] = {}
    for name in PROGRAMS:
        source = (HERE / name).read_text(encoding="utf-8")
        for number, line in enumerate(source.splitlines(), start=1):
            found = PYRIGHT_IGNORE.search(line)
            if found:
                marked[(name, number)] = {rule.strip() for rule in found.group(1).split(",")}
        stripped = TYPE_IGNORE.sub("", PYRIGHT_IGNORE.sub("", source))
        (tmp_path / name).write_text(stripped, encoding="utf-8")
    assert len(marked) >= 20
    report = run_pyright(tmp_path, *PROGRAMS)
    assert errors_by_line(report) == marked, json.dumps(report["generalDiagnostics"], indent=1)
