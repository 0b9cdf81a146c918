"""The designs the benchmarks compare, each an implementation package with the same API.

A design is a module exporting ``SystemTimer``, ``TimerTask``, ``DelayedOperation`` and
``DelayedOperationPurgatory`` with the reference's signatures, so every benchmark drives
it through the same calls. ``optimized`` is listed only once its package is complete
(another engineer may be writing it while the benchmarks are developed).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType

__all__ = [
    "ALL_DESIGNS",
    "API_NAMES",
    "available_designs",
    "build_label",
    "is_compiled",
    "load_design",
]

DESIGN_MODULES: dict[str, str] = {
    "optimized": "kpurgatory.optimized",
    "heap": "kpurgatory.bench.baselines.heap",
    "old": "kpurgatory.bench.baselines.old",
    "reference": "kpurgatory.reference",
}
"""Design name -> module, in the order tables and plots list them."""

ALL_DESIGNS: tuple[str, ...] = tuple(DESIGN_MODULES)

API_NAMES: tuple[str, ...] = (
    "SystemTimer",
    "TimerTask",
    "DelayedOperation",
    "DelayedOperationPurgatory",
)
"""The four public names every design exports."""


def load_design(name: str) -> ModuleType:
    """The module of design ``name``; ``ValueError`` for an unknown name, ``ImportError`` if
    the design is not importable or lacks one of ``API_NAMES``."""
    if name not in DESIGN_MODULES:
        raise ValueError(f"design must be one of {', '.join(ALL_DESIGNS)}, got {name!r}")
    module = importlib.import_module(DESIGN_MODULES[name])
    missing = [attr for attr in API_NAMES if not hasattr(module, attr)]
    if missing:
        raise ImportError(f"design {name!r} ({module.__name__}) lacks {', '.join(missing)}")
    return module


def available_designs() -> list[str]:
    """The designs importable here with the whole API, in ``ALL_DESIGNS`` order."""
    names = []
    for name in ALL_DESIGNS:
        try:
            load_design(name)
        except ImportError:
            continue
        names.append(name)
    return names


def is_compiled(package: str = "kpurgatory.optimized") -> bool:
    """Whether any already-imported module of ``package`` was loaded from a native extension.

    True only for a mypyc build (``KPURGATORY_COMPILE=1``); the pure-Python source is the
    fallback whenever no extension module is present.
    """
    try:
        importlib.import_module(package)
    except ImportError:
        return False
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for module_name, module in list(sys.modules.items()):
        if module_name == package or module_name.startswith(package + "."):
            origin = getattr(module, "__file__", None) or ""
            if origin.endswith(suffixes):
                return True
    return False


def build_label() -> str:
    """``"compiled"`` when the optimized package runs from mypyc extensions, else ``"pure"``."""
    return "compiled" if is_compiled() else "pure"
