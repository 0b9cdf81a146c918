"""Every code example on the site runs: the Python blocks of docs/*.md (and README.md).

Rules, which docs/conformance.md and the page sources follow:

- A fenced block whose language is ``python`` (or ``py``) is executed. The blocks of
  one page run in order in one namespace, so a page can build up an example across
  several blocks. ``__name__`` is ``"__docs__"``.
- A ``pycon`` block (``>>>`` prompts) is checked as a doctest in the same namespace.
- A block made only of ``--8<--`` includes shows code from a file that has its own
  tests (examples/ is run by tests/examples/); this test checks that the included
  file and section exist, and that the file is one the suite runs.
- A runnable block imports nothing that only this repository has (``examples``,
  ``tests``, ...): a reader copies it next to an installed kpurgatory, which has none
  of them. Show such code by include instead.
- A block preceded, on the line just before its fence, by
  ``<!-- copy of: path:section -->`` shows that section of a tested file in the page
  itself (readable outside the built site): this test checks that it equals the
  section, dedented, and that the file is one the suite runs; it is not executed here.
- A block that is intentionally not runnable is preceded, on the line just before its
  fence, by ``<!-- snippet: skip (reason) -->``. Keep these few: the reason is
  required, and the total is capped.
"""

from __future__ import annotations

import ast
import doctest
import importlib.util
import re
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("**/*.md")), ROOT / "README.md"]

RUNNABLE = {"python", "py"}
DOCTEST = {"pycon"}
SKIP_MARK = re.compile(r"<!--\s*snippet:\s*skip\b\s*(.*?)\s*-->")
COPY_MARK = re.compile(r"<!--\s*copy of:\s*(?P<path>[^:\s]+):(?P<section>[\w-]+)\s*-->")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$')
MAX_SKIPPED = 5
"""How many blocks the whole site may mark as not runnable."""

TESTED_SOURCES = {"examples": "tests/examples/"}
"""Directories whose files may be shown by include, and the tests that run them."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip_reason: str | None
    copy_of: tuple[str, str] | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order (nested fences are not supported)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = opening["info"].strip().split(" ")[0].lstrip(".{").rstrip("}").lower()
        previous = lines[index - 1] if index else ""
        skip = SKIP_MARK.search(previous)
        copy = COPY_MARK.search(previous)
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:] if lines[end][:indent].isspace() else lines[end])
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page.relative_to(ROOT)}:{index + 1}: unclosed code fence")
        found.append(
            Block(
                page,
                index + 1,
                language,
                "\n".join(body) + "\n",
                skip and skip.group(1),
                (copy["path"], copy["section"]) if copy else None,
            )
        )
        index = end + 1
    return found


def is_include_only(block: Block) -> bool:
    """Whether the block consists of snippet includes (and blank lines) only."""
    lines = [line for line in block.code.splitlines() if line.strip()]
    return bool(lines) and all(INCLUDE.match(line) for line in lines)


def all_blocks() -> list[Block]:
    return [block for page in PAGES if page.is_file() for block in blocks_of(page)]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def run_page(page: Path) -> int:
    """Execute the runnable blocks of ``page`` in one namespace; return how many ran."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran = 0
    for block in blocks_of(page):
        if block.skip_reason is not None or is_include_only(block) or block.copy_of:
            continue
        if block.language in RUNNABLE:
            try:
                exec(compile(block.code, block.where, "exec"), namespace)
            except Exception:
                pytest.fail(f"code block at {block.where} failed:\n{traceback.format_exc()}")
            ran += 1
        elif block.language in DOCTEST:
            test = doctest.DocTestParser().get_doctest(
                block.code, namespace, block.where, str(block.page), block.line
            )
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            report: list[str] = []
            result = runner.run(test, out=report.append, clear_globs=False)
            assert result.failed == 0, f"doctest block at {block.where} failed:\n" + "".join(report)
            ran += 1
    return ran


PAGE_NEEDS = {"docs/testing-techniques.md": ("crosshair",)}
"""Tools a page's blocks run, beyond the package and the test dependencies every venv has."""


@pytest.mark.parametrize("page", [p for p in PAGES if p.is_file()], ids=page_id)
def test_page_code_blocks_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page's Python blocks execute without error, in order, from the repository root."""
    needs = PAGE_NEEDS.get(page.relative_to(ROOT).as_posix(), ())
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the page runs {', '.join(missing)}, which is not installed here")
    monkeypatch.chdir(ROOT)
    run_page(page)


def test_included_code_comes_from_tested_files() -> None:
    """An include-only block names an existing file and section under a tested directory."""
    for block in all_blocks():
        if block.language not in RUNNABLE | DOCTEST or not is_include_only(block):
            continue
        for line in block.code.splitlines():
            match = INCLUDE.match(line)
            if match is None:
                continue
            source = ROOT / match["path"]
            assert source.is_file(), f"{block.where}: {match['path']} does not exist"
            top = Path(match["path"]).parts[0]
            assert top in TESTED_SOURCES, (
                f"{block.where}: {match['path']} is not under a directory the suite runs "
                f"({sorted(TESTED_SOURCES)})"
            )
            section = match["section"]
            if section is not None:
                text = source.read_text(encoding="utf-8")
                for edge in ("start", "end"):
                    marker = f"--8<-- [{edge}:{section}]"
                    assert marker in text, f"{block.where}: no {marker} in {match['path']}"


def section_of(path: str, section: str) -> str:
    """The lines between ``--8<-- [start:section]`` and ``[end:section]``, dedented."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    markers = [line.strip() for line in lines]
    start = markers.index(f"# --8<-- [start:{section}]")
    end = markers.index(f"# --8<-- [end:{section}]")
    return textwrap.dedent("\n".join(lines[start + 1 : end])).strip("\n") + "\n"


def test_copied_code_equals_its_tested_section() -> None:
    """A ``copy of`` block shows exactly its section of a file the suite runs."""
    copies = [block for block in all_blocks() if block.copy_of is not None]
    assert copies, "no copied block found: the marker is not recognised"
    for block in copies:
        assert block.copy_of is not None
        path, section = block.copy_of
        assert (ROOT / path).is_file(), f"{block.where}: {path} does not exist"
        assert Path(path).parts[0] in TESTED_SOURCES, f"{block.where}: {path} is not run"
        assert block.code == section_of(path, section), (
            f"{block.where} differs from {path}:{section}; copy the section again"
        )


REPOSITORY_ONLY = frozenset(
    path.name
    for path in ROOT.iterdir()
    if path.name != "kpurgatory" and (path.is_dir() or path.suffix == ".py")
)
"""Top-level names importable from a checkout but not from an installed wheel."""

CHECKOUT_PAGES = {
    "docs/testing-techniques.md": {"tests"},
    "docs/verification.md": {"tests"},
}
"""Pages about the project's own test machinery, read in a checkout: what they may import."""


def imported_top_levels(code: str) -> set[str]:
    """The top-level modules ``code`` imports (absolute imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_runnable_blocks_import_only_what_a_wheel_installs() -> None:
    """A block a reader copies runs next to an installed kpurgatory: it imports neither
    ``examples`` nor any other folder of this repository (the tutorial's did), except
    the pages that teach the project's own tests (``CHECKOUT_PAGES``)."""
    for block in all_blocks():
        if block.language not in RUNNABLE or block.skip_reason is not None:
            continue
        if is_include_only(block):
            continue
        allowed = CHECKOUT_PAGES.get(page_id(block.page), set())
        local = imported_top_levels(block.code) & REPOSITORY_ONLY - allowed
        assert not local, f"{block.where} imports {sorted(local)}, which no wheel installs"


def test_the_import_check_sees_examples() -> None:
    """The check above knows ``examples`` as repository-only and finds its imports."""
    assert {"examples", "tests"} <= REPOSITORY_ONLY and "kpurgatory" not in REPOSITORY_ONLY
    code = "import json\nfrom examples.long_poll_server import TopicLog\nimport kpurgatory.aio\n"
    assert imported_top_levels(code) & REPOSITORY_ONLY == {"examples"}


def test_skipped_blocks_are_few_and_explained() -> None:
    """Blocks marked not runnable say why, and there are at most MAX_SKIPPED of them."""
    skipped = [block for block in all_blocks() if block.skip_reason is not None]
    for block in skipped:
        assert block.skip_reason, f"{block.where}: a skipped block needs a reason"
    assert len(skipped) <= MAX_SKIPPED, [block.where for block in skipped]


def test_the_site_has_runnable_examples() -> None:
    """The home page and the tutorial each carry at least one executed block."""
    for name in ("index.md", "tutorial.md"):
        runnable = [
            block
            for block in blocks_of(DOCS / name)
            if block.language in RUNNABLE | DOCTEST
            and block.skip_reason is None
            and not is_include_only(block)
        ]
        assert runnable, f"docs/{name} has no executed code block"


def test_block_parser_on_a_sample(tmp_path: Path) -> None:
    """The parser finds languages, skip marks, includes and indented fences."""
    sample = tmp_path / "sample.md"
    sample.write_text(
        "text\n"
        "```python\nx = 1\n```\n"
        "<!-- snippet: skip (pseudo-code) -->\n"
        "```python\nthis is not python\n```\n"
        '```python\n--8<-- "examples/timer_basics.py"\n```\n'
        "- item\n\n    ```pycon\n    >>> 1 + 1\n    2\n    ```\n"
        "```console\n$ make\n```\n",
        encoding="utf-8",
    )
    found = blocks_of(sample)
    assert [(b.language, b.skip_reason, is_include_only(b)) for b in found] == [
        ("python", None, False),
        ("python", "(pseudo-code)", False),
        ("python", None, True),
        ("pycon", None, False),
        ("console", None, False),
    ]
    assert found[3].code == ">>> 1 + 1\n2\n"
