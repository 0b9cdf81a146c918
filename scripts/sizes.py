"""List functions over 60 lines and modules over 500 lines in the kpurgatory package.

Usage: ``python scripts/sizes.py [ROOT] [--function-lines N] [--module-lines N]``.
A function's length runs from its ``def`` (decorators excluded) to its last line; a
module's is its line count.  Nested functions are counted on their own as well.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def long_functions(root: Path, limit: int) -> list[tuple[int, str]]:
    """Return (lines, "path:qualname") for every function longer than ``limit`` lines."""
    found: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.extend(_walk(tree, path, "", limit))
    return sorted(found, reverse=True)


def _walk(node: ast.AST, path: Path, prefix: str, limit: int) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    found.append((length, f"{path}:{name}"))
            found.extend(_walk(child, path, f"{name}.", limit))
        else:
            found.extend(_walk(child, path, prefix, limit))
    return found


def long_modules(root: Path, limit: int) -> list[tuple[int, str]]:
    """Return (lines, path) for every module longer than ``limit`` lines."""
    sizes = [(len(p.read_text(encoding="utf-8").splitlines()), str(p)) for p in root.rglob("*.py")]
    return sorted((s for s in sizes if s[0] > limit), reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="kpurgatory", type=Path)
    parser.add_argument("--function-lines", type=int, default=60)
    parser.add_argument("--module-lines", type=int, default=500)
    args = parser.parse_args()
    functions = long_functions(args.root, args.function_lines)
    modules = long_modules(args.root, args.module_lines)
    print(f"{len(functions)} functions over {args.function_lines} lines")
    for length, name in functions:
        print(f"  {length:4d} {name}")
    print(f"{len(modules)} modules over {args.module_lines} lines")
    for length, name in modules:
        print(f"  {length:4d} {name}")


if __name__ == "__main__":
    main()
