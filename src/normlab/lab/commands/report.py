"""``normlab report``: run every experiment and write one self-contained HTML page.

The page opens with a table of claim vs published vs measured vs verdict, then has a section per
experiment with its figures (PNG, embedded as base64), the side-by-side check table, notes on known
differences from the papers, and the configuration. It references nothing outside itself: no
scripts, fonts, style sheets or images from the network.

Each experiment's result is cached in ``OUT/<name>/result.json`` (with its figures) as soon as it
finishes, so an interrupted report resumes where it stopped; a result is reused only when the
configuration and the experiment's source are unchanged. ``--rejudge`` measures nothing: it judges
the cached measurements again with the experiments' current rules and rewrites the page.

Every argument is checked before any file is touched; the page and ``summary.json`` are written
atomically (``normlab._files``).
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import html
import json
import os
import platform
import re
import time
import traceback
from pathlib import Path
from typing import Any

from normlab import portable

from ..arguments import add_output_arguments, add_size_arguments
from ..framework import (
    BROKEN,
    HOLDS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    VERDICT_RULE,
    Result,
    load,
    registry,
)
from ..sweep.executors import add_executor_arguments

DEFAULT_OUT = "normlab-report"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"

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
.v-error { background: #ddd; color: #333; }
.pass, .holds { color: #145214; font-weight: 600; } .FAIL { color: #a01010; font-weight: 600; }
.inconclusive { color: #2b2b6b; font-weight: 600; }
tr.identity td { background: #fafafa; }
.shown { color: #555; font-style: italic; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.meta { color: #555; font-size: 0.9em; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; font-size: 0.82em; }
.note { background: #f5f8ff; border-left: 3px solid #8aa4d6; padding: 0.3em 0.8em; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _verdict_badge(verdict: str) -> str:
    cls = {REPRODUCED: "v-reproduced", PARTLY: "v-partly", NOT_REPRODUCED: "v-not",
           INCONCLUSIVE: "v-inconclusive", HOLDS: "v-reproduced", BROKEN: "v-not"}.get(
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
    for c in sorted(r.checks, key=lambda c: c.identity):  # the empirical claims first
        note = f"<br /><span class='shown'>{_e(c.note)}</span>" if c.note else ""
        kind = " (identity)" if c.identity else ""
        parts.append(
            f"<tr class='{'identity' if c.identity else 'claim'}'><td>{_e(c.claim)}{note}</td>"
            f"<td>{_e(c.source)}</td><td>{_e(c.published)}</td>"
            f"<td class='num'>{_e(c.measured)}</td><td>{_e(c.rule)}</td>"
            f"<td class='{_e(c.status)}'>{_e(c.status)}{kind}</td></tr>")
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


def build_html(entries: list[tuple[str, Result | None, Path | None, str]], meta: dict) -> str:
    """The page. ``entries``: (name, result or None, its directory, error text)."""
    from ..results import headline, summarize

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
    tally = headline(summarize(entries, {})["tally"])
    sections = [(_section(r, d) if r is not None else _error_section(n, err))
                for n, r, d, err in entries]
    meta_line = " &#183; ".join(_e(f"{k}: {v}") for k, v in meta.items())
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8" />',
        '<meta name="viewport" content="width=device-width, initial-scale=1" />',
        "<title>normlab report</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<h1>normlab report</h1>",
        ("<p>Normalization, residual design and numeric precision in deep Transformers: the "
        "papers' claims measured on this machine with normlab's own layers, next to the "
        "published numbers.</p>"),
        f"<p class='meta'>{meta_line}</p>",
        (f"<p><b>{_e(tally)}.</b> Verdict rule: {_e(VERDICT_RULE)} Each rule is fixed in advance "
        "from the reference notes; none is tuned to the measurement. A check on a training or "
        "random quantity is decided from an interval over seeds (shown beside its number).</p>"),
        ("<table><tr><th>Experiment</th><th>Claim</th><th>Published</th><th>Measured</th>"
        "<th>Verdict</th></tr>"),
        *rows,
        "</table>",
        differences_html({n: r for n, r, _, _ in entries if r is not None}),
        *sections,
        "</body>",
        "</html>",
        "",
    ])


def differences_html(results: dict[str, Result]) -> str:
    """The section 'Where the chapters and the sources differ' (``normlab.lab.chapters``), each
    row's measurement read from this report's results."""
    from ..chapters import DIFFERENCES

    rows = []
    for d in DIFFERENCES:
        measured = d.evidence
        r = results.get(d.experiment)
        check = next((c for c in r.checks if c.claim.startswith(d.check)), None) if r else None
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


def _machine() -> str:
    cpus: int | None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count()
    isa = ", the portable instruction set (x86-64-v3)" if portable.active() else ""
    return f"{platform.machine()}{isa}, {cpus} CPU(s) available"


def write_report(
    out_dir: str | os.PathLike = DEFAULT_OUT,
    *,
    size: str = "quick",
    names: list[str] | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    show_progress: bool = True,
    executor: str = "pool",
    rejudge: bool = False,
) -> tuple[Path, list[tuple[str, Result | None, Path | None, str]], float]:
    """Run (or reuse) each experiment, then write ``out_dir/report.html`` and ``summary.json``.
    ``executor`` runs the training experiments' sweeps (pool, pool:N, serial, ray:ADDRESS);
    ``rejudge`` measures nothing and judges the cached measurements again.

    Returns the page's path, the entries and this invocation's wall time in seconds.
    """
    from ..progress import _Plain, reporter

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(registry()) if names is None else list(names)
    reused: list[str] = []
    t0 = time.perf_counter()
    one = _rejudge_one if rejudge else _run_one(size, seed, out, use_cache, executor)

    def entry(rep, name):
        cb = rep.start(name)
        try:
            o = one(name, out, cb)
        except KeyboardInterrupt:
            raise
        except Exception:  # the page reports it; the other experiments still run
            err = traceback.format_exc()
            rep.finish(name, "error: " + err.strip().splitlines()[-1])
            return (name, None, None, err)
        if o.reused:
            reused.append(name)
        how = "judged again" if rejudge else ("cached" if o.reused else f"{o.result.wall_s:.1f} s")
        rep.finish(name, f"{o.result.verdict} ({how})")
        return (name, o.result, o.out_dir, "")

    if show_progress:
        with reporter(len(names)) as rep:
            entries = [entry(rep, n) for n in names]
    else:
        rep = _Plain(open(os.devnull, "w"))
        entries = [entry(rep, n) for n in names]
    elapsed = time.perf_counter() - t0
    _write_page(out, entries, _meta(size, entries, elapsed, reused), elapsed, reused, size)
    return out / REPORT_FILE, entries, elapsed


def _run_one(size, seed, out, use_cache, executor):
    from ..framework import run_experiment

    def one(name, out_dir, progress):
        return run_experiment(name, size=size, seed=seed, out_dir=out_dir, progress=progress,
                              use_cache=use_cache, executor=executor)

    return one


def _rejudge_one(name, out_dir, progress):
    from ..framework import rejudge

    return rejudge(name, out_dir)


def _meta(size: str, entries: Any, elapsed: float, reused: list[str]) -> dict:
    """The run's setting, as summary.json records it."""
    import numpy as np

    from ... import __version__

    seeds = {r.config.get("seed") for _, r, _, _ in entries if r is not None}
    return {
        "generated": _dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "size": size,
        "seed": seeds.pop() if len(seeds) == 1 else None,
        "wall_s_experiments": sum(r.wall_s for _, r, _, _ in entries if r is not None),
        "wall_s_this_invocation": elapsed,
        "reused": reused,
        "normlab": __version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": _machine(),
        "threads": ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in
                             ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")),
    }


def _meta_line(meta: dict, n: int) -> dict:
    """The page's one-line setting, from the summary's."""
    shown = {k: v for k, v in meta.items() if k not in ("wall_s_experiments",
                                                        "wall_s_this_invocation", "reused")}
    shown["experiments' run time (sum)"] = f"{meta['wall_s_experiments']:.0f} s"
    shown["this invocation"] = (f"{meta['wall_s_this_invocation']:.0f} s ({len(meta['reused'])} "
                                f"of {n} results reused from the cache)")
    return shown


def _write_page(out: Path, entries: Any, meta: dict, elapsed: float, reused: list[str],
                size: str) -> None:
    """``report.html`` and ``summary.json``, each written atomically."""
    from ..._files import atomic_write, write_json
    from ..results import summarize

    atomic_write(out / REPORT_FILE, build_html(entries, _meta_line(meta, len(entries))),
                 what="report page")
    write_json(out / SUMMARY_FILE, summarize(entries, meta), what="report summary")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_output_arguments(p, DEFAULT_OUT, "output folder")
    add_size_arguments(p)
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments")
    p.add_argument("--no-cache", action="store_true",
                   help="recompute every experiment instead of reusing finished results")
    p.add_argument("--rejudge", action="store_true",
                   help="measure nothing: judge the cached measurements in OUT again with the "
                   "experiments' current rules, and rewrite the page")
    add_executor_arguments(p)
    p.add_argument("--markdown", action="store_true",
                   help="measure nothing: print the README's lab table rendered from a report "
                   "summary (--results), or with --readme write it into that file")
    p.add_argument("--results", metavar="FILE", default=None,
                   help="with --markdown: the summary to render (default OUT/summary.json; the "
                   "committed one is docs/results/quick.json)")
    p.add_argument("--readme", metavar="FILE", default=None,
                   help="with --markdown: replace the generated lab block of this README")
    p.add_argument("--merge", metavar="SUMMARY", default=None,
                   help="measure nothing: merge the experiments of this report summary into "
                   "--results FILE (rewritten; `make results ONLY=NAME`)")


def _markdown(args: argparse.Namespace) -> int:
    """``--markdown``: the README's lab table from a summary; every input checked first."""
    from ..._files import check_input_file, read_json
    from ..cli import UsageError
    from ..results import SCHEMA, markdown, readme_block, update_readme

    if args.rejudge or args.no_cache or args.seed is not None or args.only:
        raise UsageError("--markdown measures nothing: it takes no --rejudge, --no-cache, "
                         "--seed or --only")
    source = args.results or str(Path(args.out) / SUMMARY_FILE)
    try:
        summary = read_json(source, what="--results")
        if not isinstance(summary, dict) or summary.get("schema") != SCHEMA:
            raise ValueError(f"--results: {source!r} is not a report summary of schema {SCHEMA} "
                             "(rerun normlab report)")
        text = markdown(summary)
        if args.readme is not None:
            readme = check_input_file(args.readme, what="--readme")
            readme_block(readme.read_text(encoding="utf-8"))
    except (KeyError, TypeError) as exc:
        raise UsageError(f"--results: {source!r} lacks a summary field ({exc})") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.readme is None:
        print(text)
    else:
        changed = update_readme(args.readme, summary)
        print(f"{args.readme}: lab block {'rewritten' if changed else 'already up to date'} "
              f"from {source}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    """``--merge SUMMARY --results FILE``: SUMMARY's experiments merged into FILE (rewritten
    atomically); both read and checked before FILE is touched."""
    from ..._files import read_json, write_json
    from ..cli import UsageError
    from ..results import SCHEMA, merge

    if args.results is None or args.markdown or args.rejudge or args.only or args.readme:
        raise UsageError("--merge SUMMARY needs --results FILE (the committed summary) and "
                         "takes no --markdown, --rejudge, --only or --readme")
    try:
        both = [read_json(p, what=flag) for p, flag in ((args.results, "--results"),
                                                         (args.merge, "--merge"))]
        for d, flag in zip(both, ("--results", "--merge")):
            if not isinstance(d, dict) or d.get("schema") != SCHEMA:
                raise ValueError(f"{flag}: not a report summary of schema {SCHEMA}")
        merged = merge(both[0], both[1], list(registry()))
    except (KeyError, TypeError) as exc:
        raise UsageError(f"--merge: a summary lacks a field ({exc})") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    write_json(args.results, merged, what="--results")
    names = ", ".join(r["name"] for r in both[1]["experiments"])
    print(f"{args.results}: merged {names} from {args.merge}")
    return 0


def check_names(names: list[str] | None) -> list[str] | None:
    """``--only``'s names, each a known experiment (hyphens or underscores); refused otherwise
    with the closest name and the list."""
    from ... import _checks as ck
    from ..arguments import check_flag

    if names is None:
        return None
    known = list(registry())
    spelled = [str(n).replace("_", "-") for n in names]
    check_flag(lambda v, flag: ck.known_keys(v, known, f"experiment in {flag}"), spelled,
               "--only")
    return spelled


def check_rejudgeable(out: str, names: list[str]) -> None:
    """``--rejudge`` validates every cached result before writing anything (its config through
    the experiment's own checks, its data by the experiment's judge): one that is damaged is a
    UsageError naming it, and the page and the cache are left as they were."""
    from ..cli import UsageError
    from ..framework import DamagedResult, judge_cached

    damaged = []
    for name in names:
        try:
            judge_cached(name, out)
        except FileNotFoundError:
            continue  # not measured yet: the page reports it, as before
        except DamagedResult as exc:
            damaged.append(str(exc))
    if damaged:
        raise UsageError(f"--rejudge: {len(damaged)} cached result(s) cannot be judged again, so "
                         f"the page and the cache are left as they were: {'; '.join(damaged)} "
                         f"(measure again with normlab report --out {out})")


def main(args: argparse.Namespace) -> int:
    from ..arguments import check_output_arguments, check_output_files, make_output_dir
    from ..cli import UsageError
    from ..framework import RESULT_FILE, load, read_cached
    from ..sweep.executors import executor_from_args

    if args.merge is not None:
        return _merge(args)
    if args.markdown:
        return _markdown(args)
    if args.results is not None or args.readme is not None:
        raise UsageError("--results and --readme go with --markdown")
    seed = check_output_arguments(args)
    names = check_names(args.only)
    executor = executor_from_args(args)
    if args.rejudge and (args.no_cache or seed is not None):
        raise UsageError("--rejudge measures nothing: it takes no --no-cache or --seed")
    selected = list(registry()) if names is None else names
    dirs = [load(n).CARD.name for n in selected]
    check_output_files(args.out,
                       [REPORT_FILE, "summary.json", *(f"{d}/{RESULT_FILE}" for d in dirs)])
    if args.rejudge:
        check_rejudgeable(args.out, selected)
    if args.rejudge and not any(read_cached(Path(args.out) / d, None) for d in dirs):
        raise UsageError(f"--rejudge: {args.out} holds no cached result of "
                         f"{', '.join(selected) if names else 'any experiment'} to judge again; "
                         f"run normlab report --out {args.out} first (the page is left as it is)")
    make_output_dir(args.out)
    path, entries, elapsed = write_report(args.out, size=args.size, names=names, seed=seed,
                                          use_cache=not args.no_cache, executor=executor,
                                          rejudge=args.rejudge)
    print()
    for name, r, _, _err in entries:
        verdict = r.verdict if r is not None else "did not finish"
        print(f"{name:<26} {verdict:<18} {r.measured if r is not None else ''}")
    print(f"\nwrote {path} in {elapsed:.0f} s")
    return 1 if any(r is None for _, r, _, _ in entries) else 0
