"""Cross-entropy from logits, with final-logit soft-capping, z-loss and label smoothing.

Per row i with a target y_i (rows whose target is ``ignore_index`` are left out; N rows remain):

    z       = cap * tanh(logits / cap)               optional (Gemma 2: cap = 30), else logits
    log Z_i = logsumexp_j z_ij                       (the maximum subtracted first)
    nll_i   = log Z_i - z_{i, y_i}                   = -log p_{i, y_i}
    smooth_i = log Z_i - mean_j z_ij                 = -mean_j log p_ij  (uniform target)
    loss    = (1/N) sum_i [(1 - eps) nll_i + eps smooth_i + c (log Z_i)^2]

eps = ``label_smoothing`` (PyTorch's definition), c = ``z_loss`` (Wortsman et al. 2023 use 1e-4,
PaLM 1e-4). Backward, with p = softmax(z) and the one-hot e_{y}:

    dz_i = dloss / N * [(1 - eps)(p_i - e_{y_i}) + eps (p_i - 1/V) + 2 c log Z_i p_i]
    dlogits = dz * (1 - tanh^2)                      with the cap

The cache also carries the diagnostics a trainer reports: the plain mean NLL (no smoothing, no
z-loss: the number to compare with an entropy floor) and log Z per row.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from ..precision.accumulate import Accumulation, check_accumulation
from .embedding import token_ids

IGNORE_INDEX = -100  # PyTorch's default: targets equal to it carry no loss


class CrossEntropyCache(NamedTuple):
    """Saved: the probabilities of the kept rows and what the gradient formula needs."""

    p: Array  # (N, V) softmax(z) of the kept rows, compute dtype
    targets: Array  # (N,) the kept rows' targets
    keep: Array | None  # (...) bool, rows that carry loss; None when every row does
    log_z: Array  # (N,) log Z per kept row, compute dtype
    tanh: Array | None  # (N, V) tanh(logits / cap), None without a cap
    label_smoothing: float
    z_loss: float
    logits_shape: tuple  # (..., V)
    dtype: np.dtype  # the logits' dtype
    nll: float  # mean negative log-likelihood over the kept rows (no smoothing, no z-loss)


def check_args(logits, targets, softcap, z_loss, label_smoothing, ignore_index):
    """The forward's arguments checked (shared with the kernel): ``(logits, targets, softcap,
    label_smoothing, keep)`` with ``keep`` the mask of the targets that carry loss."""
    logits = ck.float_array(logits, "logits")
    ck.at_least_nd(logits, "logits", 1)
    targets = token_ids(targets, "targets", logits.shape[-1], ignore_index=ignore_index)
    ck.same_shape(targets, "targets", logits.shape[:-1], "the leading shape of logits")
    softcap = None if softcap is None else ck.positive(softcap, "softcap")
    if isinstance(z_loss, bool) or not np.isfinite(z_loss) or z_loss < 0:
        raise ValueError(f"z_loss must be a finite number >= 0; got {z_loss!r}")
    label_smoothing = ck.probability(label_smoothing, "label_smoothing")
    keep = targets != ignore_index
    if not keep.any():
        raise ValueError(
            f"every target equals ignore_index={ignore_index}: there is no loss to take"
        )
    return logits, targets, softcap, label_smoothing, keep


def cross_entropy_forward(
    logits: Array,
    targets: Array,
    *,
    softcap: float | None = None,
    z_loss: float = 0.0,
    label_smoothing: float = 0.0,
    ignore_index: int = IGNORE_INDEX,
    accumulate: Accumulation | None = None,
) -> tuple[Array, CrossEntropyCache]:
    """Mean cross-entropy of integer targets under ``softmax(logits)``.

    Args:
        logits: (..., V) float array.
        targets: (...) integers in [0, V), or ``ignore_index`` for rows without loss.
        softcap: cap > 0 for ``cap * tanh(logits / cap)`` first; None for none.
        z_loss: c >= 0, the weight of the mean of (log Z)^2.
        label_smoothing: eps in [0, 1): the target is (1 - eps) one-hot + eps uniform.
        ignore_index: the target value that marks a row without loss.
        accumulate: the accumulator of the log-sum-exp's sum of exponentials
            (``PrecisionPolicy.softmax_accumulate``); None or the default: float32 (float64).

    Returns:
        loss: a 0-d array in the compute dtype (float64 for float64 logits, else float32);
        cache for ``cross_entropy_backward`` (``cache.nll``, ``cache.log_z``: diagnostics).
    """
    logits, targets, softcap, label_smoothing, keep = check_args(
        logits, targets, softcap, z_loss, label_smoothing, ignore_index)
    acc = check_accumulation(accumulate)
    V = logits.shape[-1]
    ct = ck.compute_dtype(logits.dtype)

    all_kept = bool(keep.all())
    z = logits.reshape(-1, V) if all_kept else logits[keep]  # (N, V)
    y = targets.reshape(-1) if all_kept else targets[keep]  # (N,)
    z = z.astype(ct, copy=True)
    tanh = None
    if softcap is not None:
        tanh = np.tanh(z / ct.type(softcap))
        z = ct.type(softcap) * tanh
    m = z.max(axis=-1, keepdims=True)  # (N, 1)
    p = np.exp(z - m)  # (N, V) unnormalized
    sum_exp = (p.sum(axis=-1, keepdims=True) if acc is None
               else acc.sum(p)[:, None].astype(ct))  # (N, 1)
    p /= sum_exp
    log_z = (m + np.log(sum_exp))[:, 0]  # (N,)
    rows = np.arange(y.size)
    nll = log_z - z[rows, y]  # (N,)
    per_row = (1.0 - label_smoothing) * nll.astype(np.float64)
    if label_smoothing:
        per_row += label_smoothing * (log_z - z.mean(axis=-1)).astype(np.float64)
    if z_loss:
        per_row += z_loss * np.square(log_z, dtype=np.float64)
    loss = np.asarray(per_row.mean(), dtype=ct)
    cache = CrossEntropyCache(p, y, None if all_kept else keep, log_z, tanh, label_smoothing,
                              float(z_loss), logits.shape, logits.dtype,
                              float(nll.mean(dtype=np.float64)))
    return loss, cache


def cross_entropy_backward(
    dout: float | Array, cache: CrossEntropyCache
) -> tuple[Array, None]:
    """Gradients of the mean cross-entropy: ``(dlogits, None)`` (targets have none); ``dout`` is
    the scalar upstream gradient (1.0 for the loss itself; a loss scale under loss scaling)."""
    ck.cache(cache, CrossEntropyCache, "cross_entropy")
    p, y, keep, log_z, tanh, eps, c, shape, dtype = cache[:9]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.size != 1:
        raise ValueError(f"dout must be a scalar (the loss is a mean); got shape {dout.shape}")
    ct = p.dtype
    N, V = p.shape
    dz = p.copy()  # (N, V): (1 - eps) p + eps p
    dz[np.arange(N), y] -= ct.type(1.0 - eps)
    if eps:
        dz -= ct.type(eps / V)
    if c:
        dz += (ct.type(2.0 * c) * log_z)[:, None] * p
    dz *= ct.type(float(dout) / N)
    if tanh is not None:
        dz *= 1.0 - tanh * tanh
    if keep is None:
        dlogits = dz.reshape(shape)
    else:
        dlogits = np.zeros(shape, ct)
        dlogits[keep] = dz
    return ck.out_cast(dlogits, dtype), None
