"""``normlab report``: run every experiment and write one self-contained HTML page.

The page opens with the tally, the confidence level and the verdict rule, the forest plot of the
verdicts (each counted row's 95% interval against its margin; ``OUT/verdicts.png``) and a table
of claim vs published vs measured vs verdict, then has a section per experiment with its figures
(PNG, embedded as base64), the side-by-side check table, notes on known differences from the
papers, and the configuration. It references nothing outside itself: no scripts, fonts, style
sheets or images from the network. ``--quick`` (the default) runs the quick sizes, ``--full`` the
size of record (hours: resumable, and ``--ray`` sends the training runs to a cluster).

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
from ..reporting import DEFAULT_OUT, REPORT_FILE, SUMMARY_FILE, write_report
from ..running import registry
from ..sweep.executors import add_executor_arguments

__all__ = ["DEFAULT_OUT", "REPORT_FILE", "SUMMARY_FILE", "add_arguments", "check_names",
           "check_rejudgeable", "main", "write_report"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_output_arguments(p, DEFAULT_OUT, "output folder")
    add_size_arguments(p)
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments")
    p.add_argument("--no-cache", action="store_true",
                   help="recompute every experiment instead of reusing finished results, its "
                   "training runs included (each experiment's sweep store in OUT is cleared "
                   "first)")
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
    p.add_argument("--full-results", metavar="FILE", default=None,
                   help="with --markdown: the full report's summary, whose verdicts fill the "
                   "table's full column (docs/results/full.json; without it the column says "
                   "'not yet measured')")
    p.add_argument("--check-results", metavar="FILE", default=None,
                   help="with --markdown: the same size's summary at a disjoint block of seeds "
                   "(docs/results/quick-seed10000.json), set beside --results' verdicts")
    p.add_argument("--full-check-results", metavar="FILE", default=None,
                   help="with --markdown and --full-results: the full size's summary at a "
                   "disjoint block of seeds (docs/results/full-seed10000.json, some or all of "
                   "the experiments), set beside --full-results' verdicts")
    p.add_argument("--readme", metavar="FILE", nargs="+", default=None,
                   help="with --markdown: replace the generated lab blocks of these files (the "
                   "table of docs/lab.md, the README's summary)")
    p.add_argument("--forest", metavar="FILE", default=None,
                   help="with --markdown: also draw the forest plot of --results' verdicts as "
                   "this PNG (docs/img/verdicts-quick.png)")
    p.add_argument("--register", metavar="FILE", default=None,
                   help="with --markdown: the claim register (docs/results/register.json) whose "
                   "block --readme files get")
    p.add_argument("--write-register", metavar="FILE", default=None,
                   help="measure nothing: write the claim register of every experiment (their "
                   "REGISTER and AMENDMENTS, each record's grid and seeds at the quick and full "
                   "sizes) to FILE; a record FILE holds is never dropped without an amendment "
                   "that retires it")
    p.add_argument("--merge", metavar="SUMMARY", default=None,
                   help="measure nothing: merge the experiments of this report summary into "
                   "--results FILE (rewritten; `make results ONLY=NAME`)")


def _summary(path: str, flag: str) -> dict:
    """A report summary read and checked: a dict of a layout the tables read (results.READABLE)."""
    from ..._files import read_json
    from ..results import READABLE

    summary = read_json(path, what=flag)
    if not isinstance(summary, dict) or summary.get("schema") not in READABLE:
        raise ValueError(f"{flag}: {path!r} is not a report summary of schema "
                         f"{' or '.join(map(str, READABLE))} (rerun normlab report)")
    return summary


def _blocks(args: argparse.Namespace, summary: dict, full: dict | None
            ) -> tuple[dict | None, dict | None]:
    """The summaries at a disjoint block of seeds, ``--check-results`` (the same size as
    ``summary``) and ``--full-check-results`` (the full size, beside ``full``), each read and
    checked; a ValueError naming the flag otherwise."""
    check = full_check = None
    if args.check_results is not None:
        check = _summary(args.check_results, "--check-results")
        if check.get("size") != summary.get("size") or check.get("seed") == summary.get("seed"):
            raise ValueError(f"--check-results: {args.check_results!r} must be a summary of "
                             f"the {summary.get('size')!r} size at another seed than "
                             f"{summary.get('seed')!r} (normlab report --seed N)")
    if args.full_check_results is not None:
        full_check = _summary(args.full_check_results, "--full-check-results")
        if full is None or full_check.get("size") != "full" or full_check.get(
                "seed") == full.get("seed"):
            raise ValueError(f"--full-check-results: {args.full_check_results!r} must be a "
                             f"summary of the full size at another seed than "
                             f"--full-results' (normlab report --full --seed N), given with "
                             f"--full-results")
    return check, full_check


def _markdown(args: argparse.Namespace) -> int:
    """``--markdown``: the lab's tables from a summary (and the full one); every input checked
    first, then the forest plot and the files written."""
    from ..._files import check_input_file, check_output_dir, check_output_path, read_json
    from ..cli import UsageError
    from ..results import blocks_of, markdown, update_readme

    if args.rejudge or args.no_cache or args.seed is not None or args.only:
        raise UsageError("--markdown measures nothing: it takes no --rejudge, --no-cache, "
                         "--seed or --only")
    source = args.results or str(Path(args.out) / SUMMARY_FILE)
    try:
        summary = _summary(source, "--results")
        full = None
        if args.full_results is not None:
            full = _summary(args.full_results, "--full-results")
            if full.get("size") != "full":
                raise ValueError(f"--full-results: {args.full_results!r} is a summary of the "
                                 f"{full.get('size')!r} size, not of the full size")
        check, full_check = _blocks(args, summary, full)
        register = None if args.register is None else read_json(args.register,
                                                                what="--register")
        text = markdown(summary, full, check=check, full_check=full_check)
        for name in args.readme or []:
            readme = check_input_file(name, what="--readme")
            try:
                blocks_of(readme.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ValueError(f"--readme: {name}: {exc}") from None
        if args.forest is not None:
            check_output_dir(Path(args.forest).parent, what="--forest")
            check_output_path(args.forest, what="--forest")
    except (KeyError, TypeError) as exc:
        raise UsageError(f"--results: {source!r} lacks a summary field ({exc})") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.forest is not None:
        from ..plotting import forest

        out = Path(args.forest)
        forest(summary, out.parent, out.name)
        print(f"{args.forest}: the forest plot of {source}'s verdicts")
    if args.readme is None:
        print(text)
    for name in args.readme or []:
        changed = update_readme(name, summary, full, check, full_check, register)
        print(f"{name}: lab blocks {'rewritten' if changed else 'already up to date'} "
              f"from {source}" + (f" and {args.full_results}" if full is not None else ""))
    return 0


def _merge(args: argparse.Namespace) -> int:
    """``--merge SUMMARY --results FILE``: SUMMARY's experiments merged into FILE (rewritten
    atomically); both read and checked before FILE is touched."""
    from ..._files import read_json, write_json
    from ..cli import UsageError
    from ..results import SCHEMA, merge

    if (args.results is None or args.markdown or args.rejudge or args.only or args.readme
            or args.full_results or args.forest or args.check_results
            or args.full_check_results):
        raise UsageError("--merge SUMMARY needs --results FILE (the committed summary) and "
                         "takes no --markdown, --rejudge, --only, --readme, --full-results, "
                         "--check-results, --full-check-results or --forest")
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


def _write_register(args: argparse.Namespace) -> int:
    """``--write-register FILE``: the register of every experiment, written atomically after it
    is checked against the FILE already there (no record dropped without an amendment)."""
    from ..._files import read_json, write_json
    from ..cli import UsageError
    from ..register import RegisterError, check_register_file
    from ..running import register_json

    if args.markdown or args.merge or args.rejudge or args.only or args.readme:
        raise UsageError("--write-register FILE measures nothing: it takes no --markdown, "
                         "--merge, --rejudge, --only or --readme")
    try:
        new = register_json(registry())
        if Path(args.write_register).is_file():
            check_register_file(read_json(args.write_register, what="--write-register"), new)
    except RegisterError as exc:
        raise UsageError(f"--write-register: {exc}") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    write_json(args.write_register, new, what="--write-register")
    n = sum(len(e["records"]) for e in new["experiments"])
    print(f"{args.write_register}: the claim register, {n} records of "
          f"{len(new['experiments'])} experiments")
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
    from ..running import DamagedResult, judge_cached

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
    from ..cache import RESULT_FILE, read_cached
    from ..cli import UsageError
    from ..plotting import FOREST_FILE
    from ..running import load
    from ..sweep.executors import executor_from_args

    if args.write_register is not None:
        return _write_register(args)
    if args.merge is not None:
        return _merge(args)
    if args.markdown:
        return _markdown(args)
    if any(v is not None for v in (args.results, args.readme, args.full_results, args.forest,
                                   args.check_results, args.full_check_results,
                                   args.register)):
        raise UsageError("--results, --full-results, --check-results, --full-check-results, "
                         "--readme, --register and --forest go with --markdown")
    seed = check_output_arguments(args)
    names = check_names(args.only)
    executor = executor_from_args(args)
    if args.rejudge and (args.no_cache or seed is not None):
        raise UsageError("--rejudge measures nothing: it takes no --no-cache or --seed")
    selected = list(registry()) if names is None else names
    dirs = [load(n).CARD.name for n in selected]
    check_output_files(args.out,
                       [REPORT_FILE, SUMMARY_FILE, FOREST_FILE,
                        *(f"{d}/{RESULT_FILE}" for d in dirs)])
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
