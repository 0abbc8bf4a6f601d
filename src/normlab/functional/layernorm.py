"""LayerNorm (Ba et al. 2016): normalize each row over its last axis.

    mean = (1/C) sum_j x_j          var = (1/C) sum_j (x_j - mean)^2      (biased)
    xhat = (x - mean) / sqrt(var + eps)                                     (eps inside the root)
    y    = weight * xhat + bias                                             (gain and bias)

Backward, with g = weight * dy and means over the last axis:

    dx      = rstd * (g - mean(g) - xhat * mean(g * xhat))
    dweight = sum over rows of dy * xhat          dbias = sum over rows of dy

The gain and bias are ``weight`` and ``bias`` (PyTorch's and transformers' names; older normlab
called them gamma and beta).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from ..precision.accumulate import Accumulation, check_accumulation


class LayerNormCache(NamedTuple):
    """Saved: the input (in its own dtype) and the row statistics; xhat is recomputed."""

    x: Array  # (..., C) the input, as given
    weight: Array | None  # (C,) the gain in the compute dtype, None without a gain
    has_bias: bool  # whether the forward had a bias (its gradient is None otherwise)
    mean: Array  # (..., 1) row means, compute dtype (float32 or float64)
    rstd: Array  # (..., 1) 1 / sqrt(var + eps), compute dtype
    param_dtypes: tuple  # dtypes of weight and bias as given (None where absent)


def check_args(x, weight, bias, eps):
    """The forward's arguments checked (shared with the kernel): ``(x, weight, bias, eps)``."""
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    weight = ck.param(weight, "weight", C, allow_none=True)
    bias = ck.param(bias, "bias", C, allow_none=True)
    return x, weight, bias, ck.positive(eps, "eps")


def layer_norm_forward(
    x: Array, weight: Array | None = None, bias: Array | None = None, *, eps: float = 1e-5,
    accumulate: Accumulation | None = None,
) -> tuple[Array, LayerNormCache]:
    """LayerNorm over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C) float array.
        weight: (C,) gain, or None for no gain.
        bias: (C,) bias, or None for no bias.
        eps: > 0, added to the variance inside the square root.
        accumulate: the accumulator of the mean's and the variance's sums
            (``PrecisionPolicy.norm_accumulate``); None or the default: float32 (float64) means.

    Returns:
        out: (..., C) in x's dtype; cache for ``layer_norm_backward``.
    """
    x, weight, bias, eps = check_args(x, weight, bias, eps)
    acc = check_accumulation(accumulate)
    ct = ck.compute_dtype(x.dtype)

    xc = x.astype(ct, copy=False)  # (..., C)
    n = ct.type(x.shape[-1])
    if acc is None:
        mean = xc.mean(axis=-1, keepdims=True)  # (..., 1)
    else:  # two passes as below, each sum in the accumulator
        mean = acc.sum(xc)[..., None].astype(ct) / n
    centered = xc - mean  # (..., C)
    if acc is None:
        var = np.mean(centered * centered, axis=-1, keepdims=True)  # (..., 1) biased
    else:
        var = acc.sum(centered * centered)[..., None].astype(ct) / n
    rstd = 1.0 / np.sqrt(var + ct.type(eps))  # (..., 1)
    out = centered * rstd  # (..., C) xhat
    g = None if weight is None else weight.astype(ct)
    if g is not None:
        out *= g
    if bias is not None:
        out += bias.astype(ct)
    dtypes = (None if weight is None else weight.dtype, None if bias is None else bias.dtype)
    return ck.out_cast(out, x.dtype), LayerNormCache(x, g, bias is not None, mean, rstd, dtypes)


def layer_norm_backward(
    dout: Array, cache: LayerNormCache
) -> tuple[Array, Array | None, Array | None]:
    """Gradients of LayerNorm: ``(dx, dweight, dbias)``; dx in x's dtype, parameter gradients in
    at least float32 (None for an absent parameter)."""
    ck.cache(cache, LayerNormCache, "layer_norm")
    x, g, has_bias, mean, rstd, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = mean.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    xhat = (x.astype(ct, copy=False) - mean) * rstd  # (..., C) recomputed
    dweight = None if g is None else ck.reduce_rows(dy * xhat).astype(ck.compute_dtype(weight_dt))
    dbias = ck.reduce_rows(dy).astype(ck.compute_dtype(bias_dt)) if has_bias else None
    gh = dy if g is None else dy * g  # (..., C) gradient w.r.t. xhat
    dx = rstd * (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * np.mean(gh * xhat, axis=-1, keepdims=True)
    )
    return ck.out_cast(dx, x.dtype), dweight, dbias
