"""The report's page, rendered from the results: the forest plot of the verdicts (each counted
row's 95% interval against its margin) and the rows it does not draw, the table of claims, one
section per experiment (figures embedded as base64 PNG, the side-by-side check table with each
row's kind, the notes as HTML, the configuration) and the chapters' differences. Pure rendering:
nothing is measured or written here (:mod:`normlab.lab.reporting` runs the experiments, draws the
forest plot and writes the page)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from .contract import (
    BROKEN,
    CLAIM,
    DERIVATION,
    HOLDS,
    IDENTITY,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_TESTED,
    PARTLY,
    PREMISE,
    REPRODUCED,
    SHOWN,
    VERDICT_RULE,
    Result,
)
from .html_page import escape as _e
from .html_page import page

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif;
       max-width: 1180px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.88em; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 7px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
td.num { font-family: ui-monospace, Menlo, Consolas, monospace; }
.v { font-weight: 600; white-space: nowrap; padding: 1px 6px; border-radius: 3px; }
.v-reproduced { background: #d8f0d8; color: #145214; }
.v-partly { background: #fff0c2; color: #6b4e00; }
.v-not { background: #f8d4d4; color: #7a1010; }
.v-inconclusive { background: #e4e4f4; color: #2b2b6b; }
.v-not-tested { background: #eeeeee; color: #444; border: 1px dashed #999; }
.v-error { background: #ddd; color: #333; }
.pass, .holds { color: #145214; font-weight: 600; } .FAIL { color: #a01010; font-weight: 600; }
.inconclusive { color: #2b2b6b; font-weight: 600; }
tr.identity td, tr.shown td { background: #fafafa; } tr.premise td { background: #f6f6ee; }
.kind { color: #555; font-size: 0.85em; }
.shown { color: #555; font-style: italic; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.meta { color: #555; font-size: 0.9em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.82em; }
.note { background: #f5f8ff; border-left: 3px solid #8aa4d6; padding: 0.3em 0.8em; }
"""



def _verdict_badge(verdict: str) -> str:
    cls = {REPRODUCED: "v-reproduced", PARTLY: "v-partly", NOT_REPRODUCED: "v-not",
           INCONCLUSIVE: "v-inconclusive", NOT_TESTED: "v-not-tested", HOLDS: "v-reproduced",
           BROKEN: "v-not"}.get(
               verdict, "v-error")
    return f'<span class="v {cls}">{_e(verdict)}</span>'


def _png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _section(result: Result, exp_dir: Path | None) -> str:
    r = result
    parts = [f'<section id="{_e(r.name)}">',
             f"<h2>{_e(r.title)} <small>({_e(r.name)})</small> {_verdict_badge(r.verdict)}</h2>",
             f"<p><b>Claim.</b> {_e(r.claim)} <i>{_e(r.citation)}</i></p>",
             f"<p><b>Published.</b> {_e(r.published)}</p>",
             f"<p><b>Our setting.</b> {_e(r.setting)}</p>",
             f"<p><b>Measured.</b> {_e(r.measured)}</p>"]
    if r.explanation:
        parts.append(f"<p>{_e(r.explanation)}</p>")
    taught = notebooks_of(r.name)
    if taught:
        links = ", ".join(f'<a href="../notebooks/{_e(nb)}">{_e(nb)}</a>' for nb in taught)
        parts.append(f"<p><b>Learn it with the chapters.</b> The companion notebooks "
                     f"(<code>notebooks/</code>): {links}</p>")
    for fig in r.figures:
        path = None if exp_dir is None else exp_dir / fig
        if path is not None and path.is_file():
            parts.append(f'<img alt="{_e(r.name)}: {_e(fig)}" src="{_png_data_uri(path)}" />')
    parts.append("<table><tr><th>Claim</th><th>Source</th><th>Published</th><th>Measured</th>"
                 "<th>Rule</th><th>Result</th></tr>")
    order = {PREMISE: 0, CLAIM: 1, SHOWN: 2, IDENTITY: 3, DERIVATION: 3}
    for c in sorted(r.checks, key=lambda c: order.get(c.kind, 4)):  # premises, then claims
        note = f"<br /><span class='shown'>{_e(c.note)}</span>" if c.note else ""
        rule = _e(c.rule) + (f"<br /><span class='kind'>{_e(c.form)}; margin from "
                             f"{_e(c.margin_source)}</span>" if c.margin_source else
                             (f"<br /><span class='kind'>{_e(c.form)}</span>" if c.form else ""))
        parts.append(
            f"<tr class='{_e(c.kind)}'><td>{_e(c.claim)}{note}</td>"
            f"<td>{_e(c.source)}</td><td>{_e(c.published)}</td>"
            f"<td class='num'>{_e(c.measured)}</td><td>{rule}</td>"
            f"<td><span class='{_e(c.status)}'>{_e(c.status)}</span><br />"
            f"<span class='kind'>{_e(c.kind)}</span></td></tr>")
    parts.append("</table>")
    if r.notes.strip():
        parts.append("<div class='note'><p><b>Notes and known differences.</b></p>"
                     f"{markdown_html(r.notes)}</div>")
    parts.append(f"<p class='meta'>size {_e(r.size)}, run time {r.wall_s:.1f} s. "
                 f"Verdict rule: {_e(r.verdict_rule)}</p>")
    parts.append("<details><summary>configuration</summary><pre>"
                 f"{_e(json.dumps(r.config, indent=1))}</pre></details>")
    parts.append("</section>")
    return "\n".join(parts)


def notebooks_of(name: str) -> list[str]:
    """The companion notebooks that teach experiment ``name`` (its card's ``notebooks``)."""
    from .running import load

    return list(load(name).CARD.notebooks)


def markdown_html(text: str) -> str:
    """The notes' markdown as HTML: paragraphs, ``- `` bullet lists (an indented line continues
    an item) and `code`; everything else is escaped text."""
    blocks: list[tuple[str, list[str]]] = []  # ("p" or "li", lines)
    for line in text.splitlines():
        if not line.strip():
            blocks.append(("", []))
        elif line.startswith("- "):
            blocks.append(("li", [line[2:]]))
        elif blocks and blocks[-1][0] and (line.startswith(" ") or blocks[-1][0] == "p"):
            blocks[-1][1].append(line.strip())
        else:
            blocks.append(("p", [line.strip()]))
    out, in_list = [], False
    for kind, lines in blocks:
        if kind != "li" and in_list:
            out.append("</ul>")
            in_list = False
        if not kind:
            continue
        body = re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(" ".join(lines)))
        if kind == "li" and not in_list:
            out.append("<ul>")
            in_list = True
        out.append(f"<li>{body}</li>" if kind == "li" else f"<p>{body}</p>")
    return "".join(out + (["</ul>"] if in_list else []))


def _error_section(name: str, error: str) -> str:
    return (f'<section id="{_e(name)}"><h2>{_e(name)} {_verdict_badge("error")}</h2>'
            f"<p>The experiment did not finish:</p><pre>{_e(error)}</pre></section>")


def build_html(entries: list[tuple[str, Result | None, Path | None, str]], meta: dict, *,
               forest: Path | None = None) -> str:
    """The page. ``entries``: (name, result or None, its directory, error text); ``forest``: the
    forest plot of the verdicts (a PNG, embedded) when it was drawn."""
    from .results import CONFIDENCE, summarize, tallies

    rows = []
    for name, r, _, err in entries:
        if r is None:
            rows.append(f"<tr><td><a href='#{_e(name)}'>{_e(name)}</a></td><td colspan='3'>"
                        f"did not finish: {_e(err.strip().splitlines()[-1] if err else '')}</td>"
                        f"<td>{_verdict_badge('error')}</td></tr>")
            continue
        rows.append(
            f"<tr><td><a href='#{_e(name)}'>{_e(r.title)}</a></td>"
            f"<td>{_e(r.claim)}<br /><i>{_e(r.citation)}</i></td><td>{_e(r.published)}</td>"
            f"<td>{_e(r.measured)}</td><td>{_verdict_badge(r.verdict)}</td></tr>")
    summary = summarize(entries, {"size": next((r.size for _, r, _, _ in entries
                                                if r is not None and r.size), "quick")})
    tally = tallies(summary, bold=False)
    sections = [(_section(r, d) if r is not None else _error_section(n, err))
                for n, r, d, err in entries]
    meta_line = " &#183; ".join(_e(f"{k}: {v}") for k, v in meta.items())
    return page("normlab report", [
        "<h1>normlab report</h1>",
        ("<p>Normalization, residual design and numeric precision in deep Transformers: the "
        "papers' claims measured on this machine with normlab's own layers, next to the "
        "published numbers.</p>"),
        f"<p class='meta'>{meta_line}</p>",
        f"<p><b>{_e(tally)}.</b></p>",
        (f"<p><b>Confidence.</b> {_e(CONFIDENCE)} A check on a training or random quantity is "
         "decided from its interval (shown beside its number) against a margin written in the "
         "experiment before measuring, with where the margin comes from; the seed count of each "
         "experiment is fixed on its configuration for the whole experiment, and its notes say "
         "where it came from: a pilot at seeds no verdict uses, or, for the counts raised after "
         "a verdict had differed between seed blocks, those verdict runs' spread.</p>"),
        f"<p><b>Verdict rule.</b> {_e(VERDICT_RULE)}</p>",
        forest_html(summary, forest),
        ("<table><tr><th>Experiment</th><th>Claim</th><th>Published</th><th>Measured</th>"
        "<th>Verdict</th></tr>"),
        *rows,
        "</table>",
        differences_html({n: r for n, r, _, _ in entries if r is not None}),
        *sections,
    ], css=_CSS)


def forest_html(summary: dict, forest: Path | None) -> str:
    """The forest plot (embedded), its caption, and the counted rows it does not draw (decided
    from a single number), listed by experiment."""
    from .results import forest_caption, forest_rows

    parts = ["<h2 id='verdicts'>The verdicts, row by row</h2>"]
    if forest is not None and forest.is_file():
        parts.append(f'<img alt="forest plot: each counted row\'s 95% interval against its '
                     f'margin" src="{_png_data_uri(forest)}" />')
    parts.append(f"<p class='meta'>{_e(forest_caption())}</p>")
    listed = forest_rows(summary)[1]
    if listed:
        items = "".join(
            f"<li><a href='#{_e(x['experiment'])}'>{_e(x['experiment'])}</a>"
            f"{' (premise)' if x['kind'] == PREMISE else ''}: {_e(x['claim'])}: "
            f"<span class='num'>{_e(x['measured'])}</span> "
            f"<span class='{_e(x['status'])}'>({_e(x['status'])})</span></li>"
            for x in listed)
        parts.append("<p><b>Counted rows not drawn</b> (decided from a single number, not an "
                     f"interval against a margin):</p><ul>{items}</ul>")
    return "\n".join(parts)


def differences_html(results: dict[str, Result]) -> str:
    """The section 'Where the chapters and the sources differ' (``normlab.lab.chapters``), each
    row's measurement read from this report's results."""
    from .chapters import DIFFERENCES

    rows = []
    for d in DIFFERENCES:
        measured = d.evidence
        r = results.get(d.experiment)
        ids = {c.id: c for c in r.checks} if r else {}
        check = next((ids[i] for i in d.check if i in ids), None)
        if check is not None:
            measured = (f"<a href='#{_e(d.experiment)}'>{_e(d.experiment)}</a>: "
                        f"{_e(check.measured)} <span class='{_e(check.status)}'>"
                        f"({_e(check.status)})</span>")
        elif d.experiment:
            measured = f"{_e(d.experiment)}: not run in this report"
        else:
            measured = _e(measured)
        rows.append(f"<tr><td>{_e(d.chapter)}</td><td>{_e(d.says)}</td><td>{_e(d.source)}</td>"
                    f"<td>{measured}</td></tr>")
    return ("<h2 id='chapters'>Where the chapters and the sources differ</h2>"
            "<table><tr><th>Chapter</th><th>The chapter says</th><th>The source says</th>"
            "<th>normlab measured</th></tr>" + "".join(rows) + "</table>")
