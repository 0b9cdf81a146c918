"""The mypyc build of ``kpurgatory.optimized``: copy the test tree, check, run the suite on it.

``make compiled-test`` builds the compiled wheel (``KPURGATORY_COMPILE=1``, setup.py)
into its own venv, then uses this module to run the whole suite against it:

- ``copy-tree DEST``: copy the project's tracked files *except* ``kpurgatory/`` into
  DEST, so pytest run there imports the installed (compiled) package and never the
  source tree (which would shadow it: pytest puts the rootdir on ``sys.path``);
- ``check``: exit 1 unless ``kpurgatory.optimized`` really runs from extension modules
  (a silent fallback to pure Python would make the compiled job test nothing).

Run ``check`` from a folder outside the source tree (``python -m`` puts the current
folder first on ``sys.path``). Stdlib only (``kpurgatory.pipeline.builds`` is too): it
runs before any extra is installed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from kpurgatory.pipeline.builds import pure_modules

__all__ = ["EXCLUDED_TOP_LEVEL", "check", "copy_tree", "tracked_files"]

EXCLUDED_TOP_LEVEL = ("kpurgatory", ".git", ".venv", "build", "dist", "site", "out")
"""Top-level entries never copied into the test tree."""

FALLBACK_ENTRIES = (
    "tests",
    "docs",
    "examples",
    "conformance",
    "pyproject.toml",
    "README.md",
    "mkdocs.yml",
)
"""What to copy when the source is not a git checkout."""


def tracked_files(root: Path) -> list[Path]:
    """Files to copy from ``root``: git's tracked files, else ``FALLBACK_ENTRIES`` walked."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        )
        names = [name for name in done.stdout.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        names = []
        for entry in FALLBACK_ENTRIES:
            path = root / entry
            if path.is_file():
                names.append(entry)
            elif path.is_dir():
                names += [str(p.relative_to(root)) for p in path.rglob("*") if p.is_file()]
    return [
        Path(name)
        for name in sorted(names)
        if Path(name).parts and Path(name).parts[0] not in EXCLUDED_TOP_LEVEL
    ]


def copy_tree(root: Path, dest: Path) -> int:
    """Replace ``dest`` with a copy of ``root``'s files minus the package; return the count."""
    source, target = root.resolve(), dest.resolve()
    protected = [source / name for name in ("kpurgatory", "tests", "docs")]
    if (
        target == source
        or target in source.parents
        or any(target == path or path in target.parents for path in protected)
    ):
        raise ValueError(f"dest must lie outside the source tree's package and tests: {dest}")
    if dest.exists():
        shutil.rmtree(dest)
    files = tracked_files(root)
    for name in files:
        source = root / name
        if not source.is_file():
            continue  # deleted in the work tree but still tracked
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return len(files)


def check(package: str = "kpurgatory.optimized") -> list[str]:
    """Import every module of ``package``; return those NOT loaded from an extension
    (``kpurgatory.pipeline.builds.pure_modules``, the one build probe)."""
    return pure_modules(package)


def protocol_is_compiled() -> bool:
    """Whether ``kpurgatory.protocol``, the purgatory protocol both purgatories share, was
    loaded from an extension (it is compiled with the optimized package)."""
    origin = getattr(importlib.import_module("kpurgatory.protocol"), "__file__", None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kpurgatory.bench.compiled_suite {copy-tree DEST | check}``."""
    parser = argparse.ArgumentParser(prog="python -m kpurgatory.bench.compiled_suite")
    commands = parser.add_subparsers(dest="command", required=True)
    copy_parser = commands.add_parser("copy-tree", help="copy the test tree without the package")
    copy_parser.add_argument("dest", type=Path)
    copy_parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    commands.add_parser("check", help="fail unless the optimized package and protocol are compiled")
    args = parser.parse_args(argv)
    if args.command == "copy-tree":
        count = copy_tree(args.root, args.dest)
        print(f"copied {count} files from {args.root} to {args.dest} (without kpurgatory/)")
        return 0
    pure = check() + ([] if protocol_is_compiled() else ["kpurgatory.protocol"])
    origin = Path(importlib.import_module("kpurgatory").__file__ or "?").parent
    if pure:
        print(f"not compiled (kpurgatory from {origin}): {', '.join(pure)}", file=sys.stderr)
        return 1
    print(f"kpurgatory.optimized and kpurgatory.protocol are compiled (from {origin})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
