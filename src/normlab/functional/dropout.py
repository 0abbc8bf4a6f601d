"""Inverted dropout: drop each value with probability p_drop in training and scale the kept ones
by 1 / (1 - p_drop), so E[dropout(x)] = x and inference is the identity.

    keep = u >= p_drop,  u ~ Uniform[0, 1)        y = x * keep / (1 - p_drop)
    dx = dy * keep / (1 - p_drop)                 (the same mask)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class DropoutCache(NamedTuple):
    """Saved: the keep mask (one byte per value) and the scale; None at inference."""

    keep: Array | None  # x.shape bool, None when the op was the identity
    scale: float  # 1 / (1 - p_drop)
    dtype: np.dtype  # x's dtype
    shape: tuple[int, ...] = ()  # x.shape, which dout must have (also when keep is None)


def dropout_forward(
    x: Array, p_drop: float, *, training: bool, rng: np.random.Generator | None = None
) -> tuple[Array, DropoutCache]:
    """Inverted dropout.

    Args:
        x: float array of any shape.
        p_drop: probability of dropping a value, in [0, 1) (not the keep rate).
        training: drop in training; the identity (a copy of x) at inference.
        rng: a numpy Generator; required in training when p_drop > 0.

    Returns:
        out (x's dtype, x's shape); cache for ``dropout_backward``.
    """
    x = ck.float_array(x, "x")
    p_drop = ck.probability(p_drop, "p_drop")
    training = ck.flag(training, "training")
    if training and rng is None:
        raise TypeError("dropout in training needs rng (a numpy.random.Generator)")
    if rng is not None:
        ck.generator(rng)
    if not training or p_drop == 0.0:
        return x.copy(), DropoutCache(None, 1.0, x.dtype, x.shape)
    ct = ck.compute_dtype(x.dtype)
    assert rng is not None  # training: refused above without one
    keep = rng.random(x.shape) >= p_drop  # x.shape bool
    scale = 1.0 / (1.0 - p_drop)
    out = np.where(keep, x.astype(ct, copy=False) * ct.type(scale), ct.type(0))
    return ck.out_cast(out, x.dtype), DropoutCache(keep, scale, x.dtype, x.shape)


def dropout_backward(dout: Array, cache: DropoutCache) -> Array:
    """Gradient of dropout: ``dx`` (a single array: dropout has one input)."""
    ck.cache(cache, DropoutCache, "dropout")
    keep, scale, dtype, shape = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", shape, "the shape of the forward's output")
    if keep is None:
        return dout.astype(dtype, copy=True)
    ct = ck.compute_dtype(dout.dtype)
    dx = np.where(keep, dout.astype(ct, copy=False) * ct.type(scale), ct.type(0))
    return ck.out_cast(dx, dtype)
