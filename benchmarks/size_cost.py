"""What each experiment's training costs at a size, before it runs: the runs of its first training
grid, their steps and matrix-multiply FLOPs, and the CPU hours they take at the rate a report's
finished runs reached on this machine.

    python benchmarks/size_cost.py [--size full] [--store OUT] [--limit 20] [NAME ...]

Each experiment's ``measure`` is called at ``--size`` until its first call of the sweep API
(``_training.run_points``, which ``run_grid`` calls), which is answered by stopping the
experiment: nothing trains. A grid that depends on the results of an earlier one (a pilot, then
the main grid) is not seen, and an experiment that measures in-process before its first grid is
given ``--limit`` seconds to reach it, else it is listed as in-process, not estimated. So the
table is a lower bound on the training, and says nothing of in-process work.

FLOPs per run: every linear product of the model and attention's four products, forward and
backward (3 times the forward's), times the run's steps (``train_step``'s count, as
benchmarks/train_ensemble.py counts them); evaluation is left out. The rate: ``--store`` (a report's
output folder, e.g. normlab-results-full) is searched for finished runs, and the sum of their
FLOPs over the sum of their CPU seconds is the rate used for every row (a single number: small
models reach a lower rate than wide ones, so the hours are an estimate within a factor of about
two). An experiment whose runs are all in the store shows its measured CPU hours instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

os.environ.update({"OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"})

from normlab.lab import framework as F
from normlab.lab.experiments import _training
from normlab.train import TrainConfig
from normlab.train.budget import step_flops


class _Planned(Exception):
    """Raised at an experiment's first grid, carrying its configs."""

    def __init__(self, configs: list[TrainConfig]):
        self.configs = configs


class _TooLong(Exception):
    pass


def first_grid(name: str, size: str, limit: float) -> list[TrainConfig] | None:
    """The configs of ``name``'s first training grid at ``size``; None where measure() ends or
    runs past ``limit`` seconds without one."""
    module = F.load(name)
    config = F.configure(module, size)

    def planned(base, points, ctx, **_):
        raise _Planned([base.with_overrides(dict(over)) for _, over, *_own in points])

    def too_long(_signum, frame):
        # never inside an import (a module left half-initialized in sys.modules breaks every
        # later import of it) nor inside numba compiling a kernel (an exception raised in
        # llvmlite's ctypes callbacks is swallowed there, and the compilation left in between)
        while frame is not None:
            name = frame.f_code.co_filename
            if (name.startswith("<frozen importlib") or f"{os.sep}numba{os.sep}" in name
                    or f"{os.sep}llvmlite{os.sep}" in name):
                signal.setitimer(signal.ITIMER_REAL, 0.01)
                return
            frame = frame.f_back
        raise _TooLong

    saved, _training.run_points = _training.run_points, planned
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if hasattr(module, "validate"):
                module.validate(config)
            module.measure(config, F.RunContext())
    except _Planned as grid:
        return grid.configs
    except _TooLong:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _training.run_points = saved
    return None


def store_runs(store: Path) -> dict[str, list[tuple[TrainConfig, float]]]:
    """Per experiment folder of a report's output: its finished runs' (config, CPU seconds)."""
    out: dict[str, list[tuple[TrainConfig, float]]] = {}
    for status in store.glob("*/sweep/*/*/runs/*/status.json"):
        s = json.loads(status.read_text())
        if s.get("status") not in ("done", "diverged") or not s.get("cpu_s"):
            continue
        config = TrainConfig.from_dict(json.loads((status.parent / "config.json").read_text()))
        out.setdefault(status.relative_to(store).parts[0], []).append((config, s["cpu_s"]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="experiments (default: every one)")
    p.add_argument("--size", default="full", choices=("tiny", "quick", "full"))
    p.add_argument("--store", type=Path, help="a report's output folder: the rate, from its runs")
    p.add_argument("--limit", type=float, default=20.0,
                   help="seconds an experiment may measure in-process before its first grid")
    args = p.parse_args()
    names = args.names or list(F.registry())
    finished = store_runs(args.store) if args.store else {}
    pairs = [(step_flops(c) * c.steps, cpu) for runs in finished.values() for c, cpu in runs]
    rate = sum(f for f, _ in pairs) / sum(c for _, c in pairs) if pairs else None
    if rate:
        print(f"rate: {rate / 1e9:.1f} GFLOP/s per worker, from {len(pairs)} finished runs in "
              f"{args.store}")
    print(f"{'experiment':26s} {'runs':>5s} {'steps':>9s} {'TFLOP':>8s} {'CPU h':>7s}  note")
    total = 0.0
    for name in names:
        configs = first_grid(name, args.size, args.limit)
        if configs is None:
            print(f"{name:26s} {'':>5s} {'':>9s} {'':>8s} {'':>7s}  in-process (not estimated)")
            continue
        flops = sum(step_flops(c) * c.steps for c in configs)
        done = finished.get(name, [])
        if len(done) >= len(configs):
            hours, note = sum(cpu for _, cpu in done) / 3600, "measured (the store's runs)"
        elif rate:
            hours, note = flops / rate / 3600, "estimated; first grid only"
        else:
            hours, note = float("nan"), "first grid only; no rate (--store)"
        total += 0 if hours != hours else hours
        print(f"{name:26s} {len(configs):5d} {sum(c.steps for c in configs):9d} "
              f"{flops / 1e12:8.1f} {hours:7.2f}  {note}")
    print(f"{'total':26s} {'':>5s} {'':>9s} {'':>8s} {total:7.2f}  CPU hours (2 workers: half "
          f"of it in wall time, at best)")


if __name__ == "__main__":
    main()
