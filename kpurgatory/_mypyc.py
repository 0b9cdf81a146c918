"""``mypyc_attr`` for the compiled classes, without making ``mypy_extensions`` a dependency.

The compiled classes are the optimized ones and the shared protocol's ``Purgatory``.

mypyc reads ``@mypyc_attr(allow_interpreted_subclasses=True)`` when it compiles the
package (``KPURGATORY_COMPILE=1``), so users can still subclass ``TimerTask`` and
``DelayedOperation`` in plain Python. The pure package runs without ``mypy_extensions``:
then the decorator is a no-op. (An ``if TYPE_CHECKING`` split does not work here: mypyc
compiles the other branch as unreachable and the compiled module fails to import.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import IdentityFunction

__all__ = ["mypyc_attr", "trait"]

_C = TypeVar("_C")

try:
    from mypy_extensions import mypyc_attr, trait
except ImportError:  # pragma: no cover - only without mypy_extensions installed

    def trait(cls: _C) -> _C:
        """A no-op stand-in for ``mypy_extensions.trait`` (a class decorator)."""
        return cls

    def mypyc_attr(*attrs: str, **kwattrs: object) -> IdentityFunction:
        """A no-op stand-in for ``mypy_extensions.mypyc_attr`` (a class decorator)."""

        def unchanged(cls: _C) -> _C:
            return cls

        return unchanged
