"""Low-precision accumulation inside the kernels: the running sums of
``normlab.precision.accumulate`` in numba, bit for bit.

An ``Accumulation`` becomes a ``spec`` tuple (``acc_spec``): whether it is on, its chunk, and the
constants of rounding a float64 to its format (``normlab.precision.rounding.plan_quantize`` for
float64 input, the plan that ``quantize`` runs). ``acc_row_sum(v, k, spec, tmp)`` sums ``v[:k]``
as ``Accumulation.sum`` does: inside each chunk a running sum, every addition done in float64
rounded to odd (``_add_to_odd``, ``normlab.precision.accumulate.add_to_odd``'s arithmetic) and
rounded once more to the format by ``normlab.kernels.rounding``'s ``_round_one`` (the kernel of
``quantize``): the exact sum rounded once; the chunks' sums added the same way and rounded to
float32. The norm, softmax and
cross-entropy kernels call it when their ``accumulate=`` is not the default, and are then equal to
the reference bit for bit wherever their element-wise steps are (everywhere for the norms; for the
softmax wherever NumPy's exp and libm's agree: float64 under ``normlab.portable``).

``accumulate_sum`` is ``normlab.precision.accumulate_sum`` (same arguments, same result) for the
deterministic roundings; stochastic rounding runs the reference.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit, prange

from .. import _checks as ck
from ..precision import accumulate as _ref
from ..precision.accumulate import Accumulation
from ..precision.formats import FloatFormat, get_format
from ..precision.rounding import plan_quantize
from ._common import chunk_bounds, launch, nchunks
from .rounding import _MODES, _round_one

_FLOAT32 = get_format("float32")


@functools.cache
def _format_spec(fmt: FloatFormat, rounding: str, overflow: str | None) -> tuple:
    """The constants of rounding a float64 to ``fmt`` (``_round_one``'s arguments after b, r)."""
    q = plan_quantize(np.zeros(1), fmt, rounding=rounding, overflow=overflow)
    p, ovf, u = q.bits, q.ovf, np.uint64
    assert p is not None  # every format's normal range is within float64's
    return (64, p.P, p.d, p.variable, p.emin_b, p.cap, u(p.sign), u(p.implicit), u(p.inf),
            u(p.qnan), u(p.max_bits), u(p.min_normal_bits), u(p.tiny_bits), u(p.half_tiny_bits),
            float(p.q_scale), bool(fmt.zero), bool(fmt.signed), _MODES[q.rounding], u(ovf[0]),
            u(ovf[1]), u(ovf[2]), q.flush, q.sr_bits, fmt.signed_zero)


def acc_spec(acc: Accumulation | None) -> tuple:
    """The kernels' form of an accumulation: (on, chunk, the format's constants, float32's
    constants). ``on`` is False for None and the default (the kernels' own float32 sums); the
    tuple always has the same types, so one compiled kernel serves every accumulation."""
    if acc is None or acc.default:
        return (False, np.int64(0), np.int64(1)) + _format_spec(_FLOAT32, "nearest_even", None) \
            + _format_spec(_FLOAT32, "nearest_even", None)
    return ((True, np.int64(0 if acc.chunk is None else acc.chunk), np.int64(acc.every))
            + _format_spec(acc.format, acc.rounding, acc.overflow)
            + _format_spec(_FLOAT32, "nearest_even", None))


@njit(cache=True)
def _round_fmt(b, s):
    """The bits ``b`` of a float64 rounded to the accumulation's format (the constants
    spec[3:27]), as float64 bits."""
    return _round_one(b, np.uint64(0), s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],
                      s[12], s[13], s[14], s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22],
                      s[23], s[24], s[25], s[26])


@njit(cache=True)
def _round_f32(b, s):
    """The bits ``b`` of a float64 rounded to float32 (the constants spec[27:51]), as float64
    bits."""
    return _round_one(b, np.uint64(0), s[27], s[28], s[29], s[30], s[31], s[32], s[33], s[34],
                      s[35], s[36], s[37], s[38], s[39], s[40], s[41], s[42], s[43], s[44], s[45],
                      s[46], s[47], s[48], s[49], s[50])


@njit(cache=True)
def _add_to_odd(a, b, tmp):
    """a + b in float64 rounded to odd (``normlab.precision.accumulate.add_to_odd``): TwoSum's
    error e, then one float64 step toward the exact sum where e != 0 and the last bit is 0.
    Returns the sum and leaves its bits in ``tmp``."""
    s = a + b
    bv = s - a
    e = (a - (s - bv)) + (b - bv)
    tmp[0] = s
    if e != 0.0 and np.isfinite(s):
        bits = tmp.view(np.uint64)
        if (bits[0] & np.uint64(1)) == np.uint64(0):
            if (e < 0.0) == (s < 0.0):  # the exact sum is larger in magnitude
                bits[0] += np.uint64(1)
            else:
                bits[0] -= np.uint64(1)
    return tmp[0]


@njit(cache=True)
def acc_row_sum(v, k, spec, tmp):
    """sum(v[:k]) in the accumulation ``spec`` (on), as a float64 holding the result; ``tmp``: a
    1-element float64 scratch array.

    Each addition is rounded to the format. A running sum's partial is nearly always a normal
    number of the format, and the common rounding is to nearest even: that case is
    ``_round_one``'s arithmetic written out in the loop, with the constants read from ``spec``
    once (the same bits; six times faster than a call per addition, which hands the spec's
    tuple down each time); zero, subnormals, overflow, inf, NaN and the other modes go to
    ``_round_one``."""
    bits = tmp.view(np.uint64)
    chunk = spec[1] if spec[1] > 0 else max(k, 1)
    every = spec[2]
    one = np.uint64(1)
    near = spec[20] == 0 and spec[18] and spec[19]  # nearest even, a signed format with a zero
    sign_bit, implicit, inf, max_bits, lo = spec[9], spec[10], spec[11], spec[13], spec[14]
    ov_pos, ov_neg, signed_zero = spec[21], spec[22], spec[26]
    d = np.uint64(spec[5])
    mask = (one << d) - one
    half = mask >> one
    total = 0.0
    start = 0
    while start < k:
        acc = 0.0
        stop = min(k, start + chunk)
        for j in range(start, stop, every):
            part = np.float64(v[j])
            if every > 1:  # a float32 group sum, each addition rounded once
                hi = min(stop, j + every)
                if hi - j > 1:
                    part = np.float64(np.float32(part))
                for i in range(j + 1, hi):
                    part = np.float64(np.float32(_add_to_odd(part, np.float64(v[i]), tmp)))
            _add_to_odd(acc, part, tmp)
            b = bits[0]
            sign = b & sign_bit
            a = b ^ sign
            if near and lo <= a < inf:  # |x| from the smallest normal number up, finite
                out = (a + half + (((a | implicit) >> d) & one)) & ~mask
                if out > max_bits:  # past the largest finite value: the overflow mode's
                    out = ov_pos if ov_pos == ov_neg or sign == np.uint64(0) else ov_neg
                if signed_zero or out != np.uint64(0):
                    out |= sign
                bits[0] = out
            else:
                bits[0] = _round_fmt(b, spec)
            acc = tmp[0]
        if start == 0:
            total = acc
        else:
            _add_to_odd(total, acc, tmp)
            bits[0] = _round_f32(bits[0], spec)
            total = tmp[0]
        start += chunk
    return total


@njit(parallel=True, cache=True)
def _sum_rows(x, out, spec, n):
    rows = x.shape[0]
    for c in prange(n):
        lo, hi = chunk_bounds(c, n, rows)
        tmp = np.empty(1, np.float64)
        for i in range(lo, hi):
            out[i] = acc_row_sum(x[i], x.shape[1], spec, tmp)


def accumulate_sum(x: Any, fmt: Any, *, axis: int = -1, chunk: int | None = None,
                   promote: Any = "float32", rounding: str = "nearest_even",
                   rng: np.random.Generator | None = None) -> np.ndarray:
    """``normlab.precision.accumulate_sum`` in numba: same arguments, same result bit for bit."""
    if rounding == "stochastic" or get_format(promote, "promote") != _FLOAT32:
        return _ref.accumulate_sum(x, fmt, axis=axis, chunk=chunk, promote=promote,
                                   rounding=rounding, rng=rng)
    x = ck.float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension to sum along; got a scalar")
    ax = ck.integer(axis, "axis", lo=-x.ndim, hi=x.ndim - 1) % x.ndim
    acc = Accumulation(get_format(fmt, "fmt"), chunk, rounding)  # checks fmt, chunk, rounding
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.moveaxis(x, ax, -1).astype(np.float32)
    shape = terms.shape[:-1]
    rows = np.ascontiguousarray(terms.reshape(int(np.prod(shape)), terms.shape[-1]))
    out = np.empty(rows.shape[0])
    spec = acc_spec(acc)
    if not spec[0]:  # float32 without a chunk: one running float32 sum, still emulated
        spec = (True, np.int64(0), np.int64(1)) + spec[3:]
    launch(_sum_rows, rows.size, rows, out, spec, nchunks(rows.shape[0], rows.size))
    return out.reshape(shape)
