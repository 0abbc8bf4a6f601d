"""Every float32 bit pattern (2^32) through ``normlab.kernels.quantize``, bit for bit against the
float32 kernel it replaced and, where they apply, against ml_dtypes' casts.

``normlab.kernels.quantize`` rounds C-contiguous float32 input with the plan's constants compiled
into the kernel (nearest_even) or with uint32 arithmetic throughout (the other deterministic
modes). The reference is the kernel that rounded float32 before: ``_round32`` with the constants
as arguments (``_kernel32``, run as ``quantize`` ran it then), or, with ``--old PATH``, the
``quantize`` of a saved copy of an earlier ``src/normlab/kernels/rounding.py``. For each format,
rounding mode, overflow mode and subnormals setting it counts:

* ``ref``: inputs whose results differ in any bit from the reference's (NaN payloads too);
* ``ml_dtypes``: for nearest_even, the format's own overflow and subnormals kept (what a cast
  does), inputs whose results differ from ``x.astype(fmt).astype(np.float32)`` unless both are
  NaN; NaN inputs are counted apart (formats without NaN store them as 0 on purpose).

The patterns go through in chunks of 2^24, above ``_common.PARALLEL_MIN``: the parallel kernels
run (``--chunk 20`` runs the single-thread ones instead). It exits 1 on any mismatch.

    python benchmarks/exhaustive_quantize_kernel.py  # bfloat16, float16, float8_e4m3fn,
                                                     # float8_e5m2: nearest_even, overflow
                                                     # default / saturate, subnormals True / False
    python benchmarks/exhaustive_quantize_kernel.py --formats all --roundings all
    python benchmarks/exhaustive_quantize_kernel.py --formats float16 --old /tmp/rounding_before.py
    python benchmarks/exhaustive_quantize_kernel.py --limit 26       # the first 2^26 patterns only

About 15 s per combination on one core (NUMBA_NUM_THREADS=1; the reference kernel is most of
it), a minute where ml_dtypes' fp8 casts run too.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
from typing import Any

import ml_dtypes
import numpy as np

from normlab import kernels as K
from normlab.kernels import _common
from normlab.kernels import rounding as R
from normlab.precision import FORMATS
from normlab.precision.formats import DIALECTS
from normlab.precision.rounding import plan_quantize

DETERMINISTIC = ("nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "up",
                 "down")
DEFAULT_FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
# every format whose float32 rounding runs in the float32 kernels (E8M0 goes through float64)
KERNEL_FORMATS = [n for n in (*FORMATS, *DIALECTS) if n != "float8_e8m0fnu"]

_OLD32: dict[int, Any] = {}


def old_style(x: np.ndarray, fmt: str, rounding: str, overflow: str | None,
              subnormals: bool) -> np.ndarray:
    """``quantize`` of float32 input as it ran before the constants were compiled in: the plan,
    then ``_round32``'s kernel with the plan's constants as arguments."""
    q = plan_quantize(x, fmt, rounding=rounding, overflow=overflow, subnormals=subnormals)
    if q.copy:
        return q.xc.copy()
    plan, ovf, mode = q.bits, q.ovf, R._MODES[q.rounding]
    assert plan is not None and plan.uint is np.uint32 and q.fmt.zero and q.fmt.signed
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
    """The ``quantize`` of a copy of an earlier ``normlab/kernels/rounding.py`` (its relative
    imports resolve in ``normlab.kernels``)."""
    name = "normlab.kernels._rounding_before"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.quantize


def ml_dtype(name: str) -> Any:
    """The format's ml_dtypes (or NumPy) dtype, None where a cast is no rounding to it."""
    if name in ("float32", "tfloat32") or name not in FORMATS:
        return None
    return np.dtype(getattr(ml_dtypes, name) if hasattr(ml_dtypes, name) else name)


def check(name: str, rounding: str, overflow: str | None, subnormals: bool, reference: Any,
          total: int, chunk: int) -> bool:
    """One combination over the first ``total`` patterns; prints a line, True if all agree."""
    dtype = ml_dtype(name) if (rounding, overflow, subnormals) == ("nearest_even", None,
                                                                     True) else None
    has_nan = (FORMATS.get(name) or DIALECTS[name]).has_nan
    base = np.arange(chunk, dtype=np.uint32)
    bits = np.empty(chunk, np.uint32)
    x = bits.view(np.float32)
    n_ref = n_ml = n_ml_nan = 0
    examples: list[str] = []
    t0 = time.perf_counter()
    for start in range(0, total, chunk):
        np.add(base, np.uint32(start), out=bits)
        kw: dict[str, Any] = dict(rounding=rounding, overflow=overflow, subnormals=subnormals)
        got = K.quantize(x, name, **kw).view(np.uint32)
        want = reference(x, name, **kw).view(np.uint32)
        bad = got != want
        if bad.any():
            idx = np.flatnonzero(bad)
            n_ref += idx.size
            examples += [f"x=0x{bits[i]:08x}: kernel 0x{got[i]:08x}, reference 0x{want[i]:08x}"
                         for i in idx[:5 - len(examples)]]
        if dtype is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                ml = x.astype(dtype).astype(np.float32)
            gf = got.view(np.float32)
            bad = (got != ml.view(np.uint32)) & ~(np.isnan(gf) & np.isnan(ml))
            if bad.any():
                idx = np.flatnonzero(bad)
                nan_in = int(np.count_nonzero(np.isnan(x[idx])))
                n_ml_nan += nan_in
                n_ml += idx.size - nan_in
                examples += [f"x=0x{bits[i]:08x}: kernel 0x{got[i]:08x}, ml_dtypes "
                             f"0x{ml.view(np.uint32)[i]:08x}" for i in idx[:5 - len(examples)]
                             if not np.isnan(x[i])]
    ml_text = "-" if dtype is None else f"{n_ml} (NaN inputs {n_ml_nan})"
    print(f"{name:<20} {rounding:<20} {overflow!s:<9} {subnormals!s:<6} ref {n_ref:<10} "
          f"ml_dtypes {ml_text:<22} {time.perf_counter() - t0:6.1f} s", flush=True)
    for line in examples:
        print(f"    {line}")
    return n_ref == 0 and n_ml == 0 and (n_ml_nan == 0 or not has_nan)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--formats", nargs="+", default=list(DEFAULT_FORMATS),
                   choices=["all", *KERNEL_FORMATS], help="'all': every kernel format")
    p.add_argument("--roundings", nargs="+", default=["nearest_even"],
                   choices=["all", *DETERMINISTIC], help="'all': every deterministic mode")
    p.add_argument("--overflows", nargs="+", default=["default", "saturate"],
                   choices=["default", "saturate", "inf", "nan"])
    p.add_argument("--subnormals", nargs="+", default=["True", "False"], choices=["True", "False"])
    p.add_argument("--old", metavar="PATH", help="compare with the quantize of this copy of an "
                   "earlier normlab/kernels/rounding.py instead of the old-style kernel")
    p.add_argument("--chunk", type=int, default=24, help="log2 of the patterns per chunk")
    p.add_argument("--limit", type=int, default=32, help="log2 of the patterns to check")
    args = p.parse_args(argv)
    formats = KERNEL_FORMATS if "all" in args.formats else args.formats
    roundings = DETERMINISTIC if "all" in args.roundings else args.roundings
    overflows = [None if o == "default" else o for o in args.overflows]
    subnormals = [s == "True" for s in args.subnormals]
    reference = old_style if args.old is None else load_old(args.old)
    total, chunk = 1 << args.limit, 1 << min(args.chunk, args.limit)
    import numba

    print(f"normlab.kernels.quantize, {total} float32 patterns per combination, against "
          f"{args.old or 'the old-style float32 kernel'}; {numba.get_num_threads()} thread(s)")
    print(f"numpy {np.__version__}, numba {numba.__version__}, ml_dtypes {ml_dtypes.__version__}, "
          f"python {platform.python_version()}, {platform.machine()}")
    ok = True
    for name in formats:
        fmt = FORMATS.get(name) or DIALECTS[name]
        for rounding in roundings:
            for overflow in overflows:
                if (overflow == "inf" and not fmt.has_inf) or (overflow == "nan"
                                                               and not fmt.has_nan):
                    continue
                for sub in subnormals:
                    ok &= check(name, rounding, overflow, sub, reference, total, chunk)
    print("all equal" if ok else "MISMATCHES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
