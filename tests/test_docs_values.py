"""Counts and lists in the documentation's prose are generated (tools/doc_values.py): each
marked value equals its generator, and no count of checkpoint families is typed outside the
markers."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("doc_values", ROOT / "tools" / "doc_values.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()
COUNT = re.compile(r"\b(?:" + "|".join(TOOL.WORDS[2:]) + r"|\d+)\s+(?:checkpoint\s+)?families\b",
                   re.I)


def test_every_marked_value_is_its_generators():
    assert TOOL.stale() == [], "run python tools/doc_values.py"


def test_the_family_count_is_the_registrys():
    from normlab.models.hf import FAMILIES

    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert ("families.count", TOOL.number(len(FAMILIES))) in TOOL.marked(text)
    assert TOOL.number(7) == "seven" and TOOL.number(13) == "13"


def test_no_count_of_families_is_typed_by_hand():
    """Outside the markers, prose says "the families", never how many."""
    typed = []
    for page in TOOL.pages():
        text = TOOL.MARKED.sub("", page.read_text(encoding="utf-8"))
        typed += [f"{page.name}: {m.group(0)!r}" for m in COUNT.finditer(text)]
    assert not typed, typed


def test_a_stale_value_is_found_and_rewritten():
    text = "of <!-- gen:families.count -->six<!-- /gen --> families"
    fresh = TOOL.render(text)
    assert fresh != text and TOOL.marked(fresh)[0][1] == TOOL.GENERATORS["families.count"]()
    assert COUNT.search("seven checkpoint families") and not COUNT.search(TOOL.MARKED.sub("", text))
    with pytest.raises(ValueError, match=r"unknown generated value 'families\.total'"):
        TOOL.render("<!-- gen:families.total -->7<!-- /gen -->")
