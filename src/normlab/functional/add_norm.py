"""Residual add + dropout + norm, the pre-norm "add & norm" step (flash-attention's
``layer_norm_fn`` / ``rms_norm_fn``), written as the composition of the reference ops:

    xd           = dropout(x)                         inverted dropout, mask from a seeded hash
    s            = xd + residual                      in the compute dtype
    residual_out = s rounded to the residual dtype    the new residual stream
    n            = s rounded to x's dtype             if round_sum (the unfused graph, HF, Liger)
                 = s                                  otherwise (flash-attn, quack: unrounded)
    y            = norm(n)                            LayerNorm or RMSNorm, rounded to x's dtype

Backward, with dres the gradient arriving at residual_out (None: it is not used downstream):

    ds = norm_backward(dy) + dres                     in the compute dtype (one rounding at the end)
    dresidual = ds                dx = ds * keep / (1 - p_drop)

Where the sum is rounded is a real choice (``../shared/reference/norm-conventions.md`` §4.3): the
unfused graph and Liger normalize the rounded sum, flash-attn and quack the unrounded fp32 sum.
``round_sum`` picks one; with float32 or float64 inputs both agree.

Residual dtypes: the residual stream is kept in ``residual``'s dtype, which must be x's dtype or
the compute dtype (float32 for low-precision x, a Mamba-style fp32 stream); without a residual it
is x's dtype, or the compute dtype with ``residual_in_fp32``.

Dropout masks come from a counter-based hash (SplitMix64 of the flat element index and a seed
drawn once from ``rng``): the backward regenerates the mask from the seed instead of storing it,
and the numba kernel (``normlab.kernels.add_norm_forward``) draws the very same mask, so the two
paths agree for the same generator state. keep = u >= p_drop with u = (hash >> 32) / 2^32.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .norms import NormEntry, RowStats, by_fused, fused_names

NORMS = fused_names()  # ("layer", "rms"): the registry's norms with a fused name

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


class DropoutKey(NamedTuple):
    """What regenerates a dropout mask: a 64-bit seed, the keep threshold and the scale."""

    seed: int  # drawn once from the caller's Generator
    threshold: int  # keep iff (hash >> 32) >= threshold, threshold = ceil(p_drop * 2^32)
    scale: float  # 1 / (1 - p_drop)


def dropout_key(p_drop: float, rng: np.random.Generator) -> DropoutKey:
    """Draw the seed of one dropout mask from ``rng`` (one 64-bit draw)."""
    seed = int(rng.integers(0, 2**64, dtype=np.uint64))
    return DropoutKey(seed, math.ceil(p_drop * 2.0**32), 1.0 / (1.0 - p_drop))


def keep_mask(key: DropoutKey, rows: int, C: int) -> Array:
    """The (rows, C) keep mask of ``key``: SplitMix64 output number ``i*C + j`` of stream ``seed``,
    top 32 bits compared with the threshold."""
    z = np.arange(1, rows * C + 1, dtype=np.uint64).reshape(rows, C)  # counter + 1
    z = np.uint64(key.seed) + z * _GOLDEN  # wraps modulo 2^64
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(32)) >= np.uint64(key.threshold)


class AddNormCache(NamedTuple):
    """Saved: the norm's input (or what rebuilds it exactly), the row statistics and the dropout
    key; xhat and the mask are recomputed. Shared by the reference and the kernel."""

    norm_in: Array  # (..., C) residual_out when it holds the norm's input exactly, else the
    #                 unrounded sum s in the compute dtype
    round_to: np.dtype | None  # round norm_in to this dtype to get the norm's input, or None
    mean: Array | None  # (..., 1) LayerNorm row means (compute dtype); None for RMSNorm
    rstd: Array  # (..., 1) compute dtype
    weight: Array  # (C,) gain in the compute dtype (offset + weight for RMSNorm)
    has_bias: bool
    norm: str  # the fused name: "layer" or "rms"
    key: DropoutKey | None  # None when no dropout was applied
    x_dtype: np.dtype
    residual_dtype: np.dtype | None  # None when the forward had no residual
    param_dtypes: tuple  # dtypes of weight and bias as given (None where absent)


def check_add_norm(x, residual, weight, bias, eps, norm, p_drop, training, rng, round_sum,
                   residual_in_fp32, offset):
    """Validate the arguments of ``add_norm_forward``; returns them normalized plus the residual
    stream's dtype and the dropout key (None without dropout). Shared with the kernel."""
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C = x.shape[-1]
    ck.choice(norm, "norm", fused_names())
    entry = by_fused(norm)
    weight = ck.param(weight, "weight", C)
    bias = ck.param(bias, "bias", C, allow_none=True)
    if bias is not None and "bias" not in entry.param_names:
        raise ValueError(f"bias must be None for norm={norm!r} ({entry.title or entry.name} has "
                         f"no bias)")
    eps = ck.positive(eps, "eps")
    p_drop = ck.probability(p_drop, "p_drop")
    training = ck.flag(training, "training")
    round_sum = ck.flag(round_sum, "round_sum")
    residual_in_fp32 = ck.flag(residual_in_fp32, "residual_in_fp32")
    if not np.isfinite(offset):
        raise ValueError(f"offset must be a finite number; got {offset!r}")
    if offset != 0.0 and "offset" not in entry.options:
        raise ValueError(f"offset is an RMSNorm option; use offset=0 with norm={norm!r}")
    ct = ck.compute_dtype(x.dtype)
    if residual is not None:
        residual = ck.float_array(residual, "residual")
        ck.same_shape(residual, "residual", x.shape, "the shape of x")
        if residual.dtype not in (x.dtype, ct):
            raise ValueError(f"residual must have x's dtype ({x.dtype}) or the compute dtype "
                             f"({ct}); got {residual.dtype}")
        res_dt = residual.dtype
    else:
        res_dt = ct if residual_in_fp32 else x.dtype
    key = None
    if training and p_drop > 0.0:
        if rng is None:
            raise TypeError("dropout in training needs rng (a numpy.random.Generator)")
        key = dropout_key(p_drop, ck.generator(rng))
    elif rng is not None:
        ck.generator(rng)
    return x, residual, weight, bias, eps, round_sum, float(offset), ct, np.dtype(res_dt), key


def add_norm_forward(
    x: Array,
    residual: Array | None,
    weight: Array,
    bias: Array | None = None,
    *,
    eps: float = 1e-5,
    norm: str = "layer",
    p_drop: float = 0.0,
    training: bool = False,
    rng: np.random.Generator | None = None,
    round_sum: bool = True,
    residual_in_fp32: bool = False,
    offset: float = 0.0,
) -> tuple[tuple[Array, Array], AddNormCache]:
    """``y = norm(dropout(x) + residual)`` and the new residual stream.

    Args:
        x: (..., C) the branch output (attention or MLP) to add to the stream.
        residual: (..., C) the residual stream, or None (the first block: the stream starts at x).
        weight: (C,) gain (LayerNorm's or RMSNorm's ``weight``).
        bias: (C,) LayerNorm bias, or None.
        eps: > 0, inside the square root.
        norm: "layer" (LayerNorm) or "rms" (RMSNorm): the registry's fused names.
        p_drop: dropout probability on x in [0, 1); applied only when ``training``.
        training: apply dropout.
        rng: numpy Generator, required when dropping.
        round_sum: normalize the sum rounded to x's dtype (True: the unfused graph) or the
            unrounded compute-dtype sum (False: flash-attn). Same result for float32/float64 x.
        residual_in_fp32: without a residual, keep the new stream in the compute dtype.
        offset: RMSNorm only: the gain is ``offset + weight`` (Gemma's 1 + w).

    Returns:
        (y, residual_out): y (..., C) in x's dtype, residual_out (..., C) in the stream's dtype;
        and the cache for ``add_norm_backward``. The cache keeps residual_out itself (it is the
        norm's input): do not modify it in place before the backward.
    """
    args = check_add_norm(x, residual, weight, bias, eps, norm, p_drop, training, rng, round_sum,
                          residual_in_fp32, offset)
    return forward_checked(*args, norm=norm)


def forward_checked(x, residual, weight, bias, eps, round_sum, offset, ct, res_dt, key, *, norm):
    """``add_norm_forward`` on checked arguments with the dropout key already drawn."""
    C = x.shape[-1]
    xc = x.astype(ct, copy=False)  # (..., C)
    if key is not None:
        keep = keep_mask(key, x.size // C, C).reshape(x.shape)  # (..., C)
        xd = np.where(keep, xc * ct.type(key.scale), ct.type(0))  # (..., C) inverted dropout
        if round_sum:
            xd = xd.astype(x.dtype).astype(ct)  # the unfused dropout returns x's dtype
    else:
        xd = xc
    s = xd + residual.astype(ct, copy=False) if residual is not None else xd.copy()  # (..., C)
    residual_out = s.astype(res_dt)  # (..., C) the new stream
    n = s.astype(x.dtype).astype(ct) if round_sum else s  # (..., C) the norm's input
    entry = by_fused(norm)  # the registry's norm: its forward, and what its cache keeps
    given = {"weight": weight, "bias": bias}
    options = {k: v for k, v in (("eps", eps), ("offset", offset)) if k in entry.options}
    y, norm_cache = entry.forward(n, *(given[p] for p in entry.param_names), **options)
    mean, rstd, g = _row_stats(entry).stats(norm_cache)
    # What the backward needs to rebuild n exactly: residual_out (rounded to x's dtype when
    # round_sum), unless residual_out is a rounding of an unrounded n.
    if round_sum:
        norm_in, round_to = residual_out, (None if res_dt == x.dtype else x.dtype)
    elif res_dt == ct:
        norm_in, round_to = residual_out, None
    else:
        norm_in, round_to = s, None
    dtypes = (weight.dtype, None if bias is None else bias.dtype)
    # g: weight is required, so the LayerNorm cache's gain is an array too
    cache = AddNormCache(norm_in, round_to, mean, rstd, g, bias is not None, norm, key, x.dtype,
                         None if residual is None else res_dt, dtypes)
    return (y.astype(x.dtype), residual_out), cache


def add_norm_backward(
    dout: Any, cache: AddNormCache
) -> tuple[Array, Array | None, Array | None, Array | None]:
    """Gradients of ``add_norm_forward``: ``(dx, dresidual, dweight, dbias)``.

    ``dout`` is ``(dy, dresidual_out)``; dresidual_out may be None (the stream is not used
    downstream). dresidual is None when the forward had no residual, dbias without a bias.
    """
    ck.cache(cache, AddNormCache, "add_norm")
    dy, dres = _split_dout(dout)
    (norm_in, round_to, mean, rstd, g, has_bias, norm, key, x_dt, res_dt, (w_dt, b_dt)) = cache
    ck.same_shape(dy, "dy", norm_in.shape, "the shape of the forward's output")
    if dres is not None:
        ck.same_shape(dres, "dresidual_out", norm_in.shape, "the shape of residual_out")
    ct = rstd.dtype
    n = norm_in if round_to is None else norm_in.astype(round_to)
    n = n.astype(ct, copy=False)  # (..., C) the norm's input, rebuilt
    entry = by_fused(norm)
    norm_cache = _row_stats(entry).cache(n, mean, rstd, g, has_bias, (w_dt, b_dt))
    dn, dw, *rest = entry.backward(dy, norm_cache)  # (dx, dweight[, dbias])
    db = rest[0] if rest else None
    ds = dn if dres is None else dn + dres.astype(ct, copy=False)  # (..., C) compute dtype
    if key is not None:
        C = ds.shape[-1]
        keep = keep_mask(key, ds.size // C, C).reshape(ds.shape)
        dx = np.where(keep, ds * ct.type(key.scale), ct.type(0))
    else:
        dx = ds
    dresidual = None if res_dt is None else ds.astype(res_dt)
    return dx.astype(x_dt), dresidual, dw, db


def _row_stats(entry: NormEntry) -> RowStats:
    """The entry's RowStats (``register`` refuses a fused name without them)."""
    assert entry.row_stats is not None
    return entry.row_stats


def _split_dout(dout):
    if not isinstance(dout, (tuple, list)) or len(dout) != 2:
        raise TypeError("dout must be a pair (dy, dresidual_out); dresidual_out may be None")
    dy = ck.float_array(dout[0], "dy")
    dres = None if dout[1] is None else ck.float_array(dout[1], "dresidual_out")
    return dy, dres
