"""The normalized Transformer's ops (nGPT: Loshchilov, Hsieh, Sun & Ginsburg 2024, "nGPT:
Normalized Transformer with Representation Learning on the Hypersphere", arXiv 2410.01131,
section 2; the official code github.com/NVIDIA/ngpt ``model.py``, ``Block.forward`` and
``Block.justnorm``):

    Norm(x)       = x / ||x||                      over the last axis (``l2_normalize``)
    update        h <- Norm(Norm(h) + |a| (Norm(f) - Norm(h)))
                                                   the residual step towards the branch output
                                                   f = F(h), a the per-channel eigen learning
                                                   rate (the code's ``A_norm + lr * (B_norm -
                                                   A_norm)`` with ``lr = torch.abs(...)``;
                                                   "normally, normalization is not needed" of h,
                                                   which the code normalizes all the same)
    qk            s * Norm(RoPE(x))                q or k (B, H, T, D) after RoPE, per head, times
                                                   the per-head, per-channel s_qk (H, D) (the
                                                   code's ``sqk * self.justnorm(q)``)

``justnorm`` divides by the norm with no eps; here the norm is clamped below at ``EPS`` (1e-12,
``torch.nn.functional.normalize``'s), so that a zero row gives zeros and not NaN; every other row
is the code's. The parameters' stored-versus-effective scales (``alpha = a_p * a_init / a_scale``)
are the modules' (``models.block``), these ops take the effective values.

Backward, with y = x / n, n = ||x|| (n > EPS):

    dx = (dy - y <y, dy>) / n
    update: r = hn + |a| (fn - hn), dr = Norm'(dy); dfn = |a| dr; dhn = (1 - |a|) dr;
            da = sign(a) sum_rows dr (fn - hn)
    qk: dn = s dy, ds = sum_{B, T} dy n; dx = RoPE'(Norm'(dn))
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .rope import RopeCache, rope_backward, rope_forward

EPS = 1e-12  # the smallest norm divided by (torch.nn.functional.normalize's eps)


class L2Cache(NamedTuple):
    """Saved: the output y = x / n and the clamped norm n, (..., 1)."""

    y: Array  # (..., C) x / n, compute dtype
    n: Array  # (..., 1) max(||x||, EPS), compute dtype
    dtype: np.dtype  # the output dtype (x's)


def l2_normalize_forward(x: Array) -> tuple[Array, L2Cache]:
    """``x / max(||x||, EPS)`` over the last axis (nGPT's ``justnorm``).

    Args:
        x: float array (..., C).

    Returns:
        out (x's shape and dtype); cache for ``l2_normalize_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    xc = x.astype(ck.compute_dtype(x.dtype), copy=False)
    # the sum of squares accumulated in float64 and its root rounded once (torch's float32 norm
    # accumulates in float32: this one is the more accurate)
    sq = np.sum(np.square(xc, dtype=np.float64), axis=-1, keepdims=True)
    n = np.maximum(np.sqrt(sq), EPS).astype(xc.dtype)
    y = xc / n
    return ck.out_cast(y, x.dtype), L2Cache(y, n, x.dtype)


def l2_normalize_backward(dout: Array, cache: L2Cache) -> tuple[Array]:
    """``(dx,)`` of ``l2_normalize_forward``: (dy - y <y, dy>) / n (dy / n where the norm was
    clamped)."""
    ck.cache(cache, L2Cache, "l2_normalize")
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", cache.y.shape, "the shape of x")
    y, n = cache.y, cache.n
    dy = dout.astype(y.dtype, copy=False)
    proj = np.sum(y * dy, axis=-1, keepdims=True, dtype=np.float64).astype(y.dtype)  # (..., 1)
    proj = np.where(n > y.dtype.type(EPS), proj, y.dtype.type(0))
    return (ck.out_cast((dy - y * proj) / n, cache.dtype),)


class UpdateCache(NamedTuple):
    """Saved: the three normalizations' caches and the effective rate a."""

    h: L2Cache  # Norm(h)
    f: L2Cache  # Norm(f)
    r: L2Cache  # Norm(r), the output
    alpha: Array  # (C,) a, compute dtype (signed; |a| is used)
    dtype: np.dtype  # h's dtype


def ngpt_update_forward(h: Array, f: Array, alpha: Array) -> tuple[Array, UpdateCache]:
    """nGPT's residual update ``Norm(Norm(h) + |alpha| (Norm(f) - Norm(h)))``.

    Args:
        h: float array (..., C): the hidden state (on the unit sphere, up to rounding).
        f: float array of h's shape: the branch output (attention's or the MLP's).
        alpha: float array (C,): the effective eigen learning rates (their absolute values
            are used, as the official code's ``torch.abs``).

    Returns:
        out (h's shape and dtype); cache for ``ngpt_update_backward``.
    """
    h = ck.float_array(h, "h")
    f = ck.float_array(f, "f")
    alpha = ck.float_array(alpha, "alpha")
    ck.at_least_nd(h, "h", 1)
    ck.same_shape(f, "f", h.shape, "the shape of h")
    ck.same_shape(alpha, "alpha", h.shape[-1:], "(C,), h's last axis")
    ct = ck.compute_dtype(h.dtype)
    a = alpha.astype(ct, copy=False)
    hn, ch = l2_normalize_forward(h.astype(ct, copy=False))
    fn, cf = l2_normalize_forward(f.astype(ct, copy=False))
    y, cr = l2_normalize_forward(hn + np.abs(a) * (fn - hn))
    return ck.out_cast(y, h.dtype), UpdateCache(ch, cf, cr, a, h.dtype)


def ngpt_update_backward(dout: Array, cache: UpdateCache) -> tuple[Array, Array, Array]:
    """``(dh, df, dalpha)`` of ``ngpt_update_forward``: dh, df in h's dtype, dalpha (C,) in
    alpha's compute dtype, reduced over every row in float64."""
    ck.cache(cache, UpdateCache, "ngpt_update")
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", cache.r.y.shape, "the shape of h")
    a = cache.alpha
    (dr,) = l2_normalize_backward(dout.astype(a.dtype, copy=False), cache.r)
    hn, fn = cache.h.y, cache.f.y
    dalpha = (ck.reduce_rows(dr * (fn - hn)) * np.sign(a)).astype(a.dtype)
    (dh,) = l2_normalize_backward((1 - np.abs(a)) * dr, cache.h)
    (df,) = l2_normalize_backward(np.abs(a) * dr, cache.f)
    return ck.out_cast(dh, cache.dtype), ck.out_cast(df, cache.dtype), dalpha


class QKCache(NamedTuple):
    """Saved: RoPE's cache (None without), the normalization's, and the scale s (H, 1, D)."""

    rope: RopeCache | None
    norm: L2Cache
    s: Array  # (H, 1, D) compute dtype
    dtype: np.dtype  # x's dtype


def ngpt_qk_forward(x: Array, s: Array, *, rope: tuple[Array, Array] | None = None
                    ) -> tuple[Array, QKCache]:
    """nGPT's query or key: ``s * Norm(RoPE(x))`` per head (the official code's order: RoPE,
    then ``sqk * justnorm(q)``).

    Args:
        x: float array (B, H, T, D): q or k split into heads.
        s: float array (H, D): the effective s_qk of each head's channels.
        rope: ``(cos, sin)`` tables (T, D/2) each, or None for no rotation.

    Returns:
        out (x's shape and dtype); cache for ``ngpt_qk_backward``.
    """
    x = ck.float_array(x, "x")
    s = ck.float_array(s, "s")
    ck.at_least_nd(x, "x", 4)
    _B, H, _T, D = x.shape
    ck.same_shape(s, "s", (H, D), "(H, D) of x (B, H, T, D)")
    ct = ck.compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)
    rc = None
    if rope is not None:
        xc, rc = rope_forward(xc, *rope)
    n, cn = l2_normalize_forward(xc)
    sc = s.astype(ct, copy=False).reshape(H, 1, D)
    return ck.out_cast(sc * n, x.dtype), QKCache(rc, cn, sc, x.dtype)


def ngpt_qk_backward(dout: Array, cache: QKCache) -> tuple[Array, Array]:
    """``(dx, ds)`` of ``ngpt_qk_forward``: dx (B, H, T, D) in x's dtype, ds (H, D) reduced over
    the batch and the positions in float64, in the compute dtype."""
    ck.cache(cache, QKCache, "ngpt_qk")
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", cache.norm.y.shape, "(B, H, T, D) of x")
    dy = dout.astype(cache.s.dtype, copy=False)
    ds = np.sum(dy * cache.norm.y, axis=(0, 2), dtype=np.float64).astype(cache.s.dtype)
    (dx,) = l2_normalize_backward(cache.s * dy, cache.norm)
    if cache.rope is not None:
        dx = rope_backward(dx, cache.rope)[0]
    return ck.out_cast(dx, cache.dtype), ds


def normalize_rows_(w: Array, axis: int) -> None:
    """Put every vector of ``w`` along ``axis`` on the unit sphere, in place (the official
    ``train.py``'s ``normalize_matrices``: ``justnorm(W, idim)`` after each optimizer step). The
    norm is computed in float64 and the quotient rounded once to w's dtype."""
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f":
        raise TypeError(f"w must be a float ndarray; got {type(w).__name__}")
    w64 = w.astype(np.float64)
    n = np.maximum(np.sqrt(np.sum(w64 * w64, axis=axis, keepdims=True)), EPS)
    w[...] = (w64 / n).astype(w.dtype)
