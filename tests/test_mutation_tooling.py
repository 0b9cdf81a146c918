"""``make mutation`` (scripts/mutation.py) points at what exists and samples reproducibly.

The mutation run itself is slow (docs/verification.md, "Mutation score"); these checks
are quick and need no mutation tool: every module it mutates and every test it runs
exists, it never runs the meta-tests that patch source text, the equivalents list
parses, and the sample is a pure function of the seed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE_PATCHING = (
    "tests/mutants",
    "tests/aio/test_aio_mutants.py",
    "tests/concurrency/test_lock_mutants.py",
)


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kpurgatory_mutation", ROOT / "scripts" / "mutation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(
    not (ROOT / "kpurgatory").is_dir(), reason="the package's source is not in this tree"
)
def test_every_module_and_test_it_names_exists() -> None:
    tool = _tool()
    expected = {
        str(path.relative_to(ROOT))
        for folder in ("reference", "optimized", "aio")
        for path in (ROOT / "kpurgatory" / folder).glob("*.py")
        if path.name not in {"__init__.py", "_mypyc.py"}
    } | {"kpurgatory/_lifecycle.py", "kpurgatory/_sweep.py", "kpurgatory/protocol.py"}
    assert set(tool.MODULES) == expected
    for module, (quick, slow) in tool.MODULES.items():
        assert quick, module
        for test in (*quick, *slow):
            assert (ROOT / test).exists(), f"{module}: {test} does not exist"
            assert not test.startswith(SOURCE_PATCHING), f"{module}: {test} patches source"


def test_the_equivalents_list_parses_and_names_known_modules() -> None:
    tool = _tool()
    equivalents = tool.load_equivalents()
    for ident, reason in equivalents.items():
        module = ident.split(":", 1)[0]
        assert module in tool.MODULES, ident
        assert reason, ident


def test_the_sample_depends_on_the_seed_only_and_spreads_over_places() -> None:
    tool = _tool()
    mutants = [
        tool.Mutant(f"job{line}-{n}", f"m.py:{line}:0 op#{n}", (line, 0), "op", n)
        for line in range(1, 11)
        for n in range(3)
    ]
    first = tool._sample(mutants, 10, 1, "m.py")
    assert first == tool._sample(list(reversed(mutants)), 10, 1, "m.py")
    assert len({mutant.location for mutant in first}) == 10  # one per place first
    assert tool._sample(mutants, 10, 2, "m.py") != first
    assert len(tool._sample(mutants, 100, 1, "m.py")) == 30  # a small module runs whole


def test_annotations_are_found() -> None:
    tool = _tool()
    source = "def f(x: int | None, *, y: 'A' = 1) -> list[int]:\n    z: int | str = x or y\n"
    spans = tool._annotation_spans(source)
    assert tool._inside((1, 13), spans)  # the | of int | None
    assert tool._inside((2, 11), spans)  # the | of int | str
    assert not tool._inside((2, 19), spans)  # x or y: code
    assert not tool._inside((1, 32), spans)  # the default 1
