"""Throughput of ``normlab.precision.quantize`` against ml_dtypes' ``astype``, in one run.

On N float32 values (default 32M, standard normal), the median of several repeats of:

* normlab ``quantize(x, fmt)`` (float32 values on the format's grid, nearest-even);
* ml_dtypes ``x.astype(fmt).astype(np.float32)``: the same result, the reference;
* the numba kernel ``normlab.kernels.quantize`` (bit-identical to ``quantize``);
* ml_dtypes ``x.astype(fmt)``: the store alone, and normlab ``cast(x, fmt)`` (quantize + store);
* stochastic rounding, which ml_dtypes does not have: against nearest-even, and the NumPy
  generator's own cost for the random bits it needs;
* a plain copy of x: the memory-bandwidth floor.

Ratios are normlab time / reference time (below 1: normlab is faster).

    python benchmarks/quantize.py                 # 32M values, 5 repeats
    python benchmarks/quantize.py -n 4000000 -r 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import ml_dtypes
import numpy as np

import normlab
from normlab import kernels
from normlab.precision import cast, quantize


def _median_ms(f, repeats: int) -> float:
    f()  # warm-up: page faults, caches, the format's plan
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=32 * 2**20, help="values (default 32M)")
    p.add_argument("-r", "--repeats", type=int, default=5)
    args = p.parse_args(argv)
    n = args.n
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    print(f"normlab {normlab.__version__} quantize benchmark: {n:,} float32 values N(0, 1), "
          f"median of {args.repeats} repeats")
    print(f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, python "
          f"{platform.python_version()}, {_cpu()}, {os.cpu_count()} CPUs; NumPy ufuncs and "
          f"ml_dtypes casts run on one thread (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')})")
    copy_ms = _median_ms(lambda: x.copy(), args.repeats)
    print(f"\nmemory floor: x.copy() {copy_ms:.1f} ms ({copy_ms * 1e6 / n:.2f} ns/value)\n")
    head = (f"{'format':<15} {'what':<34} {'normlab ms':>10} {'ref ms':>8} {'ratio':>6}  "
            f"reference")
    print(head)
    print("-" * len(head))

    def row(fmt, what, ours, ref, ref_name):
        ratio = f"{ours / ref:6.2f}" if ref else "     -"
        ref_s = f"{ref:8.1f}" if ref else "       -"
        print(f"{fmt:<15} {what:<34} {ours:10.1f} {ref_s} {ratio}  {ref_name}")

    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float16"):
        dt = np.dtype(getattr(ml_dtypes, name) if hasattr(ml_dtypes, name) else name)
        lib = "ml_dtypes" if hasattr(ml_dtypes, name) else "NumPy"
        ours = _median_ms(lambda name=name: quantize(x, name), args.repeats)
        ref = _median_ms(lambda dt=dt: x.astype(dt).astype(np.float32), args.repeats)
        row(name, "quantize (nearest_even)", ours, ref, f"{lib} astype(fmt).astype(float32)")
        kernels.quantize(x[:8], name)  # compile, or load from the cache
        kern = _median_ms(lambda name=name: kernels.quantize(x, name), args.repeats)
        row(name, "kernels.quantize (nearest_even)", kern, ref,
            f"{lib} astype(fmt).astype(float32)")
        ours_c = _median_ms(lambda name=name: cast(x, name), args.repeats)
        ref_c = _median_ms(lambda dt=dt: x.astype(dt), args.repeats)
        row(name, "cast (quantize + store)", ours_c, ref_c, f"{lib} astype(fmt)")
        if name in ("bfloat16", "float8_e4m3fn"):
            rng = np.random.default_rng(1)
            sr = _median_ms(
                lambda name=name, rng=rng: quantize(x, name, rounding="stochastic", rng=rng),
                args.repeats)
            row(name, "quantize (stochastic)", sr, ours, "normlab quantize (nearest_even)")
            kernels.quantize(x[:8], name, rounding="stochastic", rng=rng)
            ksr = _median_ms(
                lambda name=name, rng=rng: kernels.quantize(x, name, rounding="stochastic",
                                                            rng=rng),
                args.repeats)
            row(name, "kernels.quantize (stochastic)", ksr, sr, "normlab quantize (stochastic)")
    rng = np.random.default_rng(2)
    bits = _median_ms(lambda: rng.integers(0, np.iinfo(np.uint64).max, size=(n + 1) // 2,
                                           dtype=np.uint64, endpoint=True), args.repeats)
    print(f"\nthe random bits stochastic rounding draws (n/2 uint64 from the Generator): "
          f"{bits:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
