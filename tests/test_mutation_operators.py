"""The project's own cosmic-ray operators make the mutants they promise, and only those.

``make mutation`` installs tools/cosmic_ray_kpurgatory (statement removal, lock removal,
acquire/release pair removal; docs/verification.md, "Mutation score"). Each operator is
given source snippets: its documented examples give exactly the mutated code, the
statements it must leave alone give no mutant, and the two gaps an outside run found
(a reset dropped from a rollback, a counter updated without its lock) are among the
mutants it makes of the real modules. Skipped where the mutation tools are not installed
(only ``make mutation`` installs them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

operators = pytest.importorskip("cosmic_ray_kpurgatory", reason="make mutation installs it")
plugins = pytest.importorskip("cosmic_ray.plugins")
mutating = pytest.importorskip("cosmic_ray.mutating")
cosmic_ast = pytest.importorskip("cosmic_ray.ast")

ROOT = Path(__file__).resolve().parent.parent
OPERATORS = ("RemoveStatement", "RemoveLock", "RemoveAcquireRelease")


def _mutants(operator: Any, source: str) -> list[str]:
    """Every mutant ``operator`` makes of ``source``, in cosmic-ray's occurrence order."""
    positions = [
        position
        for node in cosmic_ast.ast_nodes(cosmic_ast.get_ast(source))
        for position in operator.mutation_positions(node)
    ]
    mutants = [mutating.mutate_code(source, operator, index) for index in range(len(positions))]
    assert mutating.mutate_code(source, operator, len(positions)) is None  # no more than that
    return mutants


def test_cosmic_ray_finds_the_operators_by_their_entry_point() -> None:
    names = plugins.operator_names()
    for name in OPERATORS:
        assert f"kpurgatory/{name}" in names
        assert plugins.get_operator(f"kpurgatory/{name}") is getattr(operators, name)


@pytest.mark.parametrize("name", OPERATORS)
def test_each_example_gives_the_mutated_code(name: str) -> None:
    operator = getattr(operators, name)
    examples = operator.examples()
    assert examples
    for example in examples:
        mutated = mutating.mutate_code(
            example.pre_mutation_code, operator(), example.occurrence or 0
        )
        assert mutated == example.post_mutation_code, example.pre_mutation_code


def test_statement_removal_makes_one_mutant_per_removable_statement() -> None:
    source = (
        '"""module doc"""\n'
        "LIMIT = 3\n"  # module level: not removed
        "class C:\n"
        "    n = 0\n"  # class level: not removed
        "    def f(self, d):\n"
        '        """doc"""\n'
        "        x: int\n"  # a declaration
        "        self.n += 1\n"
        "        g(d)\n"
        "        ...\n"
        "        import os\n"
        "        assert d\n"
        "        for k in d:\n"
        "            if k:\n"
        "                continue\n"
        "            del d[k]\n"
        "        def inner():\n"
        "            nonlocal x\n"
        "            x = 1\n"
        "        if d:\n"
        "            raise ValueError(d)\n"
        "        yield d\n"
        "        return x\n"
    )
    mutants = _mutants(operators.RemoveStatement(), source)
    removed = [
        next(
            before.strip()
            for before, after in zip(source.splitlines(), mutant.splitlines(), strict=True)
            if before != after
        )
        for mutant in mutants
    ]
    assert removed == ["self.n += 1", "g(d)", "del d[k]", "x = 1"]


def test_lock_removal_takes_locks_only() -> None:
    source = (
        "def f(self, path):\n"
        "    with open(path) as handle:\n"
        "        g(handle)\n"
        "    with self._lock as held:\n"  # bound: not a plain lock item
        "        g(held)\n"
        "    with contextlib.suppress(KeyError):\n"
        "        g()\n"
        "    with self.locked():\n"  # a call: not a dotted name
        "        g()\n"
        "    with self._shutdown_lock:\n"
        "        g()\n"
    )
    (mutant,) = _mutants(operators.RemoveLock(), source)
    assert "    if True:\n        g()\n" in mutant
    assert "with self._shutdown_lock" not in mutant


def test_acquire_release_pairs_by_receiver_within_one_function() -> None:
    source = (
        "def f(self):\n"
        "    if self._lock.acquire(blocking=False):\n"  # its result is used: not paired
        "        self._lock.release()\n"
        "    lock = self._lock\n"
        "    lock.acquire()\n"
        "    def inner():\n"
        "        lock.release()\n"  # another function: not the pair
        "    try:\n"
        "        g()\n"
        "    finally:\n"
        "        lock.release()\n"
        "def h(lock):\n"
        "    lock.acquire()\n"  # never released here: no mutant
    )
    (mutant,) = _mutants(operators.RemoveAcquireRelease(), source)
    assert mutant.splitlines()[4] == "    pass"
    assert mutant.splitlines()[6] == "        lock.release()"
    assert mutant.splitlines()[10] == "        pass"


def _mutated_lines(operator: Any, path: Path) -> list[tuple[str, str]]:
    """(removed line, its replacement) for each mutant ``operator`` makes of ``path``."""
    source = path.read_text(encoding="utf-8")
    found = []
    for mutant in _mutants(operator, source):
        before = source.splitlines()
        after = mutant.splitlines()  # fewer lines if a statement of several went
        changed = [(old, new) for old, new in zip(before, after, strict=False) if old != new]
        found.append(changed[0] if changed else ("", ""))
    return found


@pytest.mark.skipif(not (ROOT / "kpurgatory").is_dir(), reason="needs the package's source")
def test_the_outside_runs_two_gaps_are_among_the_mutants() -> None:
    """The rollback's reset of the watch keys, removed (R61), and the unfinished count's
    lock in ``_watch``, removed (R61): both are mutants these operators make."""
    protocol = ROOT / "kpurgatory" / "protocol.py"
    removed = _mutated_lines(operators.RemoveStatement(), protocol)
    reset = "            self._watch_keys = ()  # type: ignore[misc]"
    assert (reset, "            pass  # type: ignore[misc]") in removed
    unlocked = _mutated_lines(operators.RemoveLock(), protocol)
    assert any(
        new.startswith("            if True:  # before its keys are set") for _, new in unlocked
    ), unlocked
    pairs = _mutated_lines(operators.RemoveAcquireRelease(), protocol)
    assert pairs == [("            lock.acquire()", "            pass")]
