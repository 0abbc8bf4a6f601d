"""The random Hadamard transform (``normlab.precision.rht`` and ``rht_inverse``) in one pass: bit
for bit the reference, which moves the rotated axis last, converts to float64, multiplies by the
signs, runs the butterflies stage by stage over the whole array and rounds once to float32.

Here each group of ``size`` values along the axis is gathered in place (any axis, any layout),
transformed with the same float64 butterflies in the same order (stage h = 1, 2, 4, ...: the pair
(i, i + h) becomes (a + b, a - b)), the signs applied before (``rht``) or after (the inverse),
divided by sqrt(size) and rounded to float32, and written where it came from.
``tests/kernels/test_kernel_hadamard.py`` compares both bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._common import PARALLEL_MIN, nchunks


@njit(cache=True)
def _groups(x, out, signs, inverse, root, a0, a1):
    """Rows a0..a1 of (A, N, B) x: every group of len(signs) along N, for every b."""
    n = signs.shape[0]
    N, B = x.shape[1], x.shape[2]
    v = np.empty(n, np.float64)
    for a in range(a0, a1):
        for g in range(0, N, n):
            for b in range(B):
                for k in range(n):
                    v[k] = np.float64(x[a, g + k, b])
                    if not inverse:
                        v[k] *= signs[k]
                h = 1
                while h < n:
                    for j in range(0, n, 2 * h):
                        for m in range(j, j + h):
                            p, q = v[m], v[m + h]
                            v[m], v[m + h] = p + q, p - q
                    h *= 2
                for k in range(n):
                    y = v[k] * signs[k] if inverse else v[k]
                    out[a, g + k, b] = np.float32(y / root)


@njit(parallel=True, cache=True)
def _groups_par(x, out, signs, inverse, root, chunks):
    A = x.shape[0]
    step = (A + chunks - 1) // chunks
    for c in prange(chunks):
        _groups(x, out, signs, inverse, root, c * step, min(A, (c + 1) * step))


def rht_float32(x: np.ndarray, axis: int, signs: np.ndarray, *, inverse: bool = False,
                threads: int | None = None) -> np.ndarray | None:
    """``rht(x, axis, size=len(signs))`` (or ``rht_inverse``) of float32 x with the float64
    ``signs`` (+-1), as a new float32 array of x's shape; None where it does not apply (x not
    float32, or the axis length not a multiple of the size: the reference's error). At most
    ``threads`` threads (None: numba's count; one: the calling thread)."""
    n = signs.shape[0]
    if x.dtype != np.float32 or x.ndim == 0 or x.size == 0 or x.shape[axis] % n:
        return None
    ax = axis % x.ndim
    A = math.prod(x.shape[:ax])
    B = math.prod(x.shape[ax + 1:])
    x3 = np.ascontiguousarray(x).reshape(A, x.shape[ax], B)
    y = np.empty_like(x3)
    s = np.ascontiguousarray(signs, np.float64)
    root = float(np.sqrt(n))
    chunks = min(A, nchunks(A, x.size) if threads is None else max(1, int(threads)))
    if x.size >= PARALLEL_MIN and chunks > 1:
        _groups_par(x3, y, s, inverse, root, chunks)
    else:
        _groups(x3, y, s, inverse, root, 0, A)
    return y.reshape(x.shape)
