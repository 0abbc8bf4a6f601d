"""Covariate-shift noise: a random affine perturbation per value whose distribution is drawn
afresh at every call (Santurkar et al. 2018's "noisy BatchNorm", injected after a BatchNorm to
give the next layer inputs with moving statistics).

Statistics are per channel (the last axis). At each call (one training step), per channel c:

    m_c ~ Uniform(-mean_range, mean_range)            the step's mean shift
    s_c = exp(u_c),  u_c ~ Uniform(-ln max_scale, ln max_scale)    the step's scale
and per value (every position, every channel), with z1, z2 ~ N(0, 1) i.i.d.:
    a = s_c (1 + spread z1),   b = m_c + spread z2
    y = a * x + b
    dx = a * dy

So the layer's output has a non-zero mean and a non-unit variance that change at every step.
``training=False`` (or mean_range = 0, max_scale = 1, spread = 0) is the identity.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class ShiftNoiseCache(NamedTuple):
    """Saved: the multiplier ``a`` that the backward needs (None at inference); the shift ``b``
    has no gradient and is not kept."""

    a: Array | None  # x.shape, compute dtype; None when the op was the identity
    dtype: np.dtype  # x's dtype
    shape: tuple[int, ...]  # x.shape, which dout must have


def shift_noise_forward(
    x: Array, *, mean_range: float, max_scale: float, spread: float, training: bool,
    rng: np.random.Generator | None = None,
) -> tuple[Array, ShiftNoiseCache]:
    """Covariate-shift noise ``y = a * x + b`` (see the module's docstring).

    Args:
        x: (..., C) float array, at least 1-D; C (the last axis) is the channel axis.
        mean_range: >= 0, the half-width of the per-step mean shift's uniform distribution.
        max_scale: >= 1, the per-step scale is log-uniform in [1 / max_scale, max_scale].
        spread: >= 0, the per-value standard deviation around the step's scale (relative) and
            mean shift (absolute).
        training: perturb in training; the identity (a copy of x) at inference.
        rng: a numpy Generator; required in training.

    Returns:
        out (x's dtype and shape); cache for ``shift_noise_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    mean_range = ck.real(mean_range, "mean_range", lo=0)
    max_scale = ck.real(max_scale, "max_scale", lo=1)
    spread = ck.real(spread, "spread", lo=0)
    training = ck.flag(training, "training")
    if training and rng is None:
        raise TypeError("shift noise in training needs rng (a numpy.random.Generator)")
    if rng is not None:
        ck.generator(rng)
    if not training:
        return x.copy(), ShiftNoiseCache(None, x.dtype, x.shape)
    ct = ck.compute_dtype(x.dtype)
    C: int = x.shape[-1]
    assert rng is not None  # training: refused above without one
    m = rng.uniform(-mean_range, mean_range, size=C)  # (C,) the step's mean shift
    s = np.exp(rng.uniform(-math.log(max_scale), math.log(max_scale), size=C))  # (C,) its scale
    a = np.broadcast_to(s.astype(ct), x.shape).copy()  # x.shape, the multiplier
    b = np.broadcast_to(m.astype(ct), x.shape).copy()  # x.shape, the shift
    if spread > 0:  # per-value draws in the compute dtype (float32 or float64)
        a *= 1.0 + ct.type(spread) * rng.standard_normal(x.shape, dtype=ct)
        b += ct.type(spread) * rng.standard_normal(x.shape, dtype=ct)
    out = a * x.astype(ct, copy=False) + b
    return ck.out_cast(out, x.dtype), ShiftNoiseCache(a, x.dtype, x.shape)


def shift_noise_backward(dout: Array, cache: ShiftNoiseCache) -> Array:
    """Gradient of the covariate-shift noise: ``dx = a * dout`` (one input)."""
    ck.cache(cache, ShiftNoiseCache, "shift_noise")
    a, dtype, shape = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", shape, "the shape of the forward's output")
    if a is None:
        return dout.astype(dtype, copy=True)
    return ck.out_cast(a * dout.astype(a.dtype, copy=False), dtype)
