"""The technique index of docs/verification.md names files and tests that exist.

The table under "Techniques at a glance" has one row per technique; its "Shown by"
column names tests as `` `path::test_name` `` (and may name plain files as
`` `path` ``). Every row must name at least one test, every named file must exist, and
every named test must be defined in its file, so the index cannot point a reader at
something renamed or removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "verification.md"
HEADING = "## Techniques at a glance"
SHOWN_BY = "Shown by"

CODE = re.compile(r"`([^`]+)`")
"""A code span of a table cell."""


@dataclass(frozen=True)
class Reference:
    """One ``path`` or ``path::test`` named by a row."""

    technique: str
    path: str
    test: str | None


def index_rows(text: str) -> list[dict[str, str]]:
    """The rows of the first table after ``HEADING``, as {column title: cell text}."""
    lines = text.splitlines()
    start = lines.index(HEADING)
    table: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table.append(line)
        elif table or line.startswith("#"):
            break
    assert len(table) > 2, f"no table under {HEADING!r} in {PAGE.name}"
    titles = [cell.strip() for cell in table[0].strip("|").split("|")]
    rows = []
    for line in table[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(titles), f"row has {len(cells)} cells, expected {titles}: {line}"
        rows.append(dict(zip(titles, cells, strict=True)))
    return rows


def references(rows: list[dict[str, str]]) -> list[Reference]:
    """Every path or path::test named in the "Shown by" column."""
    found = []
    for row in rows:
        technique = row[next(iter(row))]
        for span in CODE.findall(row[SHOWN_BY]):
            path, _, test = span.partition("::")
            found.append(Reference(technique, path, test or None))
    return found


def defines(source: str, test: str) -> bool:
    """Whether ``source`` defines the function ``test`` at module level."""
    return re.search(rf"^(async )?def {re.escape(test)}\(", source, re.MULTILINE) is not None


def problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with the index in ``text``: rows without a test, missing files or tests."""
    rows = index_rows(text)
    named = references(rows)
    found = []
    for row in rows:
        technique = row[next(iter(row))]
        if not any(ref.technique == technique and ref.test for ref in named):
            found.append(f"index row {technique!r} names no `path::test`")
    for ref in named:
        source = root / ref.path
        if not source.is_file():
            found.append(f"index row {ref.technique!r}: {ref.path} does not exist")
        elif ref.test is not None and not defines(source.read_text(encoding="utf-8"), ref.test):
            found.append(f"index row {ref.technique!r}: {ref.path} defines no {ref.test}")
    return found


def test_every_technique_names_a_test_that_exists() -> None:
    """Each row names at least one ``path::test``; every path exists; every test is defined."""
    text = PAGE.read_text(encoding="utf-8")
    assert len(index_rows(text)) >= 10, "the index lost its rows"
    assert problems(text) == []


def test_the_index_check_reports_a_missing_file_test_or_row_without_test() -> None:
    """The check can fail: each kind of broken row is reported, a good row is not."""
    this = "tests/docs/test_verification_index.py"
    page = (
        f"{HEADING}\n\n| Technique | {SHOWN_BY} | Proves |\n|---|---|---|\n"
        f"| Good | `{this}::test_every_technique_names_a_test_that_exists` | x |\n"
        f"| Renamed | `{this}::no_such_test` | x |\n"
        "| Gone | `tests/no_such_file.py::test_x` | x |\n"
        f"| File only | `{this}` | x |\n\n## Next\n"
    )
    assert problems(page) == [
        "index row 'File only' names no `path::test`",
        f"index row 'Renamed': {this} defines no no_such_test",
        "index row 'Gone': tests/no_such_file.py does not exist",
    ]
