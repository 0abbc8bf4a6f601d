"""The headroom column that predicts the ``mxfp8`` preset: ``normlab.precision.headroom`` counts
MX blocks under OCP MX v1.0's floor rule (``X = 2^(floor(log2 amax) - emax)``); the preset scales
with its ``compute`` role's rule (``ceil``: the smallest power of two with ``amax / X <= max``,
which never clips a block). Where the two rules give a block the same scale its counts are the
floor counts; only the other blocks are counted again, at both scales, and the difference
added. Exact, by the thresholds of ``normlab.precision.headroom``: a value overflows past
``max + ulp(max) / 2`` (strictly when max's last bit is even), flushes at or below half the
smallest subnormal, is subnormal below the smallest normal less half a subnormal spacing.

For the ceil rule the blocks that move are read from their amax: with ``amax = 1.m x 2^e``,
``amax / X_floor = 1.m x 2^emax``, above ``max = 1.m_max x 2^emax`` exactly when ``m > m_max``,
and then ``X_ceil = 2 X_floor`` (inside E8M0's range; a block at either end of it keeps the
clamped scale under both rules). There one pass of a numba kernel finds each block's amax and
counts the moved blocks' values against both scales' bounds while they are in the cache
(``_ceil_deltas``; each bound a float32 threshold times a power of two, exact in float32);
where numba does not import, and for any other rule, the same counts come from torch
operations (``_torch_deltas``: the blocks' amax, the moved blocks gathered; tested equal).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..precision.formats import FloatFormat
from ..precision.headroom import MX_BLOCK
from ..precision.policy import get_policy
from .quantize import mx_scale

#: The headroom column that follows the ``mxfp8`` preset's scale rule.
MXFP8 = "mxfp8"


def preset_rule() -> tuple[FloatFormat, str]:
    """The mxfp8 preset's element format and scale rule (its ``compute`` role's)."""
    p = get_policy(MXFP8).compute
    return p.format, str(getattr(p.scaling, "scale_rule", "floor"))


def _thresholds(f: FloatFormat) -> tuple[float, bool, float, float]:
    """(beyond, strict, half_tiny, top_sub), as ``normlab.precision.headroom`` counts."""
    beyond = f.max_finite + 2.0 ** (f.emax - f.mantissa_bits - 1)
    half_tiny = f.min_subnormal / 2
    top_sub = f.min_normal - f.min_subnormal / 2 if f.subnormals else half_tiny
    return beyond, f.inf_nan == "fn" and f.mantissa_bits > 0, half_tiny, top_sub


def _padded(x: torch.Tensor) -> torch.Tensor:
    """The (n, 32) blocks of x along its last axis, each row's last block padded with zeros (a
    view where the last axis is a multiple of 32)."""
    last = x.shape[-1] if x.dim() else 1
    rows = x.reshape(-1, last)
    pad = (-last) % MX_BLOCK
    return (torch.nn.functional.pad(rows, (0, pad)) if pad else rows).reshape(-1, MX_BLOCK)


def _blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The (n, 32) blocks of x along its last axis (zero padded) and each block's amax over its
    finite values, float32 (n,)."""
    blocks = _padded(x)
    amax = torch.maximum(blocks.amax(dim=1), -blocks.amin(dim=1))  # two passes, no |x| copy
    bad = ~torch.isfinite(amax)
    if bool(bad.any()):  # a block with an inf or NaN: its amax over the finite values
        sub = torch.nan_to_num(blocks[bad].abs(), nan=0.0, posinf=0.0)
        amax[bad] = sub.amax(dim=1)
    return blocks, amax


def _moved(amax: torch.Tensor, f: FloatFormat, rule: str) -> tuple[torch.Tensor, torch.Tensor,
                                                                   torch.Tensor]:
    """(the blocks whose scale differs from the floor rule's, 1 / X_floor of each (float32),
    X_rule / X_floor of each (float32))."""
    m_max = int(np.array([f.max_finite], np.float32).view(np.int32)[0]) & 0x7FFFFF
    if rule == "ceil" and math.floor(math.log2(f.max_finite)) == f.emax:
        bits = amax.view(torch.int32)
        ef = ((bits >> 23) & 0xFF) - 127 - f.emax  # floor(log2 amax) - emax, normal amax
        hit = ((bits >> 23) > 0) & ((bits & 0x7FFFFF) > m_max) & (ef >= -127) & (ef < 127)
        idx = hit.nonzero().squeeze(1)
        inv = ((127 - ef[idx]) << 23).to(torch.int32).view(torch.float32)  # 2^-ef exactly
        return idx, inv, torch.full_like(inv, 2.0)
    a = amax.double()
    xf, xr = mx_scale(a, f, "floor"), mx_scale(a, f, rule)
    idx = (xf != xr).nonzero().squeeze(1)
    return idx, (1.0 / xf[idx]).float(), (xr[idx] / xf[idx]).float()


def _torch_deltas(x: torch.Tensor, f: FloatFormat, rule: str,
                  nonfinite: bool) -> tuple[int, int, int]:
    """The changes of the (overflow, kept, normal) counts from the floor rule to ``rule``, in
    torch operations: the moved blocks gathered, |x| / X_floor against each bound at both
    scales."""
    blocks, amax = _blocks(x)
    idx, inv, ratio = _moved(amax, f, rule)
    if not idx.numel():
        return 0, 0, 0
    w = blocks.index_select(0, idx).abs_()
    if nonfinite:
        w.nan_to_num_(nan=0.0, posinf=0.0)
    w.mul_(inv[:, None])  # |x| / X_floor, exact (a power of two)
    beyond, strict, half_tiny, top_sub = _thresholds(f)
    k: Any = float(ratio[0]) if bool((ratio == ratio[0]).all()) else ratio[:, None]
    d = [int(torch.count_nonzero(w > t * k if gt else w >= t * k)) -
         int(torch.count_nonzero(w > t if gt else w >= t))
         for t, gt in ((beyond, strict), (half_tiny, True), (top_sub, False))]
    return d[0], d[1], d[2]


def _kernel() -> Callable | None:
    """``_ceil_deltas`` compiled by numba (cached), or None where numba does not import."""
    global _KERNEL
    if _KERNEL is None:
        try:
            from numba import njit
        except ImportError:  # pragma: no cover - depends on the installation
            _KERNEL = False
        else:
            _KERNEL = njit(cache=True, nogil=True, fastmath={"reassoc"})(_ceil_deltas)
    return _KERNEL or None


_KERNEL: Any = None


@functools.cache
def _bounds(f: FloatFormat) -> np.ndarray:
    """Per floor exponent ef in [-127, 126] (row ef + 127), the float32 bounds B of the six
    tests ``|x| >= B``: overflow, kept, normal at X = 2^ef, then at 2X; each t X exact in
    float32 (or past its range: inf, never reached), the next float32 up for a strict test."""
    beyond, strict, half_tiny, top_sub = _thresholds(f)
    out = np.zeros((254, 6), np.int32)
    for row, ef in enumerate(range(-127, 127)):
        for j, (t, gt) in enumerate(((beyond, strict), (half_tiny, True), (top_sub, False)) * 2):
            bound = t * 2.0 ** (ef + (j >= 3))
            b32 = np.float32(bound) if bound < 3.4e38 else np.float32(np.inf)
            if not (np.isinf(b32) or float(b32) == bound):  # pragma: no cover - by construction
                raise AssertionError(f"bound {t} 2^{ef} is not a float32")
            bits = int(np.array([b32], np.float32).view(np.int32)[0])
            out[row, j] = bits + (1 if gt and not np.isinf(b32) else 0)
    return out.view(np.float32)


def _ceil_deltas(blocks: np.ndarray, m_max: int, emax: int,
                 bounds: np.ndarray) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """The changes of the (overflow, kept, normal) counts from the floor rule to the ceil rule
    of the float32 blocks (n, 32) (non-finite values as 0), chunk by chunk: the blocks' amax,
    then for a block whose amax's mantissa field exceeds ``m_max`` (max's) and whose floor
    scale 2^ef is inside [2^-127, 2^126], its values against the six bounds of row ef + 127
    of ``bounds`` while they are in the cache."""
    d_over = d_kept = d_normal = 0
    inf = np.float32(np.inf)
    tops = np.zeros(256, np.float32)
    top_bits = tops.view(np.int32)
    for k0 in range(0, blocks.shape[0], 256):
        k1 = min(k0 + 256, blocks.shape[0])
        for k in range(k0, k1):
            row = blocks[k]
            top = np.float32(0)
            for c in range(32):
                v = abs(row[c])
                top = max(top, v if v < inf else np.float32(0))
            tops[k - k0] = top
        for k in range(k0, k1):
            b = top_bits[k - k0]
            ef = (b >> 23) - 127 - emax
            if b < 0x00800000 or (b & 0x7FFFFF) <= m_max or ef < -127 or ef >= 127:
                continue
            row, t = blocks[k], bounds[ef + 127]
            s0 = s1 = s2 = s3 = s4 = s5 = 0
            for c in range(32):
                v = abs(row[c])
                v = v if v < inf else np.float32(0)
                s0 += v >= t[0]
                s1 += v >= t[1]
                s2 += v >= t[2]
                s3 += v >= t[3]
                s4 += v >= t[4]
                s5 += v >= t[5]
            d_over += s3 - s0
            d_kept += s4 - s1
            d_normal += s5 - s2
    return d_over, d_kept, d_normal


def preset_mx_fractions(x: torch.Tensor, stats: dict, *, impl: str = "kernel") -> dict:
    """The ``mxfp8`` fractions of ``stats`` (``tensor_stats`` of x, floor rule) under the
    preset's rule (module docstring). x: float32 on the CPU, contiguous. ``impl``: "kernel"
    (numba, the ceil rule) or "torch"; the same counts."""
    f, rule = preset_rule()
    floor = stats["formats"][MXFP8]
    if rule == "floor" or x.numel() == 0:
        return dict(floor)
    n = stats["size"] - stats["zeros"] - stats["nonfinite"]
    kernel = _kernel() if impl == "kernel" else None
    if kernel is not None and rule == "ceil" and math.floor(math.log2(f.max_finite)) == f.emax:
        m_max = int(np.array([f.max_finite], np.float32).view(np.int32)[0]) & 0x7FFFFF
        d = kernel(_padded(x).numpy(), m_max, f.emax, _bounds(f))
    else:
        d = _torch_deltas(x, f, rule, bool(stats["nonfinite"]))
    over = round(floor["overflow"] * n) + d[0]
    kept = n - round(floor["flush"] * n) + d[1]
    normal = n - round(floor["flush"] * n) - round(floor["subnormal"] * n) + d[2]
    m = max(n, 1)
    return {"overflow": over / m, "flush": (n - kept) / m, "subnormal": (kept - normal) / m}


__all__ = ["MXFP8", "preset_mx_fractions", "preset_rule"]
