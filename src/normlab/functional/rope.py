"""Rotary position embedding (RoPE, Su et al. 2021), in the "rotate half" layout of GPT-NeoX and
HF LLaMA: feature i of the first half and feature i of the second half form one rotated pair.

    theta_i = base^(-2i / D),  angle[t, i] = t * theta_i           i < D/2, t < T
    x = [x1, x2]  (halves of the last axis)
    y = [x1 cos - x2 sin,  x2 cos + x1 sin]
    dx = [dy1 cos + dy2 sin,  dy2 cos - dy1 sin]                   (the inverse rotation)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


def rope_tables(T: int, D: int, base: float = 10000.0, dtype=np.float64) -> tuple[Array, Array]:
    """``(cos, sin)``, each (T, D/2), for positions 0..T-1 and an even head width D."""
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be an integer >= 1; got {T!r}")
    if isinstance(D, bool) or not isinstance(D, (int, np.integer)) or D < 2 or D % 2:
        raise ValueError(f"D (the head width) must be an even integer >= 2 for RoPE; got {D!r}")
    base = ck.positive(base, "base")
    inv_freq = base ** (-np.arange(0, D, 2, dtype=np.float64) / D)  # (D/2,)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq  # (T, D/2)
    return np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)


class RopeCache(NamedTuple):
    """Saved: the tables (the rotation is linear, so the input is not needed)."""

    cos: Array  # (T, D/2) compute dtype
    sin: Array  # (T, D/2) compute dtype
    dtype: np.dtype  # x's dtype


def rope_forward(x: Array, cos: Array, sin: Array) -> tuple[Array, RopeCache]:
    """Rotate pairs of features of ``x`` by position-dependent angles.

    Args:
        x: (..., T, D) float array, D even.
        cos, sin: (T, D/2) tables from ``rope_tables``.

    Returns:
        out: (..., T, D) in x's dtype; cache for ``rope_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 2)
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"the last axis of x must be even for RoPE; got D = {D}")
    for name, tab in (("cos", cos), ("sin", sin)):
        ck.same_shape(ck.float_array(tab, name), name, (T, D // 2), "(T, D/2) of x")
    ct = ck.compute_dtype(x.dtype)
    c, s = cos.astype(ct, copy=False), sin.astype(ct, copy=False)
    xc = x.astype(ct, copy=False)
    x1, x2 = xc[..., : D // 2], xc[..., D // 2 :]
    out = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)  # (..., T, D)
    return ck.out_cast(out, x.dtype), RopeCache(c, s, x.dtype)


def rope_backward(dout: Array, cache: RopeCache) -> tuple[Array, None, None]:
    """Gradient of RoPE: ``(dx, None, None)`` (the tables are constants)."""
    ck.cache(cache, RopeCache, "rope")
    c, s, dtype = cache
    dout = ck.float_array(dout, "dout")
    half = c.shape[-1]
    ck.at_least_nd(dout, "dout", 2)
    ck.same_shape(dout, "dout", (*dout.shape[:-2], c.shape[0], 2 * half), "(..., T, D) of x")
    dy = dout.astype(c.dtype, copy=False)
    dy1, dy2 = dy[..., :half], dy[..., half:]
    dx = np.concatenate([dy1 * c + dy2 * s, dy2 * c - dy1 * s], axis=-1)
    return ck.out_cast(dx, dtype), None, None
