"""The pictures the README and the docs show, drawn from the committed numbers beside them, each
with a record of what it was drawn from.

    python tools/doc_pictures.py report [--chromium PATH]
        docs/img/report.png: the report page (``normlab.lab.report_page.build_html``) rendered
        from docs/results/quick.json and its forest plot, screenshot by headless Chromium
    python tools/doc_pictures.py register [--chromium PATH]
        docs/img/register.png: the lab page's claim register (``register_markdown`` of
        docs/results/register.json, the block ``make tables`` writes into docs/lab.md) rendered
        as HTML and screenshot by headless Chromium, from its first experiment down
    python tools/doc_pictures.py stamp PNG SOURCE [SOURCE ...]
        record that PNG was drawn from SOURCE (the forest plots, drawn by ``normlab report
        --forest``)
    python tools/doc_pictures.py --check
        exit status 1, naming each picture older than its sources

``make tables`` runs all three after it writes the tables, so a picture is redrawn by the command
that writes the numbers beside it. The record is a sidecar, ``PNG.json``: the picture's own
SHA-256 and each source's, by path from the repository root (``tests/test_docs_pictures.py``
compares them with the files, without Chromium). Shown pictures that no committed data is behind
(an illustration drawn from a random model) are listed in ``ILLUSTRATIONS`` with the command
that draws them.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
QUICK = ROOT / "docs" / "results" / "quick.json"
REPORT_PNG = IMG / "report.png"
REGISTER = ROOT / "docs" / "results" / "register.json"
REGISTER_PNG = IMG / "register.png"
FOREST_PNG = IMG / "verdicts-quick.png"
WINDOW = "1280,1300"  # the top of the page: the setting, the tally, the rule, the forest plot
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1"]
# pictures shown without committed data behind them: picture -> the command that draws it
ILLUSTRATIONS = {
    "docs/img/inspect-torch-phi3.png":
        "python tools/torch_inspect_page.py (normlab inspect --torch on a random Phi-3 it builds)",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sidecar(png: Path) -> Path:
    return png.with_name(png.name + ".json")


def stamp(png: Path, sources: list[Path], command: str) -> Path:
    """Write ``png``'s sidecar: its hash, the command that drew it and its sources' hashes."""
    from normlab._files import write_json

    for p in [png, *sources]:
        if not p.is_file():
            raise ValueError(f"{p}: no such file")
    record = {"picture": _rel(png), "sha256": sha256(png), "command": command,
              "sources": {_rel(s): sha256(s) for s in sources}}
    return write_json(sidecar(png), record, what="picture record")


def _rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def stale(png: Path) -> list[str]:
    """Why ``png`` is older than its data (empty when it is not): no record, a picture changed
    by hand since, or a source changed or gone since it was drawn."""
    import json

    record_path = sidecar(png)
    if not record_path.is_file():
        return [f"{_rel(png)}: no record of what it was drawn from ({record_path.name})"]
    record: dict[str, Any] = json.loads(record_path.read_text(encoding="utf-8"))
    out = []
    if not png.is_file() or sha256(png) != record["sha256"]:
        out.append(f"{_rel(png)}: not the picture its record describes")
    for source, digest in record["sources"].items():
        path = ROOT / source
        if not path.is_file() or sha256(path) != digest:
            out.append(f"{_rel(png)}: drawn from an older {source} (redraw: {record['command']})")
    return out


# ---- the report page --------------------------------------------------------------------------
def _results(summary: dict) -> list[tuple[str, Any, None, str]]:
    """The report's entries rebuilt from a summary: each experiment's card (from the registry)
    with the committed measured text and rows; the verdict each computes is the committed one."""
    from normlab.lab import framework

    entries = []
    for row in summary["experiments"]:
        checks = [framework.Check(
            claim=c["claim"], published="", measured=c["measured"], rule=c["rule"],
            passed={"pass": True, "holds": True, "FAIL": False}.get(c["status"]),
            inconclusive=c["status"] == framework.INCONCLUSIVE, interval=c.get("interval"),
            kind=c["kind"], form=c.get("form", ""), threshold=c.get("threshold"),
            margin_source=c.get("margin_source", ""), estimate=c.get("estimate"),
            side=c.get("side", "")) for c in row["checks"]]
        if [c.status for c in checks] != [c["status"] for c in row["checks"]]:
            raise ValueError(f"{row['name']}: its rows do not read back as committed")
        result = framework.Result(card=framework.load(row["name"]).CARD, setting="",
                                  measured=row["measured"], checks=checks, size=summary["size"],
                                  wall_s=row["wall_s"] or 0.0)
        if result.verdict != row["verdict"]:
            raise ValueError(f"{row['name']}: the rows give {result.verdict!r}, the summary "
                             f"{row['verdict']!r}")
        entries.append((row["name"], result, None, ""))
    return entries


def report_html(summary: dict, forest: Path) -> str:
    """The report page of a committed summary, its forest plot embedded."""
    from normlab.lab.report_page import build_html
    from normlab.lab.results import tally

    entries = _results(summary)
    meta = {k: summary[k] for k in ("generated", "size", "seed", "normlab", "numpy", "python",
                                    "machine", "threads")}
    meta["experiments' run time (sum)"] = f"{summary['wall_s_experiments']:.0f} s"
    html = build_html(entries, meta, forest=forest)
    if tally(summary["experiments"]) != summary["tally"]:
        raise ValueError("the summary's tally is not its rows'")
    return html


def chromium(binary: str, profile: Path, *args: str) -> str:
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180, check=True).stdout


def draw_report(binary: str) -> Path:
    """docs/img/report.png from docs/results/quick.json, and its record."""
    from normlab._files import atomic_write, read_json
    from normlab.lab.results import headline

    summary = read_json(QUICK, what="committed results")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        page = tmp / "report.html"
        page.write_text(report_html(summary, FOREST_PNG), encoding="utf-8")
        dom = chromium(binary, tmp / "profile", "--dump-dom", page.as_uri())
        text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", dom)  # the text, no images
        if headline(summary["tally"]) not in text or "NaN" in text:
            raise RuntimeError("the rendered page lacks the committed tally, or shows NaN")
        shot = tmp / "shot.png"
        chromium(binary, tmp / "profile", f"--screenshot={shot}", f"--window-size={WINDOW}",
                 page.as_uri())
        atomic_write(REPORT_PNG, shot.read_bytes(), what="report picture")
    stamp(REPORT_PNG, [QUICK, FOREST_PNG], "make tables")
    return REPORT_PNG


# ---- the lab page's claim register -----------------------------------------------------------
REGISTER_CSS = ("body{font:13px/1.45 sans-serif;margin:16px 24px;color:#222}"
                "table{border-collapse:collapse;margin:6px 0 10px}"
                "th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}"
                "th{background:#f3f3f3}code{font-size:12px;background:#f6f6f6}"
                "h2{margin:4px 0}h4{margin:14px 0 4px}li{margin:3px 0}")


def register_html(register: dict) -> str:
    """The register block of docs/lab.md (``register_markdown``, as ``make tables`` writes it)
    as one HTML page under the lab page's heading."""
    import markdown

    from normlab.lab.register import register_markdown

    body = markdown.markdown("## The claim register\n\n" + register_markdown(register),
                             extensions=["tables"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{REGISTER_CSS}</style>"
            f"</head><body>{body}</body></html>")


def draw_register(binary: str) -> Path:
    """docs/img/register.png from docs/results/register.json, and its record."""
    from normlab._files import atomic_write, read_json

    register = read_json(REGISTER, what="claim register")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        page = tmp / "register.html"
        page.write_text(register_html(register), encoding="utf-8")
        dom = chromium(binary, tmp / "profile", "--dump-dom", page.as_uri())
        first = register["experiments"][0]["records"][0]["id"]
        if first not in dom or "<table>" not in dom:
            raise RuntimeError("the rendered register lacks its first record's row")
        shot = tmp / "shot.png"
        chromium(binary, tmp / "profile", f"--screenshot={shot}", f"--window-size={WINDOW}",
                 page.as_uri())
        atomic_write(REGISTER_PNG, shot.read_bytes(), what="register picture")
    stamp(REGISTER_PNG, [REGISTER], "make tables")
    return REGISTER_PNG


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what")
    rep = sub.add_parser("report", help="docs/img/report.png from docs/results/quick.json")
    rep.add_argument("--chromium", default="/usr/bin/chromium")
    reg = sub.add_parser("register", help="docs/img/register.png from docs/results/register.json")
    reg.add_argument("--chromium", default="/usr/bin/chromium")
    st = sub.add_parser("stamp", help="record what a picture was drawn from")
    st.add_argument("png", type=Path)
    st.add_argument("sources", type=Path, nargs="+")
    ap.add_argument("--check", action="store_true", help="name every picture older than its data")
    args = ap.parse_args(argv)
    if args.check:
        bad = [line for p in sorted(IMG.glob("*.png")) if sidecar(p).is_file()
               for line in stale(p)]
        print("\n".join(bad) or "every recorded picture is as new as its data",
              file=sys.stderr if bad else sys.stdout)
        return 1 if bad else 0
    if args.what in ("report", "register"):
        png, draw = ((REPORT_PNG, draw_report) if args.what == "report" else
                     (REGISTER_PNG, draw_register))
        if not Path(args.chromium).is_file():
            print(f"no Chromium at {args.chromium} (apt-get install chromium): "
                  f"{_rel(png)} not redrawn", file=sys.stderr)
            return 1
        print(f"wrote {_rel(draw(args.chromium))}")
    elif args.what == "stamp":
        print(f"wrote {_rel(stamp(args.png, args.sources, 'make tables'))}")
    else:
        ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
