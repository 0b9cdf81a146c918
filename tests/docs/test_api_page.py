"""docs/api.md says what the package has: every hand-written signature and every directive.

The page is mostly ``::: module`` directives that mkdocstrings renders from the
docstrings (right by construction, once the module and the members it lists exist). The
hand-written summary tables are not: a table row's first cell holds code spans, each a
signature (``[await ]target(params)[ -> return]``) or an attribute (``target``), and
each is checked against the object it names: parameter names, kinds (``*``, ``/``) and
defaults, the return annotation as written in the source, ``await`` exactly on coroutine
functions, and an attribute's existence on its class. (In the mypyc-compiled build a
compiled constructor shows no signature: there only its existence is checked.)
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import kpurgatory
import kpurgatory.aio
from kpurgatory import optimized, reference

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"

RECEIVERS: dict[str, tuple[Any, ...]] = {
    "purgatory": (kpurgatory.aio.AsyncPurgatory,),
    "driver": (kpurgatory.aio.LoopTimerDriver,),
    "SystemTimer": (optimized.SystemTimer, reference.SystemTimer),
}
"""The lower-case instance names the tables use, and the classes they stand for."""

SPAN = re.compile(r"`([^`]+)`")
SIGNATURE = re.compile(
    r"^(?P<await>await )?(?P<target>[A-Za-z_][\w.]*)(?:\[\w+\])?"
    r"(?:\((?P<params>.*)\))?(?: -> (?P<returns>.+))?$"
)
DIRECTIVE = re.compile(r"^::: (?P<module>[\w.]+)\n(?P<options>(?:    .*\n)*)", re.MULTILINE)


def table_signatures(text: str) -> list[str]:
    """The code spans of the first cell of every table row (header and rule rows skipped)."""
    spans: list[str] = []
    for line in text.splitlines():
        if not line.startswith("| ") or set(line) <= {"|", "-", " "}:
            continue
        first = line.split(" | ", 1)[0]
        spans.extend(SPAN.findall(first))
    return spans


def _resolve(target: str) -> list[Any]:
    """The objects ``target`` names: ``Receiver.attr`` or a name in ``kpurgatory.aio``."""
    head, _, rest = target.partition(".")
    owners: tuple[Any, ...]
    if head in RECEIVERS:
        owners = RECEIVERS[head]
    elif hasattr(kpurgatory.aio, head):
        owners = (getattr(kpurgatory.aio, head),)
    else:
        raise AssertionError(f"{target!r}: {head!r} is not in kpurgatory.aio")
    objects = []
    for owner in owners:
        obj = owner
        for part in rest.split(".") if rest else []:
            try:
                obj = inspect.getattr_static(obj, part)
            except AttributeError:
                raise AssertionError(f"{target!r}: {owner.__name__} has no {part!r}") from None
        objects.append(obj)
    return objects


def _documented_parameters(params: str) -> ast.arguments:
    tree = ast.parse(f"def f({params}): pass")
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    return function.args


def _default_value(node: ast.expr, module: str) -> Any:
    """A default as written: a literal, or a name of the object's module."""
    if isinstance(node, ast.Name):
        return getattr(importlib.import_module(module), node.id)
    return ast.literal_eval(node)


def check_span(span: str) -> None:
    """Raise ``AssertionError`` unless ``span`` matches the package."""
    match = SIGNATURE.match(span)
    assert match is not None, f"{span!r} is not a signature or an attribute"
    for obj in _resolve(match["target"]):
        params = match["params"]
        if params is None:  # an attribute: it exists (checked by _resolve)
            assert match["await"] is None and match["returns"] is None, span
            continue
        function = obj.__init__ if inspect.isclass(obj) else obj
        if not inspect.isfunction(function):  # compiled by mypyc: no signature to read;
            continue  # the pure build's run of this test checks it
        actual = inspect.signature(function)
        parameters = [p for p in actual.parameters.values() if p.name != "self"]
        documented = _documented_parameters(params)
        positional = [*documented.posonlyargs, *documented.args]
        kinds: list[object] = [inspect.Parameter.POSITIONAL_ONLY] * len(documented.posonlyargs) + [
            inspect.Parameter.POSITIONAL_OR_KEYWORD
        ] * len(documented.args)
        names = [a.arg for a in positional] + [a.arg for a in documented.kwonlyargs]
        kinds += [inspect.Parameter.KEYWORD_ONLY] * len(documented.kwonlyargs)
        assert names == [p.name for p in parameters], f"{span!r}: parameters {parameters}"
        assert kinds == [p.kind for p in parameters], f"{span!r}: kinds {parameters}"
        defaults: dict[str, ast.expr] = dict(
            zip(
                [a.arg for a in positional][len(positional) - len(documented.defaults) :],
                documented.defaults,
                strict=True,
            )
        )
        for arg, default in zip(documented.kwonlyargs, documented.kw_defaults, strict=True):
            if default is not None:
                defaults[arg.arg] = default
        for parameter in parameters:
            written = defaults.get(parameter.name)
            if written is None:
                assert parameter.default is inspect.Parameter.empty, (
                    f"{span!r}: {parameter.name} has a default the page does not show"
                )
            else:
                value = _default_value(written, function.__module__)
                assert parameter.default == value, (
                    f"{span!r}: {parameter.name} defaults to {parameter.default!r}"
                )
        is_coroutine = inspect.iscoroutinefunction(function)
        assert is_coroutine == (match["await"] is not None), (
            f"{span!r}: {'a' if is_coroutine else 'not a'} coroutine function"
        )
        if match["returns"] is not None:
            assert str(actual.return_annotation) == match["returns"], (
                f"{span!r}: returns {actual.return_annotation!r}"
            )


def test_api_page_table_signatures_match_the_package() -> None:
    """Every signature in the hand-written tables of docs/api.md is the package's own."""
    spans = table_signatures(API_PAGE.read_text(encoding="utf-8"))
    assert len(spans) >= 20  # the aio table: read, not skipped
    failures = []
    for span in spans:
        try:
            check_span(span)
        except AssertionError as exc:
            failures.append(str(exc))
    assert failures == []


def test_api_page_directives_name_existing_modules_and_members() -> None:
    """Each ``::: module`` imports and every member its options list exists."""
    text = API_PAGE.read_text(encoding="utf-8")
    directives = list(DIRECTIVE.finditer(text))
    assert len(directives) >= 20
    for directive in directives:
        module = importlib.import_module(directive["module"])
        listed = re.search(r"members: \[(.*)\]", directive["options"])
        if listed is None:
            continue
        for member in re.findall(r'"(\w+)"', listed[1]):
            assert hasattr(module, member), f"{directive['module']} has no {member}"


@pytest.mark.parametrize(
    "stale",
    [
        "await purgatory.wait(op, keys) -> Outcome",  # the names of the old API
        "purgatory.wait(operation, watch_keys) -> Waiter",  # the old API: not a coroutine
        "purgatory.submit(operation, watch_keys) -> Outcome",
        "AsyncPurgatory[T](purgatory_name, *, clock=None, tick_ms=2)",
        "purgatory.shutdown(wait=True) -> None",
        "purgatory.waiters",
        "Outcome.CANCELLED",
        "await purgatory.submit(operation, watch_keys) -> Waiter",
        "VirtualTimeLoop(clock)",
    ],
)
def test_the_check_refuses_a_stale_signature(stale: str) -> None:
    """The check can fail: each of these is wrong about the package (the first two were
    the page's description of ``wait`` before it became a coroutine function)."""
    with pytest.raises(AssertionError):
        check_span(stale)
