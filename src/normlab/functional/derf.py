"""Dynamic erf (Derf; Chen, Lu, Zhu, Sun & Liu 2025, "Stronger Normalization-Free Transformers",
arXiv 2512.10938, its Derf(x) = erf(alpha x + s)): DyT's successor, a point-wise function in
place of the norm.

    y = weight * erf(alpha * x + shift) + bias      alpha, shift: learned scalars (init 0.5, 0)

The paper writes it gamma * erf(alpha x + s) + beta; the official code
(github.com/zlab-princeton/Derf, ``ViT/dynamic_erf.py`` and ``language model/model_derf.patch``,
class ``Dynamic_erf``) holds ``alpha = ones(1) * alpha_init_value`` (0.5),
``shift = ones(1) * shift_init_value`` (0.0), ``weight = ones(C)`` and ``bias = zeros(C)``, and
computes ``weight * torch.erf(alpha * x + shift) + bias``. normlab keeps that order of the
parameters: ``(alpha, shift, weight, bias)``.

Backward, with z = alpha * x + shift, e = erf(z) and s = dy * weight * (2 / sqrt(pi)) exp(-z^2):

    dx = alpha * s      dalpha = sum(s * x)      dshift = sum(s)
    dweight = sum_rows dy * e                    dbias = sum_rows dy

NumPy has no vectorized erf: ``math.erf`` runs once per value (double precision, as GELU's exact
form in ``functional.activations``); the result is rounded once to the compute dtype.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array

ALPHA_INIT = 0.5  # the official code's alpha_init_value
SHIFT_INIT = 0.0  # the official code's shift_init_value
_ERF = np.frompyfunc(math.erf, 1, 1)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(z: Array) -> Array:
    """erf of every value of ``z`` (float64 math, ``math.erf``), in ``z``'s dtype."""
    return np.asarray(_ERF(np.asarray(z, np.float64)), np.float64).astype(z.dtype, copy=False)


class DerfCache(NamedTuple):
    """Saved: the input (its own dtype) and the parameters; z and erf(z) are recomputed."""

    x: Array  # (..., C) the input, as given
    alpha: Array  # () compute dtype
    shift: Array  # () compute dtype
    weight: Array  # (C,) compute dtype
    meta: tuple  # ((alpha.shape, alpha.dtype), (shift.shape, shift.dtype), weight.dtype,
    #              bias.dtype): the parameters' shapes and dtypes, for the gradients


def derf_forward(x: Array, alpha: Array, shift: Array, weight: Array,
                 bias: Array) -> tuple[Array, DerfCache]:
    """Derf over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C) float array.
        alpha, shift: learned scalars, shape () or (1,).
        weight, bias: (C,) affine parameters (the paper's gamma and beta).

    Returns:
        out: (..., C) in x's dtype; cache for ``derf_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    alpha = ck.scalar_param(alpha, "alpha")
    shift = ck.scalar_param(shift, "shift")
    weight = ck.param(weight, "weight", C)
    bias = ck.param(bias, "bias", C)
    ct = ck.compute_dtype(x.dtype)
    a, s = alpha.astype(ct).reshape(()), shift.astype(ct).reshape(())
    g = weight.astype(ct)
    z = a * x.astype(ct, copy=False) + s  # (..., C)
    out = g * erf(z) + bias.astype(ct)  # (..., C)
    meta = ((alpha.shape, alpha.dtype), (shift.shape, shift.dtype), weight.dtype, bias.dtype)
    return ck.out_cast(out, x.dtype), DerfCache(x, a, s, g, meta)


def derf_backward(dout: Array, cache: DerfCache) -> tuple[Array, Array, Array, Array, Array]:
    """Gradients of Derf: ``(dx, dalpha, dshift, dweight, dbias)``, each scalar with its
    parameter's shape; the scalars' sums accumulated in float64."""
    ck.cache(cache, DerfCache, "derf")
    x, a, s, g, ((alpha_shape, alpha_dt), (shift_shape, shift_dt), weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = a.dtype
    dy = dout.astype(ct, copy=False)  # (..., C)
    xc = x.astype(ct, copy=False)
    z = a * xc + s  # (..., C) recomputed
    dweight = ck.reduce_rows(dy * erf(z))
    dbias = ck.reduce_rows(dy)
    ds = dy * g * (ct.type(_TWO_OVER_SQRT_PI) * np.exp(-(z * z)))  # (..., C) d/dz
    dalpha = np.sum(ds * xc, dtype=np.float64)
    dshift = np.sum(ds, dtype=np.float64)
    return (
        ck.out_cast(a * ds, x.dtype),
        np.asarray(dalpha).astype(ck.compute_dtype(alpha_dt)).reshape(alpha_shape),
        np.asarray(dshift).astype(ck.compute_dtype(shift_dt)).reshape(shift_shape),
        dweight.astype(ck.compute_dtype(weight_dt)),
        dbias.astype(ck.compute_dtype(bias_dt)),
    )
