"""LayerNorm (Ba et al. 2016): normalize each row over its last axis.

    mean = (1/C) sum_j x_j          var = (1/C) sum_j (x_j - mean)^2      (biased)
    xhat = (x - mean) / sqrt(var + eps)                                     (eps inside the root)
    y    = gamma * xhat + beta

Backward, with g = gamma * dy and means over the last axis:

    dx     = rstd * (g - mean(g) - xhat * mean(g * xhat))
    dgamma = sum over rows of dy * xhat          dbeta = sum over rows of dy
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class LayerNormCache(NamedTuple):
    """Saved: the input (in its own dtype) and the row statistics; xhat is recomputed."""

    x: Array  # (..., C) the input, as given
    gamma: Array | None  # (C,) in the compute dtype, None without a gain
    has_beta: bool  # whether the forward had a bias (its gradient is None otherwise)
    mean: Array  # (..., 1) row means, compute dtype (float32 or float64)
    rstd: Array  # (..., 1) 1 / sqrt(var + eps), compute dtype
    param_dtypes: tuple  # dtypes of gamma and beta as given (None where absent)


def check_args(x, gamma, beta, eps):
    """The forward's arguments checked (shared with the kernel): ``(x, gamma, beta, eps)``."""
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    gamma = ck.param(gamma, "gamma", C, allow_none=True)
    beta = ck.param(beta, "beta", C, allow_none=True)
    return x, gamma, beta, ck.positive(eps, "eps")


def layer_norm_forward(
    x: Array, gamma: Array | None, beta: Array | None, eps: float = 1e-5
) -> tuple[Array, LayerNormCache]:
    """LayerNorm over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C) float array.
        gamma: (C,) gain, or None for no gain.
        beta: (C,) bias, or None for no bias.
        eps: > 0, added to the variance inside the square root.

    Returns:
        out: (..., C) in x's dtype; cache for ``layer_norm_backward``.
    """
    x, gamma, beta, eps = check_args(x, gamma, beta, eps)
    ct = ck.compute_dtype(x.dtype)

    xc = x.astype(ct, copy=False)  # (..., C)
    mean = xc.mean(axis=-1, keepdims=True)  # (..., 1)
    centered = xc - mean  # (..., C)
    var = np.mean(centered * centered, axis=-1, keepdims=True)  # (..., 1) biased
    rstd = 1.0 / np.sqrt(var + ct.type(eps))  # (..., 1)
    out = centered * rstd  # (..., C) xhat
    g = None if gamma is None else gamma.astype(ct)
    if g is not None:
        out *= g
    if beta is not None:
        out += beta.astype(ct)
    dtypes = (None if gamma is None else gamma.dtype, None if beta is None else beta.dtype)
    return ck.out_cast(out, x.dtype), LayerNormCache(x, g, beta is not None, mean, rstd, dtypes)


def layer_norm_backward(dout: Array, cache: LayerNormCache) -> tuple[Array, Array | None, Array | None]:
    """Gradients of LayerNorm: ``(dx, dgamma, dbeta)``; dx in x's dtype, parameter gradients in
    at least float32 (None for an absent parameter)."""
    ck.cache(cache, LayerNormCache, "layer_norm")
    x, g, has_beta, mean, rstd, (gamma_dt, beta_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = mean.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    xhat = (x.astype(ct, copy=False) - mean) * rstd  # (..., C) recomputed
    dgamma = None if g is None else ck.reduce_rows(dy * xhat).astype(ck.compute_dtype(gamma_dt))
    dbeta = ck.reduce_rows(dy).astype(ck.compute_dtype(beta_dt)) if has_beta else None
    gh = dy if g is None else dy * g  # (..., C) gradient w.r.t. xhat
    dx = rstd * (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * np.mean(gh * xhat, axis=-1, keepdims=True)
    )
    return ck.out_cast(dx, x.dtype), dgamma, dbeta
