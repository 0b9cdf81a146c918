"""R46: ``AsyncPurgatory.purgatory`` and ``.timer`` are typed by overloads of their
descriptors' ``__get__`` (kpurgatory/aio/wrapped.py), which only a type checker reads:
at run time the last definition replaces them. So this checkout's module is checked
with ``mypy --strict`` here, as the project's own gate does, for the mutation run's
tier of that module (a removed ``@overload`` changes nothing a run-time test sees)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = "kpurgatory/aio/wrapped.py"


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
@pytest.mark.skipif(
    not (ROOT / MODULE).is_file(),
    reason="no package source in this tree (the compiled job's copy of the tests)",
)
def test_r46_the_wrapped_descriptors_overloads_pass_mypy_strict(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "MYPY_CACHE_DIR")}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"),
         MODULE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
