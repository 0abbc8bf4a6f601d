"""Softmax (plain, and with soft-capping and the causal mask fused in) and cross-entropy from
logits: numba kernels with the contracts and caches of ``normlab.functional.softmax`` and
``normlab.functional.losses``.

Memory passes (rows x C; each row read once into the cache):

    softmax              forward: read x, write p           backward: read p and dy, write dx
    capped_softmax       forward: read s, write p (+ tanh)  backward: read p, tanh, dp, write ds
                         (the unfused graph: divide, tanh, scale, add mask, max, subtract, exp,
                          sum, divide: about ten passes over the (B, H, T, T) logits)
    cross_entropy        forward: read logits, write p (+ tanh); backward: read p (+ tanh), write
                         dlogits

Element-wise steps are written in the reference's order (bitwise where the reference's
transcendental functions agree with libm: exp and tanh may differ by an ulp); row sums and maxima
are reductions and match within a tolerance.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .. import _checks as ck
from ..functional import losses as _ref_losses
from ..functional import softmax as _ref_softmax
from ..functional.losses import IGNORE_INDEX, CrossEntropyCache
from ..functional.softmax import CappedSoftmaxCache, SoftmaxCache
from ..precision.accumulate import Accumulation, check_accumulation
from ._common import REDUCE, chunk_bounds, launch, nchunks, row_sum, rows_of
from ._rows import F16_TABLE, kernel_view, load_row, native, out_row, store_row
from .accumulate import acc_row_sum, acc_spec


@njit(cache=True)
def _row_max(v, k):
    """max(v[:k]): the first of equal maxima, the last NaN if there is one (NaN propagates).
    Written as a select, not a branch: on short rows a mispredicted branch costs more than
    the row."""
    m = v.dtype.type(-np.inf)
    for j in range(k):
        x = v[j]
        m = x if (x > m or np.isnan(x)) else m
    return m


@njit(cache=True)
def _exp_normalize(z, k, p, spec, tmp):
    """p[:k] = exp(z - max) / sum, in the reference's order; returns (max, sum). The sum in the
    accumulation ``spec`` when it is on."""
    m = _row_max(z, k)
    for j in range(k):
        p[j] = np.exp(z[j] - m)
    if spec[0]:
        s = p.dtype.type(acc_row_sum(p, k, spec, tmp))
    else:
        s = row_sum(p, k)
    for j in range(k):
        p[j] = p[j] / s
    return m, s


@njit(cache=True)
def _exp_normalize_plain(z, k, p):
    """``_exp_normalize`` with the kernels' own sum (no accumulation), the rest of the row (the
    masked keys, k and on) set to 0; returns the max. The same lines and roundings, without the
    spec's tuple handed down for every row, and the division and the zeros in one loop over the
    whole row: on attention's short rows, loop overhead costs more than the arithmetic."""
    m = _row_max(z, k)
    for j in range(k):
        p[j] = np.exp(z[j] - m)
    s = row_sum(p, k)
    zero = p.dtype.type(0.0)
    for j in range(p.shape[0]):
        p[j] = p[j] / s if j < k else zero
    return m


@njit(cache=True, fastmath=REDUCE)
def _dot(a, b, k):
    acc = a.dtype.type(0.0)
    for j in range(k):
        acc += a[j] * b[j]
    return acc


@njit(parallel=True, cache=True)
def _softmax_fwd(x, p, y, write_y, T, causal, cap, tanh, rowmax, fx, table, n, spec):
    """Rows of x -> p (compute dtype) and y (x's format), and each row's largest raw x over its
    kept keys (before the cap) in rowmax. With cap > 0 the logits are first capped,
    cap * tanh(x / cap) (tanh saved); with causal, row i sees keys j <= i mod T."""
    rows, C = x.shape
    own_sum = not spec[0]
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        xbuf = np.empty(C, p.dtype)
        zbuf = np.empty(C, p.dtype)
        ybuf = np.empty(C, p.dtype)
        tmp = np.empty(1, np.float64)
        zero = p.dtype.type(0.0)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fx, table)  # read x
            k = (i % T) + 1 if causal else C  # unmasked keys
            if cap > 0:
                rowmax[i] = _row_max(v, k)
                for j in range(k):
                    t = np.tanh(v[j] / cap)
                    tanh[i, j] = t
                    zbuf[j] = cap * t
                for j in range(k, C):
                    tanh[i, j] = zero  # masked: its gradient is 0 whatever tanh is
                z = zbuf
            else:
                z = v
            pr = p[i]
            if own_sum:  # write p, its masked keys 0
                m = _exp_normalize_plain(z, k, pr)
            else:
                m, _ = _exp_normalize(z, k, pr, spec, tmp)
                for j in range(k, C):
                    pr[j] = zero
            if cap <= 0:
                rowmax[i] = m
            if write_y:  # y is p itself when x has the compute dtype
                o = out_row(y[i], ybuf)
                o[:] = pr
                store_row(y[i], o, fx)  # write y


@njit(parallel=True, cache=True)
def _softmax_bwd(p, dy, has_cap, tanh, dx, fdy, fx, table, n):
    """dx = p * (dy - sum(dy * p)) (* (1 - tanh^2) with a cap), in the reference's order."""
    rows, C = p.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        gbuf = np.empty(C, p.dtype)
        obuf = np.empty(C, p.dtype)
        for i in range(lo, hi):
            pr = p[i]
            g = load_row(dy[i], gbuf, fdy, table)  # read dy (p is read alongside)
            s = _dot(g, pr, C)
            o = out_row(dx[i], obuf)
            for j in range(C):
                o[j] = g[j] * pr[j] - pr[j] * s
            if has_cap:
                t = tanh[i]
                for j in range(C):
                    o[j] = o[j] * (p.dtype.type(1.0) - t[j] * t[j])
            store_row(dx[i], o, fx)  # write dx


def softmax_forward(x: np.ndarray, axis: int = -1, *, accumulate: Accumulation | None = None
                    ) -> tuple[np.ndarray, SoftmaxCache]:
    """Softmax along ``axis``; as ``normlab.functional.softmax_forward`` (same cache)."""
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    ax = _ref_softmax._axis(axis, x.ndim)
    acc = check_accumulation(accumulate)
    if ax != x.ndim - 1 or not native(x.dtype) or x.size == 0:
        return _ref_softmax.softmax_forward(x, axis, accumulate=acc)
    p, y, _, _ = _forward(x, causal=False, softcap=None, acc=acc)
    return y, SoftmaxCache(p, ax, x.dtype)


def softmax_backward(dout: np.ndarray, cache: SoftmaxCache) -> np.ndarray:
    """Gradient of softmax; as ``normlab.functional.softmax_backward``."""
    ck.cache(cache, SoftmaxCache, "softmax")
    p, axis, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", p.shape, "the shape of the forward's output")
    if axis != p.ndim - 1 or not native(dtype) or p.size == 0:
        return _ref_softmax.softmax_backward(dout, cache)
    return _backward(dout, p, None, dtype)


def _forward(x, causal, softcap, acc=None):
    """p (compute dtype), y (x's dtype; p itself when x has the compute dtype), tanh of the cap
    (None without one) and each row's largest raw logit over its kept keys (rows,)."""
    ct = ck.compute_dtype(x.dtype)
    C = x.shape[-1]
    xk, fx = kernel_view(rows_of(x))
    rows = xk.shape[0]
    p = np.empty(x.shape, ct)
    y = p if x.dtype == ct else np.empty(x.shape, x.dtype)
    tanh = np.empty(x.shape if softcap else (0, C), ct)
    rowmax = np.empty(rows, ct)
    T = x.shape[-2] if causal else 1
    launch(_softmax_fwd, x.size, xk, p.reshape(rows, C), kernel_view(y.reshape(rows, C))[0],
           y is not p, T, causal, ct.type(softcap or 0.0), tanh.reshape(-1, C), rowmax, fx,
           F16_TABLE, nchunks(rows, x.size), acc_spec(acc))
    return p, y, (tanh if softcap else None), rowmax


def _backward(dout, p, tanh, dtype):
    ct = p.dtype
    C = p.shape[-1]
    pk = rows_of(p)
    rows = pk.shape[0]
    dyk, fdy = kernel_view(rows_of(dout if native(dout.dtype) else dout.astype(ct)))
    dx = np.empty(p.shape, dtype)
    dxk, fx = kernel_view(dx.reshape(rows, C))
    t = rows_of(tanh) if tanh is not None else np.empty((0, C), ct)
    launch(_softmax_bwd, p.size, pk, dyk, tanh is not None, t, dxk, fdy, fx, F16_TABLE,
           nchunks(rows, p.size))
    return dx


def capped_softmax_forward(
    s: np.ndarray, *, softcap: float | None = None, causal: bool = False,
    accumulate: Accumulation | None = None,
) -> tuple[np.ndarray, CappedSoftmaxCache]:
    """``softmax(cap * tanh(s / cap) + M)`` over the last axis, fused (the reference:
    ``normlab.functional.softmax.capped_softmax_forward``): the soft-cap of Gemma 2
    on the scaled attention logits, then the causal mask M (-inf above the diagonal of the last
    two axes, (..., T, T)), then softmax, as ``functional.attention`` does step by step.

    Returns p (s's shape and dtype) and a ``CappedSoftmaxCache``.
    """
    s, softcap, causal = _ref_softmax.check_capped_args(s, softcap, causal)
    acc = check_accumulation(accumulate)
    if not native(s.dtype) or s.size == 0:
        return _ref_softmax.capped_softmax_forward(s, softcap=softcap, causal=causal,
                                                   accumulate=acc)
    p, y, tanh, _ = _forward(s, causal, softcap, acc)
    return y, CappedSoftmaxCache(p, tanh, s.dtype)


def capped_softmax_backward(dout: np.ndarray, cache: CappedSoftmaxCache) -> np.ndarray:
    """Gradient of ``capped_softmax_forward`` with respect to s."""
    ck.cache(cache, CappedSoftmaxCache, "capped_softmax")
    p, tanh, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", p.shape, "the shape of the forward's output")
    if not native(dtype) or p.size == 0:
        return _ref_softmax.capped_softmax_backward(dout, cache)
    return _backward(dout, p, tanh, dtype)


# ---- cross-entropy ----------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def _ce_fwd(logits, rows_idx, y, cap, p, tanh, log_z, nll, zmean, fx, table, n, spec):
    """Kept rows r (logits row rows_idx[r]) -> p[r], tanh[r], log Z, nll and mean(z)."""
    N = rows_idx.shape[0]
    C = logits.shape[1]
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, N)
        xbuf = np.empty(C, p.dtype)
        zbuf = np.empty(C, p.dtype)
        tmp = np.empty(1, np.float64)
        for r in range(lo, hi):
            v = load_row(logits[rows_idx[r]], xbuf, fx, table)  # read logits
            if cap > 0:
                for j in range(C):
                    t = np.tanh(v[j] / cap)
                    tanh[r, j] = t
                    zbuf[j] = cap * t
                z = zbuf
            else:
                z = v
            m, s = _exp_normalize(z, C, p[r], spec, tmp)  # write p
            lz = m + np.log(s)
            log_z[r] = lz
            nll[r] = lz - z[y[r]]
            zmean[r] = row_sum(z, C) / p.dtype.type(C)


@njit(parallel=True, cache=True)
def _ce_bwd(p, y, rows_idx, log_z, one_minus_eps, eps_over_v, two_c, g, has_cap, tanh, dz,
            fx, n):
    """dz = ((p - (1 - eps) e_y - eps / V + 2 c log Z p) * dout / N) (* (1 - tanh^2)), scattered
    into the kept rows of dz (the others are zero), in the reference's order."""
    N, C = p.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, N)
        obuf = np.empty(C, p.dtype)
        for r in range(lo, hi):
            pr = p[r]
            o = out_row(dz[rows_idx[r]], obuf)
            k = two_c * log_z[r]
            for j in range(C):
                d = pr[j]
                if j == y[r]:
                    d = d - one_minus_eps
                d = d - eps_over_v
                d = d + k * pr[j]
                d = d * g
                if has_cap:
                    d = d * (p.dtype.type(1.0) - tanh[r, j] * tanh[r, j])
                o[j] = d
            store_row(dz[rows_idx[r]], o, fx)


def cross_entropy_forward(logits: np.ndarray, targets: np.ndarray, *,
                          softcap: float | None = None, z_loss: float = 0.0,
                          label_smoothing: float = 0.0, ignore_index: int = IGNORE_INDEX,
                          accumulate: Accumulation | None = None
                          ) -> tuple[np.ndarray, CrossEntropyCache]:
    """Mean cross-entropy from logits; as ``normlab.functional.cross_entropy_forward`` (same
    arguments, loss and cache)."""
    logits, targets_, softcap, label_smoothing, keep = _ref_losses.check_args(
        logits, targets, softcap, z_loss, label_smoothing, ignore_index)
    acc = check_accumulation(accumulate)
    V = logits.shape[-1]
    if not native(logits.dtype):
        return _ref_losses.cross_entropy_forward(logits, targets, softcap=softcap, z_loss=z_loss,
                                                 label_smoothing=label_smoothing,
                                                 ignore_index=ignore_index, accumulate=acc)
    ct = ck.compute_dtype(logits.dtype)
    all_kept = bool(keep.all())
    flat_keep = keep.reshape(-1)
    idx = np.arange(flat_keep.size) if all_kept else np.flatnonzero(flat_keep)
    y = targets_.reshape(-1)[idx].astype(np.int64)
    N = idx.size
    xk, fx = kernel_view(rows_of(logits))
    p = np.empty((N, V), ct)
    tanh = np.empty((N, V) if softcap else (0, V), ct)
    log_z, nll, zmean = np.empty(N, ct), np.empty(N, ct), np.empty(N, ct)
    launch(_ce_fwd, N * V, xk, idx, y, ct.type(softcap or 0.0), p, tanh, log_z, nll, zmean, fx,
           F16_TABLE, nchunks(N, N * V), acc_spec(acc))
    per_row = (1.0 - label_smoothing) * nll.astype(np.float64)
    if label_smoothing:
        per_row += label_smoothing * (log_z - zmean).astype(np.float64)
    if z_loss:
        per_row += z_loss * np.square(log_z, dtype=np.float64)
    loss = np.asarray(per_row.mean(), dtype=ct)
    cache = CrossEntropyCache(p, y, None if all_kept else keep, log_z,
                              tanh if softcap else None, label_smoothing, float(z_loss),
                              logits.shape, logits.dtype, float(nll.mean(dtype=np.float64)))
    return loss, cache


def cross_entropy_backward(
    dout: np.ndarray, cache: CrossEntropyCache
) -> tuple[np.ndarray, None]:
    """Gradients ``(dlogits, None)``; as ``normlab.functional.cross_entropy_backward``."""
    ck.cache(cache, CrossEntropyCache, "cross_entropy")
    p, y, keep, log_z, tanh, eps, c, shape, dtype = cache[:9]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.size != 1:
        raise ValueError(f"dout must be a scalar (the loss is a mean); got shape {dout.shape}")
    if not native(dtype):
        return _ref_losses.cross_entropy_backward(dout, cache)
    ct = p.dtype
    N, V = p.shape
    idx = (np.arange(N) if keep is None else np.flatnonzero(keep.reshape(-1)))
    dl = np.empty(shape, dtype) if keep is None else np.zeros(shape, dtype)
    dk, fx = kernel_view(dl.reshape(-1, V))
    # the reference's constants, rounded to the compute dtype as it rounds them
    launch(_ce_bwd, p.size, p, np.asarray(y, np.int64), idx, log_z, ct.type(1.0 - eps),
           ct.type(eps / V), ct.type(2.0 * c), ct.type(float(dout) / N), tanh is not None,
           tanh if tanh is not None else np.empty((0, V), ct), dk, fx, nchunks(N, p.size))
    return dl, None


__all__ = ["CappedSoftmaxCache", "capped_softmax_backward", "capped_softmax_forward",
           "cross_entropy_backward", "cross_entropy_forward", "softmax_backward",
           "softmax_forward"]
