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
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

COMPILE_ENV = "KPURGATORY_COMPILE"
"""Set to 1 to compile ``kpurgatory.optimized`` with mypyc."""

HERE = Path(__file__).resolve().parent


def compiled_sources() -> list[str]:
    """The optimized package's modules mypyc compiles (relative paths, sorted)."""
    folder = HERE / "kpurgatory" / "optimized"
    return sorted(
        str(path.relative_to(HERE)) for path in folder.glob("*.py") if path.name != "__init__.py"
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
    setup(ext_modules=ext_modules())
