"""``normlab sweep SPEC.toml``: run a sweep's points that the store has not finished, on a local
process pool (default) or a Ray cluster; ``--summary`` prints the table and draws the plots.

The spec (see ``normlab.lab.sweep.spec``) is read and checked whole before anything runs; a bad
one is refused with the field named (exit status 2). The store is ``--out`` (default
``sweeps/<spec name>``): one directory per run, written atomically, so the same command after a
crash or a kill resumes: finished runs are kept, failed and unfinished ones run again.

A spec is bounded (at most ``--max-points`` points, 1000 by default; ``--dry-run`` counts them
whatever their number; a lifted cap still refuses a sweep whose list of points would not fit in
half the memory available), its ``data_path`` checked before anything runs, every point's memory
estimate checked against the machine, and the store checked writable: each refusal is one line
(exit status 2). A run whose directory cannot be written is reported as failed and the sweep goes
on; a finished run whose result is damaged is run again (its files kept aside), and ``--summary``
reads only results that validate, naming the others.

Exit status: 0 when every point finished (diverged runs are results), 1 when some failed, 2 for
bad input, 130 / 143 when interrupted by Ctrl-C / SIGTERM (finished runs are kept).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from types import FrameType

    from ..sweep.spec import Point, SweepSpec
    from ..sweep.store import RunRecord

DEFAULT_ROOT = "sweeps"
SUMMARY_DIR = "summary"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep: [base], [grid], [random], seeds")
    p.add_argument("--out", metavar="DIR", default=None,
                   help=f"the results store (default: {DEFAULT_ROOT}/<spec name>)")
    from ..sweep.executors import add_executor_arguments

    add_executor_arguments(p)
    p.add_argument("--summary", action="store_true",
                   help="run nothing: print the table and write the plots to OUT/summary/")
    p.add_argument("--lr-range", nargs=2, type=float, metavar=("A", "B"), default=None,
                   help="the learning rates the LR sensitivity averages over (default: all)")
    p.add_argument("--dry-run", action="store_true",
                   help="run nothing: count the points, and list them with their ids and what the "
                   "store holds")
    p.add_argument("--max-points", type=int, metavar="N", default=None,
                   help="the most points a spec may have (default: 1000); a bigger grid or random "
                   "search is refused unless this lifts the cap")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the sweep stops as on Ctrl-C."""


def _on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Terminated()


class _Refused(Exception):
    """Bad input: printed as one line, exit status 2."""


def _refuse(message: str) -> int:
    print(f"normlab sweep: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    """Parse, check, dispatch: a dry run, the summary, or the sweep itself."""
    from ..sweep import read_sweep
    from ..sweep.executors import executor_from_args

    try:
        if args.max_points is not None and args.max_points < 1:
            raise _Refused(f"--max-points must be an integer >= 1; got {args.max_points}")
        where = executor_from_args(args)
        spec, points = _load_points(args)
        if points is None:
            print(f"{spec.size:,} points (grid x random.samples x seeds), more than the cap of "
                  f"{args.max_points or _max_points():,}: listing and running them needs "
                  f"--max-points {spec.size}")
            return 0
        out = Path(args.out) if args.out else Path(DEFAULT_ROOT) / Path(args.spec).stem
        if out.exists() and not out.is_dir():
            raise _Refused(f"--out {out}: exists and is not a directory")
        if args.dry_run:
            return _dry_run(points, read_sweep(points, out), out)
        if args.summary:
            return _summary(args, points, out)
        return _sweep(args, where, points, out)
    except _Refused as exc:
        return _refuse(str(exc))


def _max_points() -> int:
    from ..sweep.spec import MAX_POINTS

    return MAX_POINTS


def _load_points(args: argparse.Namespace) -> tuple[SweepSpec, list[Point] | None]:
    """The spec and its points (None: a dry run over the cap); refuses a bad spec or cap."""
    from ..sweep import SpecError, load_spec

    cap = args.max_points or _max_points()
    try:
        spec = load_spec(args.spec, max_points=None if args.dry_run else cap)
        if args.dry_run and spec.size > cap:
            return spec, None
        listing = _listing_bytes(spec.size)
        if listing is not None:
            raise _Refused(f"--max-points {cap}: listing {spec.size:,} points needs about "
                           f"{listing}; sweep fewer points")
        return spec, spec.points()
    except SpecError as exc:
        raise _Refused(str(exc)) from None


def _summary(args: argparse.Namespace, points: list[Point], out: Path) -> int:
    """``--summary``: the table printed, the plots and summary.json written."""
    from ..._files import write_json
    from ..sweep import plot_summary, print_summary, read_sweep, summarize

    records = read_sweep(points, out)
    for r in records:
        if r.damaged:
            print(f"normlab sweep: run {r.id}: {r.damaged}; not used (counted as pending; the "
                  f"next sweep runs it again)", file=sys.stderr)
    try:
        summary = summarize(records, lr_range=tuple(args.lr_range) if args.lr_range else None)
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    print_summary(summary)
    if not any(r.finished for r in records):
        print(f"no finished runs in {out} yet; nothing to plot")
        return 0
    try:
        files = plot_summary(summary, out / SUMMARY_DIR)
        write_json(out / SUMMARY_DIR / "summary.json", summary.to_dict(), what="sweep summary",
                   indent=1)
    except OSError as exc:
        raise _Refused(f"--out {out}: cannot write the summary: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _Refused(f"--out {out}: {exc}") from None
    print(f"wrote {', '.join(str(out / SUMMARY_DIR / f) for f in files)} and summary.json")
    return 0


def _executor(args: argparse.Namespace, where: str, points: list[Point], out: Path) -> Any:
    """The executor for the unfinished points, after the memory, store and Ray checks."""
    from ...train.budget import MemoryBudgetError
    from ..sweep import read_sweep
    from ..sweep.executors import RayUnavailable, import_ray, make_executor
    from ..sweep.runner import check_points_fit
    from ..sweep.store import RunStore, StoreError

    todo = [p for p, r in zip(points, read_sweep(points, out)) if not r.finished]
    try:
        check_points_fit(todo)
        if todo:
            RunStore(out).check_writable()
    except (MemoryBudgetError, StoreError) as exc:
        raise _Refused(str(exc)) from None
    if args.ray is not None:
        try:
            import_ray()
        except RayUnavailable as exc:
            raise _Refused(f"--ray {args.ray}: {exc}") from None
    return make_executor(where, max(len(todo), 1))


def _sweep(args: argparse.Namespace, where: str, points: list[Point], out: Path) -> int:
    """Run the unfinished points; Ctrl-C and SIGTERM stop it with the finished runs kept."""
    import signal
    import threading

    from ..sweep import read_sweep
    from ..sweep.executors import RayUnavailable
    from ..sweep.store import StoreError

    executor = _executor(args, where, points, out)
    print(f"normlab sweep: {len(points)} points from {args.spec} on {executor.describe()}; "
          f"store {out}", file=sys.stderr)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        records = _run_points(args, points, out, executor)
    except RayUnavailable as exc:  # nothing ran: Ray is reached before the first point starts
        raise _Refused(f"--ray {args.ray}: {exc}") from None
    except StoreError as exc:  # the store became unwritable as a whole: finished runs are kept
        print(f"normlab sweep: {exc}; stopped (finished runs are kept)", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        kept = sum(1 for r in read_sweep(points, out) if r.finished)
        print(f"normlab sweep: interrupted; {kept} of {len(points)} points are finished in {out} "
              f"(run the same command to resume)", file=sys.stderr)
        return 143 if isinstance(exc, _Terminated) else 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    return _report(args, records, out)


def _run_points(args: argparse.Namespace, points: list[Point], out: Path,
                executor: Any) -> list[RunRecord]:
    from ..sweep import run_sweep

    if args.quiet:
        return run_sweep(points, out, executor=executor)
    from ..progress import reporter

    with reporter(1, "sweep") as rep:
        records = run_sweep(points, out, executor=executor, progress=rep.start("points"))
        rep.finish("points", f"{len(records)} points")
    return records


def _report(args: argparse.Namespace, records: list[RunRecord], out: Path) -> int:
    """The closing lines: the counts, each failed run, the summary command."""
    from collections import Counter

    from ..sweep.runner import note
    from ..sweep.store import FAILED

    counts = Counter(r.status for r in records)
    counts["reused"] = sum(r.reused for r in records)
    print(f"{len(records)} points: {note(counts)}; store {out}")
    for r in records:
        if r.status == FAILED:
            print(f"  failed {r.id} {_varied(r.varied)}: {r.reason}")
    print(f"table and plots: normlab sweep {args.spec} --summary"
          + (f" --out {args.out}" if args.out else ""))
    return 1 if counts[FAILED] else 0


POINT_BYTES = 8 * 1024  # memory per listed point (its config, id and store record), rounded up


def _listing_bytes(size: int) -> str | None:
    """None when listing ``size`` points fits in half the memory available; else what it needs."""
    from ...train.budget import available_memory, format_bytes

    have = available_memory()
    need = size * POINT_BYTES
    if have is None or need <= have // 2:
        return None
    return f"{format_bytes(need)} of memory, more than half the {format_bytes(have)} available"


def _varied(varied: dict[str, Any]) -> str:
    from ..sweep.spec import short_name

    return " ".join(f"{short_name(k)}={v}" for k, v in varied.items())


def _dry_run(points: list[Point], records: list[RunRecord], out: Path) -> int:
    print(f"{len(points)} points; store {out}")
    for p, r in zip(points, records):
        print(f"  {p.id}  {r.status:<8}  {_varied(p.varied)}")
    return 0
