"""Every dialect's torch quantizer on CUDA against the CPU, bit for bit: one line per dialect,
exit 1 on any mismatch, 2 (one line) where CUDA is absent.

    python benchmarks/gpu_dialects.py                 # on the GPU (a few minutes at most)
    python benchmarks/gpu_dialects.py --device cpu    # the comparison logic, CPU against CPU

For each precision of ``DIALECTS`` (every entry of ``normlab.torch.quantize.TORCH_SCALINGS``:
per-tensor, delayed, MX, NVFP4 in TE's and torchao's dialects, FP8 blocks and rows, the Hadamard
rotation; unscaled element formats; the operand precisions of the recipes; stochastic rounding
where the dialect has it) ``normlab.torch.apply`` runs on the same inputs on the CPU and on the
device, each from a generator seeded alike (the same random words) and a fresh scaling state,
and the results' bits are compared (two NaNs count as equal: normlab fixes the value, not a NaN's
payload); unscaled and per-tensor precisions also run ``apply_`` in place on the device, and
``mx_quantize`` its elements and scales. The inputs are the conformance suite's edge-heavy
blocks (``normlab.precision.block_conformance``: inf, NaN, amax next to every power of two,
subnormal and huge scales, all-equal and all-zero blocks) and matrices with outliers in aligned
and ragged shapes (the in-place NVFP4 path and the split one).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from normlab.precision import MXINT8, Precision, get_policy
from normlab.precision.block_conformance import CASES, case_inputs
from normlab.precision.policy import _format_to
from normlab.torch import apply, mx_quantize
from normlab.torch.quantize import apply_

E2M1, E4M3 = "float4_e2m1fn", "float8_e4m3fn"
_NV = {"kind": "nvfp4"}
#: (name, Precision's JSON form) of every dialect compared.
DIALECTS: list[tuple[str, Any]] = [
    ("bfloat16", "bfloat16"), ("float16", "float16"), ("e4m3", E4M3), ("e5m2", "float8_e5m2"),
    ("e2m1", E2M1), ("e2m1 stochastic", {"format": E2M1, "rounding": "stochastic"}),
    ("e4m3 stochastic 8 bits", {"format": E4M3, "rounding": "stochastic", "sr_bits": 8}),
    ("tensor e4m3", {"format": E4M3, "scaling": {"kind": "tensor"}}),
    ("delayed e5m2", {"format": "float8_e5m2", "scaling": {"kind": "delayed"}}),
    ("nvfp4 te 1x16", {"format": E2M1, "scaling": _NV}),
    ("nvfp4 te 1x16 stochastic", {"format": E2M1, "rounding": "stochastic", "scaling": _NV}),
    ("nvfp4 te 16x16", {"format": E2M1, "scaling": {**_NV, "two_d": True}}),
    ("nvfp4 te 16x16 stochastic", {"format": E2M1, "rounding": "stochastic",
                                   "scaling": {**_NV, "two_d": True}}),
    ("nvfp4 te row", {"format": E2M1, "scaling": {**_NV, "global_scale": "row"}}),
    ("nvfp4 te 4over6 mae", {"format": E2M1, "scaling": {**_NV, "four_over_six": "mae"}}),
    ("nvfp4 te 4over6 mse 256 16x16", {"format": E2M1, "scaling": {
        **_NV, "four_over_six": "mse", "e4m3_max": 256, "two_d": True}}),
    ("nvfp4 torchao", {"format": E2M1, "scaling": {**_NV, "dialect": "torchao"}}),
    ("nvfp4 torchao single", {"format": E2M1, "scaling": {**_NV, "dialect": "torchao",
                                                          "global_scale": "none"}}),
    ("fp8 blocks deepgemm 1x128", {"format": E4M3, "scaling": {"kind": "fp8_blocks"}}),
    ("fp8 blocks deepgemm 128x128", {"format": E4M3, "scaling": {"kind": "fp8_blocks",
                                                                 "two_d": True}}),
    ("fp8 blocks deepgemm pow2 32x32", {"format": E4M3, "scaling": {
        "kind": "fp8_blocks", "pow2": True, "two_d": True, "block": 32}}),
    ("fp8 blocks te 1x128", {"format": E4M3, "scaling": {"kind": "fp8_blocks",
                                                         "dialect": "te"}}),
    ("fp8 blocks torchao 1x128", {"format": E4M3, "scaling": {"kind": "fp8_blocks",
                                                              "dialect": "torchao"}}),
    ("fp8 rows", {"format": E4M3, "scaling": {"kind": "fp8_rows"}}),
    ("fp8 rows no pow2", {"format": E4M3, "scaling": {"kind": "fp8_rows", "pow2": False}}),
    ("mx e4m3 rceil", {"format": E4M3, "scaling": {"kind": "mx", "scale_rule": "rceil"}}),
    ("mx e4m3 ceil 32x32", {"format": E4M3, "scaling": {"kind": "mx", "scale_rule": "ceil",
                                                         "two_d": True}}),
    ("mx e2m1 even 5-bit scales", {"format": E2M1, "scaling": {
        "kind": "mx", "scale_rule": "even", "scale_bits": 5}}),
    ("mx e2m1 stochastic", {"format": E2M1, "rounding": "stochastic",
                            "scaling": {"kind": "mx"}}),
    ("mxint8", {"format": _format_to(MXINT8), "scaling": {"kind": "mx"}}),
    ("mx deep custom", {"format": {"exponent_bits": 8, "mantissa_bits": 3, "bias": 140},
                        "scaling": {"kind": "mx"}}),
    ("hadamard nvfp4", {"format": E2M1, "scaling": {"kind": "hadamard", "scaling": _NV}}),
    ("hadamard nvfp4 stochastic", {"format": E2M1, "rounding": "stochastic",
                                   "scaling": {"kind": "hadamard", "scaling": _NV}}),
    ("hadamard 32 mx", {"format": E4M3, "scaling": {"kind": "hadamard", "signs": "none",
                                                    "size": 32, "scaling": {"kind": "mx"}}}),
]


def dialects() -> list[tuple[str, Precision]]:
    """``DIALECTS`` as Precisions, and every GEMM operand of the recipes (by name)."""
    out = [(n, Precision.from_value(v, n)) for n, v in DIALECTS]
    for name in ("nvfp4", "mxfp8_2d", "fp8_blockwise"):
        out += [(f"{name} {op}", p) for op, p in get_policy(name).operands]
    return out


def inputs(seed: int = 3) -> list[np.ndarray]:
    """The conformance suite's edge-heavy matrices (every family's) and matrices with outliers
    in aligned and ragged shapes, float32."""
    picks = ("nvfp4/te/16x16", "nvfp4/te/1x16", "mx/torchao/float8_e4m3fn/floor",
             "fp8_blocks/te/1x128/pow2=True", "fp8_rows/torchao/pow2=True",
             "rht/te/float32")
    out = [x for c in CASES if c.id in picks for x in case_inputs(c, seed=seed, blocks=64)[:2]]
    r = np.random.default_rng(seed)
    for shape in ((256, 512), (200, 333), (3, 128, 48)):
        x = (r.standard_normal(shape) * np.exp2(r.integers(-12, 12, shape[-1]))).astype(
            np.float32)
        x.reshape(-1)[r.integers(0, x.size, 8)] = 300.0
        out.append(x)
    return [np.ascontiguousarray(x, np.float32) for x in out]


def _mismatches(a: torch.Tensor, b: torch.Tensor) -> int:
    """Values whose bits differ, two NaNs counting as equal."""
    if a.shape != b.shape:
        return a.numel() or 1
    a, b = a.detach().cpu().float(), b.detach().cpu().float()
    same = (a.view(torch.int32) == b.view(torch.int32)) | (torch.isnan(a) & torch.isnan(b))
    return int((~same).sum())


def _takes(p: Precision, x: np.ndarray) -> bool:
    """Whether the dialect takes x's shape (2D tiles need a matrix; the rotation whole groups)."""
    s: Any = p.scaling
    return not ((getattr(s, "two_d", False) and x.ndim < 2) or (
        getattr(s, "kind", None) == "hadamard" and x.shape[-1] % s.size))


def _applies(p: Precision, x: np.ndarray, device: str, seed: int,
             apply_device: Callable) -> int:
    """Mismatches of one precision on one input: apply on the CPU against ``apply_device`` on
    the device (and ``apply_`` in place where it rounds there; ``mx_quantize`` for MX)."""
    s: Any = p.scaling
    if not _takes(p, x):
        return 0
    t = torch.from_numpy(x)
    want = apply(p, t, rng=np.random.default_rng(seed), state=p.new_state())
    got = apply_device(p, t.to(device), rng=np.random.default_rng(seed), state=p.new_state())
    bad = _mismatches(want, got)
    kind = getattr(p.scaling, "kind", None)
    if kind in (None, "tensor", "delayed"):
        buf = t.to(device).clone()
        apply_(p, buf, rng=np.random.default_rng(seed), state=p.new_state())
        bad += _mismatches(want, buf)
    if kind == "mx" and not s.two_d and s.scale_bits == 8:
        kw = {"block_size": s.block_size, "scale_rule": s.scale_rule, "rounding": p.rounding}
        a = mx_quantize(t, p.format, rng=np.random.default_rng(seed), **kw)
        b = mx_quantize(t.to(device), p.format, rng=np.random.default_rng(seed), **kw)
        bad += _mismatches(a.elements, b.elements) + _mismatches(a.scales, b.scales)
    return bad


def run(device: str, *, apply_device: Callable = apply, seed: int = 0,
        names: list[str] | None = None, out: Any = None) -> int:
    """Compare every dialect (or those in ``names``) on every input; one line each to ``out``
    (stdout). Returns the total number of mismatches."""
    out = sys.stdout if out is None else out
    xs = inputs()
    total = 0
    for name, p in dialects():
        if names is not None and name not in names:
            continue
        t0 = time.perf_counter()
        n = sum(x.size for x in xs if _takes(p, x))
        bad = sum(_applies(p, x, device, seed + i, apply_device) for i, x in enumerate(xs))
        total += bad
        print(f"{name:<34} {n:>9} values  mismatches {bad:>7}  "
              f"({time.perf_counter() - t0:.1f} s)", file=out, flush=True)
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda",
                    help="the device compared with the CPU (default cuda; cpu checks the logic)")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_dialects: no CUDA device (torch.cuda.is_available() is False); nothing "
              "compared", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    print(f"normlab dialects on {args.device} ({name}) against the CPU, torch {torch.__version__}",
          flush=True)
    bad = run(args.device)
    print(f"total mismatches {bad}: {'FAIL' if bad else 'all equal bit for bit'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
