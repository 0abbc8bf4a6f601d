"""RMSNorm (Zhang & Sennrich 2019): scale each row by its root mean square, no centering.

    rstd = 1 / sqrt(mean_k(x^2) + eps)      mean over the first k features: k = C, or
                                            k = ceil(p * C) for pRMSNorm (``partial=p``)
    xhat = x * rstd
    y    = xhat * (offset + w)              offset = 1 with w initialized to 0 is Gemma's (1 + w)

Backward, with g = (offset + w) * dy:

    dx = rstd * (g - [j < k] * xhat * sum_j(g * xhat) / k)
    dw = sum over rows of dy * xhat
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from ..precision.accumulate import Accumulation, check_accumulation


class RMSNormCache(NamedTuple):
    """Saved: the input (its own dtype) and the row rstd; xhat is recomputed."""

    x: Array  # (..., C) the input, as given
    scale: Array  # (C,) offset + weight, in the compute dtype
    rstd: Array  # (..., 1) compute dtype
    k: int  # number of leading features the RMS is estimated from (C unless partial)
    weight_dtype: np.dtype  # the weight's dtype as given (dweight is returned in at least float32)


def partial_width(C: int, partial: float | None) -> int:
    """Features pRMSNorm estimates the RMS from: ceil(p * C), at least 1; C without ``partial``."""
    if partial is None:
        return C
    p = ck.real(partial, "partial (the fraction of features)", lo=0, hi=1, lo_open=True)
    return max(1, min(C, math.ceil(p * C - 1e-9)))


def check_args(x, weight, eps, partial, offset):
    """The forward's arguments checked (shared with the kernel): ``(x, weight, eps, k)`` with k
    the number of features the RMS is estimated from."""
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    weight = ck.param(weight, "weight", C)
    eps = ck.positive(eps, "eps")
    k = partial_width(C, partial)
    ck.real(offset, "offset")
    return x, weight, eps, k


def rms_norm_forward(
    x: Array,
    weight: Array,
    *,
    eps: float = 1e-8,
    partial: float | None = None,
    offset: float = 0.0,
    accumulate: Accumulation | None = None,
) -> tuple[Array, RMSNormCache]:
    """RMSNorm over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C) float array.
        weight: (C,) gain; the output is scaled by ``offset + weight`` (added in the compute dtype).
        eps: > 0, added to the mean square inside the square root.
        partial: pRMSNorm's p in (0, 1]: the RMS comes from the first ceil(p * C) features.
        offset: 0 (standard) or 1 (Gemma's zero-centered ``(1 + w)``); any finite real.
        accumulate: the accumulator of the mean square (``PrecisionPolicy.norm_accumulate``);
            None or the default: the float32 (float64) mean as always.

    Returns:
        out: (..., C) in x's dtype; cache for ``rms_norm_backward``.
    """
    x, weight, eps, k = check_args(x, weight, eps, partial, offset)
    acc = check_accumulation(accumulate)
    ct = ck.compute_dtype(x.dtype)

    xc = x.astype(ct, copy=False)  # (..., C)
    head = xc[..., :k]  # (..., k)
    if acc is None:
        ms = np.mean(head * head, axis=-1, keepdims=True)  # (..., 1)
    else:  # the squares (compute dtype) summed in the accumulator, then divided by k
        ms = acc.sum(head * head)[..., None].astype(ct) / ct.type(k)
    rstd = 1.0 / np.sqrt(ms + ct.type(eps))  # (..., 1)
    scale = weight.astype(ct) + ct.type(offset)  # (C,)
    out = xc * rstd * scale  # (..., C)
    return ck.out_cast(out, x.dtype), RMSNormCache(x, scale, rstd, k, weight.dtype)


def rms_norm_backward(dout: Array, cache: RMSNormCache) -> tuple[Array, Array]:
    """Gradients of RMSNorm: ``(dx, dweight)``; dx in x's dtype, dweight in at least float32."""
    ck.cache(cache, RMSNormCache, "rms_norm")
    x, scale, rstd, k, weight_dt = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = rstd.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    xhat = x.astype(ct, copy=False) * rstd  # (..., C) recomputed
    dweight = ck.reduce_rows(dy * xhat).astype(ck.compute_dtype(weight_dt))
    g = dy * scale  # (..., C) gradient w.r.t. xhat
    dot = np.sum(g * xhat, axis=-1, keepdims=True) / k  # (..., 1)
    dx = g  # reuse the buffer: dx = rstd * (g - [j < k] xhat * dot)
    dx[..., :k] -= xhat[..., :k] * dot
    dx *= rstd
    return ck.out_cast(dx, x.dtype), dweight
