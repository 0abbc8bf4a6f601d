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
from pathlib import Path

from ..arguments import add_output_arguments, add_size_arguments
from ..framework import registry
from ..reporting import DEFAULT_OUT, REPORT_FILE, SUMMARY_FILE, write_report
from ..sweep.executors import add_executor_arguments

__all__ = ["DEFAULT_OUT", "REPORT_FILE", "SUMMARY_FILE", "add_arguments", "check_names",
           "check_rejudgeable", "main", "write_report"]


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
