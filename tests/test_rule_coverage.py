"""Meta-tests: every rule in the catalog is cited by a test and described in docs/spec.md.

A rule that no test cites is a promise nobody checks; a rule missing from the spec is a
promise nobody can read. Citations are found by the regex ``\\bR(\\d+)\\b`` over the text
of every ``tests/**/*.py`` except this file (which names rules only to check them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import kpurgatory
from kpurgatory.spec.rules import RULES, Rule

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


SECTION_HEADING = re.compile(r"^## (.+)$")
RULE_HEADING = re.compile(r"^### (R\d+) (.+)$")


def spec_headings(text: str) -> dict[str, tuple[str, str]]:
    """Rule id -> (section, title) from docs/spec.md's ``## section`` and ``### Rn title``
    headings (a rule heading belongs to the last section heading above it)."""
    found: dict[str, tuple[str, str]] = {}
    section = ""
    for line in text.splitlines():
        if match := SECTION_HEADING.match(line):
            section = match.group(1)
        elif match := RULE_HEADING.match(line):
            found[match.group(1)] = (section, match.group(2))
    return found


def disagreements(headings: dict[str, tuple[str, str]], rules: Sequence[Rule]) -> list[str]:
    """How an index of ``rules`` differs from docs/spec.md's ``headings``, one line each."""
    index = {r.id: (r.section, r.title) for r in rules}
    found = [f"{rid}: only in docs/spec.md" for rid in headings if rid not in index]
    found += [f"{rid}: only in the index" for rid in index if rid not in headings]
    found += [
        f"{rid}: index says {index[rid]}, docs/spec.md {headings[rid]}"
        for rid in index
        if rid in headings and index[rid] != headings[rid]
    ]
    return found


def test_rule_index_is_derived_from_spec_md() -> None:
    """kpurgatory.spec.rules indexes docs/spec.md: the same ids, each with the section
    and the title of its heading there (docs/spec.md is the one normative text)."""
    headings = spec_headings(SPEC_MD.read_text(encoding="utf-8"))
    assert not disagreements(headings, RULES)


def test_a_rule_filed_under_another_section_is_a_disagreement() -> None:
    """The check fires on a rule indexed under the wrong section (as R41 and R42 were),
    a changed title, and a rule missing on either side."""
    headings = spec_headings("## Timer\n### R1 A\n## Concurrency\n### R42 Unbounded timeouts\n")
    assert headings == {"R1": ("Timer", "A"), "R42": ("Concurrency", "Unbounded timeouts")}
    r1, r42 = Rule("R1", "timer", "A"), Rule("R42", "concurrency", "Unbounded timeouts")
    assert disagreements(headings, [r1, r42]) == []
    misfiled = Rule("R42", "timer", "Unbounded timeouts")
    assert disagreements(headings, [r1, misfiled]) == [
        "R42: index says ('Timer', 'Unbounded timeouts'), "
        "docs/spec.md ('Concurrency', 'Unbounded timeouts')"
    ]
    assert disagreements(headings, [Rule("R1", "timer", "B"), r42])
    assert disagreements(headings, [r1]) == ["R42: only in docs/spec.md"]
    assert disagreements(headings, [r1, r42, Rule("R7", "timer", "A")]) == ["R7: only in the index"]


PACKAGE = Path(kpurgatory.__file__).resolve().parent
"""The package imported (its .py files ship in every build, the compiled one too)."""
RULES_LINE = re.compile(r"^Rules: (.+)$", re.MULTILINE)


def declared_rules(line: str) -> set[str]:
    """The ids a ``Rules:`` header line lists: ``none``, or ids and ranges (``R1-R3``)."""
    if line.strip() == "none":
        return set()
    declared: set[str] = set()
    for part in line.rstrip(".").split(","):
        first, _, last = part.strip().partition("-")
        low, high = int(first.removeprefix("R")), int((last or first).removeprefix("R"))
        declared |= {f"R{n}" for n in range(low, high + 1)}
    return declared


def test_declared_rules_read_ids_and_ranges() -> None:
    """``R1-R3, R7`` is four rules; ``none`` is none."""
    assert declared_rules("R1-R3, R7.") == {"R1", "R2", "R3", "R7"}
    assert declared_rules("none") == set()


def test_module_headers_list_the_rules_the_module_cites() -> None:
    """A module whose docstring has a ``Rules:`` line lists there exactly the rule ids
    its text cites elsewhere (or says ``none``), so a header cannot go stale."""
    checked = 0
    wrong: dict[str, tuple[list[str], list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        match = RULES_LINE.search(text)
        if match is None:
            continue
        checked += 1
        declared = declared_rules(match.group(1))
        rest = text[: match.start()] + text[match.end() :]
        cited = {f"R{int(n)}" for n in CITATION.findall(rest)}
        if declared != cited:
            key = str(path.relative_to(PACKAGE))
            wrong[key] = (sorted(declared - cited), sorted(cited - declared))
    assert checked >= 5, "the optimized timer's modules carry Rules: headers"
    assert not wrong, f"Rules: headers (listed but not cited, cited but not listed): {wrong}"
