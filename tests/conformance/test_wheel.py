"""The kit as a porter installs it: a wheel in a fresh venv, run outside the repository.

Builds the project's wheel (``pip wheel --no-deps``, from a copy of the tree without any
earlier ``build/`` folder), checks that it carries every
committed vector and the JSON Schema byte for byte (package data copied by setup.py
from ``conformance/``), installs it with the ``[conformance]`` extra into a fresh venv
under the temp directory, and from a directory outside the repository runs
``kpurgatory conformance`` on the committed vectors and ``--stateful`` through
``kpurgatory.conformance.python_adapter``. ``PYTHONPATH`` is removed from the
environment, so the installed package is what runs, never the checkout.

About 15 s on the shared machine (the build backend and Hypothesis come from pip's cache
or the configured index), so it runs in the quick suite. It needs the source tree
(setup.py and kpurgatory/ beside the tests) and skips in the compiled job's copied tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_VECTORS = sorted((ROOT / "conformance" / "vectors").glob("*.json"))
SOURCE_SCHEMA = ROOT / "conformance" / "schema" / "vector.schema.json"
DATA_PREFIX = "kpurgatory/conformance/data/"

pytestmark = pytest.mark.skipif(
    not ((ROOT / "setup.py").is_file() and (ROOT / "kpurgatory").is_dir()),
    reason="needs the source tree (setup.py and kpurgatory/) to build a wheel",
)


def run(argv: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` without the checkout on ``PYTHONPATH``; fail with its output on error."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done


def checked(argv: list[str], cwd: Path) -> str:
    done = run(argv, cwd)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


BUILD_LEFTOVERS = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)
"""Not copied into the build tree: a reused ``build/`` could hide missing package data."""


def test_installed_wheel_runs_the_kit_from_outside_the_repository(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=BUILD_LEFTOVERS)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip"]
    checked([*pip, "wheel", "--quiet", "--no-deps", "-w", str(dist), str(source)], tmp_path)
    (wheel,) = dist.glob("kpurgatory-*.whl")

    # the wheel holds every committed vector and the schema, unchanged
    with zipfile.ZipFile(wheel) as archive:
        packaged = {
            name.removeprefix(DATA_PREFIX): archive.read(name)
            for name in archive.namelist()
            if name.startswith(DATA_PREFIX)
        }
    expected = {f"vectors/{path.name}": path.read_bytes() for path in SOURCE_VECTORS}
    expected["schema/vector.schema.json"] = SOURCE_SCHEMA.read_bytes()
    assert len(SOURCE_VECTORS) >= 36
    assert packaged == expected

    venv = tmp_path / "venv"
    checked([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    # On the free-threaded build the newest Hypothesis has no wheel and its source build
    # needs Rust crates: take the pins that differ there (what make freethreaded uses).
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    pins = ["-c", str(ROOT / "constraints-freethreaded.txt")] if free_threaded else []
    checked(
        [str(python), "-m", "pip", "install", "--quiet", *pins, f"{wheel}[conformance]"],
        tmp_path,
    )
    installed = checked([str(python), "-m", "pip", "list", "--format=freeze"], tmp_path)
    names = {line.split("==")[0].lower() for line in installed.splitlines()}
    assert {"kpurgatory", "hypothesis"} <= names
    assert not {"pytest", "mypy", "ruff", "crosshair-tool", "pyspark"} & names  # [conformance]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = checked([str(python), "-c", "import kpurgatory; print(kpurgatory.__file__)"], elsewhere)
    assert Path(where.strip()).is_relative_to(venv)

    kit = str(venv / "bin" / "kpurgatory")
    adapter = f"{python} -m kpurgatory.conformance.python_adapter --impl reference"
    out = checked([kit, "conformance", "--adapter", adapter], elsewhere)
    assert f"summary: {len(SOURCE_VECTORS)} passed, 0 failed, 0 not consumed" in out
    assert "step kinds never answered: none" in out

    search = ["--stateful", "--max-examples", "15", "--steps", "20", "--seed", "1"]
    out = checked([kit, "conformance", "--adapter", adapter, *search], elsewhere)
    assert "PASS stateful: no difference from the reference" in out
