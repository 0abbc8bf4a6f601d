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

from .framework import Result, registry
from .report_page import build_html

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

    Returns the page's path, the entries and this invocation's wall time in seconds.
    """
    from .progress import _Plain, reporter

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
    from .framework import run_experiment

    def one(name, out_dir, progress):
        return run_experiment(name, size=size, seed=seed, out_dir=out_dir, progress=progress,
                              use_cache=use_cache, executor=executor)

    return one


def _rejudge_one(name, out_dir, progress):
    from .framework import rejudge

    return rejudge(name, out_dir)


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
