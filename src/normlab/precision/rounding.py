"""Rounding to a format's grid, on the bit patterns of float32 and float64 values.

``quantize(x, fmt)`` returns the values of ``x`` rounded once to ``fmt``, as float32 (float64 for
float64 input). It never rounds through an intermediate format: float64 inputs are rounded from
their own 53 bits (ml_dtypes' casts from float64 before version 0.7 go through float32 and can
round twice).

How it works. Let ``a`` be the bits of |x| read as an unsigned integer (uint32 for float32); ``a``
grows with |x|, and inside one binade it is linear in |x|. Above the target's smallest normal
number every representable value is an ``a`` whose low ``d = P - M`` bits are zero (P = 23 or 52,
the input's stored mantissa bits), across binade boundaries too, so rounding is integer rounding
of ``a`` to a multiple of ``2^d``:

    nearest_even:  (a + 2^(d-1) - 1 + lsb) & ~(2^d - 1),   lsb = the last kept bit
    nearest_away:  (a + 2^(d-1)) & ~(2^d - 1)           (ties away from zero)
    nearest_toward_zero:  (a + 2^(d-1) - 1) & ~(2^d - 1)  (ties toward zero)
    toward_zero:   a & ~(2^d - 1)
    away:          (a + 2^d - 1) & ~(2^d - 1)           (up for x > 0, down for x < 0)
    stochastic:    (a + r) & ~(2^d - 1),  r uniform on [0, 2^d)  =>  P(up) = (x - lo) / (hi - lo)
    k-bit SR:      (a + r') & ~(2^d - 1),  r' = r with its low d - k bits cleared
                   =>  P(up) = floor(2^k (x - lo) / (hi - lo)) / 2^k

The rounding modes are the dialects of the tools that emulate formats:

* ``nearest_even`` (IEEE 754's default): ml_dtypes' casts, PyTorch's ``.to(float8_*)``,
  TransformerEngine, torchao, pychop ``rmode=1``, microxcaling's ``"even"``.
* ``nearest_away`` (ties away from zero): microxcaling's default ``"nearest"``
  (``floor(|x| + 0.5)`` on the scaled mantissa), QPyTorch's ``"nearest"`` (adds half an ulp to
  the bits and truncates; Tiiiger/QPyTorch#23), pychop ``rmode=8``, IEEE 754's
  roundTiesToAway, gfloat's ``TiesToAway``.
* ``nearest_toward_zero`` (ties toward zero): unit-scaling's ``FPFormat(...,
  rounding="nearest")`` (adds ``mask // 2`` = 2^(d-1) - 1 to the bits and truncates), pychop
  ``rmode=7`` (intended; see the conformance table for what it does).
* ``toward_zero``, ``up``, ``down``: chop/pychop ``rmode`` 4, 2, 3; microxcaling's ``"floor"`` is
  ``toward_zero`` on the magnitude.
* ``stochastic``: exact probabilities (chop/pychop ``rmode=5``); with ``sr_bits=k``, hardware's
  and the emulators' few-bit SR: k random bits are added below the last kept bit and the sum
  truncated, as unit-scaling's ``FPFormat(..., rounding="stochastic", srbits=k)``, QPyTorch's
  ``"stochastic"`` (23 - M bits), the Intel FP8 emulator (7 or 8 bits), NVIDIA's ``cvt.rs``
  and Graphcore's IPU. Its probability is truncated to k bits, so it is biased toward zero by
  less than 2^-k ulp.

A carry out of the mantissa moves to the next binade, which is the right answer. Below the
target's smallest normal number the grid is ``k * 2^(emin - M)``; for x in binade e that is a
multiple of ``2^s`` with ``s = d + (emin - e)``, so the same formulas run with a per-element
shift. Values below the smallest subnormal q round to 0 or q. What remains is bookkeeping:
overflow (saturate, inf or NaN), flush to zero, infinities, NaN, and the sign.

The work is done on blocks of 128K elements so that the temporaries stay in cache.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FloatFormat, get_format

ROUNDINGS = ("nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "up", "down",
             "stochastic")
OVERFLOWS = ("saturate", "inf", "nan")

_BLOCK = 1 << 17  # elements per block: the temporaries stay in cache


class BitPlan(NamedTuple):
    """Constants for rounding one input type (float32 or float64) to one format, as bits."""

    uint: type  # np.uint32 or np.uint64
    P: int  # the input's stored mantissa bits (23 or 52)
    d: int  # bits dropped above the target's smallest normal: P - M
    variable: bool  # the target's subnormal range is narrower than the input's: per-element shift
    emin_b: int  # the target's emin, biased as an exponent field of the input
    cap: int  # the most extra bits below emin before a value is 'tiny' (< q), min(M, emin_b - 1)
    sign: Any  # the sign bit
    implicit: Any  # 2^P: the implicit leading bit of the significand
    inf: Any  # bits of +inf in the input type
    qnan: Any  # bits of the canonical quiet NaN
    max_bits: Any  # bits of the target's largest finite value
    min_normal_bits: Any  # bits of 2^emin
    tiny_bits: Any  # bits of q = 2^(emin - M), the smallest subnormal (0 without a zero)
    half_tiny_bits: Any  # bits of q / 2
    q_scale: float  # 2^(M - emin) = 1 / q, to compute x / q for stochastic tiny values


def _bits(value: float, ftype: type) -> Any:
    return np.array(value, dtype=ftype).view(np.uint32 if ftype is np.float32 else np.uint64)[()]


@cache
def _plan(fmt: FloatFormat, ftype: type) -> BitPlan | None:
    """The plan for rounding ``ftype`` values to ``fmt``; None when float32 must go via float64
    (the format's smallest normal number is below float32's: E8M0's 2^-127)."""
    uint = np.uint32 if ftype is np.float32 else np.uint64
    P, bias = (23, 127) if ftype is np.float32 else (52, 1023)
    emin_b = fmt.emin + bias
    if emin_b < 1:
        return None
    M = fmt.mantissa_bits
    q = fmt.min_normal * 2.0**-M
    return BitPlan(
        uint=uint, P=P, d=P - M, variable=emin_b > 1, emin_b=emin_b, cap=min(M, emin_b - 1),
        sign=uint(1) << uint(8 * np.dtype(uint).itemsize - 1), implicit=uint(1) << uint(P),
        inf=_bits(np.inf, ftype), qnan=_bits(np.nan, ftype) | (uint(1) << uint(P - 1)),
        max_bits=_bits(fmt.max_finite, ftype), min_normal_bits=_bits(fmt.min_normal, ftype),
        tiny_bits=_bits(q if fmt.zero else 0.0, ftype),
        half_tiny_bits=_bits(q / 2 if fmt.zero else 0.0, ftype),
        q_scale=2.0 ** (M - fmt.emin),
    )


def _check_rounding(rounding: Any) -> str:
    return ck.choice(rounding, "rounding", ROUNDINGS)


def _check_overflow(overflow: Any, fmt: FloatFormat) -> str | None:
    if overflow is None:
        return None
    if not isinstance(overflow, str):
        raise TypeError(f"overflow must be None (the format's default) or one of {OVERFLOWS}; "
                        f"got {overflow!r}")
    if overflow not in OVERFLOWS:
        raise ValueError(f"overflow must be None (the format's default) or one of {OVERFLOWS}; "
                         f"got {overflow!r}")
    if overflow == "inf" and not fmt.has_inf:
        raise ValueError(f"overflow='inf': {fmt.name} has no infinity; use 'saturate' or "
                         f"{'nan' if fmt.has_nan else 'None'}")
    if overflow == "nan" and not fmt.has_nan:
        raise ValueError(f"overflow='nan': {fmt.name} has no NaN; use 'saturate'")
    return overflow


def _overflow_bits(plan: BitPlan, fmt: FloatFormat, rounding: str,
                   overflow: str | None) -> tuple[Any, Any, Any]:
    """(positive overflow, negative overflow, infinity) results as magnitude bits.

    With ``overflow=None`` IEEE 754's rules apply with the format's own overflow value (inf, NaN,
    or max for formats with neither): round-to-nearest and stochastic rounding overflow to it,
    toward_zero gives max, up gives it for x > 0 and -max for x < 0, down the mirror image.
    An explicit mode applies to every overflow, and to infinite inputs as well.
    """
    value = {"inf": plan.inf, "nan": plan.qnan, "saturate": plan.max_bits}
    natural = value[fmt.default_overflow]
    if overflow is not None:
        return value[overflow], value[overflow], value[overflow]
    pos = neg = natural
    if rounding in ("toward_zero", "down"):
        pos = plan.max_bits
    if rounding in ("toward_zero", "up"):
        neg = plan.max_bits
    return pos, neg, natural


def _random_bits(rng: np.random.Generator, n: int, uint: type) -> Array:
    """n uniform unsigned integers of uint's width, drawn as full-range uint64."""
    k = (n + 1) // 2 if uint is np.uint32 else n
    raw = rng.integers(0, np.iinfo(np.uint64).max, size=k, dtype=np.uint64, endpoint=True)
    return raw.view(uint)[:n]


class QuantizePlan(NamedTuple):
    """One ``quantize`` call, checked and resolved: what the reference (this module) and the
    fused kernel (``normlab.kernels.quantize``) both execute, so that they cannot drift apart.

    ``bits`` is None when float32 input must go through float64 (formats whose smallest normal
    number is below float32's: E8M0), and ``copy`` is True when there is nothing to round.
    """

    x: Array  # the checked input (its shape is the result's)
    xc: Array  # x as contiguous float32 (float64 for float64 input)
    fmt: FloatFormat
    rounding: str  # the mode to run ("toward_zero" when only overflow/flush remain)
    overflow: str | None
    subnormals: bool  # as passed (the float64 detour passes it on)
    flush: bool  # results below the smallest normal number become 0
    bits: BitPlan | None
    ovf: tuple[Any, Any, Any]  # (positive overflow, negative overflow, infinity) as bits
    sr_bits: int  # random bits per stochastic rounding: the input width W for exact SR
    copy: bool  # float32 to float32 with nothing to do: the result is a copy of xc
    rng: np.random.Generator | None

    def random_bits(self, n: int) -> Array:
        """The next n random words of the input's width: the same draws, in the same order,
        in the reference (block by block) and in the kernel (all at once)."""
        assert self.rng is not None and self.bits is not None
        return _random_bits(self.rng, n, self.bits.uint)

    @property
    def sr_low_mask(self) -> int:
        """k-bit SR clears the bits of r below 2^(s - k): this is ``sr_bits``' shift, s - k for
        the constant shift s = d (per element where the grid varies: ``sr_shift``)."""
        assert self.bits is not None
        return (1 << max(self.bits.d - self.sr_bits, 0)) - 1


def plan_quantize(x: Any, fmt: Any, *, rounding: Any = "nearest_even", overflow: Any = None,
                  subnormals: Any = True, rng: Any = None, sr_bits: Any = None) -> QuantizePlan:
    """Check ``quantize``'s arguments (before any work) and resolve them into a QuantizePlan."""
    x = ck.float_array(x, "x")
    fmt = get_format(fmt)
    rounding = _check_rounding(rounding)
    overflow = _check_overflow(overflow, fmt)
    subnormals = ck.flag(subnormals, "subnormals")
    if rounding == "stochastic" and rng is None:
        raise TypeError("stochastic rounding needs rng (a numpy.random.Generator)")
    if rng is not None:
        ck.generator(rng)
    ftype = np.float64 if x.dtype == np.float64 else np.float32
    width = 64 if ftype is np.float64 else 32
    if sr_bits is None:
        k = width
    else:
        if rounding != "stochastic":
            raise ValueError(f"sr_bits applies to rounding='stochastic' only; got rounding="
                             f"{rounding!r}")
        k = ck.integer(sr_bits, "sr_bits", lo=1, hi=width)
    with np.errstate(invalid="ignore"):  # (signalling NaNs)
        xc = np.ascontiguousarray(x, dtype=ftype)
    bits = _plan(fmt, ftype)
    flush = not (subnormals and fmt.subnormals)
    copy = False
    ovf: tuple[Any, Any, Any] = (None, None, None)
    if bits is not None:
        if bits.d == 0 and not bits.variable:  # float32 to float32: nothing to round
            copy = overflow is None and not flush
            rounding = "toward_zero"
        ovf = _overflow_bits(bits, fmt, rounding, overflow)
    return QuantizePlan(x=x, xc=xc, fmt=fmt, rounding=rounding, overflow=overflow,
                        subnormals=subnormals, flush=flush, bits=bits, ovf=ovf, sr_bits=k,
                        copy=copy, rng=rng)


class _Scratch:
    """Work arrays for one block, allocated once per call: a fresh temporary per operation
    would cost a page fault per 4 KB from the allocator, more than the arithmetic itself."""

    def __init__(self, n: int, uint: type) -> None:
        self.u: list[Array] = [np.empty(n, uint) for _ in range(6)]
        self.b: list[Array] = [np.empty(n, bool) for _ in range(2)]

    def views(self, m: int) -> tuple[Array, ...]:
        return tuple(w[:m] for w in self.u + self.b)


def _select(out: Array, cond: Array, value: Any, t1: Array, t2: Array) -> None:
    """out = where(cond, value, out), without branches: masked copies with an unpredictable
    mask cost a misprediction per element. out ^= (out ^ value) & -cond."""
    np.copyto(t1, cond, casting="unsafe")
    np.subtract(t1.dtype.type(0), t1, out=t1)
    np.bitwise_xor(out, value, out=t2)
    t2 &= t1
    out ^= t2


def _round_block(bits: Array, out: Array, q: QuantizePlan, r: Array | None,
                 scratch: _Scratch) -> None:
    """Round one block of bit patterns (1-D, the input's uint type) into ``out``."""
    plan, fmt = q.bits, q.fmt
    assert plan is not None
    u = plan.uint
    sign, a, s, mask, t1, t2, b1, b2 = scratch.views(bits.size)
    np.bitwise_and(bits, plan.sign, out=sign)
    np.bitwise_xor(bits, sign, out=a)  # |x| as bits
    zero_in = None if fmt.zero else a == 0  # no zero (E8M0): 0 becomes NaN, (0, min) min
    if zero_in is not None:
        np.maximum(a, plan.min_normal_bits, out=a)
    if plan.variable:  # s = d + clip(emin_b - e, 0, cap), without negative intermediates
        np.right_shift(a, u(plan.P), out=s)
        np.clip(s, plan.emin_b - plan.cap, plan.emin_b, out=s)
        np.subtract(u(plan.emin_b + plan.d), s, out=s)
        np.left_shift(u(1), s, out=mask)
        mask -= u(1)
    else:
        s, mask = u(plan.d), u((1 << plan.d) - 1)
    _increment(out, a, sign, s, mask, q, r, t1, t2)  # out = a + inc, then drop the low s bits
    out += a
    out &= ~mask
    ov_pos, ov_neg, inf_result = q.ovf
    over = np.greater(out, plan.max_bits, out=b1)
    if over.any():
        if ov_pos == ov_neg:
            _select(out, over, ov_pos, t1, t2)
        else:  # directed rounding with the default overflow: the sign decides
            _select(out, over & (sign == 0), ov_pos, t1, t2)
            _select(out, over & (sign != 0), ov_neg, t1, t2)
    if plan.variable and fmt.zero:  # below the smallest subnormal q the result is 0 or q
        tiny = np.less(a, plan.tiny_bits, out=b1)
        if tiny.any():
            up = _tiny_up(a, sign, tiny, plan, q.rounding, r, q.sr_bits, out=b2)
            np.copyto(mask, up, casting="unsafe")  # (mask is free now)
            mask *= plan.tiny_bits
            _select(out, tiny, mask, t1, t2)
    if q.flush:
        _select(out, np.less(out, plan.min_normal_bits, out=b1), u(0), t1, t2)
    nonfinite = np.greater_equal(bits ^ sign if zero_in is not None else a, plan.inf, out=b1)
    if nonfinite.any():  # inf: the overflow mode's value; NaN: NaN
        a0 = (bits ^ sign)[nonfinite]
        out[nonfinite] = np.where(a0 == plan.inf, inf_result, plan.qnan)
    if zero_in is not None:
        out[zero_in] = plan.qnan
    _apply_sign(out, sign, a, zero_in, plan, fmt, t1, b1)


def _increment(out: Array, a: Array, sign: Array, s: Any, mask: Any, q: QuantizePlan,
               r: Array | None, t1: Array, t2: Array) -> None:
    """out = what the rounding mode adds to |x|'s bits before the low s bits are dropped."""
    u = a.dtype.type
    rounding = q.rounding
    if rounding == "nearest_even":  # inc = 2^(s-1) - 1 + lsb; lsb is the implicit 1 if s = P
        assert q.bits is not None
        np.bitwise_or(a, q.bits.implicit, out=t1)
        np.right_shift(t1, s, out=t1)
        t1 &= u(1)
        np.right_shift(mask, u(1), out=out)
        out += t1
    elif rounding == "nearest_away":  # inc = 2^(s-1)
        np.right_shift(mask, u(1), out=out)
        out += u(1)
    elif rounding == "nearest_toward_zero":  # inc = 2^(s-1) - 1
        np.right_shift(mask, u(1), out=out)
    elif rounding in ("up", "down"):  # inc = mask when rounding away from zero, else 0
        np.right_shift(sign, u(8 * a.itemsize - 1), out=t1)  # 1 for x < 0
        if rounding == "up":
            t1 -= u(1)  # x > 0: 0 - 1 = all ones
        else:
            np.subtract(u(0), t1, out=t1)  # x < 0: all ones
        np.bitwise_and(t1, mask, out=out)
    elif rounding == "stochastic":  # inc uniform on [0, 2^s), its low s - k bits cleared
        assert r is not None
        np.bitwise_and(r, mask, out=out)
        if q.sr_bits < 8 * a.itemsize:
            _clear_low_bits(out, s, q.sr_bits, t1, t2)
    else:
        out[...] = u(0)


def _apply_sign(out: Array, sign: Array, a: Array, zero_in: Array | None, plan: BitPlan,
                fmt: FloatFormat, t1: Array, b1: Array) -> None:
    """Put the sign back: as is, not on zero ('fnuz'), or NaN for negatives (unsigned)."""
    u = plan.uint
    if fmt.signed_zero:
        out |= sign
    elif fmt.signed:  # no -0 ('fnuz'): a result of zero is +0
        np.not_equal(out, 0, out=b1)
        np.copyto(t1, b1, casting="unsafe")
        np.subtract(u(0), t1, out=t1)
        t1 &= sign
        out |= t1
    else:  # negative numbers have no code: NaN (and -0 too when there is no zero)
        neg = sign != 0
        if zero_in is None:
            neg &= a != 0
        out[neg] = plan.qnan


def _clear_low_bits(inc: Array, s: Any, k: int, t1: Array, t2: Array) -> None:
    """k-bit stochastic rounding: clear the bits of ``inc`` below 2^(s - k) (none if s <= k)."""
    u = inc.dtype.type
    if np.ndim(s) == 0:
        inc &= ~u((1 << max(int(s) - k, 0)) - 1)
        return
    np.maximum(s, u(k), out=t1)
    t1 -= u(k)
    np.left_shift(u(1), t1, out=t2)
    t2 -= u(1)
    np.invert(t2, out=t2)
    inc &= t2


def _tiny_up(a: Array, sign: Array, tiny: Array, plan: BitPlan, rounding: str,
             r: Array | None, sr_bits: int, out: Array) -> Array:
    """Which of the values below the smallest subnormal q (``tiny``) round up to q."""
    if rounding == "nearest_even":  # a tie at q/2 goes to 0, the even neighbour
        np.greater(a, plan.half_tiny_bits, out=out)
    elif rounding == "nearest_away":  # a tie at q/2 goes to q
        np.greater_equal(a, plan.half_tiny_bits, out=out)
    elif rounding == "nearest_toward_zero":
        np.greater(a, plan.half_tiny_bits, out=out)
    elif rounding == "toward_zero":
        out[...] = False
    elif rounding in ("up", "down"):
        np.not_equal(a, 0, out=out)
        out &= (sign == 0) if rounding == "up" else (sign != 0)
    else:  # stochastic: up with probability x / q, exact in float64, in units of 2^-W
        width = 8 * a.itemsize
        x_over_q = a[tiny].view(np.float32 if width == 32 else np.float64).astype(np.float64)
        x_over_q *= plan.q_scale
        out[...] = False
        assert r is not None
        if sr_bits < width:  # k bits: up when r_k < floor(2^k x / q), r_k = r's top k bits
            rk = r[tiny] >> r.dtype.type(width - sr_bits)
            out[tiny] = rk < np.floor(np.ldexp(x_over_q, sr_bits)).astype(np.uint64)
        else:
            out[tiny] = r[tiny] < np.ceil(np.ldexp(x_over_q, width)).astype(np.uint64)
    out &= tiny
    return out


def _round_same_range(bits: Array, out: Array, plan: BitPlan, rounding: str,
                      r: Array | None, sr_low_mask: int) -> None:
    """The fast path for formats with the input's exponent range (bfloat16, tfloat32 from
    float32) under nearest_even, toward_zero or stochastic rounding with the default overflow:
    the sign rides along, and a carry past the largest finite value lands exactly on inf."""
    u = plan.uint
    mask = u((1 << plan.d) - 1)
    if rounding == "nearest_even":  # + 2^(d-1) - 1 + lsb
        np.right_shift(bits, u(plan.d), out=out)
        out &= u(1)
        out += mask >> u(1)
        out += bits
    elif rounding == "stochastic":
        assert r is not None
        np.bitwise_and(r, mask & ~u(sr_low_mask), out=out)
        out += bits
    elif rounding == "nearest_away":  # + 2^(d-1)
        out[...] = bits
        out += u(1 << (plan.d - 1))
    elif rounding == "nearest_toward_zero":  # + 2^(d-1) - 1
        out[...] = bits
        out += u((1 << (plan.d - 1)) - 1)
    else:
        out[...] = bits
    out &= ~mask
    x = bits.view(np.float32 if u is np.uint32 else np.float64)
    if np.isnan(x.max(initial=0.0)):  # a carry can turn a NaN into inf or wrap its sign
        nan = np.isnan(x)
        out[nan] = (bits[nan] & plan.sign) | plan.qnan


def quantize(
    x: Any,
    fmt: Any,
    *,
    rounding: str = "nearest_even",
    overflow: str | None = None,
    subnormals: bool = True,
    rng: np.random.Generator | None = None,
    sr_bits: int | None = None,
) -> Array:
    """Round every value of ``x`` once to the grid of ``fmt``.

    Args:
        x: float array of any shape (float64, float32, float16, bfloat16, float8_*, ...).
        fmt: a FloatFormat, a name in ``FORMATS`` (``"bfloat16"``, ``"float8_e4m3fn"``, ...) or
            a NumPy/ml_dtypes dtype.
        rounding: ``"nearest_even"`` (IEEE default; ties to the even significand; for E8M0, whose
            significand is the implicit 1 alone, ties go up, as ml_dtypes), ``"nearest_away"``
            (ties away from zero: microxcaling's and QPyTorch's "nearest"),
            ``"nearest_toward_zero"`` (unit-scaling's "nearest"), ``"toward_zero"``,
            ``"up"`` (toward +inf), ``"down"`` (toward -inf) or ``"stochastic"`` (up with
            probability (x - lo) / (hi - lo), so E[quantize(x)] = x below overflow; exact
            except below q * 2^-9, q the smallest subnormal (q * 2^-12 for float64 input), where
            the probability x / q is rounded up to a multiple of 2^-32 (2^-64 for float64)).
            The module docstring names the tools behind each mode.
        overflow: None for the format's default (IEEE 754 with the format's overflow value: inf
            for bfloat16/float16/e5m2, NaN for e4m3fn, the fnuz formats and e8m0, max for
            fp6/fp4, as ml_dtypes' casts; directed roundings give max toward zero), or
            ``"saturate"`` (every result beyond max finite, infinities included, becomes +-max;
            NaN stays NaN), ``"inf"`` or ``"nan"``.
        subnormals: False flushes results below the smallest normal number to +-0.
        rng: a numpy Generator; required for stochastic rounding.
        sr_bits: stochastic rounding from k random bits, 1 <= k <= 32 (64 for float64 input),
            as hardware and unit-scaling's ``srbits``: P(up) is (x - lo) / (hi - lo) truncated
            to a multiple of 2^-k (x / q truncated likewise below the smallest subnormal q).
            None: exact probabilities. Only with ``rounding="stochastic"``.

    Returns:
        float32 array of x's shape (float64 for float64 input) holding values of ``fmt``. NaN
        stays NaN, also for formats without NaN (``cast`` then follows ml_dtypes).
    """
    plan = plan_quantize(x, fmt, rounding=rounding, overflow=overflow, subnormals=subnormals,
                         rng=rng, sr_bits=sr_bits)
    return _quantize(plan, high16=False)


def via_float64(plan: QuantizePlan, quantizer: Any) -> Array:
    """float32 input to a format below float32's normal range (E8M0): round the float64 copy."""
    with np.errstate(invalid="ignore"):
        x64 = plan.xc.astype(np.float64)
    k = None if plan.sr_bits == 32 else plan.sr_bits
    y = quantizer(x64, plan.fmt, rounding=plan.rounding, overflow=plan.overflow,
                  subnormals=plan.subnormals, rng=plan.rng, sr_bits=k)
    return y.astype(np.float32)


def _quantize(q: QuantizePlan, high16: bool) -> Array:
    """quantize's body; ``high16`` returns the high 16 bits of each float32 result as uint16
    (bfloat16 codes, for ``cast``), without a full-size float32 intermediate."""
    plan, xc = q.bits, q.xc
    ftype = xc.dtype.type
    if high16 and (ftype is not np.float32 or plan is None):
        raise ValueError("high16 needs float32 results")  # internal: cast checks it first
    if plan is None:  # float32 input, format reaching below float32's normal range: E8M0
        return via_float64(q, quantize)
    if q.copy and not high16:
        return xc.copy()
    fmt, rounding = q.fmt, q.rounding
    # the fast path: the format spans float32's exponents (bfloat16, tfloat32 from float32)
    fast = (not plan.variable and fmt.has_inf and fmt.emax == 127 and fmt.signed
            and not q.flush and q.overflow is None and rounding not in ("up", "down"))
    bits: Array = xc.reshape(-1).view(plan.uint)
    scratch = None if fast else _Scratch(min(bits.size, _BLOCK), plan.uint)
    # high16: keep only the high 16 bits of each result (a bfloat16 code), block by block
    out: Array = np.empty(bits.shape, np.uint16 if high16 else plan.uint)
    tmp: Array | None = np.empty(min(bits.size, _BLOCK), plan.uint) if high16 else None
    for i in range(0, bits.size, _BLOCK):
        block = bits[i:i + _BLOCK]
        dest = tmp[:block.size] if tmp is not None else out[i:i + _BLOCK]
        r = q.random_bits(block.size) if rounding == "stochastic" else None
        if fast:
            _round_same_range(block, dest, plan, rounding, r, q.sr_low_mask)
        else:
            assert scratch is not None
            _round_block(block, dest, q, r, scratch)
        if high16:
            dest >>= plan.uint(16)
            np.copyto(out[i:i + _BLOCK], dest, casting="unsafe")
    return out.reshape(q.x.shape) if high16 else out.view(ftype).reshape(q.x.shape)


def round_to_bfloat16(x: Any) -> Array:
    """Round to the nearest bfloat16 (ties to even), returned as float32 (float64 for float64
    input): the chapter's helper, ``quantize(x, "bfloat16")``."""
    return quantize(x, "bfloat16")


def cast(x: Any, fmt: Any, *, rounding: str = "nearest_even", overflow: str | None = None,
         subnormals: bool = True, rng: np.random.Generator | None = None,
         sr_bits: int | None = None) -> Array:
    """``quantize(x, fmt, ...)`` stored in the format's NumPy/ml_dtypes dtype.

    The values are rounded once by ``quantize`` (so float64 input is not rounded twice, and
    ``overflow="saturate"`` is available); the store is then exact: for bfloat16 it keeps the
    high half of each float32 result, for the other formats it is ml_dtypes' cast. NaN in a
    format without NaN (float6_*, float4_*) becomes ml_dtypes' -0. tfloat32 is stored in float32.

    Raises ValueError for a format without a storage dtype (custom formats: use ``quantize``).
    """
    fmt_ = get_format(fmt)
    dtype = fmt_.dtype
    if dtype is None:
        raise ValueError(f"fmt: {fmt_.name} has no NumPy/ml_dtypes storage dtype; quantize() "
                         f"returns its values in float32")
    plan = plan_quantize(x, fmt_, rounding=rounding, overflow=overflow, subnormals=subnormals,
                         rng=rng, sr_bits=sr_bits)
    if dtype == np.dtype(ml_dtypes.bfloat16) and plan.xc.dtype == np.float32:
        return _quantize(plan, high16=True).view(dtype)
    q = _quantize(plan, high16=False)
    with np.errstate(invalid="ignore"):
        return q.astype(dtype)
