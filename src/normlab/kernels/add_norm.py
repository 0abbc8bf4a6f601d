"""Fused residual add + dropout + LayerNorm/RMSNorm (flash-attention's ``layer_norm_fn``):
the contract, cache and dropout mask of ``normlab.functional.add_norm``, in one pass.

Memory passes (rows x C; every further pass over a row runs in the cache):

    forward   read x and residual, write y and residual_out      (4 streams; the unfused
              graph makes about 12: dropout, add, norm, each reading and writing)
    backward  read residual_out (the norm's input), dy and dresidual_out, write dx and dresidual

The dropout mask is never stored: forward and backward regenerate it from the seed with the
counter-based hash of ``functional.add_norm.keep_mask`` (SplitMix64, vectorized here).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from .. import _checks as ck
from ..functional import add_norm as _ref
from ..functional.add_norm import AddNormCache, check_add_norm
from ._common import ROW_BLOCK, chunk_bounds, flush, launch, nchunks, rows_of
from ._rows import (
    F16_TABLE,
    NATIVE,
    fmt_of,
    kernel_view,
    load_row,
    native,
    out_row,
    round_row,
    store_row,
)
from .norms import (
    grad_view,
    ln_apply,
    ln_bwd_row,
    ln_stats,
    rms_apply,
    rms_bwd_row,
    rms_stats,
)

# The norms the kernel computes (is_rms picks one); another fused norm of the registry runs the
# reference, which calls the entry's forward and backward.
FUSED = ("layer", "rms")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, inline="always")
def _keep(seed, counter, threshold):
    """SplitMix64 output ``counter`` (0-based) of stream ``seed``: top 32 bits >= threshold."""
    z = seed + (counter + np.uint64(1)) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(32)) >= threshold


@njit(cache=True)
def dropout_row(v, i, seed, threshold, scale, o):
    """o = v * keep / (1 - p) for row i (keep from the hash of the flat index i*C + j)."""
    C = v.shape[0]
    base = np.uint64(i) * np.uint64(C)
    zero = v.dtype.type(0.0)
    for j in range(C):
        o[j] = v[j] * scale if _keep(seed, base + np.uint64(j), threshold) else zero


@njit(parallel=True, cache=True)
def keep_mask_kernel(seed, threshold, out):
    """The (rows, C) keep mask of a dropout key (tests and ``return the mask`` uses)."""
    rows, C = out.shape
    for i in prange(rows):
        base = np.uint64(i) * np.uint64(C)
        for j in range(C):
            out[i, j] = _keep(seed, base + np.uint64(j), threshold)


@njit(parallel=True, cache=True)
def _add_norm_fwd(x, res, has_res, w, b, eps, is_rms, drop, seed, threshold, scale, round_sum,
                  y, res_out, s_out, save_s, mean, rstd, fx, fr, fro, table, n):
    rows, C = x.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        xbuf = np.empty(C, rstd.dtype)
        rbuf = np.empty(C, rstd.dtype)
        sbuf = np.empty(C, rstd.dtype)
        nbuf = np.empty(C, rstd.dtype)
        ybuf = np.empty(C, rstd.dtype)
        for i in range(lo, hi):
            v = load_row(x[i], xbuf, fx, table)  # read x
            s = out_row(res_out[i], sbuf)  # the sum, computed where residual_out lives
            if drop:
                dropout_row(v, i, seed, threshold, scale, s)
                if round_sum:
                    round_row(s, fx, table)  # the unfused dropout returns x's format
            else:
                s[:] = v
            if has_res:
                r = load_row(res[i], rbuf, fr, table)  # read residual
                for j in range(C):
                    s[j] = s[j] + r[j]
            if save_s:
                s_out[i, :] = s
            store_row(res_out[i], s, fro)  # write residual_out
            if round_sum and fx != NATIVE:
                nbuf[:] = s
                round_row(nbuf, fx, table)  # normalize the sum as x's format holds it
                nv = nbuf
            else:
                nv = s
            o = out_row(y[i], ybuf)
            if is_rms:
                rr = rms_stats(nv, C, eps)
                rms_apply(nv, rr, w, o)
            else:
                mu, rr = ln_stats(nv, eps)
                ln_apply(nv, mu, rr, w, b, o)
                mean[i] = mu
            store_row(y[i], o, fx)  # write y
            rstd[i] = rr


@njit(parallel=True, cache=True)
def _add_norm_bwd(nin, fn, round_x, dy, fdy, dres, has_dres, fdr, w, mean, rstd, is_rms, drop,
                  seed, threshold, scale, dx, fx, dr, has_dr, fr, part_w, part_b, table, n):
    rows, C = nin.shape
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        nbuf = np.empty(C, rstd.dtype)
        gbuf = np.empty(C, rstd.dtype)
        dbuf = np.empty(C, rstd.dtype)
        sbuf = np.empty(C, rstd.dtype)
        xbuf = np.empty(C, rstd.dtype)
        rbuf = np.empty(C, rstd.dtype)
        acc_w = np.zeros(C, rstd.dtype)  # float32 block partials (float64 for float64)
        acc_b = np.zeros(C, rstd.dtype)
        for i in range(lo, hi):
            v = load_row(nin[i], nbuf, fn, table)  # read the norm's input
            if round_x != NATIVE:  # round_sum with a float32 stream: the norm saw x's format
                nbuf[:] = v
                round_row(nbuf, round_x, table)
                v = nbuf
            g = load_row(dy[i], gbuf, fdy, table)  # read dy
            if is_rms:
                rms_bwd_row(v, g, w, rstd[i], C, acc_w, sbuf)
            else:
                ln_bwd_row(v, g, w, mean[i], rstd[i], acc_w, acc_b, sbuf)
            if has_dres:
                d = load_row(dres[i], dbuf, fdr, table)  # read dresidual_out
                for j in range(C):
                    sbuf[j] = sbuf[j] + d[j]
            if has_dr:
                o = out_row(dr[i], rbuf)
                o[:] = sbuf
                store_row(dr[i], o, fr)  # write dresidual
            o = out_row(dx[i], xbuf)
            if drop:
                dropout_row(sbuf, i, seed, threshold, scale, o)
            else:
                o[:] = sbuf
            store_row(dx[i], o, fx)  # write dx
            if (i - lo + 1) % ROW_BLOCK == 0 or i == hi - 1:
                flush(acc_w, part_w[c])
                flush(acc_b, part_b[c])


def add_norm_forward(x: np.ndarray, residual: np.ndarray | None, weight: np.ndarray,
                     bias: np.ndarray | None = None, *, eps: float = 1e-5, norm: str = "layer",
                     p_drop: float = 0.0, training: bool = False,
                     rng: np.random.Generator | None = None, round_sum: bool = True,
                     residual_in_fp32: bool = False, offset: float = 0.0
                     ) -> tuple[tuple[np.ndarray, np.ndarray], AddNormCache]:
    """``y = norm(dropout(x) + residual)`` and the new residual stream, fused; arguments, results
    and cache as ``normlab.functional.add_norm.add_norm_forward``."""
    args = check_add_norm(x, residual, weight, bias, eps, norm, p_drop, training, rng, round_sum,
                          residual_in_fp32, offset)
    x, residual, weight, bias, eps, round_sum, offset, ct, res_dt, key = args
    if not native(x.dtype) or x.size == 0 or norm not in FUSED:
        return _ref.forward_checked(*args, norm=norm)  # same key, so the same mask
    C = x.shape[-1]
    xk, fx = kernel_view(rows_of(x))
    rows = xk.shape[0]
    rk, fr = (kernel_view(rows_of(residual)) if residual is not None else (xk[:0], NATIVE))
    y = np.empty(x.shape, x.dtype)
    res_out = np.empty(x.shape, res_dt)
    save_s = not round_sum and res_dt != ct
    s = np.empty((rows if save_s else 0, C), ct)
    w = weight.astype(ct) + ct.type(offset)
    b = np.zeros(C, ct) if bias is None else bias.astype(ct)
    mean, rstd = np.empty(rows, ct), np.empty(rows, ct)
    seed, thr, scale = (key.seed, key.threshold, key.scale) if key is not None else (0, 0, 1.0)
    launch(_add_norm_fwd, x.size, xk, rk, residual is not None, w, b, ct.type(eps), norm == "rms",
                  key is not None, np.uint64(seed), np.uint64(thr), ct.type(scale), round_sum,
                  kernel_view(y.reshape(rows, C))[0], kernel_view(res_out.reshape(rows, C))[0],
                  s, save_s, mean, rstd, fx, fr, fmt_of(res_dt), F16_TABLE, nchunks(rows, x.size))
    stat = x.shape[:-1] + (1,)
    if round_sum:
        norm_in, round_to = res_out, (None if res_dt == x.dtype else x.dtype)
    elif res_dt == ct:
        norm_in, round_to = res_out, None
    else:
        norm_in, round_to = s.reshape(x.shape), None
    cache = AddNormCache(norm_in, round_to, mean.reshape(stat) if norm == "layer" else None,
                         rstd.reshape(stat), w, bias is not None, norm, key, x.dtype,
                         None if residual is None else res_dt,
                         (weight.dtype, None if bias is None else bias.dtype))
    return (y, res_out), cache


def add_norm_backward(dout: Any, cache: AddNormCache) -> Any:
    """Gradients ``(dx, dresidual, dweight, dbias)`` of the fused add + norm; as
    ``normlab.functional.add_norm.add_norm_backward``."""
    ck.cache(cache, AddNormCache, "add_norm")
    dy, dres = _ref._split_dout(dout)
    (norm_in, round_to, mean, rstd, w, has_bias, norm, key, x_dt, res_dt, (w_dt, b_dt)) = cache
    ck.same_shape(dy, "dy", norm_in.shape, "the shape of the forward's output")
    if dres is not None:
        ck.same_shape(dres, "dresidual_out", norm_in.shape, "the shape of residual_out")
    if not (native(x_dt) and native(norm_in.dtype)) or norm_in.size == 0 or norm not in FUSED:
        return _ref.add_norm_backward(dout, cache)
    ct = rstd.dtype
    C = norm_in.shape[-1]
    nk, fn = kernel_view(rows_of(norm_in))
    rows = nk.shape[0]
    dyk, fdy = grad_view(dy, ct)
    drk, fdr = grad_view(dres, ct) if dres is not None else (nk[:0], NATIVE)
    dx = np.empty(norm_in.shape, x_dt)
    dr = (np.empty(norm_in.shape, res_dt) if res_dt is not None
          else np.empty((0, C), x_dt))  # no residual: nothing to write
    n = nchunks(rows, norm_in.size)
    part_w, part_b = np.zeros((n, C)), np.zeros((n, C))
    seed, thr, scale = (key.seed, key.threshold, key.scale) if key is not None else (0, 0, 1.0)
    rows_stat = np.ascontiguousarray(rstd).reshape(rows)
    mean_k = rows_stat if mean is None else np.ascontiguousarray(mean).reshape(rows)
    round_x = fmt_of(round_to) if round_to is not None else NATIVE
    launch(_add_norm_bwd, norm_in.size, nk, fn, round_x, dyk, fdy, drk,
                  dres is not None, fdr, w, mean_k, rows_stat, norm == "rms", key is not None,
                  np.uint64(seed), np.uint64(thr), ct.type(scale),
                  kernel_view(dx.reshape(rows, C))[0], fmt_of(x_dt),
                  kernel_view(dr.reshape(-1, C))[0],
                  res_dt is not None, fmt_of(res_dt) if res_dt is not None else NATIVE,
                  part_w, part_b, F16_TABLE, n)
    dw = part_w.sum(axis=0).astype(ck.compute_dtype(w_dt))
    db = part_b.sum(axis=0).astype(ck.compute_dtype(b_dt)) if has_bias else None
    return dx, (dr if res_dt is not None else None), dw, db


def keep_mask(key: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The keep mask of a dropout key for an input of ``shape`` (kernel version of
    ``functional.add_norm.keep_mask``)."""
    C = shape[-1]
    out = np.empty((int(np.prod(shape[:-1], dtype=np.int64)), C), np.bool_)
    launch(keep_mask_kernel, out.size, np.uint64(key.seed), np.uint64(key.threshold), out)
    return out.reshape(shape)
