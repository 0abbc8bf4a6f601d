"""BatchNorm (Ioffe & Szegedy 2015) with PyTorch's running-statistics conventions and a mask.

Statistics are taken per channel (the last axis) over every other axis: (N, C) or (B, T, C).

Training:
    mean, var = mean and biased variance over the n valid positions (all, or where mask is True)
    y = (x - mean) / sqrt(var + eps) * weight + bias
    running_mean <- (1 - m) * running_mean + m * mean
    running_var  <- (1 - m) * running_var  + m * var * n / (n - 1)        (unbiased)
  m = momentum is the weight of the NEW batch (PyTorch, default 0.1). The textbook form
  running = m' * running + (1 - m') * batch with m' = 0.9 is the same update with m' = 1 - m.
  momentum=None is the cumulative average: m = 1 / (num_batches_tracked + 1).
Eval:
    y = (x - running_mean) / sqrt(running_var + eps) * weight + bias

Padding mask: positions where ``mask`` is False are left out of the statistics (and of the
running statistics), their output is computed with the valid positions' statistics, and they
receive zero input gradient and contribute nothing to dweight or dbias.

Backward (training), over the valid positions, with xhat = (x - mean) * rstd:
    dx = weight * rstd * (dy - mean(dy) - xhat * mean(dy * xhat))
Backward (eval): dx = dy * weight * rstd.  Both: dweight = sum dy * xhat, dbias = sum dy.

The affine parameters are ``weight`` and ``bias`` (PyTorch's names; the paper's gamma and beta).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class BatchNormCache(NamedTuple):
    """Saved: the input (its own dtype), the statistics used, and the mask; xhat is recomputed."""

    x: Array  # (..., C) the input, as given
    weight: Array  # (C,) compute dtype
    mean: Array  # (C,) batch mean (training) or running mean (eval), compute dtype
    rstd: Array  # (C,) 1 / sqrt(var + eps), compute dtype
    mask: Array | None  # (...,) bool, True = a real position; None = all positions
    training: bool
    param_dtypes: tuple  # dtypes of weight and bias as given


def _check_mask(mask: Any, x: Array) -> Array | None:
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be a boolean array (True = real position); got dtype "
                        f"{mask.dtype}")
    ck.same_shape(mask, "mask", x.shape[:-1], "the leading shape of x")
    if not mask.any():
        raise ValueError("mask must have at least one True entry (a real, unpadded position)")
    return mask


def _running(stat: Any, name: str, C: int) -> Array | None:
    return ck.param(stat, name, C, allow_none=True)


def _check_inputs(x: Array, weight: Array, bias: Array, running_mean: Array | None,
                  running_var: Array | None) -> tuple[Array, Array, Array, Any, Any]:
    """x (..., C) with C >= 1, the (C,) parameters and running statistics, checked."""
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 2)
    C = x.shape[-1]
    if C == 0:
        raise ValueError(f"x must have at least one channel (its last axis, C); got shape "
                         f"{x.shape}")
    weight = ck.param(weight, "weight", C)
    bias = ck.param(bias, "bias", C)
    running_mean = _running(running_mean, "running_mean", C)
    running_var = _running(running_var, "running_var", C)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must both be arrays or both be None")
    return x, weight, bias, running_mean, running_var


def batch_norm_forward(
    x: Array,
    weight: Array,
    bias: Array,
    running_mean: Array | None,
    running_var: Array | None,
    *,
    training: bool,
    momentum: float | None = 0.1,
    eps: float = 1e-5,
    mask: Array | None = None,
    num_batches_tracked: int = 0,
) -> tuple[Array, BatchNormCache, Array | None, Array | None]:
    """BatchNorm over every axis but the last.

    Args:
        x: (N, C) or (B, T, C) (any leading shape) float array.
        weight, bias: (C,) affine parameters.
        running_mean, running_var: (C,) running statistics (never mutated), or both None to keep
            none (training only: eval mode needs them).
        training: use (and update) the batch statistics, or use the running ones.
        momentum: weight of the new batch in [0, 1], or None for a cumulative average.
        eps: > 0, inside the square root.
        mask: bool array of x's leading shape; False marks padding.
        num_batches_tracked: batches seen before this one (used by momentum=None).

    Returns:
        out (x's dtype), cache, new running_mean, new running_var (float32, or float64 for
        float64 input; None when none were given).
    """
    x, weight, bias, running_mean, running_var = _check_inputs(x, weight, bias, running_mean,
                                                                running_var)
    C = x.shape[-1]
    training = ck.flag(training, "training")
    eps = ck.positive(eps, "eps")
    _check_counters(momentum, num_batches_tracked)
    mask = _check_mask(mask, x)
    ct = ck.compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)  # (..., C)
    rows = xc.reshape(-1, C)  # (n_all, C)

    new_mean, new_var = running_mean, running_var
    if training:
        mean, var, new_mean, new_var = _batch_stats(rows, mask, x.shape, running_mean, running_var,
                                                    momentum, num_batches_tracked)
    else:
        if running_mean is None:
            raise ValueError("BatchNorm in eval mode needs running_mean and running_var; got None")
        mean = running_mean.astype(ct)
        var = running_var.astype(ct)  # given with running_mean
        if np.any(var < 0):
            raise ValueError("running_var must be >= 0")

    rstd = 1.0 / np.sqrt(var + ct.type(eps))  # (C,)
    g = weight.astype(ct)
    out = (xc - mean) * (rstd * g) + bias.astype(ct)  # (..., C)
    cache = BatchNormCache(x, g, mean, rstd, mask, training, (weight.dtype, bias.dtype))
    return ck.out_cast(out, x.dtype), cache, new_mean, new_var


def _check_counters(momentum: Any, num_batches_tracked: Any) -> None:
    if momentum is not None:
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float, np.floating)):
            raise TypeError(f"momentum must be a number in [0, 1] or None; got {momentum!r}")
        if not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"momentum must be in [0, 1] (the weight of the new batch); got "
                             f"{momentum!r}")
    n_seen = num_batches_tracked
    if isinstance(n_seen, bool) or not isinstance(n_seen, (int, np.integer, float, np.floating)):
        raise TypeError(f"num_batches_tracked must be an integer >= 0; got {n_seen!r} "
                        f"({type(n_seen).__name__})")
    if not np.isfinite(n_seen) or int(n_seen) != n_seen or n_seen < 0:
        raise ValueError(f"num_batches_tracked must be an integer >= 0; got {n_seen!r}")


def _batch_stats(rows, mask, shape, running_mean, running_var, momentum, num_batches_tracked):
    """Training: the batch's mean and biased variance over the valid rows (C,) and the updated
    running statistics (the given ones, None, when none are kept)."""
    ct = rows.dtype
    valid = rows if mask is None else rows[mask.reshape(-1)]  # (n, C)
    n = valid.shape[0]
    if n < 2:
        raise ValueError(
            f"BatchNorm in training needs more than 1 value per channel; got {n} "
            f"(x of shape {shape}{'' if mask is None else ' with its mask'})"
        )
    # Column reductions are accumulated in float64 (NumPy sums a column sequentially).
    mean = valid.mean(axis=0, dtype=np.float64).astype(ct)  # (C,)
    centered = valid - mean
    var = np.mean(centered * centered, axis=0, dtype=np.float64).astype(ct)  # (C,) biased
    new_mean, new_var = running_mean, running_var
    if running_mean is not None:
        m = 1.0 / (num_batches_tracked + 1) if momentum is None else float(momentum)
        new_mean = (1 - m) * running_mean.astype(ct) + m * mean
        new_var = (1 - m) * running_var.astype(ct) + m * var * (n / (n - 1))
    return mean, var, new_mean, new_var


def batch_norm_backward(dout: Array, cache: BatchNormCache) -> tuple[Array, Array, Array]:
    """Gradients of BatchNorm: ``(dx, dweight, dbias)``; padded positions get dx = 0."""
    ck.cache(cache, BatchNormCache, "batch_norm")
    x, g, mean, rstd, mask, training, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = rstd.dtype
    C = x.shape[-1]
    dy = dout.astype(ct, copy=True).reshape(-1, C)  # (n_all, C)
    xhat = (x.astype(ct, copy=False).reshape(-1, C) - mean) * rstd  # (n_all, C) recomputed
    keep = None if mask is None else mask.reshape(-1)
    if keep is not None:
        dy[~keep] = 0.0  # padding sends no gradient anywhere
    dweight = np.sum(dy * xhat, axis=0, dtype=np.float64).astype(ct)  # (C,)
    dbias = dy.sum(axis=0, dtype=np.float64).astype(ct)  # (C,)
    if training:
        n = dy.shape[0] if keep is None else int(keep.sum())
        dx = (g * rstd) * (dy - dbias / n - xhat * (dweight / n))
        if keep is not None:
            dx[~keep] = 0.0
    else:
        dx = dy * (g * rstd)
    return (
        ck.out_cast(dx.reshape(x.shape), x.dtype),
        dweight.astype(ck.compute_dtype(weight_dt)),
        dbias.astype(ck.compute_dtype(bias_dt)),
    )
