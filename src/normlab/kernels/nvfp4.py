"""TransformerEngine's NVFP4 quantize-dequantize in one fused pass: bit for bit
``normlab.precision.nvfp4_quantize(x, dialect="te").dequantize()``.

The reference (``precision.nvfp4``) makes a dozen passes over x: the block amax, the E4M3 block
scale, the scaled values, their E2M1 rounding, the decode and its product. Here every 1x16 block
(or 16x16 tile) is read once to find its amax and once more to round and decode it, with the
reference's float32 operations in its order (no fast-math): the block scale
``s_b = E4M3(min(amax * (S_enc / 6), max))``, the encode ``min(1 / (s_b / S_enc), max)``, the
element ``E2M1(x * encode)`` and the value ``element * float32(float32(s_b * amax_tensor) /
(6 * 448))``. E4M3 and E2M1 to nearest even use float32's own addition of a power of two whose
float32 spacing is the format's spacing in the value's binade (exact; a carry lands on the next
binade's first value); E2M1's stochastic rounding is ``normlab.torch``'s ``e2m1_stochastic`` rule
on the same random words in the same order (one 32-bit word per value, drawn as
``precision.rounding`` draws them).

What runs here: float32 x, the per-tensor global scale, 1x16 blocks along the last axis (nearest
even or stochastic rounding) or 16x16 tiles of the last two axes (nearest even), a finite
tensor amax at most ``AMAX_LIMIT`` (beyond it ``s_b * amax`` can overflow float32, which the
reference saturates in a separate pass). Anything else returns None and the caller runs the
reference. ``tests/kernels/test_kernel_nvfp4.py`` compares both bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from ..precision.nvfp4 import te_encode_scale
from ._common import PARALLEL_MIN, nchunks

F32 = np.float32
F32_MAX = F32(np.finfo(np.float32).max)
AMAX_LIMIT = 1e35  # s_b * amax stays finite: 448 * 1e35 < float32's max
_WORDS_BLOCK = 1 << 17  # the reference draws its random words per block of this many values


@njit(cache=True, inline="always")
def _e4m3(v: np.float32) -> np.float32:
    """Non-negative finite float32 v to E4M3, nearest even, saturating at 448."""
    if v >= F32(448.0):
        return F32(448.0)
    e = math.frexp(np.float64(v))[1] - 1  # v's binade (any value below 2^-6 for v = 0)
    big = np.float32(math.ldexp(1.0, max(e, -6) - 3 + 23))  # float32's spacing at big is
    return min((v + big) - big, F32(448.0))  #                  E4M3's at v


@njit(cache=True, inline="always")
def _e2m1(v: np.float32) -> np.float32:
    """float32 v to E2M1, nearest even, saturating at 6 (-0 kept)."""
    a = min(abs(v), F32(6.0))
    big = F32(2.0**22) if a < F32(2.0) else F32(2.0**23) if a < F32(4.0) else F32(2.0**24)
    return np.float32(np.copysign((a + big) - big, v))


@njit(cache=True, inline="always")
def _e2m1_sr(v: np.float32, r: np.int32) -> np.float32:
    """float32 v to E2M1, stochastically with the 32-bit word r (``e2m1_stochastic``)."""
    a = min(abs(v), F32(6.0))
    ulp = F32(0.5) if a < F32(2.0) else F32(1.0) if a < F32(4.0) else F32(2.0)
    u = a / ulp
    k = np.float32(np.floor(u))
    frac = u - k
    t = np.float32(r & 0x7FFFFF) * F32(2.0**-23)
    if a >= F32(1.0):
        t2 = t * F32(2.0)
        g = t2 - np.float32(np.floor(t2))
    else:
        g = t
    if a < F32(0.5):
        lim = np.int64(np.ceil(frac * F32(2.0**32)))
        q = F32(0.5) if (np.int64(r) & 0xFFFFFFFF) < lim else F32(0.0)
    else:
        q = (k + (F32(1.0) if frac + g >= F32(1.0) else F32(0.0))) * ulp
    return np.float32(np.copysign(q, v))


@njit(cache=True, inline="always")
def _scales(amax: np.float32, mult: np.float32, s_dec: np.float32, ga: np.float32,
            inv: np.float32) -> tuple[np.float32, np.float32]:
    """(encode, decode) of a block with amax ``amax``: ``precision.nvfp4._te_plain``."""
    s_b = _e4m3(min(amax * mult, F32_MAX))
    d = s_b * s_dec
    enc = F32_MAX if d == F32(0.0) else min(F32(1.0) / d, F32_MAX)
    return enc, (s_b * ga) * inv


@njit(cache=True, error_model="numpy")
def _rows_1d(x, out, words, stochastic, mult, s_dec, ga, inv, r0, r1):
    """Rows r0..r1 of (R, K) x: 1x16 blocks along K (row i's words from i * Kp, Kp = K padded
    to whole blocks: the reference rounds the padded blocks and draws for the padding too)."""
    K = x.shape[1]
    Kp = (K + 15) // 16 * 16
    for i in range(r0, r1):
        for j0 in range(0, K, 16):
            j1 = min(j0 + 16, K)
            amax = F32(0.0)
            for j in range(j0, j1):
                amax = max(amax, abs(x[i, j]))
            enc, dec = _scales(amax, mult, s_dec, ga, inv)
            for j in range(j0, j1):
                v = x[i, j] * enc
                q = _e2m1_sr(v, words[i * Kp + j]) if stochastic else _e2m1(v)
                out[i, j] = q * dec


@njit(cache=True, error_model="numpy")
def _tiles_2d(x, out, mult, s_dec, ga, inv, t0, t1):
    """Tile rows t0..t1 of (B, R, K) x (16 rows each, every matrix): 16x16 tiles."""
    R, K = x.shape[1], x.shape[2]
    nt = (R + 15) // 16
    for t in range(t0, t1):
        b, i0 = t // nt, (t % nt) * 16
        i1 = min(i0 + 16, R)
        for j0 in range(0, K, 16):
            j1 = min(j0 + 16, K)
            amax = F32(0.0)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    amax = max(amax, abs(x[b, i, j]))
            enc, dec = _scales(amax, mult, s_dec, ga, inv)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    out[b, i, j] = _e2m1(x[b, i, j] * enc) * dec


@njit(parallel=True, cache=True)
def _rows_1d_par(x, out, words, stochastic, mult, s_dec, ga, inv, chunks):
    R = x.shape[0]
    step = (R + chunks - 1) // chunks
    for c in prange(chunks):
        _rows_1d(x, out, words, stochastic, mult, s_dec, ga, inv, c * step,
                 min(R, (c + 1) * step))


@njit(parallel=True, cache=True)
def _tiles_2d_par(x, out, mult, s_dec, ga, inv, chunks):
    n = x.shape[0] * ((x.shape[1] + 15) // 16)
    step = (n + chunks - 1) // chunks
    for c in prange(chunks):
        _tiles_2d(x, out, mult, s_dec, ga, inv, c * step, min(n, (c + 1) * step))


@njit(cache=True)
def _amax(flat):
    """max |flat| (NaN if any value is NaN)."""
    m = F32(0.0)
    for k in range(flat.shape[0]):
        a = abs(flat[k])
        if not a <= m:  # a > m, or a NaN: NaN wins
            m = a
            if a != a:
                break
    return m


@njit(parallel=True, cache=True)
def _amax_par(flat, chunks):
    """max |flat| (NaN if any value is NaN), split over ``chunks``."""
    n = flat.shape[0]
    step = (n + chunks - 1) // chunks
    part = np.zeros(chunks, np.float32)
    for c in prange(chunks):
        m = F32(0.0)
        for k in range(c * step, min(n, (c + 1) * step)):
            a = abs(flat[k])
            if not a <= m:  # a > m, or a NaN: NaN wins
                m = a
                if a != a:
                    break
        part[c] = m
    out = F32(0.0)
    for c in range(chunks):
        if not part[c] <= out:
            out = part[c]
    return out


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    """n random 32-bit words as the reference draws them (``rounding._random_bits`` per block of
    ``_WORDS_BLOCK`` values), as int32."""
    parts = []
    for i in range(0, n, _WORDS_BLOCK):
        m = min(_WORDS_BLOCK, n - i)
        raw = rng.integers(0, np.iinfo(np.uint64).max, size=(m + 1) // 2, dtype=np.uint64,
                           endpoint=True)
        parts.append(raw.view(np.uint32)[:m])
    return np.concatenate(parts).view(np.int32) if parts else np.zeros(0, np.int32)


def nvfp4_te_qdq(x: np.ndarray, *, two_d: bool = False, rounding: str = "nearest_even",
                 rng: np.random.Generator | None = None, out: np.ndarray | None = None,
                 threads: int | None = None) -> np.ndarray | None:
    """TE's plain NVFP4 of float32 x with a per-tensor scale, quantized and dequantized.

    Args:
        x: float32 ndarray, C-contiguous; 1x16 blocks along the last axis, or with ``two_d``
            16x16 tiles of the last two axes (x at least 2-D).
        rounding: ``"nearest_even"``, or ``"stochastic"`` (1x16 blocks only) with ``rng``.
        out: a float32 array of x's shape to write into (may be x itself), or None.
        threads: at most this many threads (None: numba's count); one runs on the calling
            thread, as does any x under ``PARALLEL_MIN`` values.

    Returns:
        The values (float32, x's shape), bit for bit ``nvfp4_quantize(x, dialect="te",
        two_d=two_d, rounding=rounding, rng=rng).dequantize()`` with rng left where the
        reference leaves it; None (nothing drawn, nothing written) where this path does not
        apply (the module docstring).
    """
    if (x.dtype != np.float32 or not x.flags.c_contiguous or x.size == 0 or x.ndim < 1 or
            (two_d and (x.ndim < 2 or rounding != "nearest_even")) or
            rounding not in ("nearest_even", "stochastic") or
            (rounding == "stochastic" and rng is None)):
        return None
    flat = x.reshape(-1)
    chunks = nchunks(x.size, x.size) if threads is None else max(1, int(threads))
    par = x.size >= PARALLEL_MIN and chunks > 1
    ga = _amax_par(flat, chunks) if par else _amax(flat)
    if not (ga <= AMAX_LIMIT):  # NaN, inf or too large: the reference's separate passes
        return None
    ga = F32(ga)
    s_enc = te_encode_scale(np.asarray(ga, F32)).reshape(())[()]
    mult = F32(s_enc * F32(1.0 / 6.0))
    s_dec = F32(F32(1.0) / s_enc)
    inv = F32(1.0 / (6 * 448))
    y = np.empty_like(x) if out is None else out
    if two_d:
        x3, y3 = x.reshape(-1, *x.shape[-2:]), y.reshape(-1, *x.shape[-2:])
        n = x3.shape[0] * ((x3.shape[1] + 15) // 16)
        if par:
            _tiles_2d_par(x3, y3, mult, s_dec, ga, inv, chunks)
        else:
            _tiles_2d(x3, y3, mult, s_dec, ga, inv, 0, n)
        return y
    x2, y2 = x.reshape(-1, x.shape[-1]), y.reshape(-1, x.shape[-1])
    stochastic = rounding == "stochastic"
    padded = x2.shape[0] * ((x2.shape[1] + 15) // 16 * 16)
    words = _words(rng, padded) if stochastic and rng is not None else np.zeros(1, np.int32)
    if par:
        _rows_1d_par(x2, y2, words, stochastic, mult, s_dec, ga, inv, chunks)
    else:
        _rows_1d(x2, y2, words, stochastic, mult, s_dec, ga, inv, 0, x2.shape[0])
    return y


def applies(scaling: Any, rounding: str, sr_bits: int | None) -> bool:
    """Whether an ``NVFP4Scaling`` with this rounding runs here (its x permitting)."""
    s = scaling
    return (getattr(s, "kind", "") == "nvfp4" and s.dialect == "te" and
            s.global_scale == "tensor" and s.four_over_six is None and s.e4m3_max == 448 and
            sr_bits is None and (s.two_d or s.axis == -1) and
            (rounding == "nearest_even" or (rounding == "stochastic" and not s.two_d)))
