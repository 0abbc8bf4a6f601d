"""Sweeps: many independent training runs from one spec, on a process pool or a Ray cluster, kept in
a store that survives faults, and summarized as loss-vs-learning-rate curves and the LR
sensitivity of Wortsman et al. (2023).

The Python API (the lab's training experiments use it; ``normlab sweep`` is a thin layer on it)::

    from normlab.lab.sweep import load_spec, run_sweep, summarize, plot_summary, ProcessPool

    spec = load_spec("lr.toml")                        # checked whole; SpecError names the field
    records = run_sweep(spec, "sweeps/lr", executor=ProcessPool(2))   # -> list[RunRecord]
    summary = summarize(records)                       # per variant and lr; LR sensitivity
    plot_summary(summary, "sweeps/lr/summary")

``run_sweep`` also takes TrainConfigs directly (``run_sweep([cfg_a, cfg_b], out, executor=
SerialExecutor())``), and ``lr_sensitivity(lrs, losses, loss_at_init)`` is the metric alone.

Modules: ``spec`` (TOML specs, points, run ids), ``store`` (one directory per run, atomic
writes), ``task`` (what a worker runs), ``executors`` (serial, process pool, Ray), ``runner``
(``run_sweep``), ``summary`` (tables, metric, figures). The command ``normlab sweep`` is
``normlab.lab.commands.sweep``.
"""

from .executors import (
    ProcessPool,
    RayExecutor,
    RayUnavailable,
    SerialExecutor,
    default_workers,
)
from .runner import as_points, read_sweep, run_sweep
from .spec import (
    Point,
    SpecError,
    SweepSpec,
    load_spec,
    make_points,
    parse_spec,
    run_id,
)
from .store import DIVERGED, DONE, FAILED, PENDING, RunRecord, RunStore
from .summary import (
    SweepSummary,
    lr_sensitivity,
    plot_summary,
    print_summary,
    summarize,
)

__all__ = [
    "DIVERGED",
    "DONE",
    "FAILED",
    "PENDING",
    "Point",
    "ProcessPool",
    "RayExecutor",
    "RayUnavailable",
    "RunRecord",
    "RunStore",
    "SerialExecutor",
    "SpecError",
    "SweepSpec",
    "SweepSummary",
    "as_points",
    "default_workers",
    "load_spec",
    "lr_sensitivity",
    "make_points",
    "parse_spec",
    "plot_summary",
    "print_summary",
    "read_sweep",
    "run_id",
    "run_sweep",
    "summarize",
]
