"""``mypyc_attr`` for the optimized classes: ``kpurgatory._mypyc``'s (the shared protocol
uses it too, and imports nothing of this package)."""

from __future__ import annotations

from kpurgatory._mypyc import mypyc_attr

__all__ = ["mypyc_attr"]
