"""What the conformance tests share: the kit's CLI run in process, and the commands of the
Python adapter and of the broken adapters (one defect each)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from kpurgatory.cli import main
from kpurgatory.conformance.adapter import DEFAULT_VECTORS_DIR, vector_paths

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "conformance" / "broken_adapter.py"
VECTORS = vector_paths([DEFAULT_VECTORS_DIR])
"""The committed vectors' files."""
VECTOR_NAMES = [json.loads(path.read_text(encoding="utf-8"))["name"] for path in VECTORS]


def python_adapter(impl: str = "reference") -> str:
    """The command of the Python adapter over the implementation package ``impl``."""
    return shlex.join(
        [sys.executable, "-m", "kpurgatory.conformance.python_adapter", "--impl", impl]
    )


def broken_adapter(bug: str, script: Path = BROKEN) -> str:
    """The command of a broken adapter (``script``) with the defect ``bug``."""
    return shlex.join([sys.executable, str(script), "--bug", bug])


def conformance(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``kpurgatory conformance ARGS`` in process; return (exit status, stdout)."""
    code = main(["conformance", *args])
    return code, capsys.readouterr().out


def conformance_and_errors(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``conformance`` with what it wrote to stderr as well."""
    code = main(["conformance", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def passes_with_allow_kafka(
    capsys: pytest.CaptureFixture[str], adapter: str, *options: str, seed: int
) -> str:
    """The adapter passes ``--stateful --allow kafka`` on ``seed``, the vectors and the
    search; the report."""
    code, out = conformance(
        capsys,
        "--adapter",
        adapter,
        *options,
        "--stateful",
        "--allow",
        "kafka",
        "--seed",
        str(seed),
    )
    assert code == 0, out
    assert out.rstrip().endswith("conformance: PASS (vectors: PASS; search: PASS)"), out
    return out
