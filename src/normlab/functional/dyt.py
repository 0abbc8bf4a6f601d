"""Dynamic Tanh (Zhu, Chen, He, LeCun & Liu 2025): a normalization-free replacement for
LayerNorm that keeps its S-shaped input-output map.

    y = gamma * tanh(alpha * x) + beta          alpha: one learned scalar (initial value 0.5)

Backward, with t = tanh(alpha * x) and s = dy * gamma * (1 - t^2):

    dx = alpha * s        dalpha = sum(s * x)        dgamma = sum_rows dy * t     dbeta = sum_rows dy
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
    gamma: Array  # (C,) compute dtype
    param_shapes_dtypes: tuple  # ((alpha.shape, alpha.dtype), gamma.dtype, beta.dtype)


def dyt_forward(x: Array, alpha: Array, gamma: Array, beta: Array) -> tuple[Array, DyTCache]:
    """DyT over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C) float array.
        alpha: learned scalar, shape () or (1,).
        gamma, beta: (C,) affine parameters.

    Returns:
        out: (..., C) in x's dtype; cache for ``dyt_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    alpha = ck.scalar_param(alpha, "alpha")
    gamma = ck.param(gamma, "gamma", C)
    beta = ck.param(beta, "beta", C)
    ct = ck.compute_dtype(x.dtype)
    a = alpha.astype(ct).reshape(())
    g = gamma.astype(ct)
    out = g * np.tanh(a * x.astype(ct, copy=False)) + beta.astype(ct)  # (..., C)
    meta = ((alpha.shape, alpha.dtype), gamma.dtype, beta.dtype)
    return ck.out_cast(out, x.dtype), DyTCache(x, a, g, meta)


def dyt_backward(dout: Array, cache: DyTCache) -> tuple[Array, Array, Array, Array]:
    """Gradients of DyT: ``(dx, dalpha, dgamma, dbeta)``, dalpha with alpha's shape."""
    ck.cache(cache, DyTCache, "dyt")
    x, a, g, ((alpha_shape, alpha_dt), gamma_dt, beta_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = a.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    xc = x.astype(ct, copy=False)
    t = np.tanh(a * xc)  # (..., C) recomputed
    dgamma = ck.reduce_rows(dy * t)
    dbeta = ck.reduce_rows(dy)
    s = dy * g * (1.0 - t * t)  # (..., C) gradient w.r.t. alpha * x
    dalpha = np.sum(s * xc, dtype=np.float64)  # a scalar: accumulated in float64
    dx = a * s
    return (
        ck.out_cast(dx, x.dtype),
        np.asarray(dalpha).astype(ck.compute_dtype(alpha_dt)).reshape(alpha_shape),
        dgamma.astype(ck.compute_dtype(gamma_dt)),
        dbeta.astype(ck.compute_dtype(beta_dt)),
    )
