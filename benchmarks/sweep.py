"""Wall time of an 8-point sweep: serial (one process) against the process pool (2 workers) and
Ray tasks (a local instance with 2 CPUs), measured side by side in one run.

    python benchmarks/sweep.py [--points 8] [--workers 2] [--steps 300] [--repeats 3] [--no-ray]

Each repeat runs the whole sweep once per executor, round-robin, into a fresh store (so every
point runs); the table gives the median and the first (cold) sweep, and the speed-up
serial / executor (ideal: the number of workers). Everything is single-threaded (one BLAS and
numba thread per process, as the pool's workers are), so the serial baseline is one core's work.
The pool pays for starting its workers (Python, NumPy, numba's cached kernels) in every sweep;
Ray keeps its workers between sweeps, and its start-up (``ray.init``) is timed apart. A second
table runs ``--sweeps`` consecutive small sweeps (a report runs a dozen) twice per repeat, each
starting its own workers and all sharing one set (``sweep.executors.shared_workers``, as
``normlab report`` and ``normlab run`` do), with the CPU seconds of the workers beside the wall
time.

Two more columns say what the machine gave: "cores used" is the runs' CPU seconds over the
sweep's wall time, and each repeat also measures the *ceiling*: the throughput of the same fixed
CPU-bound loop on N processes at once against one (N x t1 / tN). On idle cores the ceiling is N;
on a machine shared with other work, and with Linux's per-session fair share (autogroup), it can
be near 1, and no executor can beat it. The speed-up over the ceiling is the executor's
efficiency.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

# One BLAS / numba thread, set before NumPy loads (importing normlab loads it): the serial
# baseline runs on one thread, as each pool worker does (checked against THREAD_ENV below).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}
os.environ.update(ONE_THREAD)

import numpy as np  # noqa: E402

from normlab.lab.sweep import ProcessPool, RayExecutor, SerialExecutor, make_points, run_sweep  # noqa: E402
from normlab.lab.sweep.task import THREAD_ENV  # noqa: E402
from normlab.lab.timing import environment  # noqa: E402
from normlab.models import GPTConfig  # noqa: E402
from normlab.train import TrainConfig  # noqa: E402


def points(n: int, steps: int):
    """``n`` runs of a small pre-LN model: a learning-rate grid."""
    model = GPTConfig(vocab_size=16, seq_len=32, n_layers=2, d_model=32, n_heads=2)
    lrs = np.geomspace(3e-4, 3e-2, n)
    return make_points([TrainConfig(model=model, steps=steps, warmup=steps // 10, batch_size=8,
                                    eval_interval=steps, eval_batches=2, lr=float(lr))
                        for lr in lrs])


def _spin(n: int) -> int:
    """A fixed amount of single-threaded CPU work."""
    x = 0
    for i in range(n):
        x ^= i * i
    return x


def ceiling(pool, workers: int, n: int) -> float:
    """Throughput of ``workers`` copies of a CPU-bound loop at once, against one copy alone."""
    t0 = time.perf_counter()
    pool.submit(_spin, n).result()
    t1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    for f in [pool.submit(_spin, n) for _ in range(workers)]:
        f.result()
    return workers * t1 / (time.perf_counter() - t0)


def consecutive(a) -> None:
    """The second table: ``a.sweeps`` sweeps of 4 short runs each, with fresh and shared workers
    (round-robin over ``a.repeats``); wall time and the workers' CPU seconds (RUSAGE_CHILDREN,
    counted when a worker exits, so each arm ends with its workers shut down)."""
    import contextlib
    import resource

    from normlab.lab.sweep.executors import shared_workers

    def children_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    runs = [points(4, 20)[i].config for i in range(4)]
    out: dict[str, list[tuple[float, float]]] = {"fresh workers per sweep": [],
                                                 "shared workers": []}
    with tempfile.TemporaryDirectory(prefix="normlab-sweeps-bench-") as root:
        for r in range(a.repeats):
            for name, block in (("fresh workers per sweep", contextlib.nullcontext),
                                ("shared workers", shared_workers)):
                t0, c0 = time.perf_counter(), children_cpu()
                with block():
                    for k in range(a.sweeps):
                        seeded = [c.with_overrides({"seed": 1000 * r + k}) for c in runs]
                        run_sweep(make_points(seeded), os.path.join(root, f"{r}-{name[0]}-{k}"),
                                  executor=ProcessPool(a.workers))
                out[name].append((time.perf_counter() - t0, children_cpu() - c0))
    print(f"\n{a.sweeps} consecutive sweeps of 4 runs x 20 steps on {a.workers} workers, median "
          f"of {a.repeats} (round-robin)")
    print(f"{'workers':<24} {'wall s':>8} {'workers CPU s':>14} {'per sweep':>10}")
    for name, ts in out.items():
        wall, cpu = (float(np.median([t[i] for t in ts])) for i in (0, 1))
        print(f"{name:<24} {wall:8.2f} {cpu:14.2f} {cpu / a.sweeps:9.2f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=300, help="training steps per point")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-ray", action="store_true", help="skip Ray")
    p.add_argument("--sweeps", type=int, default=6, help="consecutive sweeps, second table")
    a = p.parse_args()
    assert ONE_THREAD == THREAD_ENV, "keep the baseline's threads those of the pool's workers"

    pts = points(a.points, a.steps)
    run_sweep(pts[:1], tempfile.mkdtemp(prefix="warm-"), executor=SerialExecutor())  # numba cache
    executors = {"serial": SerialExecutor(), f"pool ({a.workers} workers)": ProcessPool(a.workers)}
    env = environment()
    if not a.no_ray:
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=a.workers, include_dashboard=False, log_to_driver=False)
        ray_init = time.perf_counter() - t0
        executors[f"ray ({a.workers} CPUs)"] = RayExecutor()
        env["ray"] = ray.__version__

    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    spinners = ProcessPoolExecutor(a.workers, mp_context=multiprocessing.get_context("spawn"))
    for f in [spinners.submit(_spin, 1) for _ in range(a.workers)]:  # started before timing
        f.result()
    times: dict[str, list[float]] = {k: [] for k in executors}
    cores: dict[str, list[float]] = {k: [] for k in executors}
    ceilings: list[float] = []
    with tempfile.TemporaryDirectory(prefix="normlab-sweep-bench-") as root:
        for r in range(a.repeats):
            ceilings.append(ceiling(spinners, a.workers, 4_000_000))
            print(f"  repeat {r + 1}: ceiling            {ceilings[-1]:7.2f}x", file=sys.stderr)
            for name, ex in executors.items():
                out = os.path.join(root, f"{r}-{len(times[name])}-{name.split()[0]}")
                t0 = time.perf_counter()
                records = run_sweep(pts, out, executor=ex)
                times[name].append(time.perf_counter() - t0)
                cores[name].append(sum(rec.cpu_s for rec in records) / times[name][-1])
                assert all(rec.finished and not rec.reused for rec in records), name
                print(f"  repeat {r + 1}: {name:<18} {times[name][-1]:7.2f} s", file=sys.stderr)
    spinners.shutdown()
    if not a.no_ray:
        ray.shutdown()

    serial = float(np.median(times["serial"]))
    print(
        f"\n{a.points}-point sweep, {a.steps} steps per point (2 layers, d_model 32, batch 8 x 32 "
        f"tokens), median of {a.repeats} (round-robin)"
    )
    ceil = float(np.median(ceilings))
    print(f"{'executor':<20} {'median s':>9} {'first s':>8} {'speed-up vs serial':>19} "
          f"{'of the ceiling':>15} {'cores used':>11}")
    for name, ts in times.items():
        med = float(np.median(ts))
        print(
            f"{name:<20} {med:9.2f} {ts[0]:8.2f} {serial / med:18.2f}x {serial / med / ceil:14.0%} "
            f"{float(np.median(cores[name])):11.2f}"
        )
    print(f"ceiling ({a.workers} spinning processes against 1, same run): {ceil:.2f}x "
          f"(repeats: {', '.join(f'{c:.2f}' for c in ceilings)}); ideal {a.workers}x on idle cores")
    print(f"serial per point: {serial / a.points:.2f} s")
    if not a.no_ray:
        print(f"ray.init (local, {a.workers} CPUs): {ray_init:.2f} s, not in the sweeps' times")
    consecutive(a)
    print("threads per process: 1 (" + ", ".join(f"{k}={v}" for k, v in THREAD_ENV.items()) + ")")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in env.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
