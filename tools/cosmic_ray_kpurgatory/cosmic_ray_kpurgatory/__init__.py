"""Statement-removal and lock-removal mutation operators for cosmic-ray (8.7).

cosmic-ray's core operators swap operators, numbers and keywords; none deletes a
statement or a lock, the two kinds of bug an outside mutation run found surviving
kpurgatory's suite (a reset dropped from a rollback; a counter updated without its
lock). These operators make those mutants. cosmic-ray finds them through this
distribution's ``cosmic_ray.operator_providers`` entry point, under the provider name
``kpurgatory``, so every session ``make mutation`` initialises lists them too:

``kpurgatory/RemoveStatement``
    One simple statement inside a function body replaced by ``pass``: an assignment
    (plain, augmented, or annotated with a value), an expression statement (a call, an
    ``await``) or a ``del``. Not a ``return``, ``raise``, ``yield``, ``assert``,
    ``import``, ``global``/``nonlocal``, ``pass``/``break``/``continue``, a docstring or
    any other lone name or literal (no effect to remove, or a change of control flow
    that other operators make), nor a statement at module or class level (removing one
    breaks the import, or drops a declaration).
``kpurgatory/RemoveLock``
    One lock of a ``with`` statement removed: the statement becomes ``if True:`` over
    the same body when the lock is its only item, else the item is dropped. A lock is
    an item without ``as`` that is a dotted name whose last part names a lock
    (``lock``, ``mutex``, ``_flags``, ``_cond``/``_condition``): ``with self._lock:``,
    ``with shard.lock:``, ``with _STATE_LOCK:``.
``kpurgatory/RemoveAcquireRelease``
    An ``X.acquire()`` statement and the first ``X.release()`` statement after it in
    the same function (same ``X``, as written) both replaced by ``pass``. An
    ``acquire`` whose result is used (``if X.acquire(blocking=False):``) is not paired.

Each operator's ``examples()`` is what its unit tests check (tests/
test_mutation_operators.py); docs/verification.md, "Mutation score", says how the
project uses them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from cosmic_ray.operators.operator import Example, Operator
from parso.python.tree import Keyword
from parso.tree import BaseNode, Leaf

__all__ = ["OperatorProvider", "RemoveAcquireRelease", "RemoveLock", "RemoveStatement"]

Position = tuple[tuple[int, int], tuple[int, int]]

_NOT_REMOVED = frozenset(
    {
        "return_stmt",
        "raise_stmt",
        "yield_expr",
        "assert_stmt",
        "import_name",
        "import_from",
        "global_stmt",
        "nonlocal_stmt",
        "strings",
        "fstring",
    }
)
"""Statement kinds RemoveStatement leaves alone (besides every lone leaf)."""

_LOCK_NAME = re.compile(r"lock|mutex|^_?flags$|^_?cond(ition)?$", re.IGNORECASE)


def _in_function(node: Any) -> bool:
    """Whether ``node``'s nearest enclosing scope is a function body."""
    parent = node.parent
    while parent is not None:
        if parent.type == "funcdef":
            return True
        if parent.type in ("classdef", "file_input"):
            return False
        parent = parent.parent
    return False


def _is_statement(node: Any) -> bool:
    """Whether ``node`` is one statement of a simple-statement line (``a; b`` has two)."""
    parent = node.parent
    return (
        parent is not None
        and parent.type == "simple_stmt"
        and node.type not in ("newline", "operator")  # the line's end, a ``;``
    )


def _pass_for(node: Any) -> Keyword:
    """A ``pass`` that takes ``node``'s place (and its leading whitespace)."""
    leaf = Keyword("pass", node.start_pos, prefix=node.get_first_leaf().prefix)
    leaf.parent = node.parent
    return leaf


def _removable(node: Any) -> bool:
    if isinstance(node, Leaf) or not _is_statement(node) or node.type in _NOT_REMOVED:
        return False
    if node.type == "expr_stmt" and node.children[1].type == "annassign":
        valued = any(_text(child) == "=" for child in node.children[1].children)
        if not valued:  # ``x: int``: a declaration, nothing runs
            return False
    return _in_function(node)


def _text(node: Any) -> str:
    """``node``'s code without spaces or comments (``self . _lock`` is ``self._lock``)."""
    if isinstance(node, Leaf):
        return str(node.value)
    return "".join(_text(child) for child in node.children)


class RemoveStatement(Operator):  # type: ignore[misc]
    """One simple statement in a function body replaced by ``pass``."""

    def mutation_positions(self, node: Any) -> Iterator[Position]:
        if _removable(node):
            yield (node.start_pos, node.end_pos)

    def mutate(self, node: Any, index: int) -> Any:
        assert index == 0
        return _pass_for(node)

    @classmethod
    def examples(cls) -> tuple[Example, ...]:
        return (
            Example("def f():\n    x = 1\n", "def f():\n    pass\n"),
            Example("def f(s):\n    s.n += 1\n", "def f(s):\n    pass\n"),
            Example("def f(s):\n    s.keys: tuple = ()\n", "def f(s):\n    pass\n"),
            Example("def f(s):\n    s.reset()  # why\n", "def f(s):\n    pass  # why\n"),
            Example("async def f(s):\n    await s.go()\n", "async def f(s):\n    pass\n"),
            Example("def f(d):\n    del d[0]\n", "def f(d):\n    pass\n"),
            Example("def f(a):\n    a.x = 1; a.y = 2\n", "def f(a):\n    a.x = 1; pass\n", 1),
            Example(
                "def f(a):\n    if a:\n        a.go()\n    return a\n",
                "def f(a):\n    if a:\n        pass\n    return a\n",
            ),
        )


def _with_items(node: Any) -> list[Any]:
    """The items of a ``with`` statement, in order."""
    return [child for child in node.children[1:-2] if child.type != "operator"]


def _is_lock(item: Any) -> bool:
    """Whether a ``with`` item is a lock: no ``as``; a dotted name naming a lock."""
    if item.type == "name":
        return bool(_LOCK_NAME.search(item.value))
    if item.type not in ("atom_expr", "power") or item.children[0].type != "name":
        return False
    trailers = item.children[1:]
    if not all(
        trailer.type == "trailer"
        and trailer.children[0].type == "operator"
        and trailer.children[0].value == "."
        for trailer in trailers
    ):
        return False
    return bool(_LOCK_NAME.search(trailers[-1].children[1].value))


class RemoveLock(Operator):  # type: ignore[misc]
    """One lock of a ``with`` statement removed (``if True:`` when it was the only item)."""

    def mutation_positions(self, node: Any) -> Iterator[Position]:
        if node.type != "with_stmt":
            return
        # listed first: ``mutate`` rewrites the node while cosmic-ray still counts positions
        locks = [item for item in _with_items(node) if _is_lock(item)]
        for item in locks:
            yield (item.start_pos, item.end_pos)

    def mutate(self, node: Any, index: int) -> Any:
        items = _with_items(node)
        lock = [item for item in items if _is_lock(item)][index]
        if len(items) == 1:
            keyword, prefix = node.children[0], lock.get_first_leaf().prefix
            node.children[0] = Keyword("if", keyword.start_pos, prefix=keyword.prefix)
            node.children[1] = Keyword("True", lock.start_pos, prefix=prefix)
            for child in node.children[:2]:
                child.parent = node
            return node
        at = node.children.index(lock)
        if lock is items[0]:  # ``with lock, other:``: the comma after it goes too
            node.children[at + 2].get_first_leaf().prefix = lock.get_first_leaf().prefix
            del node.children[at : at + 2]
        else:  # the comma before it goes too
            del node.children[at - 1 : at + 1]
        return node

    @classmethod
    def examples(cls) -> tuple[Example, ...]:
        return (
            Example(
                "def f(s):\n    with s._lock:\n        s.n += 1\n",
                "def f(s):\n    if True:\n        s.n += 1\n",
            ),
            Example(
                "def f(shard):\n    with shard.lock:  # the shard's\n        pass\n",
                "def f(shard):\n    if True:  # the shard's\n        pass\n",
            ),
            Example(
                "def f():\n    with _STATE_LOCK:\n        g()\n",
                "def f():\n    if True:\n        g()\n",
            ),
            Example(
                "def f(s):\n    with s._flags:\n        g()\n",
                "def f(s):\n    if True:\n        g()\n",
            ),
            Example(
                "def f(a, s):\n    with a.lock, s._counters_lock:\n        g()\n",
                "def f(a, s):\n    with s._counters_lock:\n        g()\n",
            ),
            Example(
                "def f(a, s):\n    with a.lock, s._counters_lock:\n        g()\n",
                "def f(a, s):\n    with a.lock:\n        g()\n",
                1,
            ),
            Example(
                "def f(p, s):\n    with open(p), s.lock:\n        g()\n",
                "def f(p, s):\n    with open(p):\n        g()\n",
            ),
        )


def _release_call(node: Any, method: str) -> str | None:
    """``X`` if ``node`` is the statement ``X.<method>()``, else None."""
    if node.type not in ("atom_expr", "power") or not _is_statement(node):
        return None
    *receiver, name, call = node.children
    if not receiver or _text(call) != "()" or _text(name) != f".{method}":
        return None
    return "".join(_text(part) for part in receiver)


def _statements_after(node: Any) -> Iterator[Any]:
    """The statements of ``node``'s function after ``node``, in source order, outside
    any nested function, class or lambda."""
    scope = node.parent
    while scope.type != "funcdef":
        scope = scope.parent

    def walk(current: Any) -> Iterator[Any]:
        for child in current.children:
            if child.type in ("funcdef", "classdef", "lambdef", "async_funcdef"):
                continue
            if _is_statement(child) and child.start_pos > node.start_pos:
                yield child
            if isinstance(child, BaseNode):
                yield from walk(child)

    yield from walk(scope.children[-1])


def _paired_release(node: Any) -> Any | None:
    """The release that pairs with the acquire statement ``node`` (None if none does)."""
    receiver = _release_call(node, "acquire")
    if receiver is None or not _in_function(node):
        return None
    for statement in _statements_after(node):
        if _release_call(statement, "release") == receiver:
            return statement
    return None


class RemoveAcquireRelease(Operator):  # type: ignore[misc]
    """An ``X.acquire()`` statement and its ``X.release()`` both replaced by ``pass``."""

    def mutation_positions(self, node: Any) -> Iterator[Position]:
        if _paired_release(node) is not None:
            yield (node.start_pos, node.end_pos)

    def mutate(self, node: Any, index: int) -> Any:
        assert index == 0
        release = _paired_release(node)
        assert release is not None
        siblings = release.parent.children
        siblings[siblings.index(release)] = _pass_for(release)
        return _pass_for(node)

    @classmethod
    def examples(cls) -> tuple[Example, ...]:
        return (
            Example(
                "def f(s):\n    lock = s._lock\n    lock.acquire()  # cheaper\n    try:\n"
                "        s.n += 1\n    finally:\n        lock.release()\n",
                "def f(s):\n    lock = s._lock\n    pass  # cheaper\n    try:\n"
                "        s.n += 1\n    finally:\n        pass\n",
            ),
            Example(
                "def f(s):\n    s.a.acquire()\n    s.b.acquire()\n    g()\n"
                "    s.b.release()\n    s.a.release()\n",
                "def f(s):\n    s.a.acquire()\n    pass\n    g()\n    pass\n    s.a.release()\n",
                1,
            ),
        )


_OPERATORS: dict[str, type[Operator]] = {
    operator.__name__: operator for operator in (RemoveStatement, RemoveLock, RemoveAcquireRelease)
}


class OperatorProvider:
    """cosmic-ray's operator provider for this distribution (provider name ``kpurgatory``)."""

    def __iter__(self) -> Iterator[str]:
        return iter(_OPERATORS)

    def __getitem__(self, name: str) -> type[Operator]:
        return _OPERATORS[name]
