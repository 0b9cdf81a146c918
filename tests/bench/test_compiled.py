"""The compiled-build mechanics: opt-in setup.py, the test-tree copy, the compiled check.

``make compiled-test`` runs this whole suite with ``KPURGATORY_EXPECT_COMPILED=1``
against a mypyc wheel; ``test_expected_build_is_compiled`` then fails if the optimized
package silently fell back to pure Python.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from pathlib import Path

import pytest

from kpurgatory.bench import compiled_suite
from kpurgatory.pipeline import builds

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "setup.py"


def test_expected_build_is_compiled() -> None:
    """Under the compiled job every optimized module comes from an extension module."""
    if os.environ.get("KPURGATORY_EXPECT_COMPILED") != "1":
        pytest.skip("pure build (KPURGATORY_EXPECT_COMPILED is not 1)")
    assert builds.optimized_build() == "compiled"
    assert compiled_suite.check() == []


@pytest.mark.skipif(not SETUP.exists(), reason="setup.py is not beside the tests")
@pytest.mark.skipif(
    importlib.util.find_spec("setuptools") is None, reason="setuptools is not installed"
)
def test_setup_compiles_only_on_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without KPURGATORY_COMPILE no extension is built; the sources are the optimized
    package's modules (never its __init__) and the shared protocol, nothing else."""
    namespace = runpy.run_path(str(SETUP), run_name="setup_under_test")
    monkeypatch.delenv("KPURGATORY_COMPILE", raising=False)
    assert namespace["ext_modules"]() == []
    monkeypatch.setenv("KPURGATORY_COMPILE", "0")
    assert namespace["ext_modules"]() == []
    sources = namespace["compiled_sources"]()
    if (ROOT / "kpurgatory" / "optimized").is_dir():
        assert sources, "the optimized package has modules to compile"
    for source in sources:  # the optimized package and the protocol both purgatories share
        optimized = source.startswith("kpurgatory/optimized/")
        assert optimized or source == "kpurgatory/protocol.py", source
        assert not source.endswith("__init__.py")


def test_copy_tree_leaves_the_package_out(tmp_path: Path) -> None:
    """The copied tree has the tests but no kpurgatory/ to shadow the installed build."""
    source = tmp_path / "src"
    for name in ("kpurgatory/__init__.py", "tests/test_x.py", "pyproject.toml", ".venv/x"):
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")
    dest = tmp_path / "tree"
    compiled_suite.copy_tree(source, dest)
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert copied == ["pyproject.toml", "tests/test_x.py"]
    for bad in (source, source / "kpurgatory" / "x", source / "tests", tmp_path):
        with pytest.raises(ValueError, match="dest must lie outside"):
            compiled_suite.copy_tree(source, bad)


def test_check_reports_pure_modules_in_a_pure_build() -> None:
    """In a pure build ``check`` lists the optimized modules that are not extensions."""
    if builds.optimized_build() == "compiled":
        pytest.skip("compiled build")
    if not (ROOT / "kpurgatory" / "optimized").is_dir():
        pytest.skip("no optimized package")
    pure = compiled_suite.check()
    assert pure and all(entry.startswith("kpurgatory.optimized.") for entry in pure)
    assert compiled_suite.main(["check"]) == 1


def test_compiled_job_compares_the_compiled_optimized_with_the_pure_reference() -> None:
    """The compiled build's own proof: in the compiled job, the equivalence machines
    (tests/machines) and the conformance vectors (tests/conformance) load the mypyc
    ``kpurgatory.optimized`` and compare it with the pure-Python reference.

    Both take their implementations from ``tests.support``; this pins what they load.
    """
    if os.environ.get("KPURGATORY_EXPECT_COMPILED") != "1":
        pytest.skip("pure build (KPURGATORY_EXPECT_COMPILED is not 1)")
    from tests.machines.test_equivalence_timer import other_implementation
    from tests.support import implementation_names, load

    assert other_implementation() == "optimized"
    assert "optimized" in implementation_names()
    optimized_timer = sys.modules[load("optimized").SystemTimer.__module__]
    reference_timer = sys.modules[load("reference").SystemTimer.__module__]
    assert str(optimized_timer.__file__).endswith(".so")
    assert str(reference_timer.__file__).endswith(".py")


def test_one_build_probe_answers_bench_pipeline_and_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI's check, the benchmarks' label and the pipeline's build all come from
    ``pure_modules``: a module loaded from source is listed, and the answers agree."""
    package = tmp_path / "probe_package"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "plain.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    listed = builds.pure_modules("probe_package")
    assert [entry.split(" ")[0] for entry in listed] == ["probe_package.plain"]
    assert compiled_suite.check("probe_package") == listed
    assert (builds.optimized_build() == "compiled") == (compiled_suite.check() == [])
    assert builds.optimized_build() in ("compiled", "pure", "partly compiled")
