"""The pictures the README and the docs show are drawn from the committed numbers beside them
(tools/doc_pictures.py, run by ``make tables``): each has a record of the files it was drawn
from, and a picture older than its data fails here. The check reads hashes only; rendering the
report page needs headless Chromium and is skipped where it is absent."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOWN = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


def _tool():
    spec = importlib.util.spec_from_file_location("doc_pictures", ROOT / "tools" /
                                                  "doc_pictures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()


def shown() -> dict[Path, list[str]]:
    """Every picture README.md and docs/*.md show -> the pages that show it."""
    out: dict[Path, list[str]] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in SHOWN.finditer(page.read_text(encoding="utf-8")):
            out.setdefault((page.parent / m.group(1)).resolve(), []).append(page.name)
    return out


def test_every_shown_picture_has_a_record_or_is_an_illustration():
    pictures = shown()
    assert (ROOT / "docs" / "img" / "report.png").resolve() in pictures
    for png, pages in pictures.items():
        rel = png.relative_to(ROOT).as_posix()
        assert png.is_file(), f"{pages} show {rel}, which does not exist"
        if rel in TOOL.ILLUSTRATIONS:
            continue
        assert TOOL.sidecar(png).is_file(), f"{rel} (shown by {pages}) has no record"


@pytest.mark.parametrize("rel", sorted(p.relative_to(ROOT).as_posix() for p in shown()
                                       if p.relative_to(ROOT).as_posix() not in
                                       TOOL.ILLUSTRATIONS))
def test_no_picture_is_older_than_its_data(rel):
    png = ROOT / rel
    assert TOOL.stale(png) == [], "redraw with make tables"
    record = json.loads(TOOL.sidecar(png).read_text(encoding="utf-8"))
    assert record["picture"] == rel
    assert any(s.startswith("docs/results/") for s in record["sources"]), record["sources"]


def test_a_stale_picture_is_found(tmp_path, monkeypatch):
    """The check can fail: the data changed after the picture, or the picture by hand."""
    monkeypatch.setattr(TOOL, "ROOT", tmp_path)
    (tmp_path / "img").mkdir()
    data, png = tmp_path / "data.json", tmp_path / "img" / "p.png"
    data.write_text('{"tally": 1}\n')
    png.write_bytes(b"\x89PNG picture")
    TOOL.stamp(png, [data], "make tables")
    assert TOOL.stale(png) == []
    data.write_text('{"tally": 2}\n')
    assert TOOL.stale(png) == ["img/p.png: drawn from an older data.json (redraw: make tables)"]
    TOOL.stamp(png, [data], "make tables")
    png.write_bytes(b"\x89PNG another")
    assert TOOL.stale(png) == ["img/p.png: not the picture its record describes"]
    TOOL.sidecar(png).unlink()
    assert "no record" in TOOL.stale(png)[0]


def test_the_report_picture_is_the_committed_tally_rendered():
    """What the picture shows is built from docs/results/quick.json: its page holds the
    committed tally (no Chromium needed for the page itself)."""
    from normlab._files import read_json
    from normlab.lab.results import headline

    summary = read_json(TOOL.QUICK)
    html = TOOL.report_html(summary, TOOL.FOREST_PNG)
    assert headline(summary["tally"]) in html
    width, height = struct.unpack(">II", TOOL.REPORT_PNG.read_bytes()[16:24])
    assert f"{width},{height}" == TOOL.WINDOW


def test_the_register_picture_is_the_committed_register_rendered():
    """The register picture's page is docs/lab.md's register block built from
    docs/results/register.json: every experiment and every record id is on it."""
    from normlab._files import read_json

    register = read_json(TOOL.REGISTER)
    html = TOOL.register_html(register)
    assert "<table>" in html and "The claim register" in html
    for e in register["experiments"]:
        assert f"<code>{e['name']}</code>" in html
        assert all(f"<code>{r['id']}</code>" in html for r in e["records"])
    width, height = struct.unpack(">II", TOOL.REGISTER_PNG.read_bytes()[16:24])
    assert f"{width},{height}" == TOOL.WINDOW


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")
def test_chromium_renders_the_report_page(tmp_path):
    from normlab._files import read_json
    from normlab.lab.results import headline

    summary = read_json(TOOL.QUICK)
    page = tmp_path / "report.html"
    page.write_text(TOOL.report_html(summary, TOOL.FOREST_PNG), encoding="utf-8")
    try:
        dom = TOOL.chromium(CHROMIUM, tmp_path / "profile", "--dump-dom", page.as_uri())
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"Chromium did not run here: {exc}")
    assert headline(summary["tally"]) in dom and "The verdicts, row by row" in dom
