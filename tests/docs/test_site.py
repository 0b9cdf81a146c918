"""The documentation site builds with ``mkdocs build --strict``, and every page is in the nav.

The strict build fails on any warning: a broken link or anchor, a page missing from
the nav or a nav entry without a page, an include (``--8<--``) of a missing file,
or an API object mkdocstrings cannot find. It runs in a subprocess into a temporary
directory, so it never touches ``site/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mkdocs", reason="the docs extra is not installed")

from mkdocs.config import load_config

from tests.support import implementation_names

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def nav_pages(entries: Any) -> list[str]:
    """Every page path named by a nav tree (strings, lists, single-key dicts)."""
    if isinstance(entries, str):
        return [] if "://" in entries else [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return []


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    """Named mismatches first, so a new page says exactly which nav entry to add."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), f"duplicate nav entries: {listed}"
    excluded = config["exclude_docs"]
    pages = {
        page
        for page in (str(path.relative_to(DOCS)) for path in DOCS.glob("**/*.md"))
        if excluded is None or not excluded.match_file(page)
    }
    assert not pages - set(listed), f"add to mkdocs.yml nav: {sorted(pages - set(listed))}"
    assert not set(listed) - pages, f"nav names missing pages: {sorted(set(listed) - pages)}"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict`` succeeds and renders the API reference and the diagram."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for anchor in (
        "kpurgatory.reference.purgatory.DelayedOperationPurgatory.try_complete_else_watch",
        "kpurgatory.reference.timer.SystemTimer.advance_clock",
        "kpurgatory.spec.rules.Rule",
    ):
        assert f'id="{anchor}"' in api, f"API page lacks {anchor}"
    for name in implementation_names():  # every implementation package is documented
        assert f'id="kpurgatory.{name}"' in api, f"docs/api.md lacks ::: kpurgatory.{name}"
    public = api.index('id="kpurgatory.optimized.purgatory.DelayedOperationPurgatory"')
    assert public < api.index('id="kpurgatory.reference"'), "the default export comes first"
    internals = api.index('id="internals-of-the-optimized-implementation"')
    for internal in ("EntryHolder", "HandOver", "TimerTaskEntry"):
        assert api.index(f'id="kpurgatory.optimized.bucket.{internal}"') > internals
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'class="mermaid"' in home
    # Mermaid is bundled (offline): the page loads the local copy, which defines the
    # global the theme looks for before it would fetch the CDN copy.
    assert 'src="javascripts/mermaid.min.js"' in home
    bundled = (site / "javascripts" / "mermaid.min.js").read_text(encoding="utf-8")
    assert len(bundled) > 1_000_000 and "mermaid" in bundled[:5000]
    tutorial = (site / "tutorial" / "index.html").read_text(encoding="utf-8")
    assert "check_and_complete" in tutorial and "call_soon_threadsafe" in tutorial
