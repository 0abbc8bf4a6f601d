"""The headroom column that predicts the ``mxfp8`` preset: ``normlab.precision.headroom`` counts
MX blocks under OCP MX v1.0's floor rule (``X = 2^(floor(log2 amax) - emax)``); the preset scales
with its ``compute`` role's rule (``ceil``: the smallest power of two with ``amax / X <= max``,
which never clips a block). Where the two rules give a block the same scale its counts are the
floor counts; only the other blocks are counted again, at both scales, and the difference
added. Exact, by the thresholds of ``normlab.precision.headroom``: a value overflows past
``max + ulp(max) / 2`` (strictly when max's last bit is even), flushes at or below half the
smallest subnormal, is subnormal below the smallest normal less half a subnormal spacing.

For the ceil rule the blocks that move are read from the bits of their float32 amax: with
``amax = 1.m x 2^e``, ``amax / X_floor = 1.m x 2^emax``, above ``max = 1.m_max x 2^emax``
exactly when ``m > m_max``, and then ``X_ceil = 2 X_floor`` (inside E8M0's range; a block at
either end of it keeps the clamped scale under both rules). Any other rule goes through
``normlab.torch.mx_scale``.
"""

from __future__ import annotations

import math
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


def _blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The (n, 32) blocks of x along its last axis (zero padded) and each block's amax over its
    finite values, float32 (n,)."""
    last = x.shape[-1] if x.dim() else 1
    rows = x.reshape(-1, last)
    pad = (-last) % MX_BLOCK
    blocks = (torch.nn.functional.pad(rows, (0, pad)) if pad else rows).reshape(-1, MX_BLOCK)
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


def preset_mx_fractions(x: torch.Tensor, stats: dict) -> dict:
    """The ``mxfp8`` fractions of ``stats`` (``tensor_stats`` of x, floor rule) under the
    preset's rule (module docstring). x: float32 on the CPU, contiguous."""
    f, rule = preset_rule()
    floor = stats["formats"][MXFP8]
    if rule == "floor" or x.numel() == 0:
        return dict(floor)
    n = stats["size"] - stats["zeros"] - stats["nonfinite"]
    over = round(floor["overflow"] * n)
    kept = n - round(floor["flush"] * n)
    normal = kept - round(floor["subnormal"] * n)
    blocks, amax = _blocks(x)
    idx, inv, ratio = _moved(amax, f, rule)
    if idx.numel():
        w = blocks.index_select(0, idx).abs_()
        if stats["nonfinite"]:
            w.nan_to_num_(nan=0.0, posinf=0.0)
        w.mul_(inv[:, None])  # |x| / X_floor, exact (a power of two)
        beyond, strict, half_tiny, top_sub = _thresholds(f)
        k: Any = float(ratio[0]) if bool((ratio == ratio[0]).all()) else ratio[:, None]
        d = [int(torch.count_nonzero(w > t * k if gt else w >= t * k)) -
             int(torch.count_nonzero(w > t if gt else w >= t))
             for t, gt in ((beyond, strict), (half_tiny, True), (top_sub, False))]
        over, kept, normal = over + d[0], kept + d[1], normal + d[2]
    m = max(n, 1)
    return {"overflow": over / m, "flush": (n - kept) / m, "subnormal": (kept - normal) / m}


__all__ = ["MXFP8", "preset_mx_fractions", "preset_rule"]
