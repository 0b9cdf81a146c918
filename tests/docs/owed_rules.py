"""docs/porting.md's "What a port owes" table, generated from the rule index.

Who owes each rule is kept once, in ``kpurgatory.spec.rules`` (``Rule.owed_by`` and
``Rule.why``). The table sits in docs/porting.md between ``BEGIN`` and ``END``;
tests/docs/test_porting_docs.py fails when it differs from ``table()``. After a change
to the index, rewrite it with::

    python -m tests.docs.owed_rules --write
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from kpurgatory.spec.rules import EVERY_PORT, FEATURES, PYTHON_ONLY, RULES, Rule

ROOT = Path(__file__).resolve().parents[2]
PORTING = ROOT / "docs" / "porting.md"
BEGIN = (
    "<!-- owed rules: generated from kpurgatory/spec/rules.py"
    " by `python -m tests.docs.owed_rules --write` -->"
)
END = "<!-- /owed rules -->"


def anchor(rule: Rule) -> str:
    """The id the site gives the rule's ``### R<n> <title>`` heading in docs/spec.md
    (Python-Markdown's ``toc`` slug: code marks dropped, lower case, words joined by ``-``)."""
    text = f"{rule.id} {rule.title}".replace("`", "")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def owed_by(rule: Rule) -> str:
    """The table's "owed by" cell for ``rule``."""
    if rule.owed_by == EVERY_PORT:
        return "every port"
    if rule.owed_by == PYTHON_ONLY:
        return f"no port (Python only): {rule.why}"
    return FEATURES[rule.owed_by]


def table(rules: tuple[Rule, ...] = RULES) -> str:
    """The generated block, markers included."""
    lines = [BEGIN, "", "| rule | title | owed by |", "| --- | --- | --- |"]
    lines += [f"| [{r.id}](spec.md#{anchor(r)}) | {r.title} | {owed_by(r)} |" for r in rules]
    return "\n".join([*lines, "", END])


def current(text: str) -> str:
    """The block as docs/porting.md has it now (``ValueError`` without its markers)."""
    start, end = text.index(BEGIN), text.index(END)
    return text[start : end + len(END)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/porting.md's table")
    args = parser.parse_args(argv)
    text = PORTING.read_text(encoding="utf-8")
    old, new = current(text), table()
    if old == new:
        print("docs/porting.md: the owed-rules table is up to date")
        return 0
    if not args.write:
        print("docs/porting.md: the owed-rules table is stale; run with --write")
        return 1
    PORTING.write_text(text.replace(old, new), encoding="utf-8")
    print("docs/porting.md: the owed-rules table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
