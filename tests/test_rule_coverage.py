"""Meta-tests: every rule in the catalog is cited by a test and described in docs/spec.md.

A rule that no test cites is a promise nobody checks; a rule missing from the spec is a
promise nobody can read. Citations are found by the regex ``\\bR(\\d+)\\b`` over the text
of every ``tests/**/*.py`` except this file (which names rules only to check them).
"""

from __future__ import annotations

import re
from pathlib import Path

from kpurgatory.spec.rules import RULES

TESTS_DIR = Path(__file__).resolve().parent
SPEC_MD = TESTS_DIR.parent / "docs" / "spec.md"
CITATION = re.compile(r"\bR(\d+)\b")
HEADING = re.compile(r"^#+\s.*?\bR(\d+)\b", re.MULTILINE)


def citations() -> dict[str, set[str]]:
    """Rule id -> the test files (relative to tests/) whose text cites it."""
    cited: dict[str, set[str]] = {}
    for path in sorted(TESTS_DIR.rglob("*.py")):
        if path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8")
        for number in CITATION.findall(text):
            cited.setdefault(f"R{int(number)}", set()).add(str(path.relative_to(TESTS_DIR)))
    return cited


def test_rule_ids_are_unique_and_consecutive() -> None:
    """The catalog numbers its rules R1, R2, ... with no gap or duplicate."""
    assert [r.id for r in RULES] == [f"R{i}" for i in range(1, len(RULES) + 1)]


def test_every_rule_is_cited_by_a_test_file() -> None:
    """Each rule id in kpurgatory.spec.rules.RULES appears in at least one test file."""
    cited = citations()
    missing = [r.id for r in RULES if r.id not in cited]
    assert not missing, f"rules no test cites: {missing}"


def test_tests_cite_only_existing_rules() -> None:
    """A citation of a rule that does not exist is a typo or a stale id."""
    known = {r.id for r in RULES}
    unknown = {rid: sorted(files) for rid, files in citations().items() if rid not in known}
    assert not unknown, f"tests cite unknown rules: {unknown}"


def test_every_rule_is_described_in_spec_md() -> None:
    """docs/spec.md has a heading or line with every rule id, and no heading for unknown ids."""
    assert SPEC_MD.is_file(), f"{SPEC_MD} is missing"
    text = SPEC_MD.read_text(encoding="utf-8")
    lines = text.splitlines()
    missing = [r.id for r in RULES if not any(re.search(rf"\b{r.id}\b", line) for line in lines)]
    assert not missing, f"rules docs/spec.md does not mention: {missing}"
    known = {r.id for r in RULES}
    headed = [f"R{int(n)}" for n in HEADING.findall(text)]
    assert not [rid for rid in headed if rid not in known], headed
    duplicated = sorted({rid for rid in headed if headed.count(rid) > 1})
    assert not duplicated, f"rules with more than one heading in docs/spec.md: {duplicated}"
