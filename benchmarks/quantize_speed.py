"""Cost of one ``normlab.kernels.quantize`` call on float32 input, the old way against the new,
from 256 to 262144 values: microseconds per call and nanoseconds per value.

* old: the arguments checked and planned at every call (``plan_quantize``), then
  ``_kernel32``'s parallel kernel through ``_common.launch`` with the plan's constants as
  arguments (one thread below PARALLEL_MIN), as ``quantize`` ran before; or, with
  ``--old PATH``, the ``quantize`` of a saved copy of an earlier ``normlab/kernels/rounding.py``;
* new: ``normlab.kernels.quantize`` (the arguments remembered, the format's constants compiled
  into a kernel called on this thread).

Each time is the fastest of several rounds of many calls on the same array (the other work on a
shared machine only ever adds time), standard normal values, nearest_even.

    NUMBA_NUM_THREADS=1 python benchmarks/quantize_speed.py
    python benchmarks/quantize_speed.py --formats bfloat16 --sizes 4096 --old /tmp/rounding.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from typing import Any

import numpy as np

from normlab import kernels as K
from normlab.kernels import _common
from normlab.kernels import rounding as R
from normlab.precision.rounding import plan_quantize

_OLD32: dict[int, Any] = {}


def old_style(x: np.ndarray, fmt: str) -> np.ndarray:
    """``quantize(x, fmt)`` for float32 x the way it ran before: plan, then the launch."""
    q = plan_quantize(x, fmt)
    plan, ovf, mode = q.bits, q.ovf, R._MODES[q.rounding]
    assert plan is not None and not q.copy
    if mode not in _OLD32:
        _OLD32[mode] = R._kernel32(mode)[1]
    bits = q.xc.reshape(-1).view(np.uint32)
    out = np.empty_like(bits)
    u = np.uint32
    _common.launch(_OLD32[mode], bits.size, q.xc.reshape(-1), bits, np.empty(0, np.uint32), out,
                   plan.d, plan.variable, plan.emin_b, plan.cap, u(plan.max_bits),
                   u(plan.min_normal_bits), u(plan.tiny_bits), u(plan.half_tiny_bits),
                   float(plan.q_scale), u(ovf[0]), u(ovf[1]), u(ovf[2]), u(plan.qnan), q.flush,
                   q.sr_bits, q.fmt.signed_zero)
    return out.view(np.float32).reshape(x.shape)


def load_old(path: str) -> Any:
    """The ``quantize`` of a copy of an earlier ``normlab/kernels/rounding.py``."""
    name = "normlab.kernels._rounding_before"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.quantize


def per_call(f: Any, x: np.ndarray, fmt: str, rounds: int) -> float:
    """Seconds per call: the fastest round of calls adding up to about 20 ms."""
    f(x, fmt)  # compile or load, plan
    calls = max(5, min(5000, 4_000_000 // x.size))
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            f(x, fmt)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--formats", nargs="+", default=["bfloat16", "float16", "float8_e4m3fn"])
    p.add_argument("--sizes", nargs="+", type=int,
                   default=[256, 1024, 4096, 16384, 65536, 262144])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--old", metavar="PATH", help="time this copy of an earlier "
                   "normlab/kernels/rounding.py as the old way")
    args = p.parse_args(argv)
    import numba

    old = old_style if args.old is None else load_old(args.old)
    print(f"quantize, float32 input, nearest_even; {numba.get_num_threads()} numba thread(s); "
          f"old = {args.old or 'plan + launch of _kernel32'}")
    print(f"{'format':<15}{'n':>8}  {'old us':>9}{'new us':>9}  {'old ns/el':>10}"
          f"{'new ns/el':>10}  {'speed-up':>8}")
    rng = np.random.default_rng(0)
    for fmt in args.formats:
        for n in args.sizes:
            x = rng.standard_normal(n).astype(np.float32)
            assert np.array_equal(old(x, fmt).view(np.uint32), K.quantize(x, fmt).view(np.uint32))
            t_old = per_call(old, x, fmt, args.rounds)
            t_new = per_call(K.quantize, x, fmt, args.rounds)
            print(f"{fmt:<15}{n:>8}  {1e6 * t_old:>9.2f}{1e6 * t_new:>9.2f}  "
                  f"{1e9 * t_old / n:>10.3f}{1e9 * t_new / n:>10.3f}  {t_old / t_new:>7.1f}x",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
