"""Softmax over one axis, with the maximum subtracted first so exp never overflows.

    p = exp(x - max(x)) / sum(exp(x - max(x)))
    dx = p * (dy - sum(dy * p))                   (sums over the softmax axis)

Entries equal to -inf (a mask) get probability 0; a slice that is -inf everywhere has no
distribution and gives NaN.

``capped_softmax_forward`` composes the soft-cap and the causal mask in front of it, step by step
as ``attention_forward`` does (the reference of the fused ``normlab.kernels`` op):

    p  = softmax(cap * tanh(s / cap) + M)         M = -inf above the diagonal (causal)
    ds = softmax_backward(dp) * (1 - tanh^2)      (times 1 without a cap)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from .._checks import Array
from ..precision.accumulate import Accumulation, check_accumulation


class SoftmaxCache(NamedTuple):
    """Saved: the output probabilities (the backward needs only them)."""

    p: Array  # x.shape, compute dtype
    axis: int  # the softmax axis, normalized to be non-negative
    dtype: np.dtype  # x's dtype


def _axis(axis: Any, ndim: int) -> int:
    if (
        isinstance(axis, bool)
        or not isinstance(axis, (int, np.integer))
        or not -ndim <= axis < ndim
    ):
        raise ValueError(
            f"axis must be an integer in [-{ndim}, {ndim}) for x.ndim = {ndim}; got {axis!r}"
        )
    return int(axis) % ndim


def softmax_forward(x: Array, axis: int = -1, *, accumulate: Accumulation | None = None
                    ) -> tuple[Array, SoftmaxCache]:
    """Softmax of ``x`` along ``axis``.

    Args:
        x: float array, at least 1-D; -inf entries are masked out.
        axis: the axis that sums to one.
        accumulate: the accumulator of the denominator's sum
            (``PrecisionPolicy.softmax_accumulate``); None or the default: float32 (float64).

    Returns:
        p (x's shape and dtype); cache for ``softmax_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    axis = _axis(axis, x.ndim)
    acc = check_accumulation(accumulate)
    ct = ck.compute_dtype(x.dtype)
    p = x.astype(ct, copy=True)
    if p.shape[axis] == 0:  # nothing to normalize: the empty result, as PyTorch
        return ck.out_cast(p, x.dtype), SoftmaxCache(p, axis, x.dtype)
    p -= p.max(axis=axis, keepdims=True)
    np.exp(p, out=p)
    if acc is None:
        p /= p.sum(axis=axis, keepdims=True)
    else:  # the exponentials summed in order in the accumulator
        p /= np.expand_dims(acc.sum(p, axis=axis).astype(ct), axis)
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


class CappedSoftmaxCache(NamedTuple):
    """Saved: the probabilities and tanh of the cap (the backward needs only these); shared with
    the fused kernel (``normlab.kernels.capped_softmax_forward``)."""

    p: Array  # (..., T, T) or (..., C) compute dtype, 0 where masked
    tanh: Array | None  # same shape, tanh(s / cap); None without a cap
    dtype: np.dtype  # the logits' dtype


def causal_mask(T: int, dtype: DTypeLike, window: int | None = None) -> Array:
    """(T, T) additive mask: 0 on and below the diagonal, -inf above it; with a sliding
    ``window`` W also -inf where the key is W or more positions behind the query (attention's
    mask, here beside the capped softmax that adds it; ``functional.attention`` imports it)."""
    mask = np.triu(np.full((T, T), -np.inf, dtype), k=1)
    if window is not None and window < T:
        mask += np.tril(np.full((T, T), -np.inf, dtype), k=-window)
    return mask


def check_capped_args(s: Any, softcap: Any, causal: Any) -> tuple[Array, float | None, bool]:
    """``capped_softmax_forward``'s arguments checked (shared with the kernel)."""
    s = ck.float_array(s, "s")
    ck.at_least_nd(s, "s", 2 if causal else 1)
    softcap = None if softcap is None else ck.positive(softcap, "softcap")
    causal = ck.flag(causal, "causal")
    if causal and s.shape[-1] != s.shape[-2]:
        raise ValueError(f"s must be (..., T, T) with causal=True; got {s.shape}")
    return s, softcap, causal


def capped_softmax_forward(
    s: Array, *, softcap: float | None = None, causal: bool = False,
    accumulate: Accumulation | None = None,
) -> tuple[Array, CappedSoftmaxCache]:
    """``softmax(cap * tanh(s / cap) + M)`` over the last axis: the soft-cap of Gemma 2 on the
    scaled attention logits, then the causal mask M (-inf above the diagonal of the last two
    axes, (..., T, T)), then softmax (its sum in ``accumulate``, as ``softmax_forward``). Returns
    p (s's shape and dtype) and the cache."""
    s, softcap, causal = check_capped_args(s, softcap, causal)
    acc = check_accumulation(accumulate)
    ct = ck.compute_dtype(s.dtype)
    z = s.astype(ct)
    tanh = None
    if softcap is not None:
        tanh = np.tanh(z / ct.type(softcap))
        z = ct.type(softcap) * tanh
    if causal:
        z = z + causal_mask(s.shape[-1], ct)
    y, c = softmax_forward(z, axis=-1, accumulate=acc)
    return y.astype(s.dtype), CappedSoftmaxCache(c.p, tanh, s.dtype)


def capped_softmax_backward(dout: Array, cache: CappedSoftmaxCache) -> Array:
    """Gradient of ``capped_softmax_forward`` with respect to s, in s's dtype."""
    ck.cache(cache, CappedSoftmaxCache, "capped_softmax")
    p, tanh, dtype = cache
    ds = softmax_backward(dout, SoftmaxCache(p, p.ndim - 1, p.dtype))
    if tanh is not None:
        ds *= 1.0 - tanh * tanh
    return ds.astype(dtype)
