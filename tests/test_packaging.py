"""Packaging metadata: one version, a pure build without mypy, ranges for users, pins for CI.

The wheel itself is built and installed in a fresh venv by ``scripts/check_wheel.sh``
(``make wheel-check``, a CI job in .ci/run; ``test_wheel_installs_in_a_fresh_venv``
here runs it under ``-m slow``).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import kpurgatory
from kpurgatory.cli import main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "constraints.txt"

needs_source = pytest.mark.skipif(
    not PYPROJECT.exists() or not CONSTRAINTS.exists(), reason="not a source checkout"
)


def project() -> dict[str, object]:
    table: dict[str, object] = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return table


def requirement_name(requirement: str) -> str:
    """The normalized distribution name of a requirement string."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def test_version_is_the_installed_metadata() -> None:
    """``__version__`` is read from the installed distribution (written once, in pyproject)."""
    assert kpurgatory.__version__ == importlib.metadata.version("kpurgatory")
    source = (Path(kpurgatory.__file__).parent / "__init__.py").read_text(encoding="utf-8")
    assert not re.search(r"__version__\s*=\s*['\"]\d+\.\d", source), "version written by hand"


def test_cli_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``kpurgatory --version`` prints the version and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"kpurgatory {kpurgatory.__version__}"


@needs_source
def test_pure_build_needs_only_setuptools() -> None:
    """The build requirements hold setuptools >= 77 (SPDX license) and no mypy: only the
    compiled build needs mypyc, and the Makefile installs it for that build."""
    table = project()
    build = table["build-system"]
    assert isinstance(build, dict)
    assert build["requires"] == ["setuptools>=77"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "--no-build-isolation" in makefile
    assert "setuptools mypy" in makefile


@needs_source
def test_extras_give_ranges_and_constraints_pin_them() -> None:
    """No extra pins an exact version; constraints.txt pins every extra's package exactly."""
    table = project()
    meta = table["project"]
    assert isinstance(meta, dict)
    pins = {
        requirement_name(line): line.split("==", 1)[1]
        for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    for extra, requirements in meta["optional-dependencies"].items():
        for requirement in requirements:
            assert "==" not in requirement, f"extra {extra} pins {requirement}"
            assert requirement_name(requirement) in pins, f"{requirement} not in constraints"


@needs_source
def test_license_urls_and_classifiers() -> None:
    """Apache-2.0: the SPDX field, the full license text shipped, URLs and classifiers set."""
    meta = project()["project"]
    assert isinstance(meta, dict)
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert meta["urls"]
    assert "Typing :: Typed" in meta["classifiers"]
    assert not any(c.startswith("License ::") for c in meta["classifiers"])  # PEP 639


@pytest.mark.slow
@needs_source
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_wheel_installs_in_a_fresh_venv(tmp_path: Path) -> None:
    """scripts/check_wheel.sh: build the pure wheel, install it in a fresh venv, import it,
    run ``kpurgatory --version`` and check the library's typing from outside."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check_wheel.sh"), str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kpurgatory {kpurgatory.__version__}" in done.stdout


@needs_source
def test_readme_keeps_two_setup_commands_and_gives_pip_routes() -> None:
    """README: the "Set up" block has exactly ``make run`` and ``make test``; beside it one
    ``pip install`` line for library users and one for the compiled build."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", setup, re.S)
    assert block
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert [command for command in commands if command] == ["make run", "make test"]
    assert "`pip install .`" in readme
    assert "KPURGATORY_COMPILE=1 pip install --no-build-isolation ." in readme
