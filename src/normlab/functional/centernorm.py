"""Centering only: LayerNorm without its rescaling (the ablation of Zhang & Sennrich 2019's
argument that the rescaling, not the re-centering, is what LayerNorm's stability comes from).

    mean = (1/C) sum_j x_j
    y    = weight * (x - mean) + bias          gain and bias as LayerNorm's; no division

It is LayerNorm with the division by the standard deviation taken out, as RMSNorm is LayerNorm
with the mean taken out: the four arms (neither, centering, rescaling, both) differ by one
operation each. No eps: nothing is divided.

Backward, with g = weight * dy and means over the last axis (the centering is a projection,
its Jacobian I - 11^T / C is symmetric):

    dx      = g - mean(g)
    dweight = sum over rows of dy * (x - mean)          dbias = sum over rows of dy
"""

from __future__ import annotations

from typing import NamedTuple

from .. import _checks as ck
from .._checks import Array


class CenterNormCache(NamedTuple):
    """Saved: the input (its own dtype) and the row means; x - mean is recomputed."""

    x: Array  # (..., C) the input, as given
    weight: Array | None  # (C,) the gain in the compute dtype, None without a gain
    has_bias: bool  # whether the forward had a bias (its gradient is None otherwise)
    mean: Array  # (..., 1) row means, compute dtype (float32 or float64)
    param_dtypes: tuple  # dtypes of weight and bias as given (None where absent)


def center_norm_forward(
    x: Array, weight: Array | None = None, bias: Array | None = None
) -> tuple[Array, CenterNormCache]:
    """Centering over the last axis of ``x`` (any leading shape), then the gain and bias.

    Args:
        x: (..., C) float array.
        weight: (C,) gain, or None for no gain.
        bias: (C,) bias, or None for no bias.

    Returns:
        out: (..., C) in x's dtype; cache for ``center_norm_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    weight = ck.param(weight, "weight", C, allow_none=True)
    bias = ck.param(bias, "bias", C, allow_none=True)
    ct = ck.compute_dtype(x.dtype)

    xc = x.astype(ct, copy=False)  # (..., C)
    mean = xc.mean(axis=-1, keepdims=True)  # (..., 1)
    out = xc - mean  # (..., C) a fresh array
    g = None if weight is None else weight.astype(ct)
    if g is not None:
        out *= g
    if bias is not None:
        out += bias.astype(ct)
    dtypes = (None if weight is None else weight.dtype, None if bias is None else bias.dtype)
    return ck.out_cast(out, x.dtype), CenterNormCache(x, g, bias is not None, mean, dtypes)


def center_norm_backward(
    dout: Array, cache: CenterNormCache
) -> tuple[Array, Array | None, Array | None]:
    """Gradients of the centering: ``(dx, dweight, dbias)``; dx in x's dtype, parameter
    gradients in at least float32 (None for an absent parameter)."""
    ck.cache(cache, CenterNormCache, "center_norm")
    x, g, has_bias, mean, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = mean.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    centered = x.astype(ct, copy=False) - mean  # (..., C) recomputed
    dweight = (None if g is None
               else ck.reduce_rows(dy * centered).astype(ck.compute_dtype(weight_dt)))
    dbias = ck.reduce_rows(dy).astype(ck.compute_dtype(bias_dt)) if has_bias else None
    gh = dy if g is None else dy * g  # (..., C) gradient w.r.t. x - mean
    dx = gh - gh.mean(axis=-1, keepdims=True)
    return ck.out_cast(dx, x.dtype), dweight, dbias
