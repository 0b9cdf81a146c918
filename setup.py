"""Build script. Pure Python by default; ``KPURGATORY_COMPILE=1`` compiles the optimized package.

With ``KPURGATORY_COMPILE=1`` the modules of ``kpurgatory/optimized/`` (except its
``__init__``) are compiled to C extensions with mypyc (shipped with mypy). mypy is not
in pyproject.toml's ``[build-system] requires`` (a pure build must not need it): install
it in the build environment and build without isolation, as ``make compiled-venv`` does:
``pip install setuptools mypy`` then ``KPURGATORY_COMPILE=1 pip wheel --no-deps
--no-build-isolation -w dist .`` (``make compiled-test`` also runs the whole suite
against the result). Nothing else is compiled: the pure-Python source stays the source
of truth, and the wheel still carries every ``.py`` file, so a platform without the
extensions falls back to them. Never compile in place (``pip install -e``
with the flag): the ``.so`` files would shadow later edits of the ``.py`` files.

Package data: the committed conformance vectors and their JSON Schema live in the
repository's ``conformance/`` (their only source, edited through ``kpurgatory pipeline
vectors``). ``build_py`` copies them into ``kpurgatory/conformance/data/`` of the build,
so every wheel carries them and ``kpurgatory conformance`` finds them from any directory
(``kpurgatory.conformance.vectors.conformance_root``). Nothing is copied in the source
tree, and an editable install reads the checkout's ``conformance/`` directly.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

COMPILE_ENV = "KPURGATORY_COMPILE"
"""Set to 1 to compile ``kpurgatory.optimized`` with mypyc."""

HERE = Path(__file__).resolve().parent

CONFORMANCE_DATA: dict[str, str] = {"vectors": "*.json", "schema": "*.json"}
"""Folders of the repository's ``conformance/`` shipped as package data, with their files."""

PACKAGED_DATA_DIR = Path("kpurgatory", "conformance", "data")
"""Where they go inside the built package (relative to the build's ``lib`` folder)."""


def copy_conformance_data(source: Path, build_lib: Path) -> list[Path]:
    """Replace ``build_lib``'s packaged conformance data with ``source``'s files; return them.

    The target folder is emptied first, so a vector deleted from ``conformance/`` does not
    survive in a reused build folder. ``SystemExit`` if ``source`` has no vectors or schema
    (a wheel without them would be a broken kit).
    """
    target = build_lib / PACKAGED_DATA_DIR
    shutil.rmtree(target, ignore_errors=True)
    written: list[Path] = []
    for folder, pattern in CONFORMANCE_DATA.items():
        files = sorted((source / folder).glob(pattern))
        if not files:
            raise SystemExit(f"package data: no {pattern} files in {source / folder}")
        (target / folder).mkdir(parents=True, exist_ok=True)
        for path in files:
            written.append(Path(shutil.copy2(path, target / folder / path.name)))
    return written


class BuildPyWithConformanceData(build_py):
    """``build_py`` that also copies the conformance vectors and schema into the package."""

    def run(self) -> None:
        """Build the modules, then add the data (not for an editable install: it reads
        the checkout's ``conformance/`` in place)."""
        super().run()
        if not getattr(self, "editable_mode", False):
            copy_conformance_data(HERE / "conformance", Path(self.build_lib))


def compiled_sources() -> list[str]:
    """The modules mypyc compiles (relative paths, sorted): the optimized package's and
    the purgatory protocol both purgatories share (``kpurgatory/protocol.py``)."""
    folder = HERE / "kpurgatory" / "optimized"
    optimized = [path for path in folder.glob("*.py") if path.name != "__init__.py"]
    return sorted(
        str(path.relative_to(HERE)) for path in [*optimized, HERE / "kpurgatory" / "protocol.py"]
    )


def ext_modules() -> list[object]:
    """mypyc extensions when ``KPURGATORY_COMPILE`` is 1/true/yes, else none (pure build)."""
    if os.environ.get(COMPILE_ENV, "").strip().lower() not in ("1", "true", "yes"):
        return []
    sources = compiled_sources()
    if not sources:
        raise SystemExit(f"{COMPILE_ENV}=1 but kpurgatory/optimized/ has no modules to compile")
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        raise SystemExit(
            f"{COMPILE_ENV}=1 needs mypyc in the build environment: pip install mypy, then "
            f"build with --no-build-isolation: {exc}"
        ) from exc
    os.chdir(HERE)  # mypycify takes paths relative to the project root
    extensions: list[object] = mypycify(sources, opt_level="3", target_dir="build/mypyc")
    return extensions


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__
    setup(ext_modules=ext_modules(), cmdclass={"build_py": BuildPyWithConformanceData})
