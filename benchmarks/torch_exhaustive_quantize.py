"""Every float32 bit pattern through ``normlab.torch.quantize`` and through
``normlab.precision.quantize``, counting the inputs whose results differ in any bit (NaN payloads
and signs included: the two must be the same bits).

    python benchmarks/torch_exhaustive_quantize.py                  # bfloat16, both fp8, nearest
    python benchmarks/torch_exhaustive_quantize.py --roundings nearest_even toward_zero up down
    python benchmarks/torch_exhaustive_quantize.py --limit 28       # the first 2^28 patterns
    python benchmarks/torch_exhaustive_quantize.py --device cuda    # torch on another device

2^32 patterns take one core about a minute for bfloat16 to nearest even (torch's cast) and
about ten for a format torch rounds in integer operations (the FNUZ formats, or another
rounding mode); docs/conformance/torch_exhaustive_quantize.txt is a run's output.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
import torch

from normlab.precision import quantize as np_quantize
from normlab.torch import quantize

CHUNK = 1 << 24


def compare_chunk(start: int, n: int, fmt: str, rounding: str, device: str) -> tuple[int, list]:
    """(mismatches, up to 3 examples (input, torch, numpy) as bits) over patterns
    [start, start + n)."""
    bits = np.arange(start, start + n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    want = np_quantize(x, fmt, rounding=rounding).view(np.uint32)
    got = quantize(torch.from_numpy(x).to(device), fmt, rounding=rounding).cpu().numpy()
    bad = np.flatnonzero(got.view(np.uint32) != want)
    examples = [(hex(bits[i]), hex(got.view(np.uint32)[i]), hex(want[i])) for i in bad[:3]]
    return int(bad.size), examples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", nargs="+",
                    default=["bfloat16", "float8_e4m3fn", "float8_e5m2"])
    ap.add_argument("--roundings", nargs="+", default=["nearest_even"])
    ap.add_argument("--limit", type=int, default=32, help="check the first 2^LIMIT patterns")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if not 1 <= args.limit <= 32:
        ap.error(f"--limit must be in [1, 32]; got {args.limit}")
    total = 1 << args.limit
    print(f"torch {torch.__version__}, numpy {np.__version__}, python "
          f"{platform.python_version()}, device {args.device}, threads "
          f"{torch.get_num_threads()}; 2^{args.limit} float32 patterns")
    failed = False
    for fmt in args.formats:
        for rounding in args.roundings:
            t0, mismatches, examples = time.perf_counter(), 0, []
            for start in range(0, total, CHUNK):
                m, ex = compare_chunk(start, min(CHUNK, total - start), fmt, rounding,
                                      args.device)
                mismatches += m
                examples += ex[:3 - len(examples)]
            failed |= mismatches > 0
            note = f"  e.g. {examples}" if examples else ""
            print(f"{fmt:16s} {rounding:13s} mismatches {mismatches:>10d} of {total}  "
                  f"({time.perf_counter() - t0:.0f} s){note}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
