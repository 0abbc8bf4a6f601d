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


@njit(cache=True)
def count_buckets(bits, shift, counts, sh):  # pragma: no cover - compiled
    """counts[key] += 1 for each non-zero value; key = (bits >> sh) - shift[i] (a bucket keeps
    23 - sh mantissa bits; row i of ``bits`` shares a shift: 0 for plain counting,
    k * 2^(23 - sh) for v = |x| / 2^k), clipped to the table."""
    n, block = bits.shape
    top = counts.size - 1
    for i in range(n):
        s = shift[i]
        for j in range(block):
            b = bits[i, j]
            if b != 0:
                counts[min(max((b >> sh) - s, 0), top)] += 1


@njit(cache=True)
def gather_buckets(bits, shift, table, m, sh):  # pragma: no cover - compiled
    """(positions, keys) of the non-zero values whose bucket ``table`` marks; ``m`` is how many
    there are (the marked buckets' counts from ``count_buckets``), so one pass fills them."""
    n, block = bits.shape
    top = table.size - 1
    pos = np.empty(m, np.int64)
    keys = np.empty(m, np.int64)
    k = 0
    for i in range(n):
        s = shift[i]
        for j in range(block):
            b = bits[i, j]
            if b != 0:
                key = min(max((b >> sh) - s, 0), top)
                if table[key]:
                    pos[k] = i * block + j
                    keys[k] = key
                    k += 1
    return pos, keys


@njit(cache=True)
def first_pass(raw, last, sh, counts, block_max):  # pragma: no cover - compiled
    """One pass over a tensor's float32 bit patterns ``raw`` (its last axis ``last`` long):
    returns (|x| bits with the non-finite values as 0, how many are non-finite, how many are
    non-zero, the largest |x| bits); counts the non-zero magnitudes by bucket (``count_buckets``
    with shift 0) and fills ``block_max`` with each MX block's largest bits (blocks of 32 along
    the last axis, the rows padded)."""
    n = raw.size
    rows = n // last
    per_row = (last + 31) // 32
    top = counts.size - 1
    bits = np.empty(n, np.uint32)
    nonfinite = 0
    nonzero = 0
    largest = 0
    for r in range(rows):
        for c in range(last):
            i = r * last + c
            b = raw[i] & 0x7FFFFFFF
            if b >= 0x7F800000:
                nonfinite += 1
                b = 0
            bits[i] = b
            if b != 0:
                nonzero += 1
                largest = max(largest, b)
                counts[min(b >> sh, top)] += 1
                k = r * per_row + c // 32
                block_max[k] = max(block_max[k], b)
    return bits, nonfinite, nonzero, largest
