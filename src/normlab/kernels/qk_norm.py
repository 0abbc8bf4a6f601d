"""QK-norm's LayerNorm, fused, bit for bit the NumPy reference's.

The QK-norm's LayerNorm (a gain, no bias: ViT-22B) normalizes rows of the head width, 16 to 128
features, and the reference spends about ten NumPy passes over q and over k on it in each
direction: a fifth of a training step of the lab's QK-norm models. Unlike ``kernels.norms``,
whose sums are reordered (equal to the reference within a tolerance), this kernel adds in
NumPy's own order, so that a run with QK-norm computes the same bits whichever path it takes and
the committed runs reproduce:

    sum(row)   0 + pairwise(row): NumPy's pairwise summation (``pairwise_sum``), as
               ``np.add.reduce`` sums a row (the reduction starts from the identity, +0)
    mean       sum / C, rounded once (NumPy divides in float64 and rounds to float32: the same
               bits, a division rounded twice through a format of 2p + 2 or more bits is exact)
    var        sum((x - mean)^2) / C, the squares summed pairwise; rstd = 1 / sqrt(var + eps)
    out        (x - mean) * rstd, then * weight
    backward   g = dy * weight; dx = rstd * ((g - mean(g)) - xhat * mean(g * xhat)), each mean
               pairwise as above; dweight = the column sums of dy * xhat in float64, row by row
               from +0 in the rows' C order (``_checks.reduce_rows``), rounded once

Ops (the contracts of ``normlab.functional.attention``'s): ``qk_norm_forward``,
``qk_norm_backward``, ``qk_norm_members_forward`` and ``qk_norm_members_backward``; the fused
attention (``kernels.attention``) uses them for a per-head QK-norm. What they compute: norm
"layernorm" on float32 or float64 rows of up to four axes; anything else runs the reference
(the same results, more slowly). The output has the reference's memory layout (``np.empty_like``
of the input: the attention products read it, and a product's bits may depend on its operands'
layout). tests/kernels/test_kernel_qk_norm.py checks every value and layout bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .. import _checks as ck
from ..functional import attention as _ref
from ..functional.attention import QKMembersCache
from ..functional.layernorm import LayerNormCache, check_args

PW_BLOCK = 128  # NumPy's PW_BLOCKSIZE: a pairwise sum's leaf


@njit(cache=True, inline="always")
def _leaf(v, lo, n):
    """NumPy's pairwise sum of at most ``PW_BLOCK`` terms v[lo:lo + n]: below 8 one running
    sum; else eight running sums over the terms' residues mod 8, added as a balanced tree, then
    the rest in order."""
    if n < 8:
        res = v.dtype.type(-0.0)
        for i in range(lo, lo + n):
            res += v[i]
        return res
    r0, r1, r2, r3 = v[lo], v[lo + 1], v[lo + 2], v[lo + 3]
    r4, r5, r6, r7 = v[lo + 4], v[lo + 5], v[lo + 6], v[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += v[lo + i]
        r1 += v[lo + i + 1]
        r2 += v[lo + i + 2]
        r3 += v[lo + i + 3]
        r4 += v[lo + i + 4]
        r5 += v[lo + i + 5]
        r6 += v[lo + i + 6]
        r7 += v[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += v[lo + i]
        i += 1
    return res


@njit(cache=True, inline="always")
def _half(n):
    """Where NumPy cuts a sum of n > ``PW_BLOCK`` terms: n / 2 down to a multiple of 8."""
    h = n // 2
    return h - h % 8


@njit(cache=True)
def pairwise_sum(v, lo, n):
    """NumPy's pairwise sum of v[lo:lo + n] in v's dtype (``@TYPE@_pairwise_sum`` of
    numpy/_core/src/umath/loops_utils.h.src): ``_leaf`` up to ``PW_BLOCK`` terms; above, the two
    halves (``_half``) summed alike and added, left + right. The recursion is unrolled into a
    stack of frames (numba's disk cache does not load recursive functions reliably): frame f
    sums v[at[f]:at[f] + size[f]], ``left[f]`` its left half's sum once known."""
    if n <= PW_BLOCK:
        return _leaf(v, lo, n)
    at = np.empty(64, np.int64)  # depth <= log2(n / PW_BLOCK) + 1
    size = np.empty(64, np.int64)
    left = np.empty(64, v.dtype)
    has_left = np.zeros(64, np.bool_)
    at[0], size[0], top = lo, n, 0
    while True:
        while size[top] > PW_BLOCK:  # descend into the left halves
            has_left[top + 1] = False
            at[top + 1], size[top + 1] = at[top], _half(size[top])
            top += 1
        res = _leaf(v, at[top], size[top])
        while True:  # return: a right half completes its parent, a left half starts the right
            if top == 0:
                return res
            if has_left[top]:
                top -= 1
                res = left[top] + res
                continue
            h = _half(size[top - 1])
            left[top - 1] = res
            has_left[top] = True
            at[top], size[top] = at[top - 1] + h, size[top - 1] - h
            break


@njit(cache=True, inline="always")
def _row_mean(v, n):
    """NumPy's ``v.mean()`` over a row: (+0 + pairwise sum) / n."""
    k = v.shape[0]
    s = _leaf(v, 0, k) if k <= PW_BLOCK else pairwise_sum(v, 0, k)
    return (v.dtype.type(0.0) + s) / n


@njit(cache=True)
def _forward(x, w, eps, y, mean, rstd):
    """x, y (A, B, T, C), any strides; w (M, C), member m owning rows a in [m A/M, (m+1) A/M);
    mean and rstd (A, B, T) out. Each row is read into a contiguous buffer (no per-row views:
    the rows are short)."""
    A, B, T, C = x.shape
    per = A // w.shape[0]
    n = mean.dtype.type(C)
    one = mean.dtype.type(1.0)
    xr = np.empty(C, mean.dtype)
    cen = np.empty(C, mean.dtype)
    sq = np.empty(C, mean.dtype)
    for a in range(A):
        m = a // per
        for b in range(B):
            for t in range(T):
                for j in range(C):
                    xr[j] = x[a, b, t, j]
                mu = _row_mean(xr, n)
                for j in range(C):
                    cen[j] = xr[j] - mu
                    sq[j] = cen[j] * cen[j]
                r = one / np.sqrt(_row_mean(sq, n) + eps)
                for j in range(C):
                    y[a, b, t, j] = cen[j] * r * w[m, j]
                mean[a, b, t] = mu
                rstd[a, b, t] = r


@njit(cache=True)
def _backward(x, dy, w, mean, rstd, dx, dw):
    """dx (A, B, T, C) and dw (M, C) float64 (zeroed by the caller) from x, dy (A, B, T, C),
    w (M, C) and the forward's mean and rstd (A, B, T)."""
    A, B, T, C = x.shape
    per = A // w.shape[0]
    n = mean.dtype.type(C)
    gh = np.empty(C, mean.dtype)
    gx = np.empty(C, mean.dtype)
    xh = np.empty(C, mean.dtype)
    for a in range(A):
        m = a // per
        for b in range(B):
            for t in range(T):
                mu, r = mean[a, b, t], rstd[a, b, t]
                for j in range(C):
                    d = dy[a, b, t, j]
                    xh[j] = (x[a, b, t, j] - mu) * r
                    dw[m, j] += np.float64(d * xh[j])
                    gh[j] = d * w[m, j]
                    gx[j] = gh[j] * xh[j]
                m1 = _row_mean(gh, n)
                m2 = _row_mean(gx, n)
                for j in range(C):
                    dx[a, b, t, j] = r * ((gh[j] - m1) - xh[j] * m2)


# ---- the ops -----------------------------------------------------------------------------------
def _fused(norm: str, *arrays: np.ndarray) -> bool:
    """Whether this kernel computes a QK-norm ``norm`` over these arrays (else the reference)."""
    a = arrays[0]
    return (norm == "layernorm" and a.dtype in (np.float32, np.float64) and 1 <= a.ndim <= 4
            and a.size > 0 and all(b.dtype == a.dtype for b in arrays[1:]))


def _four(a: np.ndarray) -> np.ndarray:
    """``a`` as four axes, unit axes inserted after the first (the members' axis stays first;
    a view)."""
    if a.ndim == 1:
        return a.reshape((1, 1, 1) + a.shape)
    return a.reshape(a.shape[:1] + (1,) * (4 - a.ndim) + a.shape[1:])


def _run_forward(x: np.ndarray, gains: np.ndarray, eps: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, mean, rstd)``: y in x's layout (the reference's), mean and rstd (..., 1)."""
    ct = x.dtype
    y = np.empty_like(x)
    stats = x.shape[:-1] + (1,)
    mean, rstd = np.empty(stats, ct), np.empty(stats, ct)
    _forward(_four(x), gains, ct.type(eps), _four(y), _four(mean)[..., 0], _four(rstd)[..., 0])
    return y, mean, rstd


def _run_backward(dout: np.ndarray, x: np.ndarray, gains: np.ndarray, mean: np.ndarray,
                  rstd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(dx, dgains)``: dx C-contiguous, dgains (M, C) float64, each member's own rows."""
    dx = np.empty(x.shape, x.dtype)
    dw = np.zeros(gains.shape)
    _backward(_four(x), _four(dout), gains, _four(mean)[..., 0], _four(rstd)[..., 0], _four(dx),
              dw)
    return dx, dw


def qk_norm_forward(x: np.ndarray, weight: np.ndarray, *, norm: str,
                    eps: float) -> tuple[np.ndarray, Any]:
    """As ``normlab.functional.attention.qk_norm_forward``, bit for bit."""
    if norm != "layernorm":
        return _ref.qk_norm_forward(x, weight, norm=norm, eps=eps)
    x, weight, _, eps = check_args(x, weight, None, eps)
    if weight is None or not _fused(norm, x, weight.astype(x.dtype, copy=False)):
        return _ref.qk_norm_forward(x, weight, norm=norm, eps=eps)
    g = weight.astype(x.dtype)
    y, mean, rstd = _run_forward(x, g[None], eps)
    return y, LayerNormCache(x, g, False, mean, rstd, (weight.dtype, None))


def qk_norm_backward(dout: Any, cache: Any, *, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """As ``normlab.functional.attention.qk_norm_backward``, bit for bit."""
    if norm != "layernorm" or not isinstance(cache, LayerNormCache):
        return _ref.qk_norm_backward(dout, cache, norm=norm)
    x, g, has_bias, mean, rstd, (weight_dt, _) = cache
    dout = ck.float_array(dout, "dout")
    if (g is None or has_bias or dout.shape != x.shape
            or not _fused(norm, x, dout, g, mean, rstd)):
        return _ref.qk_norm_backward(dout, cache, norm=norm)
    dx, dw = _run_backward(dout, x, g[None], mean, rstd)
    return dx, dw[0].astype(ck.compute_dtype(weight_dt))


def qk_norm_members_forward(x: np.ndarray, weights: np.ndarray, *, norm: str,
                            eps: float) -> tuple[np.ndarray, QKMembersCache] | None:
    """As ``normlab.functional.attention.qk_norm_members_forward``, bit for bit."""
    xa, wa = ck.float_array(x, "x"), ck.float_array(weights, "weights")
    if (norm != "layernorm" or wa.ndim != 2 or xa.ndim < 2 or not len(wa)
            or xa.shape[0] % len(wa) or wa.shape[-1] != xa.shape[-1]
            or not _fused(norm, xa, wa.astype(xa.dtype, copy=False))):
        return _ref.qk_norm_members_forward(x, weights, norm=norm, eps=eps)
    eps = ck.positive(eps, "eps")
    gain = wa.astype(xa.dtype)
    y, mean, rstd = _run_forward(xa, gain, eps)
    return y, QKMembersCache(norm, LayerNormCache(xa, None, False, mean, rstd, (None, None)),
                             gain, wa.dtype)


def qk_norm_members_backward(dout: Any, cache: Any) -> tuple[np.ndarray, np.ndarray]:
    """As ``normlab.functional.attention.qk_norm_members_backward``, bit for bit."""
    ck.cache(cache, QKMembersCache, "qk_norm_members")
    norm, inner, gain, weight_dt = cache
    dout = ck.float_array(dout, "dout")
    if (norm != "layernorm" or not isinstance(inner, LayerNormCache) or inner.weight is not None
            or dout.shape != inner.x.shape
            or not _fused(norm, inner.x, dout, gain, inner.mean, inner.rstd)):
        return _ref.qk_norm_members_backward(dout, cache)
    dx, dw = _run_backward(dout, inner.x, gain, inner.mean, inner.rstd)
    return dx, dw.astype(ck.compute_dtype(weight_dt))


__all__ = ["pairwise_sum", "qk_norm_backward", "qk_norm_forward", "qk_norm_members_backward",
           "qk_norm_members_forward"]
