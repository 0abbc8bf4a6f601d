"""The two passes of ``normlab.precision.headroom`` over a tensor's bit patterns (numba).

``count_buckets`` counts the non-zero magnitudes by bucket; ``gather_buckets`` returns the
positions and buckets of the values in the buckets a table marks (the few values next to a
threshold, compared exactly afterwards). Their NumPy references are
``normlab.precision.headroom.count_buckets_reference`` and ``gather_buckets_reference``, tested
equal in ``tests/precision/test_headroom.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

SHIFT = 13  # a bucket keeps 10 mantissa bits of |x|: 2^18 buckets (normlab.precision.headroom)


@njit(cache=True)
def count_buckets(bits, shift, counts):  # pragma: no cover - compiled
    """counts[key] += 1 for each non-zero value; key = (bits >> SHIFT) - shift[i] (row i of
    ``bits`` shares a shift: 0 for plain counting, k * 2^10 for v = |x| / 2^k)."""
    n, block = bits.shape
    top = counts.size - 1
    for i in range(n):
        s = shift[i]
        for j in range(block):
            b = bits[i, j]
            if b != 0:
                counts[min(max((b >> SHIFT) - s, 0), top)] += 1


@njit(cache=True)
def gather_buckets(bits, shift, table):  # pragma: no cover - compiled
    """(positions, keys) of the non-zero values whose bucket ``table`` marks."""
    n, block = bits.shape
    top = table.size - 1
    m = 0
    for i in range(n):
        for j in range(block):
            b = bits[i, j]
            if b != 0 and table[min(max((b >> SHIFT) - shift[i], 0), top)]:
                m += 1
    pos = np.empty(m, np.int64)
    keys = np.empty(m, np.int64)
    m = 0
    for i in range(n):
        for j in range(block):
            b = bits[i, j]
            if b != 0:
                key = min(max((b >> SHIFT) - shift[i], 0), top)
                if table[key]:
                    pos[m] = i * block + j
                    keys[m] = key
                    m += 1
    return pos, keys
