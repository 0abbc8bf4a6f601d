"""The two passes of ``normlab.precision.headroom.tensor_stats`` over a tensor's float32 bit
patterns (numba).

``extremes`` finds the largest and the smallest non-zero finite magnitude. ``census`` then
reads the tensor once more, in chunks that stay in the L1 cache, sums the squares for the RMS
(float64, in an order that does not depend on the machine) and counts, exactly: the non-finite
and the non-zero values, the non-zero magnitudes by float32 exponent
field, how many magnitudes reach each of a set of bounds (``|x| > t`` is ``|x| >= B`` for one
float32 B), and per MX block of 32 along the last axis the values that overflow, survive and
stay normal after the block's shared scale. Both release the GIL: tensors can be measured on
several threads at once. Their NumPy reference is ``normlab.precision.headroom``'s
``impl="reference"``, tested equal in ``tests/precision/test_headroom.py``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_CHUNK = 1024  # values per chunk of census: 4 KiB, in L1
_SMALLEST = np.float32(2.0**-149)  # the smallest positive float32


@njit(cache=True, nogil=True)
def extremes(raw):  # pragma: no cover - compiled
    """(largest, smallest non-zero) finite |x| bit patterns of the float32 bits ``raw``
    (0xFFFFFFFF as the smallest where no value is finite and non-zero)."""
    largest = 0
    smallest = 0xFFFFFFFF
    for i in range(raw.size):
        b = raw[i] & 0x7FFFFFFF
        b = b if b < 0x7F800000 else 0
        largest = max(largest, b)
        smallest = min(smallest, b if b != 0 else 0xFFFFFFFF)
    return largest, smallest


@njit(cache=True)
def _squares(rows, lanes):  # pragma: no cover - compiled
    """lanes[j] += rows[i, j]^2 in float64 for each row i in turn (each square exact)."""
    a0, a1, a2, a3 = lanes[0], lanes[1], lanes[2], lanes[3]
    a4, a5, a6, a7 = lanes[4], lanes[5], lanes[6], lanes[7]
    for i in range(rows.shape[0]):
        r = rows[i]
        a0 += np.float64(r[0]) ** 2
        a1 += np.float64(r[1]) ** 2
        a2 += np.float64(r[2]) ** 2
        a3 += np.float64(r[3]) ** 2
        a4 += np.float64(r[4]) ** 2
        a5 += np.float64(r[5]) ** 2
        a6 += np.float64(r[6]) ** 2
        a7 += np.float64(r[7]) ** 2
    lanes[0], lanes[1], lanes[2], lanes[3] = a0, a1, a2, a3
    lanes[4], lanes[5], lanes[6], lanes[7] = a4, a5, a6, a7


@njit(cache=True)
def _floor_log2(b):  # pragma: no cover - compiled
    """floor(log2 v) of a positive finite float32 v given by its bits ``b``."""
    if b >= 0x00800000:
        return (b >> 23) - 127
    e = -150
    while b:
        b >>= 1
        e += 1
    return e


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def census(raw, last, bounds, above, exps, mx_bits, mx_plus, mx_emax, e_fast,
           mx_counts):  # pragma: no cover - compiled
    """One pass over the float32 values ``raw`` (last axis ``last`` long); the non-finite
    values read as 0. Returns (non-finite count, non-zero count, the sum of the squares) and
    adds into: ``above[j]`` the values with |x| >= ``bounds[j]`` (float32); ``exps[e]`` the
    non-zero values of exponent field e; ``mx_counts[f, i]`` the values with v = |x| / 2^k >=
    t_fi, k = max(floor(log2 amax_block) - mx_emax[f], -127), t_fi a normal float32 given by
    its bits ``mx_bits[f, i]`` (``>`` where ``mx_plus[f, i]`` is 1); ``e_fast``: the smallest
    floor(log2 amax_block) for which no k is clamped and every t_fi 2^k is normal.

    The magnitudes are copied into a chunk of whole MX blocks (each row's last block padded
    with zeros, which no count includes) and counted there while they are in L1, in float32
    lanes (exact: a chunk holds fewer than 2^24 values). The squares are summed in float64 in
    an order that does not depend on the machine: in the rows padded to whole blocks, lane j
    (0..7) adds the squares at the positions j, j + 8, ... in turn; the lanes are then added
    as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7))."""
    n = raw.size
    rows = n // last
    buf = np.zeros(_CHUNK, np.float32)
    by8 = buf.reshape((_CHUNK // 8, 8))
    lanes = np.zeros(8)
    bits = buf.view(np.int32)
    buf2 = buf.reshape((_CHUNK // 32, 32))  # the chunk's blocks
    bits2 = buf2.view(np.int32)
    rel = np.zeros(_CHUNK, np.int32)
    rel2 = rel.reshape((_CHUNK // 32, 32))
    tops = np.zeros(_CHUNK // 32, np.float32)
    hist = np.zeros(4 * 256, np.int64)
    nonfinite = 0
    nonzero = 0
    fill = 0
    padded = 0
    for r in range(rows):
        c0 = 0
        while c0 < last:
            take = min(last - c0, _CHUNK - fill)
            nonfinite += _fill(raw[r * last + c0:r * last + c0 + take], buf[fill:fill + take])
            fill += take
            c0 += take
            if c0 == last:
                while fill % 32:  # the row's last block, padded
                    buf[fill] = 0
                    fill += 1
                    padded += 1
            if fill == _CHUNK or (r == rows - 1 and c0 == last):
                nonzero += _chunk(buf[:fill], bits[:fill], bounds, above, hist)
                _squares(by8[:fill // 8], lanes)
                _mx_chunk(buf2, bits2, rel2, rel, fill // 32, tops, mx_bits, mx_plus, mx_emax,
                          e_fast, mx_counts)
                fill = 0
    for t in range(4):
        for e in range(256):
            exps[e] += hist[t * 256 + e]
    exps[0] -= n + padded - nonzero  # zeros, non-finite values and padding: exponent field 0
    squares = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5])
                                                                 + (lanes[6] + lanes[7]))
    return nonfinite, nonzero, squares


@njit(cache=True, fastmath={"reassoc"})
def _fill(src, dst):  # pragma: no cover - compiled
    """dst = |src| with the non-finite values as 0; returns how many were non-finite."""
    bad = np.float32(0)
    for c in range(src.size):
        v = abs(src[c])
        ok = v < np.inf  # False for inf and NaN
        bad += np.float32(1) - np.float32(ok)
        dst[c] = v if ok else np.float32(0)
    return int(bad)


@njit(cache=True, fastmath={"reassoc"})
def _chunk(buf, bits, bounds, above, hist):  # pragma: no cover - compiled
    """The element-wise counts of one chunk of whole blocks (``bits``: ``buf`` as int32; four
    interleaved tables in ``hist``, no store-to-load chain when neighbours share a field,
    indexed unsigned); returns its non-zero count."""
    for c in range(0, bits.size, 4):
        hist[np.uint32(bits[c]) >> 23] += 1
        hist[256 + (np.uint32(bits[c + 1]) >> 23)] += 1
        hist[512 + (np.uint32(bits[c + 2]) >> 23)] += 1
        hist[768 + (np.uint32(bits[c + 3]) >> 23)] += 1
    for j in range(bounds.size):
        above[j] += _count(buf, bounds[j])
    return _count(buf, _SMALLEST)


@njit(cache=True, fastmath={"reassoc"})
def _count(buf, t):  # pragma: no cover - compiled
    """How many of buf are >= t (buf and t both float32 or both int32; float32 lanes, exact
    below 2^24 values)."""
    s = np.float32(0)
    for c in range(buf.size):
        s += np.float32(buf[c] >= t)
    return int(s)


@njit(cache=True)
def _scaled_bound(t_bits, plus, k):  # pragma: no cover - compiled
    """The bits B of ``|x| >= B`` for the test t 2^k, t a normal float32 (bits ``t_bits``),
    strict where ``plus`` is 1: t's bits with k added to the exponent while the result is
    normal; below, the subnormal multiple of 2^-149 at or under t 2^k, plus one when the test
    is strict or inexact."""
    if (t_bits >> 23) + k >= 1:
        return min(t_bits + (k << 23) + plus, 0x7F800000)
    frac = 1.0 + (t_bits & 0x7FFFFF) / 8388608.0  # t = frac 2^(E - 127)
    q = math.ldexp(frac, (t_bits >> 23) - 127 + k + 149)  # t 2^k in units of 2^-149
    fl = math.floor(q)
    return np.int64(fl) + (1 if plus or fl != q else 0)


@njit(cache=True, fastmath={"reassoc"})
def _mx_chunk(buf, bits, rel, rel_flat, nb, tops, mx_bits, mx_plus, mx_emax, e_fast,
              mx_counts):  # pragma: no cover - compiled
    """The MX counts of the first ``nb`` blocks of a chunk (``buf``, (n, 32); ``bits``: ``buf``
    as int32). A block whose floor(log2 amax) = e >= ``e_fast`` is counted on rel = bits -
    (e << 23), where each test is one constant for every block; the few others
    (amax below about 2^-100) one by one with ``_scaled_bound``. ``rel`` (like ``bits``) and
    ``tops`` (n,): scratch."""
    for blk in range(nb):
        t = np.float32(0)
        for c in range(32):
            t = max(t, buf[blk, c])
        tops[blk] = t
    top_bits = tops.view(np.int32)
    for blk in range(nb):
        tb = top_bits[blk]
        e = _floor_log2(tb) if tb else -1000
        if e >= e_fast:
            off = e << 23
            for c in range(32):
                b = bits[blk, c]
                rel[blk, c] = b - off if b != 0 else -0x80000000
        else:
            for c in range(32):
                rel[blk, c] = -0x80000000
            if tb:
                _mx_block(buf[blk], e, mx_bits, mx_plus, mx_emax, mx_counts)
    for f in range(mx_emax.size):
        for i in range(3):
            # v >= t 2^k  <=>  bits >= t_bits + ((e - emax) << 23) (+1)  <=>  rel >= cst
            cst = np.int32(mx_bits[f, i] - (mx_emax[f] << 23) + mx_plus[f, i])
            mx_counts[f, i] += _count(rel_flat[:nb * 32], cst)


@njit(cache=True)
def _mx_block(seg, e, mx_bits, mx_plus, mx_emax, mx_counts):  # pragma: no cover - compiled
    """The MX counts of one block of tiny values (floor(log2 amax) = e), test by test."""
    sb = seg.view(np.int32)
    for f in range(mx_emax.size):
        k = max(e - mx_emax[f], -127)
        for i in range(3):
            bound = _scaled_bound(mx_bits[f, i], mx_plus[f, i], k)
            for c in range(sb.size):
                mx_counts[f, i] += sb[c] >= bound
