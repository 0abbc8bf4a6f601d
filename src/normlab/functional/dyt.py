"""Dynamic Tanh (Zhu, Chen, He, LeCun & Liu 2025): a normalization-free replacement for
LayerNorm that keeps its S-shaped input-output map.

    y = weight * tanh(alpha * x) + bias         alpha: one learned scalar (initial value 0.5)

Backward, with t = tanh(alpha * x) and s = dy * weight * (1 - t^2):

    dx = alpha * s      dalpha = sum(s * x)      dweight = sum_rows dy * t      dbias = sum_rows dy

The affine parameters are ``weight`` and ``bias`` (the paper's gamma and beta).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array

ALPHA_INIT = 0.5


class DyTCache(NamedTuple):
    """Saved: the input (its own dtype) and the parameters; tanh is recomputed."""

    x: Array  # (..., C) the input, as given
    alpha: Array  # () compute dtype
    weight: Array  # (C,) compute dtype
    param_shapes_dtypes: tuple  # ((alpha.shape, alpha.dtype), weight.dtype, bias.dtype)


def dyt_forward(x: Array, alpha: Array, weight: Array, bias: Array) -> tuple[Array, DyTCache]:
    """DyT over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C) float array.
        alpha: learned scalar, shape () or (1,).
        weight, bias: (C,) affine parameters (gain and bias).

    Returns:
        out: (..., C) in x's dtype; cache for ``dyt_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    alpha = ck.scalar_param(alpha, "alpha")
    weight = ck.param(weight, "weight", C)
    bias = ck.param(bias, "bias", C)
    ct = ck.compute_dtype(x.dtype)
    a = alpha.astype(ct).reshape(())
    g = weight.astype(ct)
    out = g * np.tanh(a * x.astype(ct, copy=False)) + bias.astype(ct)  # (..., C)
    meta = ((alpha.shape, alpha.dtype), weight.dtype, bias.dtype)
    return ck.out_cast(out, x.dtype), DyTCache(x, a, g, meta)


def dyt_backward(dout: Array, cache: DyTCache) -> tuple[Array, Array, Array, Array]:
    """Gradients of DyT: ``(dx, dalpha, dweight, dbias)``, dalpha with alpha's shape."""
    ck.cache(cache, DyTCache, "dyt")
    x, a, g, ((alpha_shape, alpha_dt), weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = a.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    xc = x.astype(ct, copy=False)
    t = np.tanh(a * xc)  # (..., C) recomputed
    dweight = ck.reduce_rows(dy * t)
    dbias = ck.reduce_rows(dy)
    s = dy * g * (1.0 - t * t)  # (..., C) gradient w.r.t. alpha * x
    dalpha = np.sum(s * xc, dtype=np.float64)  # a scalar: accumulated in float64
    dx = a * s
    return (
        ck.out_cast(dx, x.dtype),
        np.asarray(dalpha).astype(ck.compute_dtype(alpha_dt)).reshape(alpha_shape),
        dweight.astype(ck.compute_dtype(weight_dt)),
        dbias.astype(ck.compute_dtype(bias_dt)),
    )
