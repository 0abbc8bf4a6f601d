"""docs/index.md reaches every page of the site: it links each docs/*.md page itself, and the
API reference's pages through docs/api/index.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\((?![a-z]+:)([^)#\s]+\.md)(?:#[^)]*)?\)")  # not a URL


def links(page: Path) -> set[Path]:
    """The pages of docs/ that ``page`` links to (relative Markdown links)."""
    return {(page.parent / m.group(1)).resolve() for m in LINK.finditer(page.read_text("utf-8"))}


def test_the_index_links_every_page():
    pages = {p.resolve() for p in DOCS.glob("*.md")} - {(DOCS / "index.md").resolve()}
    missing = sorted(p.name for p in pages - links(DOCS / "index.md"))
    assert not missing, f"docs/index.md does not link: {missing}"


def test_every_page_is_reached_from_the_index():
    seen, todo = set(), [(DOCS / "index.md").resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file():
            continue
        seen.add(page)
        todo += [p for p in links(page) if DOCS.resolve() in p.parents]
    every = {p.resolve() for p in DOCS.rglob("*.md")}
    assert every - seen == set(), sorted(str(p.relative_to(DOCS)) for p in every - seen)


def test_a_link_is_read():
    page = DOCS / "index.md"
    assert (DOCS / "lab.md").resolve() in links(page)
    assert not LINK.search("[site](https://example.org/x.md) and `lab.md`")
