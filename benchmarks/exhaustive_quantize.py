"""Every float32 bit pattern through ``normlab.precision.quantize`` and through ml_dtypes'
float32 cast (``x.astype(fmt).astype(float32)``), counting the mismatches per format.

A mismatch is an input whose two results differ in their bits, unless both are NaN (NaN
payloads and signs are not compared: ml_dtypes returns its own quiet NaN). Mismatches are also
counted separately for NaN inputs, where the formats without NaN (fp6, fp4) differ on purpose:
quantize keeps NaN, ml_dtypes stores -0 or +0.

    python benchmarks/exhaustive_quantize.py                    # bfloat16, the OCP fp8 formats
    python benchmarks/exhaustive_quantize.py --formats float8_e4m3fnuz float8_e5m2fnuz \
        float8_e4m3b11fnuz                                      # the FNUZ formats (AMD, IPU)
    python benchmarks/exhaustive_quantize.py --formats float16 float4_e2m1fn
    python benchmarks/exhaustive_quantize.py --limit 26         # the first 2^26 patterns only

2^32 patterns take a few minutes per format on one core (ml_dtypes' fp8 cast is most of it).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import ml_dtypes
import numpy as np

from normlab.precision import FORMATS, quantize


def compare_chunk(bits: np.ndarray, name: str) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(mismatches, of which NaN inputs, up to 5 examples (input, ours, ml_dtypes) as bits)."""
    x = bits.view(np.float32)
    dtype = np.dtype(getattr(ml_dtypes, name) if hasattr(ml_dtypes, name) else name)
    ours = quantize(x, name)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = x.astype(dtype).astype(np.float32)
    ob, rb = ours.view(np.uint32), ref.view(np.uint32)
    bad = (ob != rb) & ~(np.isnan(ours) & np.isnan(ref))
    n_bad = int(np.count_nonzero(bad))
    if not n_bad:
        return 0, 0, []
    idx = np.flatnonzero(bad)
    nan_in = int(np.count_nonzero(np.isnan(x[idx])))
    first = [(int(bits[i]), int(ob[i]), int(rb[i])) for i in idx[:5]]
    return n_bad, nan_in, first


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--formats", nargs="+", default=["bfloat16", "float8_e4m3fn", "float8_e5m2"],
                   choices=[n for n in FORMATS if n not in ("tfloat32", "float32")])
    p.add_argument("--chunk", type=int, default=24, help="log2 of the patterns per chunk")
    p.add_argument("--limit", type=int, default=32, help="log2 of the patterns to check")
    args = p.parse_args(argv)
    total, chunk = 1 << args.limit, 1 << min(args.chunk, args.limit)
    print(f"normlab exhaustive quantize check: {total} float32 patterns per format")
    print(f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, "
          f"python {platform.python_version()}, {platform.machine()}")
    print("mismatch = result bits differ and not both NaN")
    failed = False
    for name in args.formats:
        t0 = time.perf_counter()
        n_bad = n_nan = 0
        examples: list[tuple[int, int, int]] = []
        for start in range(0, total, chunk):
            bits = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32)
            b, nn, ex = compare_chunk(bits, name)
            n_bad, n_nan = n_bad + b, n_nan + nn
            examples += ex[: 5 - len(examples)]
        dt = time.perf_counter() - t0
        print(f"{name:<16} mismatches {n_bad:>12}  (NaN inputs {n_nan}, other {n_bad - n_nan})"
              f"  {dt:7.1f} s")
        for xin, ours, ref in examples:
            print(f"    x=0x{xin:08x} ({np.uint32(xin).view(np.float32)!r}): "
                  f"normlab 0x{ours:08x}, ml_dtypes 0x{ref:08x}")
        failed |= (n_bad - n_nan) > 0 or (n_nan > 0 and FORMATS[name].has_nan)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
