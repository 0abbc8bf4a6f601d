"""``normlab report``'s orchestration: run (or reuse, or judge again) each experiment, then write
``OUT/verdicts.png`` (the forest plot of the verdicts, :func:`normlab.lab.plotting.forest`),
``OUT/report.html`` (:mod:`normlab.lab.report_page`) and ``OUT/summary.json``
(:mod:`normlab.lab.results`), each atomically. An experiment that raises is reported on the page;
the others still run. The command (:mod:`normlab.lab.commands.report`) parses and checks the
arguments and calls :func:`write_report`."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
import traceback
from pathlib import Path
from typing import Any

from normlab import portable

from .contract import Result
from .report_page import build_html
from .running import registry
from .sweep.executors import shared_workers

DEFAULT_OUT = "normlab-report"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"


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

    With a local pool of two or more workers, the experiments that measure in the calling
    process (:func:`lanes`) are measured in a second process beside the others, so that no core
    waits while one of them runs; the experiments that time themselves run first, with nothing
    beside them. The second process is single-threaded (``sweep.task.THREAD_ENV``), as the
    pool's workers are: in a single-threaded environment (``make results``) the numbers are the
    ones a serial report gives.

    Returns the page's path, the entries (in ``names``' order) and this invocation's wall time
    in seconds.
    """
    from .progress import _Plain, reporter

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(registry()) if names is None else list(names)
    t0 = time.perf_counter()
    run = _Entries(out, rejudge, _rejudge_one if rejudge else
                   _run_one(size, seed, out, use_cache, executor),
                   _run_one(size, seed, out, True, executor))  # (a result measured aside)
    alone, aside, rest = lanes(names, None if rejudge else executor)

    def run_all(rep):
        with shared_workers():  # every experiment's sweeps, one set of pool workers
            done = {n: run.entry(rep, n) for n in alone}
            with _Aside(aside, size, seed, out, use_cache) as beside:
                done.update((n, run.entry(rep, n)) for n in rest)
                done.update((n, run.entry(rep, n, beside)) for n in aside)
        return [done[n] for n in names]

    if show_progress:
        with reporter(len(names)) as rep:
            entries = run_all(rep)
    else:
        entries = run_all(_Plain(open(os.devnull, "w")))
    elapsed = time.perf_counter() - t0
    reused = run.reused
    _write_page(out, entries, _meta(size, entries, elapsed, reused), elapsed, reused, size)
    return out / REPORT_FILE, entries, elapsed


class _Entries:
    """The report's entries, one experiment at a time: measured (or reused, or judged again) by
    ``one``, or, for one measured aside, waited for and read from the cache by ``read``;
    ``reused`` lists the names whose result came from an earlier invocation."""

    def __init__(self, out: Path, rejudge: bool, one: Any, read: Any):
        self.out, self.rejudge, self.one, self.read = out, rejudge, one, read
        self.reused: list[str] = []

    def entry(self, rep: Any, name: str, aside: _Aside | None = None
              ) -> tuple[str, Result | None, Path | None, str]:
        cb = rep.start(name)
        fresh = False  # measured aside in this invocation
        try:
            if aside is not None:
                fresh = not aside.check(name)
            o = (self.one if aside is None else self.read)(name, self.out, cb)
        except KeyboardInterrupt:
            raise
        except Exception:  # the page reports it; the other experiments still run
            err = traceback.format_exc()
            rep.finish(name, "error: " + err.strip().splitlines()[-1])
            return (name, None, None, err)
        if o.reused and not fresh:
            self.reused.append(name)
        how = ("judged again" if self.rejudge else "cached" if o.reused and not fresh
               else f"{o.result.wall_s:.1f} s" + (", beside the others" if fresh else ""))
        rep.finish(name, f"{o.result.verdict} ({how})")
        return (name, o.result, o.out_dir, "")


def lanes(names: list[str], executor: str | None) -> tuple[list[str], list[str], list[str]]:
    """``names`` split into the experiments that run first with nothing beside them (their
    module's ``LANE = "alone"``: they time themselves), those measured in a second process beside
    the rest (``LANE = "process"``, the default: they measure in the calling process, on one
    core), and the rest (``LANE = "pool"``: their training runs go to the executor's workers),
    each in ``names``' order. Unless ``executor`` is a local pool of two or more workers (None:
    nothing is measured), nothing goes beside the rest and the order is ``names``'."""
    from .contract import LANES
    from .running import load
    from .sweep.executors import default_workers

    lane = {n: getattr(load(n), "LANE", "process") for n in names}
    for n, v in lane.items():
        if v not in LANES:
            raise ValueError(f"experiment {n}: LANE must be one of {LANES}; got {v!r}")
    head, _, tail = (executor or "").partition(":")
    two = head == "pool" and (int(tail) if tail else default_workers()) >= 2
    if not two:
        return [], [], list(names)
    alone = [n for n in names if lane[n] == "alone"]
    aside = [n for n in names if lane[n] == "process"]
    rest = [n for n in names if n not in alone and n not in aside]
    return alone, aside, rest


def _measure_aside(name: str, size: str, seed: int | None, out: Path, use_cache: bool,
                   module: str, path: list[str]) -> str:
    """In the second process: measure (or reuse) ``name`` into ``out`` (its result cached there,
    as :func:`run_experiment` writes it); ``"measured"`` or ``"reused"``, else the traceback.
    ``module`` is the report's registry entry for ``name`` and ``path`` its import path, so that
    an experiment registered at run time (a notebook's, a plug-in's) is found here too."""
    import sys

    from . import experiments
    from .running import run_experiment

    sys.path[:0] = [p for p in path if p not in sys.path]
    experiments.EXPERIMENTS.setdefault(name.replace("_", "-"), module)
    try:
        o = run_experiment(name, size=size, seed=seed, out_dir=out, use_cache=use_cache,
                           executor="serial")
    except Exception:
        return traceback.format_exc()
    return "reused" if o.reused else "measured"


class _Aside:
    """The second process of a report: measures ``names`` one after the other, in order, from
    the moment the block is entered, single-threaded (``sweep.task.THREAD_ENV``), and leaves
    each result in ``out``'s cache for the report to read; stopped when the block is left by an
    exception."""

    def __init__(self, names: list[str], size: str, seed: int | None, out: Path,
                 use_cache: bool):
        self.names, self.args = names, (size, seed, out, use_cache)
        self.futures: dict = {}

    def __enter__(self) -> _Aside:
        if self.names:
            import multiprocessing
            import sys
            from concurrent.futures import ProcessPoolExecutor

            from .sweep.executors import _environ
            from .sweep.task import THREAD_ENV, worker_init

            with _environ(THREAD_ENV):
                self.pool = ProcessPoolExecutor(
                    1, mp_context=multiprocessing.get_context("spawn"),
                    initializer=worker_init, initargs=(os.getpid(),))
                self.futures = {n: self.pool.submit(_measure_aside, n, *self.args,
                                                    registry()[n.replace("_", "-")],
                                                    list(sys.path))
                                for n in self.names}
        return self

    def __exit__(self, kind, *_):
        if self.futures:
            from .sweep.executors import _terminate

            if kind is None:
                self.pool.shutdown(wait=True)
            else:
                _terminate(self.pool)

    def check(self, name: str) -> bool:
        """Wait for ``name``: whether its result came from the cache; a RuntimeError with the
        traceback where it failed."""
        how = self.futures[name].result()
        if how not in ("measured", "reused"):
            raise RuntimeError(f"{name}, measured beside the others, failed:\n{how}")
        return how == "reused"


def _run_one(size, seed, out, use_cache, executor):
    from .running import run_experiment

    def one(name, out_dir, progress):
        return run_experiment(name, size=size, seed=seed, out_dir=out_dir, progress=progress,
                              use_cache=use_cache, executor=executor)

    return one


def _rejudge_one(name, out_dir, progress):
    from .running import rejudge

    return rejudge(name, out_dir)


def _commit() -> str:
    """The commit of the checkout normlab runs from (``+`` when it has uncommitted changes to
    the package), '' outside a git checkout: which code measured a result."""
    import subprocess

    here = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def _meta(size: str, entries: Any, elapsed: float, reused: list[str]) -> dict:
    """The run's setting, as summary.json records it."""
    import numpy as np

    from .. import __version__

    seeds = {r.config.get("seed") for _, r, _, _ in entries if r is not None}
    return {
        "generated": _dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "size": size,
        "seed": seeds.pop() if len(seeds) == 1 else None,
        "wall_s_experiments": sum(r.wall_s for _, r, _, _ in entries if r is not None),
        "wall_s_this_invocation": elapsed,
        "reused": reused,
        "normlab": __version__,
        "commit": _commit(),
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
    """``verdicts.png`` (the forest plot of the verdicts), ``report.html`` and ``summary.json``,
    each written atomically."""
    from .._files import atomic_write, write_json
    from .plotting import FOREST_FILE, forest
    from .results import summarize

    summary = summarize(entries, meta)
    forest(summary, out, FOREST_FILE)
    atomic_write(out / REPORT_FILE, build_html(entries, _meta_line(meta, len(entries)),
                                               forest=out / FOREST_FILE), what="report page")
    write_json(out / SUMMARY_FILE, summary, what="report summary")
