"""Imports run one way: spec imports no implementation, reference never imports optimized,
the conformance kit (with the workload generator it builds vectors from) and the asyncio
layer never import the Spark pipeline or the benchmarks; the history checker imports none
of them nor the kit (which may reuse it), and its model and search no implementation;
the step language sits below both the kit and the generator, and the generator never
imports the kit.

Checked on the source (every ``import`` and ``from ... import`` statement, including
ones inside functions), because importing any subpackage at run time executes the
``kpurgatory`` package's ``__init__``, which re-exports the optimized implementation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kpurgatory

PACKAGE_ROOT = Path(kpurgatory.__file__).parent

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "spec": ("kpurgatory.reference", "kpurgatory.optimized", "kpurgatory.pipeline"),
    "reference": ("kpurgatory.optimized", "kpurgatory.pipeline", "kpurgatory.bench"),
    "optimized": ("kpurgatory.reference", "kpurgatory.pipeline", "kpurgatory.bench"),
    "aio": ("kpurgatory.pipeline", "kpurgatory.bench", "kpurgatory.conformance"),
    "conformance": ("kpurgatory.pipeline", "kpurgatory.bench"),
    "workloads.py": (
        "kpurgatory.pipeline",
        "kpurgatory.bench",
        "kpurgatory.conformance",
    ),
    "history": ("kpurgatory.pipeline", "kpurgatory.bench", "kpurgatory.conformance"),
    "history/model.py": ("kpurgatory.reference", "kpurgatory.optimized"),
    "history/search.py": ("kpurgatory.reference", "kpurgatory.optimized"),
    "steps.py": (
        "kpurgatory.conformance",
        "kpurgatory.workloads",
        "kpurgatory.reference",
        "kpurgatory.optimized",
        "kpurgatory.pipeline",
    ),
}
"""Layer (a subpackage or a module file) -> module prefixes it must not import."""


def imported_modules(path: Path) -> list[str]:
    """Every module name an import statement in ``path`` names (``from a import b`` gives
    both ``a`` and ``a.b``, since ``b`` may be a submodule), plus the string literal given
    to any ``import_module(...)`` call (a lazy import is still a dependency)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id == "import_module")
            )
        ):
            names.append(node.args[0].value)
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def layer_files(layer: str) -> list[Path]:
    """The source files of ``layer``: a module file, or every module of a subpackage."""
    root = PACKAGE_ROOT / layer
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_run_one_way(layer: str) -> None:
    files = layer_files(layer)
    assert files, f"layer {layer} has no source files (moved or renamed?)"
    offenders = [
        f"{path.relative_to(PACKAGE_ROOT.parent)} imports {name}"
        for path in files
        for name in imported_modules(path)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[layer])
    ]
    assert not offenders, offenders


def guarded_imports(path: Path) -> set[str]:
    """Modules that are optional at run time: imported inside a ``try`` whose handlers
    catch ``ImportError`` (e.g. ``mypy_extensions`` for the mypyc build, with a no-op
    fallback), or only under ``if TYPE_CHECKING:``."""
    guarded: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module is not None:
                    guarded.add(statement.module)
        if isinstance(node, ast.Try) and any(
            isinstance(handler.type, ast.Name)
            and handler.type.id in ("ImportError", "ModuleNotFoundError")
            for handler in node.handlers
        ):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module is not None:
                    guarded.add(statement.module)
                elif isinstance(statement, ast.Import):
                    guarded.update(alias.name for alias in statement.names)
    return guarded


def test_core_has_no_runtime_dependencies() -> None:
    """The core library (everything but pipeline, bench, conformance's optional parts)
    imports only the standard library and kpurgatory itself, apart from imports guarded
    by ``except ImportError`` with a fallback."""
    import sys

    stdlib = sys.stdlib_module_names
    core = [PACKAGE_ROOT / name for name in ("spec", "reference", "optimized", "aio")] + [
        PACKAGE_ROOT / f"{name}.py" for name in ("clock", "executors", "sync", "_checks")
    ]
    paths = [p for entry in core for p in ([entry] if entry.is_file() else entry.rglob("*.py"))]
    offenders = [
        f"{path.name} imports {name}"
        for path in paths
        for name in imported_modules(path)
        if name.split(".")[0] not in stdlib
        and name.split(".")[0] != "kpurgatory"
        and name.split(".")[0] not in {g.split(".")[0] for g in guarded_imports(path)}
    ]
    assert not offenders, offenders


def test_default_export_is_the_optimized_implementation() -> None:
    from kpurgatory import optimized

    for name in ("TimerTask", "SystemTimer", "DelayedOperation", "DelayedOperationPurgatory"):
        assert getattr(kpurgatory, name) is getattr(optimized, name)
