"""Argument types for the public signatures: precise for users' checkers, ``object`` to mypyc.

Why: mypyc turns every annotation of a compiled function into a run-time check made
before the function body runs, with a message that names no argument ("str object
expected; got int"), and it lets ``True`` through as an ``int``. The project's rule R35
wants every refusal to name the argument, in the pure and the compiled build alike, so
the bodies validate their arguments themselves (``kpurgatory._checks``). The annotations
must therefore be types mypyc does not check, while a user's type checker still flags
``SystemTimer("x", tick_ms="5")``.

A *value-restricted* type variable does both: mypy and other checkers accept exactly the
listed types (``IntArg`` accepts an ``int``, so a ``str`` is flagged as ``Value of type
variable "IntArg" ... cannot be "str"  [type-var]``), and mypyc erases a value-restricted
type variable to ``object`` (its upper bound), so the compiled function runs the body's
own checks. Zero cost on the hot path: the compiled code is the one an ``object``
annotation gives. (A single ``typing.overload`` works for methods too, but mypyc 2.4.1
cannot compile an overloaded ``__init__``; see docs/verification.md.)

``TypeVar`` (with a PEP 696 ``default=``) is for the purgatories' operation parameter: a
checker sees ``typing_extensions.TypeVar`` (typeshed knows it, nothing is imported at run
time), the runtime gets ``typing.TypeVar`` without the default where Python < 3.13 has
none. The core stays free of run-time dependencies.
"""

from __future__ import annotations

import sys
import typing
from typing import TYPE_CHECKING

__all__ = ["BoolArg", "IntArg", "StrArg", "TypeVar"]

IntArg = typing.TypeVar("IntArg", int, int)
"""An ``int`` argument (``bool`` is refused at run time, R35); ``IntArg | None`` for an
optional one (a ``None`` default does not fit a constrained type variable)."""

StrArg = typing.TypeVar("StrArg", str, str)
"""A ``str`` argument."""

BoolArg = typing.TypeVar("BoolArg", bool, bool)
"""A ``bool`` argument."""

if TYPE_CHECKING:
    from typing_extensions import TypeVar as TypeVar
else:

    def TypeVar(name, *constraints, default=None, **kwargs):  # noqa: N802 - typing's name
        """``typing.TypeVar``, passing ``default`` only where the runtime supports it."""
        if default is not None and sys.version_info >= (3, 13):
            kwargs["default"] = default
        return typing.TypeVar(name, *constraints, **kwargs)
