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

Float32 input, what training rounds tens of thousands of times per run, has kernels of its own
for the deterministic modes (``_const32``): nearest_even's with the plan's constants compiled in,
one small kernel per format, overflow and flush setting (compiled at its first use, then loaded
from numba's disk cache), the other modes' in uint32 arithmetic with the constants as arguments.
They give ``_round32``'s bits for all 2^32 float32 inputs
(``benchmarks/exhaustive_quantize_kernel.py``).
Below ``_common.PARALLEL_MIN`` elements every kernel runs on the calling thread, called directly:
the parallel launch cost about 17 us a call, more than rounding 16K values. And a call that
repeats an earlier call's arguments, with x a C-contiguous float32 ndarray, skips the checks and
the plan, done the first time: about 2 us for 256 values, from 25.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit, prange

from ..precision import rounding as _ref
from ._common import PARALLEL_MIN

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


def _kernel32(mode: int) -> tuple[Any, Any]:
    """The float32 kernels of one rounding mode: ``_round32`` inlined with ``mode`` a constant, so
    LLVM drops the other modes' branches and vectorizes the loop (10x the general kernel). The
    loop over a block is its own function over whole arrays (views of the block): LLVM does not
    vectorize it inside a ``prange`` body, nor over ``range(lo, hi)``. Returns (block, kernel):
    below PARALLEL_MIN elements ``block`` is called on the whole array, on the calling thread.
    (``kernel`` holds ``block`` in a closure cell, so numba's disk cache misses it in every new
    process and it compiles again, about a second: ``_const_kernels32`` says why.)"""

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

    return block, kernel


# stochastic rounding's (the deterministic modes run _const32's kernels)
_STOCHASTIC32 = _kernel32(_MODES["stochastic"])


@njit(cache=True)
def _quantize_serial(bits, r, out, W, P, d, variable, emin_b, cap, sign_bit, implicit, inf, qnan,
                     max_bits, min_normal_bits, tiny_bits, half_tiny_bits, q_scale, fmt_zero,
                     signed, mode, ov_pos, ov_neg, inf_result, flush, k, signed_zero):
    """``_quantize`` on the calling thread (below PARALLEL_MIN elements)."""
    for i in range(bits.shape[0]):
        ri = np.uint64(r[i]) if mode == 4 else np.uint64(0)
        out[i] = _round_one(np.uint64(bits[i]), ri, W, P, d, variable, emin_b, cap, sign_bit,
                            implicit, inf, qnan, max_bits, min_normal_bits, tiny_bits,
                            half_tiny_bits, q_scale, fmt_zero, signed, mode, ov_pos, ov_neg,
                            inf_result, flush, k, signed_zero)


@njit(cache=True, inline="always")
def _round32_narrow(b, mode, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
                    half_tiny_bits, ov_pos, ov_neg, inf_result, qnan, flush, signed_zero):
    """``_round32`` and the sign for the bits ``b`` of a float32, deterministic modes only, with
    a uint32 cast on every intermediate: numba widens integer arithmetic to 64 bits, and the
    casts let LLVM narrow it back (8 lanes to an AVX2 register, not 4). Nothing needs more than
    32 bits: |x|'s bits are below 2^31 and an increment is at most 2^23. Checked equal to
    ``_round32`` on every float32 (``benchmarks/exhaustive_quantize_kernel.py``)."""
    u = np.uint32
    one, zero = u(1), u(0)
    sign = u(b & _SIGN32)
    a = u(b ^ sign)
    s = u(d)
    if variable:  # below the smallest normal number: a coarser grid, a per-value shift
        e = np.int32(a >> u(23))
        s = u(d + min(max(np.int32(np.int32(emin_b) - e), np.int32(0)), np.int32(cap)))
    mask = u(u(one << s) - one)
    if mode == 0:  # nearest even
        inc = u(u(mask >> one) + u(u(u(a | _IMPLICIT32) >> s) & one))
    elif mode == 5:  # nearest away: + 2^(s-1)
        inc = u(u(mask >> one) + one)
    elif mode == 6:  # nearest toward zero: + 2^(s-1) - 1
        inc = u(mask >> one)
    elif mode == 2:  # up: away from zero for x > 0
        inc = mask if sign == zero else zero
    elif mode == 3:  # down: away from zero for x < 0
        inc = mask if sign != zero else zero
    else:  # toward zero
        inc = zero
    o = u(u(a + inc) & u(~mask))
    if o > u(max_bits):
        o = u(ov_pos) if sign == zero else u(ov_neg)
    if variable and a < u(tiny_bits):  # below the smallest subnormal q: 0 or q
        if mode == 0 or mode == 6:
            up = a > u(half_tiny_bits)
        elif mode == 5:
            up = a >= u(half_tiny_bits)
        elif mode == 2:
            up = a != zero and sign == zero
        elif mode == 3:
            up = a != zero and sign != zero
        else:
            up = False
        o = u(tiny_bits) if up else zero
    if flush and o < u(min_normal_bits):
        o = zero
    if a >= _INF32:  # inf: the overflow mode's value; NaN: NaN
        o = u(inf_result) if a == _INF32 else u(qnan)
    if signed_zero or o != zero:  # 'fnuz' formats have no -0
        o = u(o | sign)
    return o


@njit(cache=True, inline="always")
def _loop32(x, out, mode, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
            half_tiny_bits, ov_pos, ov_neg, inf_result, qnan, flush, signed_zero):
    """out = x rounded, element by element (float32 arrays: their bits viewed here)."""
    bits, res = x.view(np.uint32), out.view(np.uint32)
    for i in range(bits.shape[0]):
        res[i] = _round32_narrow(bits[i], mode, d, variable, emin_b, cap, max_bits,
                                 min_normal_bits, tiny_bits, half_tiny_bits, ov_pos, ov_neg,
                                 inf_result, qnan, flush, signed_zero)


def _const_kernels32(mode: int, d: int, variable: bool, emin_b: int, cap: int, max_bits: int,
                     min_normal_bits: int, tiny_bits: int, half_tiny_bits: int, ov_pos: int,
                     ov_neg: int, inf_result: int, qnan: int, flush: bool,
                     signed_zero: bool) -> tuple[Any, Any]:
    """(block, kernel) for one plan of float32 input with every constant compiled in: the closure
    cells, which numba's disk cache keys a closure by. LLVM folds the shifts and masks and drops
    the branches the format does not take: bfloat16 rounds 5x faster than ``_kernel32``'s
    nearest_even with the constants as arguments, float16 and fp8 about 4x.

    Both take x and the result as float32 (two arguments for numba to type). ``block`` runs on
    the calling thread; ``kernel`` splits 64K-element blocks across threads, the loop inlined in
    its ``prange`` body (where ``_round32_narrow``'s loop vectorizes as well as in ``block``):
    calling ``block`` from there would put a dispatcher in its cells, whose pickle differs from
    process to process, and numba's disk cache would never find the kernel."""

    @njit(cache=True)
    def block(x, out):
        _loop32(x, out, mode, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
                half_tiny_bits, ov_pos, ov_neg, inf_result, qnan, flush, signed_zero)

    @njit(parallel=True, cache=True)
    def kernel(x, out):
        n = x.shape[0]
        for blk in prange((n + _BLOCK - 1) // _BLOCK):
            lo, hi = blk * _BLOCK, min(n, (blk + 1) * _BLOCK)
            _loop32(x[lo:hi], out[lo:hi], mode, d, variable, emin_b, cap, max_bits,
                    min_normal_bits, tiny_bits, half_tiny_bits, ov_pos, ov_neg, inf_result,
                    qnan, flush, signed_zero)

    return block, kernel


def _narrow_kernels32(mode: int) -> tuple[Any, Any]:
    """``_const_kernels32`` with only ``mode`` compiled in and the plan's constants as arguments:
    the deterministic modes other than nearest_even, compiled once per mode rather than once per
    format, overflow and flush (they are seldom used; faster than ``_kernel32`` all the same,
    from the uint32 arithmetic)."""

    @njit(cache=True)
    def block(x, out, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
              half_tiny_bits, ov_pos, ov_neg, inf_result, qnan, flush, signed_zero):
        _loop32(x, out, mode, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
                half_tiny_bits, ov_pos, ov_neg, inf_result, qnan, flush, signed_zero)

    @njit(parallel=True, cache=True)
    def kernel(x, out, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits,
               half_tiny_bits, ov_pos, ov_neg, inf_result, qnan, flush, signed_zero):
        n = x.shape[0]
        for blk in prange((n + _BLOCK - 1) // _BLOCK):
            lo, hi = blk * _BLOCK, min(n, (blk + 1) * _BLOCK)
            _loop32(x[lo:hi], out[lo:hi], mode, d, variable, emin_b, cap, max_bits,
                    min_normal_bits, tiny_bits, half_tiny_bits, ov_pos, ov_neg, inf_result,
                    qnan, flush, signed_zero)

    return block, kernel


_NARROW32 = {mode: _narrow_kernels32(mode) for mode in _MODES.values() if mode != 4}


_F32 = np.dtype(np.float32)


@functools.cache
def _const32(consts: tuple[Any, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """The rounding of a C-contiguous float32 array under one plan, ``consts`` =
    (mode, d, variable, emin_b, cap, max_bits, min_normal_bits, tiny_bits, half_tiny_bits,
    ov_pos, ov_neg, inf_result, qnan, flush, signed_zero): nearest_even's kernels with them
    compiled in, the other modes' with them as arguments. Each kernel compiles at its first
    call (about a second), or loads from numba's disk cache (milliseconds)."""
    if consts[0] == _MODES["nearest_even"]:
        (block, kernel), args = _const_kernels32(*consts), ()
    else:
        (block, kernel), args = _NARROW32[consts[0]], consts[1:]

    def run(x: np.ndarray) -> np.ndarray:
        n = x.size
        out = np.empty(n, _F32)  # (faster than empty_like or a shape tuple)
        xf = x if x.ndim == 1 else x.ravel()  # (a view)
        (block if n < PARALLEL_MIN else kernel)(xf, out, *args)  # (launch's choice, directly)
        return out if x.ndim == 1 else out.reshape(x.shape)

    return run


# (type(fmt), fmt, rounding, overflow, subnormals, rng is None) -> the rounding of a
# C-contiguous float32 array under those arguments, checked once: ``quantize``'s fast path
_RUNS: dict[tuple[Any, ...], Callable[[np.ndarray], np.ndarray]] = {}
_RUNS_MAX = 1024  # (formats are few; a program making FloatFormats without end clears it)


def quantize(x: Any, fmt: Any, *, rounding: str = "nearest_even",
             overflow: str | None = None, subnormals: bool = True,
             rng: np.random.Generator | None = None, sr_bits: int | None = None) -> np.ndarray:
    """Round every value of ``x`` once to the grid of ``fmt``; as
    ``normlab.precision.quantize`` (same arguments, bit-identical result).

    The common call, a C-contiguous float32 ndarray and arguments seen before, costs a dict
    lookup and one kernel call: the arguments were checked and resolved the first time (the
    key holds their exact types, so that 1 for True, say, is still refused as it was). An rng
    passed to a deterministic rounding (the training hooks pass theirs to every call) is only
    checked to be a Generator, as ever; stochastic rounding draws from it on the full path."""
    key = None
    if (type(x) is np.ndarray and x.dtype is _F32 and sr_bits is None
            and type(rounding) is str and (overflow is None or type(overflow) is str)
            and (subnormals is True or subnormals is False) and x.flags.c_contiguous
            and (rng is None or type(rng) is np.random.Generator)):
        k = (type(fmt), fmt, rounding, overflow, subnormals, rng is None)
        try:
            run = _RUNS.get(k)
        except TypeError:  # an unhashable fmt: the checks say what is accepted
            run = None
        else:
            key = k
        if run is not None:
            return run(x)
    return _plan_and_round(x, fmt, rounding, overflow, subnormals, rng, sr_bits, key)


def _plan_and_round(x: Any, fmt: Any, rounding: Any, overflow: Any, subnormals: Any,
                    rng: Any, sr_bits: Any, key: tuple[Any, ...] | None) -> np.ndarray:
    """``quantize`` with the arguments checked and resolved; remembers the rounding under
    ``key`` where it is one of the fast path's."""
    q = _ref.plan_quantize(x, fmt, rounding=rounding, overflow=overflow,
                           subnormals=subnormals, rng=rng, sr_bits=sr_bits)
    plan, xc, fmt_ = q.bits, q.xc, q.fmt
    if plan is None:  # float32 input, a format below float32's normal range: via float64
        return _ref.via_float64(q, quantize)
    if q.copy:
        if key is not None:
            _remember(key, _copy)
        return xc.copy()
    ovf, mode = q.ovf, _MODES[q.rounding]
    if plan.uint is np.uint32 and fmt_.zero and fmt_.signed and mode != _MODES["stochastic"]:
        run = _const32((mode, int(plan.d), bool(plan.variable), int(plan.emin_b), int(plan.cap),
                        int(plan.max_bits), int(plan.min_normal_bits), int(plan.tiny_bits),
                        int(plan.half_tiny_bits), int(ovf[0]), int(ovf[1]), int(ovf[2]),
                        int(plan.qnan), bool(q.flush), bool(fmt_.signed_zero)))
        if key is not None:
            _remember(key, run)
        return run(xc).reshape(q.x.shape)
    bits: np.ndarray = xc.reshape(-1).view(plan.uint)
    out = np.empty_like(bits)
    # the reference's draws, in order
    r = q.random_bits(bits.size) if q.rounding == "stochastic" else np.empty(0, plan.uint)
    serial = bits.size < PARALLEL_MIN  # one thread: call the serial loop, skip the launch
    if plan.uint is np.uint32 and fmt_.zero and fmt_.signed:  # stochastic
        u = np.uint32
        block, kernel = _STOCHASTIC32
        (block if serial else kernel)(
            xc.reshape(-1), bits, r, out, plan.d, plan.variable, plan.emin_b, plan.cap,
            u(plan.max_bits), u(plan.min_normal_bits), u(plan.tiny_bits), u(plan.half_tiny_bits),
            float(plan.q_scale), u(ovf[0]), u(ovf[1]), u(ovf[2]), u(plan.qnan), q.flush,
            q.sr_bits, fmt_.signed_zero)
        return out.view(xc.dtype).reshape(q.x.shape)
    u = np.uint64
    W = 8 * np.dtype(plan.uint).itemsize
    (_quantize_serial if serial else _quantize)(
        bits, r, out, W, plan.P, plan.d, plan.variable, plan.emin_b, plan.cap, u(plan.sign),
        u(plan.implicit), u(plan.inf), u(plan.qnan), u(plan.max_bits), u(plan.min_normal_bits),
        u(plan.tiny_bits), u(plan.half_tiny_bits), float(plan.q_scale), bool(fmt_.zero),
        bool(fmt_.signed), mode, u(ovf[0]), u(ovf[1]), u(ovf[2]), q.flush, q.sr_bits,
        fmt_.signed_zero)
    return out.view(xc.dtype).reshape(q.x.shape)


def _copy(x: np.ndarray) -> np.ndarray:
    """``xc.copy()`` for a C-contiguous float32 ``x``: xc is x, or x as shape (1,) if 0-d."""
    return x.copy() if x.ndim else x.reshape(1).copy()


def _remember(key: tuple[Any, ...], run: Callable[[np.ndarray], np.ndarray]) -> None:
    if len(_RUNS) >= _RUNS_MAX:
        _RUNS.clear()
    _RUNS[key] = run
