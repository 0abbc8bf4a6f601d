"""``quantize`` to any FloatFormat: a numba kernel bit-exact with
``normlab.precision.quantize`` (same arguments, same result), for every rounding mode.

The algorithm is the reference's (integer rounding of the bit pattern of |x|, see
``normlab.precision.rounding``), done element by element in one pass: read x, write the result.
The reference makes a dozen passes over 128K-element blocks. Both execute the same
``QuantizePlan`` (``normlab.precision.rounding.plan_quantize``: the checked arguments, the
per-format bit constants, the overflow results and the random draws), so they cannot drift
apart.

Stochastic rounding draws its random bits with NumPy from the caller's Generator, exactly as the
reference draws them (one uint64 per two float32 values, in order), and rounds in numba: for the
same generator state both return the same bits. Unbiasedness (E[q(x)] = x) is tested.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from ..precision import rounding as _ref
from ._common import launch

_BLOCK = 1 << 16  # elements per work item
_MODES = {"nearest_even": 0, "toward_zero": 1, "up": 2, "down": 3, "stochastic": 4,
          "nearest_away": 5, "nearest_toward_zero": 6}


@njit(cache=True, inline="always")
def _tiny_up_one(a, sign, r, W, k, mode, half_tiny_bits, q_scale):
    """Whether |x| (bits ``a``) below the smallest subnormal q rounds up to q."""
    if mode == 0 or mode == 6:  # nearest even, toward zero: a tie at q/2 goes to 0
        return a > half_tiny_bits
    if mode == 5:
        return a >= half_tiny_bits
    if mode == 1:
        return False
    if mode == 2:
        return a != np.uint64(0) and sign == np.uint64(0)
    if mode == 3:
        return a != np.uint64(0) and sign != np.uint64(0)
    # stochastic: up with probability x / q, in units of 2^-W (2^-k with k bits)
    if W == 32:
        xv = np.float64(np.array([np.uint32(a)]).view(np.float32)[0])
    else:
        xv = np.array([a]).view(np.float64)[0]
    if k < W:
        return (r >> np.uint64(W - k)) < np.uint64(math.floor(math.ldexp(xv * q_scale, k)))
    return r < np.uint64(np.ceil(math.ldexp(xv * q_scale, W)))  # float -> uint64


@njit(cache=True, inline="always")
def _round_one(b, r, W, P, d, variable, emin_b, cap, sign_bit, implicit, inf, qnan, max_bits,
               min_normal_bits, tiny_bits, half_tiny_bits, q_scale, fmt_zero, signed, mode,
               ov_pos, ov_neg, inf_result, flush, k, signed_zero):
    """Round the bits ``b`` of one float (W = 32 or 64 bits, in a uint64) to the format."""
    one = np.uint64(1)
    sign = b & sign_bit
    a0 = b ^ sign  # |x| as bits
    a = a0
    zero_in = (not fmt_zero) and a0 == np.uint64(0)
    if not fmt_zero and a < min_normal_bits:  # no zero (E8M0): (0, min) goes to min
        a = min_normal_bits
    if variable:  # below the smallest normal number the grid is coarser: a per-value shift
        e = a >> np.uint64(P)
        lo_e = np.uint64(emin_b - cap)
        if e < lo_e:
            e = lo_e
        if e > np.uint64(emin_b):
            e = np.uint64(emin_b)
        s = np.uint64(emin_b + d) - e
    else:
        s = np.uint64(d)
    mask = (one << s) - one
    if mode == 0:  # nearest even: + 2^(s-1) - 1 + lsb
        inc = (mask >> one) + (((a | implicit) >> s) & one)
    elif mode == 2 or mode == 3:  # up / down: away from zero on one side
        neg = sign >> np.uint64(W - 1)
        t = (neg - one) if mode == 2 else (np.uint64(0) - neg)
        inc = t & mask
    elif mode == 4:
        inc = r & mask
        if k < W and s > np.uint64(k):  # k-bit SR: the bits below 2^(s - k) cleared
            inc &= ~((one << (s - np.uint64(k))) - one)
    elif mode == 5:  # nearest away: + 2^(s-1)
        inc = (mask >> one) + one
    elif mode == 6:  # nearest toward zero: + 2^(s-1) - 1
        inc = mask >> one
    else:
        inc = np.uint64(0)
    out = (a + inc) & ~mask
    if out > max_bits:
        if ov_pos == ov_neg:
            out = ov_pos
        else:
            out = ov_pos if sign == np.uint64(0) else ov_neg
    if variable and fmt_zero and a < tiny_bits:  # below the smallest subnormal q: 0 or q
        up = _tiny_up_one(a, sign, r, W, k, mode, half_tiny_bits, q_scale)
        out = tiny_bits if up else np.uint64(0)
    if flush and out < min_normal_bits:
        out = np.uint64(0)
    if a0 >= inf:  # inf: the overflow mode's value; NaN: NaN
        out = inf_result if a0 == inf else qnan
    if zero_in:
        out = qnan
    if signed:
        if signed_zero or out != np.uint64(0):  # 'fnuz': no -0
            out |= sign
    elif sign != np.uint64(0) and (not fmt_zero or a != np.uint64(0)):
        out = qnan  # negative numbers have no code
    return out


@njit(parallel=True, cache=True)
def _quantize(bits, r, out, W, P, d, variable, emin_b, cap, sign_bit, implicit, inf, qnan,
              max_bits, min_normal_bits, tiny_bits, half_tiny_bits, q_scale, fmt_zero, signed,
              mode, ov_pos, ov_neg, inf_result, flush, k, signed_zero):
    n = bits.shape[0]
    nb = (n + _BLOCK - 1) // _BLOCK
    for blk in prange(nb):
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            ri = np.uint64(r[i]) if mode == 4 else np.uint64(0)
            out[i] = _round_one(np.uint64(bits[i]), ri, W, P, d, variable, emin_b, cap,
                                sign_bit, implicit, inf, qnan, max_bits, min_normal_bits,
                                tiny_bits, half_tiny_bits, q_scale, fmt_zero, signed, mode,
                                ov_pos, ov_neg, inf_result, flush, k, signed_zero)


_SIGN32, _INF32, _IMPLICIT32 = np.uint32(0x80000000), np.uint32(0x7F800000), np.uint32(1 << 23)


@njit(cache=True, inline="always")
def _round32(a, sign, ri, xi, mode, d, variable, emin_b, cap, max_bits, min_normal_bits,
             tiny_bits, half_tiny_bits, q_scale, ov_pos, ov_neg, inf_result, qnan, flush, k):
    """``_round_one`` for the bits ``a`` of |x| (a float32) and a signed format with a zero,
    in 32-bit integers; ``mode`` is a compile-time constant in every kernel that inlines it."""
    one, zero = np.uint32(1), np.uint32(0)
    s = np.uint32(d)
    if variable:  # below the smallest normal number: a coarser grid, a per-value shift
        t = min(max(np.int64(emin_b) - np.int64(a >> np.uint32(23)), 0), cap)
        s = np.uint32(d + t)
    mask = (one << s) - one
    if mode == 0:  # nearest even
        inc = (mask >> one) + (((a | _IMPLICIT32) >> s) & one)
    elif mode == 4:  # stochastic; k-bit: the bits below 2^(s - k) cleared
        inc = ri & mask
        if k < 32 and s > np.uint32(k):
            inc &= ~((one << (s - np.uint32(k))) - one)
    elif mode == 5:  # nearest away: + 2^(s-1)
        inc = (mask >> one) + one
    elif mode == 6:  # nearest toward zero: + 2^(s-1) - 1
        inc = mask >> one
    elif mode == 2:  # up: away from zero for x > 0
        inc = mask if sign == zero else zero
    elif mode == 3:  # down: away from zero for x < 0
        inc = mask if sign != zero else zero
    else:  # toward zero
        inc = zero
    o = (a + inc) & ~mask
    if o > max_bits:
        o = ov_pos if sign == zero else ov_neg
    if variable and a < tiny_bits:  # below the smallest subnormal q: 0 or q
        if mode == 0:
            up = a > half_tiny_bits
        elif mode == 5:
            up = a >= half_tiny_bits
        elif mode == 6:
            up = a > half_tiny_bits
        elif mode == 4 and k < 32:  # k bits: r's top k bits below floor(2^k |x| / q)
            rk = np.uint64(ri >> np.uint32(32 - k))
            up = rk < np.uint64(math.floor(np.float64(abs(xi)) * (q_scale * 2.0**k)))
        elif mode == 4:  # up with probability |x| / q, in units of 2^-32; |x| * 2^32 / q is
            # a float32 times a power of two below 2^32: exact, and so is its ceiling
            up = np.uint64(ri) < np.uint64(math.ceil(abs(xi) * np.float32(q_scale * 2.0**32)))
        elif mode == 2:
            up = a != zero and sign == zero
        elif mode == 3:
            up = a != zero and sign != zero
        else:
            up = False
        o = tiny_bits if up else zero
    if flush and o < min_normal_bits:
        o = zero
    if a >= _INF32:  # inf: the overflow mode's value; NaN: NaN
        o = inf_result if a == _INF32 else qnan
    return o


def _kernel32(mode: int) -> Any:
    """The float32 kernel of one rounding mode: ``_round32`` inlined with ``mode`` a constant, so
    LLVM drops the other modes' branches and vectorizes the loop (10x the general kernel). The
    loop over a block is its own function over whole arrays (views of the block): LLVM does not
    vectorize it inside a ``prange`` body, nor over ``range(lo, hi)``."""

    @njit(cache=True)
    def block(x, bits, r, out, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
              half_tiny_bits, q_scale, ov_pos, ov_neg, inf_result, qnan, flush, k, signed_zero):
        for i in range(bits.shape[0]):
            b = bits[i]
            sign = b & _SIGN32
            ri = r[i] if mode == 4 else np.uint32(0)
            o = _round32(b ^ sign, sign, ri, x[i], mode, d, variable, emin_b, cap, max_bits,
                         min_normal_bits, tiny_bits, half_tiny_bits, q_scale, ov_pos, ov_neg,
                         inf_result, qnan, flush, k)
            if signed_zero or o != np.uint32(0):  # 'fnuz' formats have no -0
                o |= sign
            out[i] = o

    @njit(parallel=True, cache=True)
    def kernel(x, bits, r, out, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
               half_tiny_bits, q_scale, ov_pos, ov_neg, inf_result, qnan, flush, k, signed_zero):
        n = bits.shape[0]
        for blk in prange((n + _BLOCK - 1) // _BLOCK):
            lo, hi = blk * _BLOCK, min(n, (blk + 1) * _BLOCK)
            rb = r[lo:hi] if mode == 4 else r
            block(x[lo:hi], bits[lo:hi], rb, out[lo:hi], d, variable, emin_b, cap, max_bits,
                  min_normal_bits, tiny_bits, half_tiny_bits, q_scale, ov_pos, ov_neg,
                  inf_result, qnan, flush, k, signed_zero)

    return kernel


_QUANTIZE32 = {mode: _kernel32(mode) for mode in _MODES.values()}


def quantize(x: Any, fmt: Any, *, rounding: str = "nearest_even",
             overflow: str | None = None, subnormals: bool = True,
             rng: np.random.Generator | None = None, sr_bits: int | None = None) -> np.ndarray:
    """Round every value of ``x`` once to the grid of ``fmt``; as
    ``normlab.precision.quantize`` (same arguments, bit-identical result)."""
    q = _ref.plan_quantize(x, fmt, rounding=rounding, overflow=overflow,
                           subnormals=subnormals, rng=rng, sr_bits=sr_bits)
    plan, xc, fmt_ = q.bits, q.xc, q.fmt
    if plan is None:  # float32 input, a format below float32's normal range: via float64
        return _ref.via_float64(q, quantize)
    if q.copy:
        return xc.copy()
    ovf, mode = q.ovf, _MODES[q.rounding]
    bits: np.ndarray = xc.reshape(-1).view(plan.uint)
    out = np.empty_like(bits)
    # the reference's draws, in order
    r = q.random_bits(bits.size) if q.rounding == "stochastic" else np.empty(0, plan.uint)
    if plan.uint is np.uint32 and fmt_.zero and fmt_.signed:
        u = np.uint32
        launch(_QUANTIZE32[mode], bits.size, xc.reshape(-1), bits, r, out, plan.d,
               plan.variable, plan.emin_b, plan.cap, u(plan.max_bits), u(plan.min_normal_bits),
               u(plan.tiny_bits), u(plan.half_tiny_bits), float(plan.q_scale), u(ovf[0]),
               u(ovf[1]), u(ovf[2]), u(plan.qnan), q.flush, q.sr_bits, fmt_.signed_zero)
        return out.view(xc.dtype).reshape(q.x.shape)
    u = np.uint64
    W = 8 * np.dtype(plan.uint).itemsize
    launch(_quantize, bits.size, bits, r, out, W, plan.P, plan.d, plan.variable, plan.emin_b,
           plan.cap, u(plan.sign), u(plan.implicit), u(plan.inf), u(plan.qnan),
           u(plan.max_bits), u(plan.min_normal_bits), u(plan.tiny_bits), u(plan.half_tiny_bits),
           float(plan.q_scale), bool(fmt_.zero), bool(fmt_.signed), mode,
           u(ovf[0]), u(ovf[1]), u(ovf[2]), q.flush, q.sr_bits, fmt_.signed_zero)
    return out.view(xc.dtype).reshape(q.x.shape)
