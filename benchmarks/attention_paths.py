"""Attention's two fused paths side by side, forward and backward: the lanes kernel (one compiled
call each way, every sequence a SIMD lane, ``normlab.kernels.attention_lanes``) against NumPy's
batched products around the fused softmax kernel (one sgemm call per batch row and head and
product), over head widths D and lengths T, in one process, round-robin.

    python benchmarks/attention_paths.py [--lanes 512] [--repeats 9]

Each (T, D): causal attention of ``--lanes`` sequences (batch rows x 4 heads) of float32 q, k, v
read from one fused projection's rows (B, T, 3 H D), as the model calls it; the forward writes
its output into the heads' rows, the backward into the projection's gradient columns. Prints the
milliseconds of forward + backward per path (median of the rounds, the process's CPU time) and
lanes / sgemm, the ratio that ``normlab.kernels.attention.LANES_MAX_D`` (the widest head the lanes
kernel runs) is chosen from. One thread (OpenBLAS, numba).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy and numba start their pools

import numpy as np  # noqa: E402

from normlab.kernels import attention as KA  # noqa: E402

GRID = [(16, 8), (32, 8), (64, 8), (16, 16), (32, 16), (64, 16), (16, 32), (32, 32), (64, 32)]
H = 4


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lanes", type=int, default=512, help="sequences (batch rows x 4 heads)")
    p.add_argument("--repeats", type=int, default=9)
    return p.parse_args()


def step(T: int, D: int, lanes: int, widest: int):
    """One forward + backward of the fused attention, ``widest`` the lanes kernel's widest head
    (a width above it runs the sgemm path)."""
    B = max(1, lanes // H)
    C = H * D
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((B, T, 3 * C), dtype=np.float32)
    drows = np.empty_like(rows)
    out = np.empty((B, T, H, D), np.float32).transpose(0, 2, 1, 3)
    dy = rng.standard_normal((B, H, T, D), dtype=np.float32)

    def heads(a: np.ndarray, j: int) -> np.ndarray:
        return a[..., j * C:(j + 1) * C].reshape(B, T, H, D).transpose(0, 2, 1, 3)

    q, k, v = heads(rows, 0), heads(rows, 1), heads(rows, 2)
    dq, dk, dv = heads(drows, 0), heads(drows, 1), heads(drows, 2)

    def run() -> None:
        saved, KA.LANES_MAX_D = KA.LANES_MAX_D, widest
        try:
            _, cache, _ = KA.attention_forward_members(1, q, k, v, out=out)
            KA.attention_backward_into(dy, cache, dq, dk, dv)
        finally:
            KA.LANES_MAX_D = saved

    return run


def main() -> None:
    a = parse()
    print(f"# causal attention, {a.lanes} sequences ({H} heads), float32, forward + backward, "
          f"one thread, median of {a.repeats} rounds (round-robin), cpu clock; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'T':>4} {'D':>4} {'lanes ms':>9} {'sgemm ms':>9} {'lanes/sgemm':>11}")
    for T, D in GRID:
        fns = {"lanes": step(T, D, a.lanes, 1 << 30), "sgemm": step(T, D, a.lanes, 0)}
        for f in fns.values():
            f()
            f()
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(a.repeats):
            for k, f in fns.items():
                t0 = time.process_time()
                f()
                times[k].append(time.process_time() - t0)
        t = {k: statistics.median(v) for k, v in times.items()}
        print(f"{T:>4} {D:>4} {1e3 * t['lanes']:>9.3f} {1e3 * t['sgemm']:>9.3f} "
              f"{t['lanes'] / t['sgemm']:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
