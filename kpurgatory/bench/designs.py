"""Which build of ``kpurgatory.optimized`` runs here: pure Python or mypyc-compiled."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys

__all__ = ["build_label", "is_compiled"]


def is_compiled(package: str = "kpurgatory.optimized") -> bool:
    """Whether a module of ``package`` was loaded from a native extension (a mypyc build,
    ``KPURGATORY_COMPILE=1``); the pure-Python source is the fallback otherwise."""
    try:
        importlib.import_module(package)
    except ImportError:
        return False
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return any(
        (getattr(module, "__file__", None) or "").endswith(suffixes)
        for name, module in list(sys.modules.items())
        if name == package or name.startswith(package + ".")
    )


def build_label() -> str:
    """``"compiled"`` when the optimized package runs from mypyc extensions, else ``"pure"``."""
    return "compiled" if is_compiled() else "pure"
