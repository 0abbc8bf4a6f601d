"""The documentation: the site builds with warnings as errors (``mkdocs build --strict``), its API
reference is generated from the docstrings, and every page under docs/ is in it; the README stays
a short page whose links resolve."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _need_mkdocs() -> None:
    missing = [m for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
               if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        pytest.skip(f"the docs extra is not installed ({', '.join(missing)}): "
                    "pip install -e '.[docs]' (make test installs it)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    _need_mkdocs()
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-3000:]}{r.stderr[-5000:]}"
    return out


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "results" not in p.relative_to(DOCS).parts)


def test_the_site_builds_with_every_page(site):
    for page in _pages():
        rel = page.relative_to(DOCS).with_suffix("")
        html = site / ("index.html" if rel.name == "index" and rel.parent == Path(".")
                       else rel.parent / "index.html" if rel.name == "index"
                       else rel / "index.html")
        assert html.is_file(), f"docs/{page.relative_to(DOCS)} is not in the built site"


def test_the_api_reference_is_generated_from_the_docstrings(site):
    from normlab.functional import layer_norm_forward

    html = (site / "api" / "functional" / "index.html").read_text(encoding="utf-8")
    assert "layer_norm_forward" in html
    first = layer_norm_forward.__doc__.strip().splitlines()[0]
    words = re.findall(r"[A-Za-z]{4,}", first)[:4]
    assert words and all(w in html for w in words), (words, "not in the API page")
    for pkg in ("nn", "models", "train", "precision", "kernels", "testing", "lab", "portable"):
        page = (site / "api" / pkg / "index.html").read_text(encoding="utf-8")
        assert page.count('class="doc doc-heading"') >= 3, f"api/{pkg}: no members rendered"


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The check can fail: a page linking to a missing page aborts the strict build."""
    _need_mkdocs()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# x\n\n[gone](nowhere.md)\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nstrict: true\n")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and "nowhere.md" in r.stderr


def test_every_docs_page_has_a_title():
    for page in _pages():
        first = page.read_text(encoding="utf-8").lstrip().splitlines()[0]
        assert first.startswith("# "), f"docs/{page.relative_to(DOCS)}: start with a '# Title'"


def test_the_readme_is_short_and_its_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) < 6000, f"the README is {len(text)} characters: move reference to docs/"
    assert "make demo" in text and "make test" in text
    targets = re.findall(r"\]\(([^)#\s]+)", text)
    assert any(t.endswith(".png") for t in targets)
    for t in targets:
        if "://" not in t:
            assert (ROOT / t).exists(), f"README links to {t}, which does not exist"
