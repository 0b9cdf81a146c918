"""Applying a seeded mutant: a one-line change of a function's source, patched in and out.

Each ``Mutant`` names a function or method of the optimized package, an exact fragment of
its source, and the fragment's replacement. ``applied(mutant)`` rebuilds the function
from its source with that one change (``inspect.getsource`` + text replacement +
``compile``/``exec`` in the defining module's namespace, so globals resolve as in the
original), swaps it in for the duration of a ``with`` block, and restores the original
afterwards. A target the named class inherits (the shared protocol's methods) is
planted on that class alone. It raises ``MutantError`` if the target is gone or the
fragment does not occur exactly once, so a refactor of the optimized code cannot
silently disarm a mutant: the test that checks every mutant is armed fails instead, and
the catalog must be adapted to the new code.

The mutants themselves are in ``tests.mutants.catalog``.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import inspect
import textwrap
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any, Literal

MachineName = Literal["timer", "purgatory"]

BUCKET = "kpurgatory.optimized.bucket"
WHEEL = "kpurgatory.optimized.wheel"
QUEUE = "kpurgatory.optimized.delay_queue"
TIMER = "kpurgatory.optimized.timer"
OPERATION = "kpurgatory.optimized.operation"
PURGATORY = "kpurgatory.optimized.purgatory"
"""The optimized package's modules the mutants and port bugs edit."""


class MutantError(Exception):
    """A mutant cannot be applied: its target or its source fragment is not there."""


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace ``old`` by ``new`` (exactly once) in ``module.target``.

    ``target`` is ``"function"`` or ``"Class.method"`` (a property's getter is patched
    through the property). ``machines`` lists the equivalence machines run against it,
    in order; the first to fail catches it.
    """

    name: str
    module: str
    target: str
    old: str
    new: str
    description: str
    machines: tuple[MachineName, ...] = ("timer", "purgatory")


def _resolve(mutant: Mutant) -> tuple[ModuleType, Any, str, Any, bool]:
    """(module, owner, attribute name, raw attribute, inherited) of the mutant's target.

    A method the named class inherits (the purgatory protocol of ``kpurgatory.protocol``,
    which both purgatories derive from) is found in the class that defines it: the
    module is that class's (its globals), and the mutant is planted on the named class
    alone, so the other implementation keeps the correct code (``inherited``)."""
    try:
        module = importlib.import_module(mutant.module)
    except ImportError as exc:
        raise MutantError(f"{mutant.name}: module {mutant.module} not importable: {exc}") from exc
    owner: Any = module
    parts = mutant.target.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            raise MutantError(f"{mutant.name}: {mutant.module}.{mutant.target} not found")
    attr = parts[-1]
    namespace = vars(owner)
    if attr in namespace:
        return module, owner, attr, namespace[attr], False
    for base in owner.__mro__[1:] if isinstance(owner, type) else ():
        if attr in vars(base):
            defining = importlib.import_module(base.__module__)
            return defining, owner, attr, vars(base)[attr], True
    raise MutantError(
        f"{mutant.name}: {mutant.module}.{mutant.target} not found (not defined there)"
    )


def _function_of(raw: Any, mutant: Mutant) -> FunctionType:
    """The plain function behind a function, method, static/class method or property."""
    if isinstance(raw, property):
        raw = raw.fget
    elif isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    if not isinstance(raw, FunctionType):
        raise MutantError(
            f"{mutant.name}: {mutant.target} is a {type(raw).__name__}, not a Python "
            "function (a compiled build cannot be mutated)"
        )
    return raw


def mutated_source(mutant: Mutant) -> tuple[str, str]:
    """(original source, mutated source) of the target; ``MutantError`` unless the
    fragment occurs exactly once."""
    _, _, _, raw, _ = _resolve(mutant)
    function = _function_of(raw, mutant)
    source = textwrap.dedent(inspect.getsource(function))
    count = source.count(mutant.old)
    if count != 1:
        raise MutantError(
            f"{mutant.name}: fragment {mutant.old!r} occurs {count} times in "
            f"{mutant.module}.{mutant.target}, expected exactly once"
        )
    return source, source.replace(mutant.old, mutant.new)


def _build(mutant: Mutant, module: ModuleType, owner: Any, raw: Any, source: str) -> Any:
    """Compile ``source`` (one def) into a replacement for ``raw``.

    The def is wrapped in a factory taking ``__class__``, so zero-argument ``super()``
    inside a method still finds its class; the function's globals are the defining
    module's namespace; decorators are dropped and the original wrapper (property,
    staticmethod, classmethod) is rebuilt around the new function.
    """
    tree = ast.parse(source)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise MutantError(f"{mutant.name}: {mutant.target} is not a single def")
    function_def = tree.body[0]
    function_def.decorator_list = []
    factory = ast.FunctionDef(
        name="__mutant_factory__",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg="__class__")],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[function_def, ast.Return(value=ast.Name(id=function_def.name, ctx=ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    wrapper = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(wrapper)
    code = compile(
        wrapper,
        f"<mutant {mutant.name}: {mutant.module}.{mutant.target}>",
        "exec",
        flags=__future__.annotations.compiler_flag,  # annotations stay strings, as in the module
        dont_inherit=True,
    )
    scope: dict[str, Any] = {}
    exec(code, vars(module), scope)
    original = _function_of(raw, mutant)
    new_function = scope["__mutant_factory__"](owner if isinstance(owner, type) else None)
    new_function.__qualname__ = original.__qualname__
    new_function.__module__ = original.__module__
    new_function.__defaults__ = original.__defaults__
    new_function.__kwdefaults__ = original.__kwdefaults__
    if isinstance(raw, property):
        return property(new_function, raw.fset, raw.fdel, raw.__doc__)
    if isinstance(raw, staticmethod):
        return staticmethod(new_function)
    if isinstance(raw, classmethod):
        return classmethod(new_function)
    return new_function


@contextmanager
def applied(mutant: Mutant) -> Iterator[Any]:
    """Swap the mutated function in for the ``with`` block; yields the replacement.

    The original attribute is restored on exit, even if the block raised.
    """
    module, owner, attr, raw, inherited = _resolve(mutant)
    _, new_source = mutated_source(mutant)
    replacement = _build(mutant, module, owner, raw, new_source)
    setattr(owner, attr, replacement)
    try:
        yield replacement
    finally:
        if inherited:
            delattr(owner, attr)  # the named class inherits the original again
        else:
            setattr(owner, attr, raw)


@contextmanager
def applied_together(edits: Iterable[Mutant]) -> Iterator[None]:
    """Apply every edit for the ``with`` block; the edits of one function are combined
    into one replacement, so a function may carry several."""
    with ExitStack() as stack:
        by_target: dict[tuple[str, str], list[Mutant]] = {}
        for edit in edits:
            by_target.setdefault((edit.module, edit.target), []).append(edit)
        for same in by_target.values():
            stack.enter_context(applied(_combined(same)))
        yield


def _combined(edits: list[Mutant]) -> Mutant:
    """One mutant for several edits of one function: the first edit's fragment widened to
    the whole function's source, with every edit applied to it."""
    if len(edits) == 1:
        return edits[0]
    source, _ = mutated_source(edits[0])
    new = source
    for edit in edits:
        if new.count(edit.old) != 1:
            raise ValueError(f"{edit.name}: fragment {edit.old!r} does not occur once")
        new = new.replace(edit.old, edit.new)
    return Mutant(edits[0].name, edits[0].module, edits[0].target, source, new, "")
