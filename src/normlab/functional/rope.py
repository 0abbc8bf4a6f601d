"""Rotary position embedding (RoPE, Su et al. 2021), in the "rotate half" layout of GPT-NeoX and
HF LLaMA: feature i of the first half and feature i of the second half form one rotated pair.

    theta_i = base^(-2i / D),  angle[t, i] = t * theta_i           i < D/2, t < T
    x = [x1, x2]  (halves of the last axis)
    y = [x1 cos - x2 sin,  x2 cos + x1 sin]
    dx = [dy1 cos + dy2 sin,  dy2 cos - dy1 sin]                   (the inverse rotation)

Frequency scaling for contexts longer than pretraining's (``rope_frequencies``):

    linear   theta_i / factor                                      (position interpolation)
    llama3   wavelength l_i = 2 pi / theta_i, against L_orig / low and L_orig / high:
             l_i > L_orig / low:  theta_i / factor                 (low frequencies: scaled)
             l_i < L_orig / high: theta_i                          (high frequencies: kept)
             between: (1 - s) theta_i / factor + s theta_i,  s = (L_orig / l_i - low) / (high - low)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from .._checks import Array

ROPE_SCALINGS = ("none", "linear", "llama3")


def rope_frequencies(D: int, base: float = 10000.0, scaling: str = "none", *, factor: float = 1.0,
                     low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                     original_max: int = 8192) -> Array:
    """The (D/2,) float64 angular frequencies theta_i = base^(-2i / D), scaled by ``scaling``
    ("none", "linear" or "llama3"; the formulas in the module docstring)."""
    if isinstance(D, bool) or not isinstance(D, (int, np.integer)) or D < 2 or D % 2:
        raise ValueError(f"D (the head width) must be an even integer >= 2 for RoPE; got {D!r}")
    if scaling not in ROPE_SCALINGS:
        raise ValueError(f"scaling must be one of {ROPE_SCALINGS}; got {scaling!r}")
    base = ck.positive(base, "base")
    theta = base ** (-np.arange(0, D, 2, dtype=np.float64) / D)  # (D/2,)
    if scaling == "linear":
        return theta / ck.positive(factor, "factor")
    if scaling == "llama3":
        factor = ck.positive(factor, "factor")
        low = ck.positive(low_freq_factor, "low_freq_factor")
        high = ck.positive(high_freq_factor, "high_freq_factor")
        if high <= low:
            raise ValueError(f"high_freq_factor ({high}) must exceed low_freq_factor ({low})")
        wavelen = 2 * np.pi / theta
        s = (original_max / wavelen - low) / (high - low)
        smooth = (1 - s) * theta / factor + s * theta
        return np.where(wavelen > original_max / low, theta / factor,
                        np.where(wavelen < original_max / high, theta, smooth))
    return theta


def rope_tables(T: int, D: int, base: float = 10000.0, dtype: DTypeLike = np.float64, *,
                inv_freq: Array | None = None) -> tuple[Array, Array]:
    """``(cos, sin)``, each (T, D/2), for positions 0..T-1 and an even head width D; ``inv_freq``
    (D/2,) replaces base^(-2i / D) (``rope_frequencies`` with a scaling)."""
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be an integer >= 1; got {T!r}")
    if isinstance(D, bool) or not isinstance(D, (int, np.integer)) or D < 2 or D % 2:
        raise ValueError(f"D (the head width) must be an even integer >= 2 for RoPE; got {D!r}")
    if inv_freq is None:
        inv_freq = rope_frequencies(D, base)  # (D/2,)
    else:
        ck.same_shape(ck.float_array(inv_freq, "inv_freq"), "inv_freq", (D // 2,), "(D/2,)")
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
