"""Which build of kpurgatory a Python interpreter runs: what the pipeline's replay uses.

The pipeline's executors replay every stream through ``kpurgatory.optimized``, which
exists in two builds of the same source: the pure-Python one and the mypyc-compiled one
(``make compiled-venv``). Which one a worker runs depends on its interpreter *and* on
its ``sys.path`` (a source checkout on the path shadows an installed compiled package),
so the pipeline asks the interpreters themselves, with this module:

- ``optimized_build()``: ``"compiled"``, ``"pure"`` or ``"partly compiled"`` for the
  running process (cached: every stream row records it, at no cost per stream), from
  ``pure_modules()``, the build probe the benchmarks and CI's compiled job ask too;
- ``source_digest()``: a SHA-256 over the package's ``.py`` files (relative path and
  bytes), equal for a source tree, the wheel built from it (compiled or not: the wheel
  keeps every ``.py``) and the zip the driver ships to a cluster. Equal digests mean the
  executors replay the code the driver resolved, whatever the build;
- ``describe()``: both, plus the interpreter, its Python version, where ``kpurgatory``
  was imported from and which of the modules the replay needs (``REQUIRED_MODULES``)
  it lacks, as a JSON-ready dict.

Stdlib only and self-contained (no ``kpurgatory`` import at module level): the driver
runs this file's *source* in a candidate interpreter (``python -c``) whose kpurgatory
may be missing, broken or another version, and reads the JSON it prints.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import pkgutil
import platform
import socket
import sys
from importlib import resources
from typing import Any

__all__ = [
    "REQUIRED_MODULES",
    "describe",
    "optimized_build",
    "pure_modules",
    "source_digest",
    "worker_name",
]

REQUIRED_MODULES = ("pyarrow", "pandas")
"""What the replay stage imports in an executor besides kpurgatory (pyspark's own Python
modules come from Spark's installation, on the workers' PYTHONPATH)."""


def pure_modules(package: str = "kpurgatory.optimized") -> list[str]:
    """The build probe: the submodules of ``package`` NOT loaded from a native extension.

    Imports every submodule and returns ``"name (file)"`` for each one whose file is
    Python source; an empty list means every submodule is compiled (mypyc). The one
    answer to "is the optimized package compiled?" for the pipeline, the benchmarks
    (``kpurgatory bench``) and CI's compiled job (``python -m kpurgatory.bench.compiled_suite
    check``).
    """
    root = importlib.import_module(package)
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    pure = []
    for info in pkgutil.iter_modules(root.__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        origin = getattr(module, "__file__", None) or ""
        if not origin.endswith(suffixes):
            pure.append(f"{module.__name__} ({origin})")
    return pure


@functools.cache
def optimized_build() -> str:
    """The build of ``kpurgatory.optimized`` this process runs (``pure_modules``).

    ``"compiled"`` when every submodule was loaded from a native extension (mypyc),
    ``"pure"`` when none was, ``"partly compiled"`` otherwise (a broken install: some
    extension failed to load and Python fell back to its ``.py``). Cached: every
    stream row records it.
    """
    package = importlib.import_module("kpurgatory.optimized")
    modules = sum(1 for _ in pkgutil.iter_modules(package.__path__))
    pure = len(pure_modules())
    if pure == 0 and modules:
        return "compiled"
    return "pure" if pure == modules else "partly compiled"


@functools.cache
def source_digest() -> str:
    """SHA-256 (hex) over every ``.py`` file of the ``kpurgatory`` package this process
    imports: its path relative to the package and its bytes, in path order.

    Reads through ``importlib.resources``, so it works for a directory and for the zip
    the driver ships with ``addPyFile`` alike.
    """
    digest = hashlib.sha256()
    stack = [("", resources.files("kpurgatory"))]
    files: list[tuple[str, Any]] = []
    while stack:
        prefix, folder = stack.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                if entry.name != "__pycache__":
                    stack.append((f"{prefix}{entry.name}/", entry))
            elif entry.name.endswith(".py"):
                files.append((f"{prefix}{entry.name}", entry))
    for relative, entry in sorted(files, key=lambda item: item[0]):
        digest.update(relative.encode())
        digest.update(b"\0")
        digest.update(entry.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def worker_name() -> str:
    """``host:pid`` of this process: which Python worker replayed a stream."""
    return f"{socket.gethostname()}:{os.getpid()}"


def describe() -> dict[str, Any]:
    """This interpreter as the pipeline sees it (every value JSON-ready).

    Keys: ``executable``, ``python`` (x.y.z), ``worker`` (host:pid), ``missing`` (the
    ``REQUIRED_MODULES`` it cannot import), and, if ``kpurgatory`` imports,
    ``kpurgatory_version``, ``kpurgatory_path`` (its package folder), ``build`` and
    ``digest``; else ``error`` (why it does not import).
    """
    found: dict[str, Any] = {
        "executable": sys.executable,
        "python": platform.python_version(),
        "worker": worker_name(),
        "missing": [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None],
    }
    try:
        kpurgatory = importlib.import_module("kpurgatory")
        found["kpurgatory_version"] = str(getattr(kpurgatory, "__version__", "?"))
        found["kpurgatory_path"] = os.path.dirname(kpurgatory.__file__ or "?")
        found["build"] = optimized_build()
        found["digest"] = source_digest()
    except Exception as exc:  # any import failure is what the driver must report
        found["error"] = f"cannot import kpurgatory: {type(exc).__name__}: {exc}"
    return found


if __name__ == "__main__":  # python -c "<this file's source>": the driver's probe
    print(json.dumps(describe()))
