"""Softmax over one axis, with the maximum subtracted first so exp never overflows.

    p = exp(x - max(x)) / sum(exp(x - max(x)))
    dx = p * (dy - sum(dy * p))                   (sums over the softmax axis)

Entries equal to -inf (a mask) get probability 0; a slice that is -inf everywhere has no
distribution and gives NaN.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class SoftmaxCache(NamedTuple):
    """Saved: the output probabilities (the backward needs only them)."""

    p: Array  # x.shape, compute dtype
    axis: int  # the softmax axis, normalized to be non-negative
    dtype: np.dtype  # x's dtype


def _axis(axis, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"axis must be an integer in [-{ndim}, {ndim}) for x.ndim = {ndim}; got {axis!r}")
    return int(axis) % ndim


def softmax_forward(x: Array, axis: int = -1) -> tuple[Array, SoftmaxCache]:
    """Softmax of ``x`` along ``axis``.

    Args:
        x: float array, at least 1-D; -inf entries are masked out.
        axis: the axis that sums to one.

    Returns:
        p (x's shape and dtype); cache for ``softmax_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    axis = _axis(axis, x.ndim)
    ct = ck.compute_dtype(x.dtype)
    p = x.astype(ct, copy=True)
    if p.shape[axis] == 0:  # nothing to normalize: the empty result, as PyTorch
        return ck.out_cast(p, x.dtype), SoftmaxCache(p, axis, x.dtype)
    p -= p.max(axis=axis, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(axis=axis, keepdims=True)
    return ck.out_cast(p, x.dtype), SoftmaxCache(p, axis, x.dtype)


def softmax_backward(dout: Array, cache: SoftmaxCache) -> Array:
    """Gradient of softmax: ``dx`` (one input), in x's dtype."""
    ck.cache(cache, SoftmaxCache, "softmax")
    p, axis, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", p.shape, "the shape of the forward's output")
    dy = dout.astype(p.dtype, copy=False)
    dx = dy * p
    dx -= p * dx.sum(axis=axis, keepdims=True)
    return ck.out_cast(dx, dtype)
