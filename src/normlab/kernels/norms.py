"""LayerNorm and RMSNorm: fused numba kernels with the contracts of ``normlab.functional``.

Same signatures, same caches (``LayerNormCache``, ``RMSNormCache``), same dtype rules: a cache
from the reference forward can be fed to the kernel backward and the other way round.

Memory passes (rows x C, each row read into the cache once and revisited there):

    forward   read x, write y                                     (+ mean and rstd per row)
    backward  read x and dy, write dx                             (+ one C-vector per thread)

Forward per row: sum -> mean, centered sum of squares -> rstd (two passes over the cached row, the
two-pass variance of the reference), then y = (x - mean) * rstd * weight + bias. Backward per row:
one pass accumulates sum(g) and sum(g * xhat) (g = weight * dy) and the parameter-gradient
partials, a second writes dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).

Parameter gradients are reduced per thread from float32 partial sums (blocks of ROW_BLOCK rows,
added into a float64 accumulator), then across threads in float64, and rounded once.

dtypes: float64 and float32 directly, float16 and bfloat16 as raw bits decoded and rounded in the
kernel (see ``_rows``); other formats (float8, ...) run the reference.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit, prange

from .. import _checks as ck
from ..functional import layernorm as _ref_ln
from ..functional import rmsnorm as _ref_rms
from ..functional.layernorm import LayerNormCache
from ..functional.rmsnorm import RMSNormCache
from ..precision.accumulate import Accumulation, check_accumulation
from ._common import (
    PARALLEL_MIN,
    REDUCE,
    ROW_BLOCK,
    chunk_bounds,
    flush,
    launch,
    nchunks,
    row_centered_sumsq,
    row_sum,
    row_sumsq,
    rows_of,
)
from ._rows import F16_TABLE, kernel_view, load_row, native, out_row, store_row
from .accumulate import acc_row_sum, acc_spec

# ---- row helpers (shared with the fused add + norm) ----------------------------------------------


@njit(cache=True)
def ln_stats(v, eps):
    """LayerNorm statistics of a cached row: (mean, rstd), two-pass variance, eps in the root."""
    n = v.dtype.type(v.shape[0])
    mu = row_sum(v, v.shape[0]) / n
    var = row_centered_sumsq(v, mu) / n
    return mu, v.dtype.type(1.0) / np.sqrt(var + eps)


@njit(cache=True)
def ln_apply(v, mu, r, weight, bias, o):
    """o = (v - mean) * rstd * weight + bias, in the reference's order of roundings."""
    for j in range(v.shape[0]):
        o[j] = (v[j] - mu) * r * weight[j] + bias[j]


@njit(cache=True)
def rms_stats(v, k, eps):
    """RMSNorm rstd of a cached row from its first k features."""
    return v.dtype.type(1.0) / np.sqrt(row_sumsq(v, k) / v.dtype.type(k) + eps)


@njit(cache=True)
def rms_apply(v, r, scale, o):
    """o = v * rstd * scale."""
    for j in range(v.shape[0]):
        o[j] = v[j] * r * scale[j]


@njit(cache=True, fastmath=REDUCE)
def _ln_bwd_sums(v, g, weight, mu, r, acc_g, acc_b):
    """First backward pass over a row: sum(weight dy), sum(weight dy xhat); the dweight and
    dbias partials."""
    s1 = v.dtype.type(0.0)
    s2 = v.dtype.type(0.0)
    for j in range(v.shape[0]):
        xh = (v[j] - mu) * r
        gh = g[j] * weight[j]
        s1 += gh
        s2 += gh * xh
        acc_g[j] += g[j] * xh
        acc_b[j] += g[j]
    return s1, s2


@njit(cache=True)
def ln_bwd_row(v, g, weight, mu, r, acc_g, acc_b, o):
    """LayerNorm input gradient of one cached row into o; adds the parameter partials."""
    n = v.dtype.type(v.shape[0])
    s1, s2 = _ln_bwd_sums(v, g, weight, mu, r, acc_g, acc_b)
    c1 = s1 / n
    c2 = s2 / n
    for j in range(v.shape[0]):
        xh = (v[j] - mu) * r
        gh = g[j] * weight[j]
        o[j] = r * (gh - c1 - xh * c2)


@njit(cache=True, fastmath=REDUCE)
def _rms_bwd_sums(v, g, scale, r, acc_w):
    """First backward pass over a row: sum(scale dy xhat) over all features; dweight partials."""
    s = v.dtype.type(0.0)
    for j in range(v.shape[0]):
        xh = v[j] * r
        s += g[j] * scale[j] * xh
        acc_w[j] += g[j] * xh
    return s


@njit(cache=True)
def rms_bwd_row(v, g, scale, r, k, acc_w, o):
    """RMSNorm input gradient of one cached row into o; adds the dweight partials. Only the first
    k features (pRMSNorm) enter rstd, so only they get the xhat * dot term."""
    dot = _rms_bwd_sums(v, g, scale, r, acc_w) / v.dtype.type(k)
    for j in range(k):
        o[j] = (g[j] * scale[j] - v[j] * r * dot) * r
    for j in range(k, v.shape[0]):
        o[j] = g[j] * scale[j] * r


@njit(cache=True)
def ln_stats_acc(v, eps, spec, sq, tmp):
    """``ln_stats`` with both sums in the accumulation ``spec`` (the reference's order)."""
    n = v.dtype.type(v.shape[0])
    mu = v.dtype.type(acc_row_sum(v, v.shape[0], spec, tmp)) / n
    for j in range(v.shape[0]):
        d = v[j] - mu
        sq[j] = d * d
    var = v.dtype.type(acc_row_sum(sq, v.shape[0], spec, tmp)) / n
    return mu, v.dtype.type(1.0) / np.sqrt(var + eps)


@njit(cache=True)
def rms_stats_acc(v, k, eps, spec, sq, tmp):
    """``rms_stats`` with the sum of squares in the accumulation ``spec``."""
    for j in range(k):
        sq[j] = v[j] * v[j]
    ms = v.dtype.type(acc_row_sum(sq, k, spec, tmp)) / v.dtype.type(k)
    return v.dtype.type(1.0) / np.sqrt(ms + eps)


# ---- kernels -----------------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def _layer_norm_fwd(x, weight, bias, eps, y, mean, rstd, fmt, table, n, spec):
    rows, C = x.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        xbuf = np.empty(C, mean.dtype)
        ybuf = np.empty(C, mean.dtype)
        sq = np.empty(C if spec[0] else 0, mean.dtype)
        tmp = np.empty(1, np.float64)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fmt, table)  # memory pass 1: read x
            if spec[0]:  # an emulated accumulator
                mu, r = ln_stats_acc(v, eps, spec, sq, tmp)
            else:
                mu, r = ln_stats(v, eps)  # from the cache
            o = out_row(y[i], ybuf)
            ln_apply(v, mu, r, weight, bias, o)  # memory pass 2: write y
            store_row(y[i], o, fmt)
            mean[i] = mu
            rstd[i] = r


@njit(parallel=True, cache=True)
def _layer_norm_bwd(x, dy, weight, mean, rstd, dx, part_g, part_b, fx, fdy, table, n):
    rows, C = x.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        xbuf = np.empty(C, mean.dtype)
        gbuf = np.empty(C, mean.dtype)
        obuf = np.empty(C, mean.dtype)
        acc_g = np.zeros(C, mean.dtype)  # float32 block partials (float64 for float64)
        acc_b = np.zeros(C, acc_g.dtype)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fx, table)  # read x
            g = load_row(dy[i], gbuf, fdy, table)  # read dy
            o = out_row(dx[i], obuf)
            ln_bwd_row(v, g, weight, mean[i], rstd[i], acc_g, acc_b, o)  # write dx
            store_row(dx[i], o, fx)
            if (i - lo + 1) % ROW_BLOCK == 0 or i == hi - 1:
                flush(acc_g, part_g[c])
                flush(acc_b, part_b[c])


@njit(parallel=True, cache=True)
def _rms_norm_fwd(x, scale, eps, k, y, rstd, fmt, table, n, spec):
    rows, C = x.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        xbuf = np.empty(C, rstd.dtype)
        ybuf = np.empty(C, rstd.dtype)
        sq = np.empty(C if spec[0] else 0, rstd.dtype)
        tmp = np.empty(1, np.float64)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fmt, table)  # memory pass 1: read x
            if spec[0]:  # an emulated accumulator
                r = rms_stats_acc(v, k, eps, spec, sq, tmp)
            else:
                r = rms_stats(v, k, eps)
            o = out_row(y[i], ybuf)
            rms_apply(v, r, scale, o)  # memory pass 2: write y
            store_row(y[i], o, fmt)
            rstd[i] = r


@njit(parallel=True, cache=True)
def _rms_norm_bwd(x, dy, scale, rstd, k, dx, part_w, fx, fdy, table, n):
    rows, C = x.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        xbuf = np.empty(C, rstd.dtype)
        gbuf = np.empty(C, rstd.dtype)
        obuf = np.empty(C, rstd.dtype)
        acc_w = np.zeros(C, rstd.dtype)  # float32 block partials (float64 for float64)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fx, table)  # read x
            g = load_row(dy[i], gbuf, fdy, table)  # read dy
            o = out_row(dx[i], obuf)
            rms_bwd_row(v, g, scale, rstd[i], k, acc_w, o)  # write dx
            store_row(dx[i], o, fx)
            if (i - lo + 1) % ROW_BLOCK == 0 or i == hi - 1:
                flush(acc_w, part_w[c])


# ---- plain kernels: float32 or float64 rows, one thread ------------------------------------------
# Below PARALLEL_MIN elements per member (the lab's sizes) a norm of float32 or float64 rows runs
# these: one loop over the rows, no chunks and no row-access layer, the rows of group g (an
# ensemble's member; one group for a single call) [g R, (g + 1) R) with its own parameters and its
# own parameter-gradient partials, flushed every ROW_BLOCK rows as the chunked kernels do with one
# chunk. The forward's lines are the chunked kernels' (the same bits); the backward's row sums
# read the rows in place, which LLVM vectorizes in another order than the chunked kernels' (their
# last bits differ; every call of these sizes runs these, single or grouped, so a member still
# computes its single run's bits). At (2048, 32), about 1.6x faster each way than the chunked
# kernels with one thread.


def plain(x: np.ndarray, ct: np.dtype, per_group: int, spec: tuple = (False,)) -> bool:
    """Whether the plain kernels compute a norm of x (its compute dtype, float32 or float64),
    ``per_group`` elements per member, no emulated accumulator (``spec``)."""
    return (x.dtype == ct and ct in (np.float32, np.float64) and per_group < PARALLEL_MIN
            and not spec[0])


@njit(cache=True)
def _ln_fwd_plain(x, weight, bias, eps, y, mean, rstd, R):
    """LayerNorm of the rows x (rows, C), group g's rows with weight[g] and bias[g]."""
    rows, C = x.shape
    n = x.dtype.type(C)
    one = x.dtype.type(1.0)
    for i in range(rows):
        g = i // R
        v = x[i]
        mu = row_sum(v, C) / n
        r = one / np.sqrt(row_centered_sumsq(v, mu) / n + eps)
        o, w, b = y[i], weight[g], bias[g]
        for j in range(C):
            o[j] = (v[j] - mu) * r * w[j] + b[j]
        mean[i] = mu
        rstd[i] = r


@njit(cache=True, fastmath=REDUCE)
def _ln_bwd_sums_at(x, dy, weight, i, g, mu, r, acc_g, acc_b):
    """``_ln_bwd_sums`` of row i of x and dy (group g's weight), read in place."""
    s1 = x.dtype.type(0.0)
    s2 = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        xh = (x[i, j] - mu) * r
        gh = dy[i, j] * weight[g, j]
        s1 += gh
        s2 += gh * xh
        acc_g[j] += dy[i, j] * xh
        acc_b[j] += dy[i, j]
    return s1, s2


@njit(cache=True)
def _ln_bwd_plain(x, dy, weight, mean, rstd, dx, part_g, part_b, R):
    """LayerNorm's dx of the rows; group g's dweight and dbias partials into part_g[g],
    part_b[g] (float64)."""
    rows, C = x.shape
    n = x.dtype.type(C)
    acc_g = np.zeros(C, x.dtype)
    acc_b = np.zeros(C, x.dtype)
    for i in range(rows):
        g = i // R
        mu, r = mean[i], rstd[i]
        s1, s2 = _ln_bwd_sums_at(x, dy, weight, i, g, mu, r, acc_g, acc_b)
        c1 = s1 / n
        c2 = s2 / n
        for j in range(C):
            xh = (x[i, j] - mu) * r
            gh = dy[i, j] * weight[g, j]
            dx[i, j] = r * (gh - c1 - xh * c2)
        if (i - g * R + 1) % ROW_BLOCK == 0 or i == g * R + R - 1:
            flush(acc_g, part_g[g])
            flush(acc_b, part_b[g])


@njit(cache=True)
def _rms_fwd_plain(x, scale, eps, k, y, rstd, R):
    """RMSNorm of the rows x (rows, C) from their first k features, group g's with scale[g]."""
    rows, C = x.shape
    one = x.dtype.type(1.0)
    for i in range(rows):
        v = x[i]
        r = one / np.sqrt(row_sumsq(v, k) / x.dtype.type(k) + eps)
        o, w = y[i], scale[i // R]
        for j in range(C):
            o[j] = v[j] * r * w[j]
        rstd[i] = r


@njit(cache=True, fastmath=REDUCE)
def _rms_bwd_sum_at(x, dy, scale, i, g, r, acc_w):
    """``_rms_bwd_sums`` of row i of x and dy (group g's scale), read in place."""
    s = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        xh = x[i, j] * r
        s += dy[i, j] * scale[g, j] * xh
        acc_w[j] += dy[i, j] * xh
    return s


@njit(cache=True)
def _rms_bwd_plain(x, dy, scale, rstd, k, dx, part_w, R):
    """RMSNorm's dx of the rows; group g's dweight partials into part_w[g] (float64)."""
    rows, C = x.shape
    acc_w = np.zeros(C, x.dtype)
    for i in range(rows):
        g = i // R
        r = rstd[i]
        dot = _rms_bwd_sum_at(x, dy, scale, i, g, r, acc_w) / x.dtype.type(k)
        for j in range(k):
            dx[i, j] = (dy[i, j] * scale[g, j] - x[i, j] * r * dot) * r
        for j in range(k, C):
            dx[i, j] = dy[i, j] * scale[g, j] * r
        if (i - g * R + 1) % ROW_BLOCK == 0 or i == g * R + R - 1:
            flush(acc_w, part_w[g])


# ---- Python entry points -------------------------------------------------------------------------


def grad_view(dout: np.ndarray, ct: np.dtype) -> tuple[np.ndarray, int]:
    """An upstream gradient as a kernel array: natively if the kernels read its dtype, else cast
    to the compute dtype once (a float8 gradient, say)."""
    d = rows_of(dout if native(dout.dtype) else dout.astype(ct))
    return kernel_view(d)


def check_out(out: np.ndarray | None, x: np.ndarray) -> np.ndarray | None:
    """A caller-provided output: None, or a C-contiguous array of x's shape and dtype that does
    not share memory with x (else a clear error naming ``out``)."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array or None; got {type(out).__name__}")
    if out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {x.dtype} array of x's shape {x.shape}; "
                         f"got {out.dtype} {out.shape}"
                         + ("" if out.flags.c_contiguous else " (not C-contiguous)"))
    if not out.flags.writeable or np.shares_memory(out, x):
        raise ValueError("out must be writeable and must not share memory with x (the input is "
                         "never overwritten)")
    return out


def _into(out, result):
    """The reference's (y, cache) with y copied into ``out`` when one was given."""
    y, cache = result
    if out is None:
        return y, cache
    np.copyto(out, y)
    return out, cache


def layer_norm_forward(x: np.ndarray, weight: np.ndarray | None = None,
                       bias: np.ndarray | None = None, *, eps: float = 1e-5,
                       out: np.ndarray | None = None, accumulate: Accumulation | None = None
                       ) -> tuple[np.ndarray, LayerNormCache]:
    """LayerNorm over the last axis; see ``normlab.functional.layer_norm_forward`` (same
    arguments, result and cache; with an ``accumulate`` the same result bit for bit). ``out``: an
    array of x's shape and dtype to write y into (then returned as y), instead of a new one."""
    x, weight, bias, eps = _ref_ln.check_args(x, weight, bias, eps)
    acc = check_accumulation(accumulate)
    out = check_out(out, x)
    C = x.shape[-1]
    if not native(x.dtype) or x.size == 0:
        return _into(out, _ref_ln.layer_norm_forward(x, weight, bias, eps=eps, accumulate=acc))
    ct = ck.compute_dtype(x.dtype)
    g = None if weight is None else weight.astype(ct)
    xk, fmt = kernel_view(rows_of(x))
    rows = xk.shape[0]
    y = np.empty(x.shape, x.dtype) if out is None else out
    yk, _ = kernel_view(y.reshape(rows, C))
    mean, rstd = np.empty(rows, ct), np.empty(rows, ct)
    weight_, bias_ = (np.ones(C, ct) if g is None else g,
                      np.zeros(C, ct) if bias is None else bias.astype(ct))
    if plain(x, ct, x.size, acc_spec(acc)):
        _ln_fwd_plain(xk, weight_[None], bias_[None], ct.type(eps), yk, mean, rstd,
                      max(rows, 1))
    else:
        launch(_layer_norm_fwd, x.size, xk, weight_, bias_, ct.type(eps), yk, mean, rstd, fmt,
               F16_TABLE, nchunks(rows, x.size), acc_spec(acc))
    stat_shape = x.shape[:-1] + (1,)
    dtypes = (None if weight is None else weight.dtype, None if bias is None else bias.dtype)
    return y, LayerNormCache(x, g, bias is not None, mean.reshape(stat_shape),
                             rstd.reshape(stat_shape), dtypes)


def layer_norm_backward(
    dout: np.ndarray, cache: LayerNormCache
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Gradients of LayerNorm: ``(dx, dweight, dbias)``, as ``functional.layer_norm_backward``."""
    ck.cache(cache, LayerNormCache, "layer_norm")
    x, g, has_bias, mean, rstd, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    if not native(x.dtype) or x.size == 0:
        return _ref_ln.layer_norm_backward(dout, cache)
    ct = mean.dtype
    C = x.shape[-1]
    xk, fx = kernel_view(rows_of(x))
    dyk, fdy = grad_view(dout, ct)
    rows = xk.shape[0]
    dx = np.empty(x.shape, x.dtype)
    dxk, _ = kernel_view(dx.reshape(rows, C))
    n = nchunks(rows, x.size)
    part_g, part_b = np.zeros((n, C)), np.zeros((n, C))
    weight_ = np.ones(C, ct) if g is None else g
    mean_ = np.ascontiguousarray(mean).reshape(rows)
    rstd_ = np.ascontiguousarray(rstd).reshape(rows)
    if plain(x, ct, x.size) and dyk.dtype == ct:
        _ln_bwd_plain(xk, dyk, weight_[None], mean_, rstd_, dxk, part_g, part_b, rows)
    else:
        launch(_layer_norm_bwd, x.size, xk, dyk, weight_, mean_, rstd_, dxk, part_g, part_b, fx,
               fdy, F16_TABLE, n)
    dweight = None if g is None else part_g.sum(axis=0).astype(ck.compute_dtype(weight_dt))
    dbias = part_b.sum(axis=0).astype(ck.compute_dtype(bias_dt)) if has_bias else None
    return dx, dweight, dbias


def rms_norm_forward(x: np.ndarray, weight: np.ndarray, *, eps: float = 1e-8,
                     partial: float | None = None, offset: float = 0.0,
                     out: np.ndarray | None = None, accumulate: Accumulation | None = None
                     ) -> tuple[np.ndarray, RMSNormCache]:
    """RMSNorm over the last axis; see ``normlab.functional.rms_norm_forward`` (same arguments,
    result and cache; with an ``accumulate`` the same result bit for bit). ``out``: an array of
    x's shape and dtype to write y into (then returned as y), instead of a new one."""
    x, weight, eps, k = _ref_rms.check_args(x, weight, eps, partial, offset)
    acc = check_accumulation(accumulate)
    out = check_out(out, x)
    C = x.shape[-1]
    if not native(x.dtype) or x.size == 0:
        return _into(out, _ref_rms.rms_norm_forward(x, weight, eps=eps, partial=partial,
                                                    offset=offset, accumulate=acc))
    ct = ck.compute_dtype(x.dtype)
    scale = weight.astype(ct) + ct.type(offset)
    xk, fmt = kernel_view(rows_of(x))
    rows = xk.shape[0]
    y = np.empty(x.shape, x.dtype) if out is None else out
    yk, _ = kernel_view(y.reshape(rows, C))
    rstd = np.empty(rows, ct)
    if plain(x, ct, x.size, acc_spec(acc)):
        _rms_fwd_plain(xk, scale[None], ct.type(eps), k, yk, rstd, max(rows, 1))
    else:
        launch(_rms_norm_fwd, x.size, xk, scale, ct.type(eps), k, yk, rstd, fmt, F16_TABLE,
               nchunks(rows, x.size), acc_spec(acc))
    return y, RMSNormCache(x, scale, rstd.reshape(x.shape[:-1] + (1,)), k, weight.dtype)


def rms_norm_backward(dout: np.ndarray, cache: RMSNormCache) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of RMSNorm: ``(dx, dweight)``, as ``functional.rms_norm_backward``."""
    ck.cache(cache, RMSNormCache, "rms_norm")
    x, scale, rstd, k, weight_dt = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    if not native(x.dtype) or x.size == 0:
        return _ref_rms.rms_norm_backward(dout, cache)
    ct = rstd.dtype
    C = x.shape[-1]
    xk, fx = kernel_view(rows_of(x))
    dyk, fdy = grad_view(dout, ct)
    rows = xk.shape[0]
    dx = np.empty(x.shape, x.dtype)
    dxk, _ = kernel_view(dx.reshape(rows, C))
    n = nchunks(rows, x.size)
    part_w = np.zeros((n, C))
    rstd_ = np.ascontiguousarray(rstd).reshape(rows)
    if plain(x, ct, x.size) and dyk.dtype == ct:
        _rms_bwd_plain(xk, dyk, scale[None], rstd_, k, dxk, part_w, rows)
    else:
        launch(_rms_norm_bwd, x.size, xk, dyk, scale, rstd_, k, dxk, part_w, fx, fdy, F16_TABLE,
               n)
    return dx, part_w.sum(axis=0).astype(ck.compute_dtype(weight_dt))


# ---- an ensemble's members: one launch, each member's rows with its own parameters ---------------
# Member g owns rows [g R, (g + 1) R) and is split into the chunks a call on its rows alone would
# use (``nchunks(R, R C)``), so that its parameter-gradient partials, and their float64 sum, are
# those of that call, bit for bit; the M n chunks run in one prange.


@njit(parallel=True, cache=True)
def _layer_norm_fwd_members(x, weight, bias, eps, y, mean, rstd, fmt, table, n, R):
    C = x.shape[1]
    G = weight.shape[0]
    for c in prange(G * n):
        g = c // n
        lo, hi = chunk_bounds(c % n, n, R)
        xbuf = np.empty(C, mean.dtype)
        ybuf = np.empty(C, mean.dtype)
        for i in range(g * R + lo, g * R + hi):
            v = load_row(x[i], xbuf, fmt, table)
            mu, r = ln_stats(v, eps)
            o = out_row(y[i], ybuf)
            ln_apply(v, mu, r, weight[g], bias[g], o)
            store_row(y[i], o, fmt)
            mean[i] = mu
            rstd[i] = r


@njit(parallel=True, cache=True)
def _layer_norm_bwd_members(x, dy, weight, mean, rstd, dx, part_g, part_b, fx, fdy, table, n, R):
    C = x.shape[1]
    G = weight.shape[0]
    for c in prange(G * n):
        g = c // n
        lo, hi = chunk_bounds(c % n, n, R)
        lo += g * R
        hi += g * R
        xbuf = np.empty(C, mean.dtype)
        gbuf = np.empty(C, mean.dtype)
        obuf = np.empty(C, mean.dtype)
        acc_g = np.zeros(C, mean.dtype)
        acc_b = np.zeros(C, acc_g.dtype)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fx, table)
            gr = load_row(dy[i], gbuf, fdy, table)
            o = out_row(dx[i], obuf)
            ln_bwd_row(v, gr, weight[g], mean[i], rstd[i], acc_g, acc_b, o)
            store_row(dx[i], o, fx)
            if (i - lo + 1) % ROW_BLOCK == 0 or i == hi - 1:
                flush(acc_g, part_g[c])
                flush(acc_b, part_b[c])


@njit(parallel=True, cache=True)
def _rms_norm_fwd_members(x, scale, eps, k, y, rstd, fmt, table, n, R):
    C = x.shape[1]
    G = scale.shape[0]
    for c in prange(G * n):
        g = c // n
        lo, hi = chunk_bounds(c % n, n, R)
        xbuf = np.empty(C, rstd.dtype)
        ybuf = np.empty(C, rstd.dtype)
        for i in range(g * R + lo, g * R + hi):
            v = load_row(x[i], xbuf, fmt, table)
            r = rms_stats(v, k, eps)
            o = out_row(y[i], ybuf)
            rms_apply(v, r, scale[g], o)
            store_row(y[i], o, fmt)
            rstd[i] = r


@njit(parallel=True, cache=True)
def _rms_norm_bwd_members(x, dy, scale, rstd, k, dx, part_w, fx, fdy, table, n, R):
    C = x.shape[1]
    G = scale.shape[0]
    for c in prange(G * n):
        g = c // n
        lo, hi = chunk_bounds(c % n, n, R)
        lo += g * R
        hi += g * R
        xbuf = np.empty(C, rstd.dtype)
        gbuf = np.empty(C, rstd.dtype)
        obuf = np.empty(C, rstd.dtype)
        acc_w = np.zeros(C, rstd.dtype)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fx, table)
            gr = load_row(dy[i], gbuf, fdy, table)
            o = out_row(dx[i], obuf)
            rms_bwd_row(v, gr, scale[g], rstd[i], k, acc_w, o)
            store_row(dx[i], o, fx)
            if (i - lo + 1) % ROW_BLOCK == 0 or i == hi - 1:
                flush(acc_w, part_w[c])


def members_native(x: np.ndarray, *params: np.ndarray | None) -> bool:
    """Whether the member kernels compute a norm of ``x`` (M, ..., C) with stacked ``params``
    ((M, C) each, or None): a dtype they read, at least one row per member, and parameters of
    one float dtype (else the caller runs each member alone)."""
    M = x.shape[0] if x.ndim >= 2 else 0
    return (native(x.dtype) and x.size > 0 and M > 0
            and all(p is None or (p.shape == (M, x.shape[-1]) and p.dtype.kind == "f")
                    for p in params))


def layer_norm_forward_members(x: np.ndarray, weight: np.ndarray | None,
                               bias: np.ndarray | None, *, eps: float = 1e-5
                               ) -> tuple[np.ndarray, LayerNormCache]:
    """M members' LayerNorms in one launch: x (M, ..., C), weight and bias (M, C) or None;
    member m's rows equal ``layer_norm_forward(x[m], weight[m], bias[m])``'s. The cache holds the
    stacked x, gains and statistics (for ``layer_norm_backward_members``)."""
    M, C = x.shape[0], x.shape[-1]
    ct = ck.compute_dtype(x.dtype)
    eps = ck.positive(eps, "eps")
    g = None if weight is None else weight.astype(ct)
    xk, fmt = kernel_view(rows_of(x))
    rows = xk.shape[0]
    R = rows // M
    y = np.empty(x.shape, x.dtype)
    yk, _ = kernel_view(y.reshape(rows, C))
    mean, rstd = np.empty(rows, ct), np.empty(rows, ct)
    weight_, bias_ = (np.ones((M, C), ct) if g is None else g,
                      np.zeros((M, C), ct) if bias is None else bias.astype(ct))
    if plain(x, ct, x.size // M):  # as each member's own call would
        _ln_fwd_plain(xk, weight_, bias_, ct.type(eps), yk, mean, rstd, R)
    else:
        launch(_layer_norm_fwd_members, x.size, xk, weight_, bias_, ct.type(eps), yk, mean, rstd,
               fmt, F16_TABLE, nchunks(R, x.size // M), R)
    stat_shape = x.shape[:-1] + (1,)
    dtypes = (None if weight is None else weight.dtype, None if bias is None else bias.dtype)
    return y, LayerNormCache(x, g, bias is not None, mean.reshape(stat_shape),
                             rstd.reshape(stat_shape), dtypes)


def layer_norm_backward_members(dout: np.ndarray, cache: LayerNormCache
                                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Gradients of ``layer_norm_forward_members``: dx (M, ..., C), dweight and dbias (M, C),
    each member's reduced over its own rows only."""
    x, g, has_bias, mean, rstd, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct, M, C = mean.dtype, x.shape[0], x.shape[-1]
    xk, fx = kernel_view(rows_of(x))
    dyk, fdy = grad_view(dout, ct)
    rows = xk.shape[0]
    R = rows // M
    dx = np.empty(x.shape, x.dtype)
    dxk, _ = kernel_view(dx.reshape(rows, C))
    n = nchunks(R, x.size // M)
    part_g, part_b = np.zeros((M * n, C)), np.zeros((M * n, C))
    weight_ = np.ones((M, C), ct) if g is None else g
    mean_ = np.ascontiguousarray(mean).reshape(rows)
    rstd_ = np.ascontiguousarray(rstd).reshape(rows)
    if plain(x, ct, x.size // M) and dyk.dtype == ct:  # as each member's own call would
        _ln_bwd_plain(xk, dyk, weight_, mean_, rstd_, dxk, part_g, part_b, R)
    else:
        launch(_layer_norm_bwd_members, x.size, xk, dyk, weight_, mean_, rstd_, dxk, part_g,
               part_b, fx, fdy, F16_TABLE, n, R)
    dweight = (None if g is None else
               part_g.reshape(M, n, C).sum(axis=1).astype(ck.compute_dtype(weight_dt)))
    dbias = (part_b.reshape(M, n, C).sum(axis=1).astype(ck.compute_dtype(bias_dt))
             if has_bias else None)
    return dx, dweight, dbias


def rms_norm_forward_members(x: np.ndarray, weight: np.ndarray, *, eps: float = 1e-8,
                             partial: float | None = None, offset: float = 0.0
                             ) -> tuple[np.ndarray, RMSNormCache]:
    """M members' RMSNorms in one launch: x (M, ..., C), weight (M, C); member m's rows equal
    ``rms_norm_forward(x[m], weight[m], ...)``'s."""
    M, C = x.shape[0], x.shape[-1]
    _, _, eps, k = _ref_rms.check_args(x[0], weight[0], eps, partial, offset)
    ct = ck.compute_dtype(x.dtype)
    scale = weight.astype(ct) + ct.type(offset)
    xk, fmt = kernel_view(rows_of(x))
    rows = xk.shape[0]
    R = rows // M
    y = np.empty(x.shape, x.dtype)
    yk, _ = kernel_view(y.reshape(rows, C))
    rstd = np.empty(rows, ct)
    if plain(x, ct, x.size // M):  # as each member's own call would
        _rms_fwd_plain(xk, scale, ct.type(eps), k, yk, rstd, R)
    else:
        launch(_rms_norm_fwd_members, x.size, xk, scale, ct.type(eps), k, yk, rstd, fmt,
               F16_TABLE, nchunks(R, x.size // M), R)
    return y, RMSNormCache(x, scale, rstd.reshape(x.shape[:-1] + (1,)), k, weight.dtype)


def rms_norm_backward_members(dout: np.ndarray, cache: RMSNormCache
                              ) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of ``rms_norm_forward_members``: dx (M, ..., C) and dweight (M, C)."""
    x, scale, rstd, k, weight_dt = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct, M, C = rstd.dtype, x.shape[0], x.shape[-1]
    xk, fx = kernel_view(rows_of(x))
    dyk, fdy = grad_view(dout, ct)
    rows = xk.shape[0]
    R = rows // M
    dx = np.empty(x.shape, x.dtype)
    dxk, _ = kernel_view(dx.reshape(rows, C))
    n = nchunks(R, x.size // M)
    part_w = np.zeros((M * n, C))
    rstd_ = np.ascontiguousarray(rstd).reshape(rows)
    if plain(x, ct, x.size // M) and dyk.dtype == ct:  # as each member's own call would
        _rms_bwd_plain(xk, dyk, scale, rstd_, k, dxk, part_w, R)
    else:
        launch(_rms_norm_bwd_members, x.size, xk, dyk, scale, rstd_, k, dxk, part_w, fx, fdy,
               F16_TABLE, n, R)
    return dx, part_w.reshape(M, n, C).sum(axis=1).astype(ck.compute_dtype(weight_dt))


MEMBER_OPS: dict[str, tuple[Callable, Callable]] = {
    "layer_norm": (layer_norm_forward_members, layer_norm_backward_members),
    "rms_norm": (rms_norm_forward_members, rms_norm_backward_members)}
