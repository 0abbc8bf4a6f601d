"""``normlab.precision.quantize`` and ``mx_quantize`` written in torch operations.

The algorithm is ``normlab.precision.rounding``'s, on integer bit patterns: the magnitude bits
``a`` of each value (a 64-bit integer tensor, so no step wraps), rounded to a multiple of
``2^s`` (``s = d`` above the target's smallest normal number, one more per binade below it),
then overflow, values below the smallest subnormal, flush to zero, infinities, NaN and the sign.
Every operation is a torch operation on the input's device; the results are the same bits as
``normlab.precision.quantize`` (tests/torch/test_torch_quantize.py: every 16-bit pattern, every code
and midpoint of the 6- and 4-bit formats, every rounding mode and overflow mode;
benchmarks/torch_exhaustive_quantize.py: all 2^32 float32 inputs).

Stochastic rounding draws its random bits from a ``numpy.random.Generator`` exactly as
``normlab.precision.quantize`` does (so the same generator state gives the same result), or takes
them as ``random_bits``: an integer tensor of x's shape with values in [0, 2^32) (float32 input)
or any int64 (float64 input, read as unsigned).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import torch

from .. import _checks as ck
from ..precision.formats import FORMATS, FloatFormat, get_format
from ..precision.policy import Precision
from ..precision.rounding import OVERFLOWS, ROUNDINGS
from ..precision.scaling import (
    SCALE_RULES,
    DelayedScalingState,
    ScalingState,
    _quotient_dtype,
    tensor_scale,
)

_F32_MAX = float(np.finfo(np.float32).max)
_BLOCK = 1 << 17  # normlab.precision.quantize draws random bits block by block, as here
_LOW_FLOATS = (torch.float16, torch.bfloat16)
# formats that torch stores natively: a float32 cast to them rounds to nearest, ties to even,
# and keeps subnormals; it overflows to inf (bfloat16, float16, E5M2) or saturates (E4M3, whose
# overflow normlab sends to NaN past max + half an ulp: _cast)
_NATIVE = {"bfloat16": torch.bfloat16, "float16": torch.float16,
           "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


class _Consts(NamedTuple):
    """Rounding constants of one (format, input width) pair, as magnitude bits."""

    P: int  # the input's stored mantissa bits: 23 or 52
    W: int  # the input's width: 32 or 64
    d: int  # bits dropped above the format's smallest normal number
    variable: bool  # a per-element shift below it (the format's emin above the input's)
    emin_b: int  # the format's emin as a biased exponent of the input
    cap: int  # the most extra bits below emin: min(M, emin_b - 1)
    inf: int
    qnan: int
    max_bits: int
    min_normal_bits: int
    tiny_bits: int  # the smallest subnormal q (0 for a format without zero)
    half_tiny_bits: int
    q_scale: float  # 1 / q


def _bits_of(value: float, wide: bool) -> int:
    ft, ut = (np.float64, np.uint64) if wide else (np.float32, np.uint32)
    return int(np.array(value, ft).view(ut))


@cache
def _consts(fmt: FloatFormat, wide: bool) -> _Consts | None:
    """None when float32 input must go through float64 (E8M0's 2^-127)."""
    P, bias, W = (52, 1023, 64) if wide else (23, 127, 32)
    emin_b = fmt.emin + bias
    if emin_b < 1:
        return None
    M = fmt.mantissa_bits
    q = fmt.min_normal * 2.0**-M
    return _Consts(P=P, W=W, d=P - M, variable=emin_b > 1, emin_b=emin_b, cap=min(M, emin_b - 1),
                   inf=_bits_of(np.inf, wide), qnan=_bits_of(np.nan, wide) | (1 << (P - 1)),
                   max_bits=_bits_of(fmt.max_finite, wide),
                   min_normal_bits=_bits_of(fmt.min_normal, wide),
                   tiny_bits=_bits_of(q if fmt.zero else 0.0, wide),
                   half_tiny_bits=_bits_of(q / 2 if fmt.zero else 0.0, wide),
                   q_scale=2.0 ** (M - fmt.emin))


def torch_format(fmt: Any, name: str = "fmt") -> FloatFormat:
    """``normlab.precision.get_format`` that also reads a torch floating dtype by its name
    (``torch.float8_e4m3fn`` is ``"float8_e4m3fn"``); a torch dtype normlab has no format for
    is refused by name."""
    if isinstance(fmt, torch.dtype):
        label = str(fmt).removeprefix("torch.")
        if label not in FORMATS:
            raise ValueError(f"{name}: torch dtype {fmt} is not one of normlab's formats "
                             f"({', '.join(FORMATS)})")
        return FORMATS[label]
    return get_format(fmt, name)


def _check(t: Any, fmt: Any, rounding: Any, overflow: Any, subnormals: Any, rng: Any,
           random_bits: Any) -> tuple:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"t must be a torch.Tensor; got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"t must be a floating-point tensor (float64, float32, float16, "
                        f"bfloat16); got {t.dtype}")
    fmt = torch_format(fmt)
    rounding = ck.choice(rounding, "rounding", ROUNDINGS)
    if overflow is not None:
        ck.choice(overflow, "overflow", OVERFLOWS)
        if overflow == "inf" and not fmt.has_inf:
            raise ValueError(f"overflow='inf': {fmt.name} has no infinity; use 'saturate'")
        if overflow == "nan" and not fmt.has_nan:
            raise ValueError(f"overflow='nan': {fmt.name} has no NaN; use 'saturate'")
    subnormals = ck.flag(subnormals, "subnormals")
    if rounding == "stochastic" and rng is None and random_bits is None:
        raise TypeError("stochastic rounding needs rng (a numpy.random.Generator) or "
                        "random_bits")
    if rng is not None:
        ck.generator(rng)
    if random_bits is not None:
        if not isinstance(random_bits, torch.Tensor) or random_bits.is_floating_point() or \
                random_bits.shape != t.shape:
            raise TypeError(f"random_bits must be an integer tensor of t's shape {tuple(t.shape)}")
    return fmt, rounding, overflow, subnormals


def random_bits(rng: np.random.Generator, n: int, wide: bool = False) -> np.ndarray:
    """The n random words ``normlab.precision.quantize`` draws from ``rng`` for stochastic
    rounding, as int64 (uint32 values, or uint64 read as int64 when ``wide``)."""
    out = []
    for i in range(0, n, _BLOCK):
        m = min(_BLOCK, n - i)
        k = m if wide else (m + 1) // 2
        raw = rng.integers(0, np.iinfo(np.uint64).max, size=k, dtype=np.uint64, endpoint=True)
        out.append(raw.view(np.uint64 if wide else np.uint32)[:m].astype(
            np.uint64 if wide else np.int64).view(np.int64))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def quantize(t: torch.Tensor, fmt: Any, *, rounding: str = "nearest_even",
             overflow: str | None = None, subnormals: bool = True,
             rng: np.random.Generator | None = None,
             random_bits: torch.Tensor | None = None) -> torch.Tensor:
    """Round every value of ``t`` once to ``fmt``'s grid, on ``t``'s device: the values of
    ``normlab.precision.quantize`` with the same arguments, bit for bit.

    Args:
        t: a floating-point tensor (float64 is rounded from its own 53 bits; float32, float16
            and bfloat16 from float32).
        fmt, rounding, overflow, subnormals, rng: as ``normlab.precision.quantize``.
        random_bits: for stochastic rounding instead of ``rng``: the random words (module
            docstring).

    Returns:
        float32 tensor of t's shape (float64 for float64 input). No gradient flows through it
        (use ``normlab.torch.emulate`` for a straight-through rounding).
    """
    fmt, rounding, overflow, subnormals = _check(t, fmt, rounding, overflow, subnormals, rng,
                                                 random_bits)
    wide = t.dtype == torch.float64
    with torch.no_grad():
        x = t.detach().to(torch.float64 if wide else torch.float32)
        c = _consts(fmt, wide)
        if c is None:  # E8M0 from float32: through float64, as normlab.precision does
            y = quantize(x.double(), fmt, rounding=rounding, overflow=overflow,
                         subnormals=subnormals, rng=rng, random_bits=random_bits)
            return y.float()
        flush = not (subnormals and fmt.subnormals)
        if c.d == 0 and not c.variable:  # float32 to float32: nothing to round
            if overflow is None and not flush:
                return x.clone()
            rounding = "toward_zero"
        native = _native(fmt, rounding, overflow, flush)
        if native is not None and not wide:
            return _cast(x, native, fmt, overflow)
        r = None
        if rounding == "stochastic":
            if random_bits is None:
                assert rng is not None  # _check: stochastic rounding needs rng or random_bits
                r = torch.from_numpy(_rand(rng, x.numel(), wide)).to(x.device)
            else:
                r = random_bits.to(device=x.device, dtype=torch.int64).reshape(-1)
        return _round(x.reshape(-1), c, fmt, rounding, overflow, flush, r).reshape(t.shape)


_rand = random_bits


def _native(fmt: FloatFormat, rounding: str, overflow: str | None,
            flush: bool) -> torch.dtype | None:
    """torch's dtype for ``fmt`` where a cast gives normlab's values: nearest-even rounding
    with subnormals, and the format's own overflow or saturation."""
    dt = _NATIVE.get(fmt.name or "")
    if dt is None or rounding != "nearest_even" or flush or fmt != get_format(fmt.name):
        return None
    if overflow not in (None, "saturate", fmt.default_overflow):
        return None
    return dt


def _cast(x: torch.Tensor, dt: torch.dtype, fmt: FloatFormat, overflow: str | None,
          own: bool = False, work: Workspace | None = None,
          inside: bool = False) -> torch.Tensor:
    """float32 x through torch's cast to ``dt`` and back: one rounding to nearest even (a
    saturating overflow clamps first, as normlab sends every value past max to max, inf
    included); NaN as normlab's, the quiet NaN with x's sign. ``own``: x is a finite temporary
    of the caller's, rounded in place (a saturating cast of it has no NaN to look for);
    ``work``: the buffers for that cast (``Workspace.cast_``); ``inside``: x is known to lie
    within +-max already (no clamp)."""
    if own and overflow == "saturate":
        if not inside:
            x.clamp_(-fmt.max_finite, fmt.max_finite)
        if work is not None:
            return work.cast_(x, dt)
        return x.copy_(x.to(dt))
    if overflow == "saturate":
        y = torch.clamp(x, -fmt.max_finite, fmt.max_finite).to(dt).to(torch.float32)
    else:
        y = x.to(dt).to(torch.float32)
    if not fmt.has_inf and overflow != "saturate":  # E4M3: NaN past max + half an ulp (a tie
        # goes to max, the even neighbour); torch's cast saturates there
        half = 2.0 ** (fmt.emax - fmt.mantissa_bits - 1)
        y = torch.where(torch.abs(x) > fmt.max_finite + half, float("nan"), y)
    if not math.isfinite(float(torch.sum(y))):  # one pass; a NaN (or inf) needs a closer look
        nan = torch.isnan(y)
        y = torch.where(nan, torch.copysign(torch.full_like(y, float("nan")), x), y)
    return y


def _magnitude(x: torch.Tensor, c: _Consts) -> tuple[torch.Tensor, torch.Tensor]:
    """(|x| as int64 bits, the sign as a bool tensor)."""
    if c.W == 32:
        bits = x.view(torch.int32).to(torch.int64)
        return bits & 0x7FFFFFFF, bits < 0
    bits = x.view(torch.int64)
    return bits & 0x7FFFFFFFFFFFFFFF, bits < 0


def _overflow_values(c: _Consts, fmt: FloatFormat, rounding: str,
                     overflow: str | None) -> tuple[int, int, int]:
    """(positive overflow, negative overflow, infinity) as magnitude bits (normlab's rules)."""
    value = {"inf": c.inf, "nan": c.qnan, "saturate": c.max_bits}
    if overflow is not None:
        return value[overflow], value[overflow], value[overflow]
    natural = value[fmt.default_overflow]
    pos = c.max_bits if rounding in ("toward_zero", "down") else natural
    neg = c.max_bits if rounding in ("toward_zero", "up") else natural
    return pos, neg, natural


def _round(x: torch.Tensor, c: _Consts, fmt: FloatFormat, rounding: str,
           overflow: str | None, flush: bool, r: torch.Tensor | None) -> torch.Tensor:
    a0, neg = _magnitude(x, c)
    a = a0 if fmt.zero else torch.clamp(a0, min=c.min_normal_bits)
    if c.variable:
        e = torch.clamp(a >> c.P, c.emin_b - c.cap, c.emin_b)
        s = (c.emin_b + c.d) - e
        mask = torch.bitwise_left_shift(torch.ones_like(s), s) - 1
    else:
        s = torch.full_like(a, c.d)
        mask = torch.full_like(a, (1 << c.d) - 1)
    if rounding == "nearest_even":
        inc = (mask >> 1) + (torch.bitwise_right_shift(a | (1 << c.P), s) & 1)
    elif rounding == "nearest_away":  # half an ulp: a tie goes up in magnitude
        inc = (mask + 1) >> 1
    elif rounding == "nearest_toward_zero":  # just under half an ulp: a tie stays
        inc = mask >> 1
    elif rounding in ("up", "down"):
        away = ~neg if rounding == "up" else neg
        inc = torch.where(away, mask, torch.zeros_like(mask))
    elif rounding == "stochastic":
        assert r is not None  # quantize draws the random words for stochastic rounding
        inc = r & mask
    else:  # toward_zero
        inc = torch.zeros_like(mask)
    out = (a + inc) & ~mask
    ov_pos, ov_neg, inf_result = _overflow_values(c, fmt, rounding, overflow)
    over = out > c.max_bits
    out = torch.where(over & ~neg, torch.full_like(out, ov_pos), out)
    out = torch.where(over & neg, torch.full_like(out, ov_neg), out)
    if c.variable and fmt.zero:  # below the smallest subnormal q: 0 or q
        tiny = a < c.tiny_bits
        up = _tiny_up(a, neg, c, rounding, r)
        out = torch.where(tiny, torch.where(up, c.tiny_bits, 0).to(out.dtype), out)
    if flush:
        out = torch.where(out < c.min_normal_bits, torch.zeros_like(out), out)
    nonfinite = a0 >= c.inf
    out = torch.where(nonfinite, torch.where(a0 == c.inf, inf_result, c.qnan).to(out.dtype), out)
    if not fmt.zero:
        out = torch.where(a0 == 0, torch.full_like(out, c.qnan), out)
    if fmt.signed:  # a format without -0 (FNUZ): a value rounding to zero is +0
        return _with_sign(out, neg if fmt.signed_zero else neg & (out != 0), c)
    bad = neg if not fmt.zero else neg & (a0 != 0)
    out = torch.where(bad, torch.full_like(out, c.qnan), out)
    return _with_sign(out, torch.zeros_like(neg), c)


def _tiny_up(a: torch.Tensor, neg: torch.Tensor, c: _Consts, rounding: str,
             r: torch.Tensor | None) -> torch.Tensor:
    """Which values below q round up to q."""
    if rounding in ("nearest_even", "nearest_toward_zero"):  # a tie at q/2 goes to 0
        return a > c.half_tiny_bits
    if rounding == "nearest_away":  # a tie at q/2 goes to q
        return a >= c.half_tiny_bits
    if rounding == "toward_zero":
        return torch.zeros_like(a, dtype=torch.bool)
    if rounding in ("up", "down"):
        return (a != 0) & (~neg if rounding == "up" else neg)
    # stochastic: up with probability x / q, in units of 2^-W: r < ceil(x / q * 2^W)
    assert r is not None  # quantize draws the random words for stochastic rounding
    ft = torch.float32 if c.W == 32 else torch.float64
    mag = (a.to(torch.int32) if c.W == 32 else a).view(ft).to(torch.float64)
    limit = torch.ceil(torch.ldexp(mag * c.q_scale, torch.tensor(float(c.W), dtype=torch.float64,
                                                                   device=a.device)))
    if c.W == 32:
        return r < limit.to(torch.int64)
    hi = torch.floor(limit / 2.0**32)  # exact halves of an integer below 2^64
    lo = limit - hi * 2.0**32
    r_hi, r_lo = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
    hi_i, lo_i = hi.to(torch.int64), lo.to(torch.int64)
    return (r_hi < hi_i) | ((r_hi == hi_i) & (r_lo < lo_i))


def _with_sign(out: torch.Tensor, neg: torch.Tensor, c: _Consts) -> torch.Tensor:
    if c.W == 32:
        signed = torch.where(neg, out | (1 << 31), out)
        signed = torch.where(signed >= 1 << 31, signed - (1 << 32), signed)
        return signed.to(torch.int32).view(torch.float32)
    return torch.where(neg, out | torch.iinfo(torch.int64).min, out).view(torch.float64)


class MXTensor(NamedTuple):
    """An MX-quantized tensor in torch: element values and one power-of-two scale per block."""

    elements: torch.Tensor  # float32 (float64 for float64 input), x's shape
    scales: torch.Tensor  # X per block: x's shape with the block axis ceil(n / block_size)
    axis: int
    block_size: int
    fmt: FloatFormat

    def dequantize(self) -> torch.Tensor:
        """elements * X: exact (X is a power of two) wherever the value is a number of the
        elements' dtype; the MX value 2^128 of a finite float32 block (a round-up scale rule
        with amax next to float32's max) becomes float32's max, never inf, as
        ``normlab.precision.MXTensor.dequantize``."""
        n = self.elements.shape[self.axis]
        X = torch.repeat_interleave(self.scales, self.block_size, dim=self.axis)
        X = X.narrow(self.axis, 0, n)
        out = self.elements * X
        if out.dtype == torch.float32:
            over = torch.isinf(out) & torch.isfinite(self.elements) & torch.isfinite(X)
            out = torch.where(over, torch.copysign(torch.full_like(out, _F32_MAX), out), out)
        return out


def mx_scale(block_amax: torch.Tensor, fmt: Any, scale_rule: str = "floor") -> torch.Tensor:
    """``normlab.precision.mx_scale`` in torch: float64 powers of two in [2^-127, 2^127], NaN
    for a non-finite amax. ``block_amax``: a floating tensor of amaxes (>= 0, or NaN or inf
    where a block holds one); a negative value is refused (a ValueError), as no block has one."""
    if not isinstance(block_amax, torch.Tensor) or not block_amax.is_floating_point():
        raise TypeError(f"block_amax must be a floating-point torch.Tensor; got "
                        f"{type(block_amax).__name__}")
    fmt = torch_format(fmt)
    rule = ck.choice(scale_rule, "scale_rule", SCALE_RULES)
    a = block_amax.to(torch.float64)
    if bool((a < 0).any()):
        raise ValueError(f"block_amax must be >= 0 (a block's max |x|); got "
                         f"{float(a.min())}")
    finite = torch.isfinite(a)
    safe = torch.where(finite & (a > 0), a, torch.ones_like(a))
    one = torch.ones_like(a)
    if rule == "floor":
        e = torch.frexp(safe).exponent.to(torch.int64) - 1 - fmt.emax
        e = torch.where(a > 0, e, torch.full_like(e, -127))
        X = torch.where(e > 127, torch.full_like(a, float("nan")),
                        torch.ldexp(one, torch.clamp(e, -127, 127).to(torch.float64)))
    elif rule == "ceil":
        e = torch.frexp(safe / fmt.max_finite).exponent.to(torch.int64)
        fmax = torch.full_like(a, fmt.max_finite)
        e = e + (safe > torch.ldexp(fmax, e.to(torch.float64))).to(torch.int64)
        e = e - (safe <= torch.ldexp(fmax, (e - 1).to(torch.float64))).to(torch.int64)
        X = torch.where(a > 0, torch.ldexp(one, torch.clamp(e, -127, 127).to(torch.float64)),
                        torch.full_like(a, 2.0**-127))
    elif rule == "nearest":
        X = torch.where(a > 0, quantize(safe / fmt.max_finite, "float8_e8m0fnu"),
                        torch.full_like(a, 2.0**-127))
    else:
        X = _mx_scale_float32_bits(torch.where(finite, a, torch.zeros_like(a)), fmt, rule)
    return torch.where(finite, X, torch.full_like(X, float("nan")))


def _mx_scale_float32_bits(a: torch.Tensor, fmt: FloatFormat, rule: str) -> torch.Tensor:
    """rceil, even and ceil_amax on the float32 bits of amax (finite, >= 0; float64 in),
    as ``normlab.precision.scaling``'s (torchao's rules)."""
    a32 = a.to(torch.float32)
    nan = torch.full_like(a, float("nan"))
    one = torch.ones_like(a)
    if rule == "rceil":
        d = a32 * torch.tensor(1.0 / fmt.max_finite, dtype=torch.float32)  # rounded to float32
        b = d.view(torch.int32).to(torch.int64)
        field, mant = b >> 23, b & 0x7FFFFF
        up = torch.where(field == 0, mant > 0x400000, mant != 0)
        biased = field + up.to(torch.int64)  # 255 (beyond 2^127) is E8M0's NaN
        return torch.where(biased >= 255, nan, torch.ldexp(one, (biased - 127).to(torch.float64)))
    b = a32.view(torch.int32).to(torch.int64)
    if rule == "even":  # round amax to the element's precision, half up, keep the exponent
        b = (b + (1 << (22 - fmt.mantissa_bits))) & 0xFF800000
        extra = torch.zeros_like(b)
    else:  # ceil_amax: the next power of two unless amax is one
        extra = ((b & 0x7FFFFF) != 0).to(torch.int64)
    e = torch.clamp(((b >> 23) & 0xFF) - 127 + extra - fmt.emax, -127, 128)  # 128: E8M0's NaN
    return torch.where(e > 127, nan, torch.ldexp(one, torch.clamp(e, max=127).to(torch.float64)))


def mx_quantize(t: torch.Tensor, fmt: Any = "float8_e4m3fn", *, block_size: int = 32,
                axis: int = -1, scale_rule: str = "floor", rounding: str = "nearest_even",
                rng: np.random.Generator | None = None) -> MXTensor:
    """``normlab.precision.mx_quantize`` in torch operations (OCP MX v1.0 blocks along
    ``axis``), the same elements and scales bit for bit; ``rng`` draws the random bits of
    stochastic rounding as normlab does."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"t must be a floating-point torch.Tensor; got {type(t).__name__}")
    fmt = torch_format(fmt)
    k = ck.integer(block_size, "block_size", lo=1, hi=1 << 16)
    if t.dim() == 0:
        raise ValueError("t must have at least 1 dimension for MX blocks; got a scalar")
    ax = ck.integer(axis, "axis", lo=-t.dim(), hi=t.dim() - 1) % t.dim()
    ck.choice(scale_rule, "scale_rule", SCALE_RULES)
    ck.choice(rounding, "rounding", ROUNDINGS)
    ct = torch.float64 if t.dtype == torch.float64 else torch.float32
    xm = t.detach().to(ct).movedim(ax, -1)
    n = xm.shape[-1]
    pad = (-n) % k
    if pad:
        xm = torch.cat([xm, xm.new_zeros(xm.shape[:-1] + (pad,))], dim=-1)
    xb = xm.reshape(xm.shape[:-1] + ((n + pad) // k, k))  # (..., nb, k)
    block_amax = torch.amax(torch.abs(xb), dim=-1)
    block_amax = torch.where(torch.isnan(xb).any(dim=-1), float("nan"), block_amax)
    X = mx_scale(block_amax, fmt, scale_rule)  # (..., nb) float64
    # V / X in the dtype NumPy's mx_quantize forms it in (exact, or rounding to the same)
    near = _quotient_dtype(np.dtype(np.float32 if ct == torch.float32 else np.float64), fmt,
                           rounding) != np.float64
    wt = ct if near else torch.float64
    v = xb.to(wt) * (1.0 / X[..., None]).to(wt)
    p = quantize(v, fmt, rounding=rounding, overflow="saturate", rng=rng).to(ct)
    p = p.reshape(p.shape[:-2] + (p.shape[-2] * k,))[..., :n]  # (..., nb k): no -1 when empty
    return MXTensor(elements=p.movedim(-1, ax), scales=X.to(ct).movedim(-1, ax), axis=ax,
                    block_size=k, fmt=fmt)


def _amax(t: torch.Tensor) -> float:
    """max |t| as a float (NaN when t holds one; 0 when empty), as ``scaling.amax``."""
    if t.numel() == 0:
        return 0.0
    lo, hi = torch.aminmax(t)  # one pass, no |t| temporary; NaN propagates
    return max(-float(lo), float(hi)) if not (torch.isnan(lo) or torch.isnan(hi)) else math.nan


def _scaled_qdq(x: torch.Tensor, fmt: FloatFormat, scale: float, rounding: str,
                overflow: str | None, rng: np.random.Generator | None,
                finite: bool = False, work: Workspace | None = None,
                amax: float = math.inf) -> torch.Tensor:
    """``normlab.precision.scaled_qdq`` for float32 x: quantize(x * s) * float32(1 / s), both
    products in float32. ``finite``: x is known to hold no NaN or infinity (its amax is
    finite), so a saturating cast that torch does natively rounds x * s in place. ``work``: x
    is the caller's contiguous float32 temporary, rounded in place (its buffers reused).
    ``amax``: x's max |x| where known: when float32(amax * s) is within max, so is every
    x * s (a float32 product rounds monotonically) and nothing needs a clamp."""
    s = np.float32(scale)
    xs = x.mul_(float(s)) if work is not None else x * float(s)
    native = _native(fmt, rounding, overflow, not fmt.subnormals)
    if finite and overflow == "saturate" and native is not None:
        with np.errstate(over="ignore"):
            inside = bool(np.float32(amax) * s <= fmt.max_finite)
        q = _cast(xs, native, fmt, overflow, own=True, work=work, inside=inside)
    elif work is not None:
        q = xs.copy_(quantize(xs, fmt, rounding=rounding, overflow=overflow, rng=rng))
    else:
        q = quantize(xs, fmt, rounding=rounding, overflow=overflow, rng=rng)
    return q.mul_(float(np.float32(1.0) / s))


class Workspace:
    """Buffers reused from one rounding to the next (``normlab.torch.emulate`` keeps one): the
    codes of a cast and the indices that decode them, and float32 tensors by shape. torch's
    CPU allocator returns a large tensor's memory to the system when it is freed, so every new
    large temporary pays a page fault per page on its first write; reused buffers do not."""

    def __init__(self) -> None:
        self._raw: dict[torch.device, torch.Tensor] = {}
        self._free: dict[tuple, list[torch.Tensor]] = {}
        self._luts: dict[tuple, torch.Tensor] = {}

    def _bytes(self, n: int, device: torch.device) -> torch.Tensor:
        buf = self._raw.get(device)
        if buf is None or buf.numel() < n:
            buf = self._raw[device] = torch.empty(n, dtype=torch.uint8, device=device)
        return buf[:n]

    def cast_(self, x: torch.Tensor, dt: torch.dtype,
              src: torch.Tensor | None = None) -> torch.Tensor:
        """x (contiguous float32) through torch's cast to ``dt`` and back, in place (``src``:
        a float32 tensor of x's shape cast into x instead): the one rounding is the cast's; the
        codes are decoded exactly (a float8 code through the table of its 256 values: torch's
        own decoding, without its per-element conversion)."""
        n = x.numel()
        if torch.empty(0, dtype=dt).element_size() > 1:
            codes = self._bytes(2 * n, x.device).view(dt).view(x.shape)
            codes.copy_(x if src is None else src)
            return x.copy_(codes)
        if src is not None:
            x.copy_(src)
        off = -(-n // 64) * 64  # the indices start aligned
        raw = self._bytes(off + 4 * n, x.device)
        raw[:n].view(dt).view(x.shape).copy_(x)
        idx = raw[off:].view(torch.int32)
        idx.copy_(raw[:n])
        torch.index_select(self._lut(dt, x.device), 0, idx, out=x.view(-1))
        return x

    def _lut(self, dt: torch.dtype, device: torch.device) -> torch.Tensor:
        key = (dt, device)
        if key not in self._luts:
            codes = torch.arange(256, dtype=torch.uint8, device=device)
            self._luts[key] = codes.view(dt).to(torch.float32)
        return self._luts[key]

    def take(self, like: torch.Tensor) -> torch.Tensor:
        """A float32 tensor of ``like``'s shape and device (values unset), laid out as
        ``like`` where that is a transposed contiguous matrix (so the products that read it run
        as they would on ``like``), contiguous otherwise."""
        key = (tuple(like.shape), is_transposed(like), like.device)
        free = self._free.get(key)
        if free:
            return free.pop()
        if key[1]:
            return torch.empty(like.shape[::-1], dtype=torch.float32, device=like.device).t()
        return torch.empty(like.shape, dtype=torch.float32, device=like.device)

    def give(self, t: torch.Tensor) -> None:
        """Return a tensor from ``take`` for reuse (its holder no longer reads it)."""
        self._free.setdefault((tuple(t.shape), is_transposed(t), t.device), []).append(t)


def is_transposed(t: torch.Tensor) -> bool:
    """t is a matrix whose transpose, and not itself, is contiguous."""
    return t.dim() == 2 and not t.is_contiguous() and t.t().is_contiguous()


def _flat(t: torch.Tensor) -> torch.Tensor | None:
    """t's elements as one contiguous vector in memory order (contiguous t, or a transposed
    contiguous matrix), for element-wise work; None otherwise."""
    if t.is_contiguous():
        return t.view(-1)
    return t.t().reshape(-1) if is_transposed(t) else None


def _check_apply(precision: Any, t: Any) -> None:
    if not isinstance(precision, Precision):
        raise TypeError(f"precision must be a normlab.precision.Precision; got "
                        f"{type(precision).__name__}")
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"t must be a floating-point torch.Tensor; got {type(t).__name__}")


def apply(precision: Precision, t: torch.Tensor, *, rng: np.random.Generator | None = None,
          state: ScalingState | None = None) -> torch.Tensor:
    """``Precision.apply`` in torch operations on ``t``'s device, the same values bit for bit:
    unscaled, and each scaling dialect that :data:`TORCH_SCALINGS` has in torch operations
    (per-tensor: the scale from this tensor's amax; delayed: ``state`` from
    ``precision.new_state()``, its scale, and this tensor's amax recorded in its history; MX:
    blocks along the recipe's axis). float32 (or float16 / bfloat16) input; returns float32.
    Any other dialect of ``normlab.precision.scaling.SCALINGS``, a precision with ``sr_bits`` and
    float64 input go through ``Precision.apply`` on a CPU copy: the same bits, at NumPy's
    speed."""
    _check_apply(precision, t)
    s, p = precision.scaling, precision
    backend = None if s is None else TORCH_SCALINGS.get(s.kind)
    if p.sr_bits is not None or t.dtype == torch.float64 or (s is not None and backend is None):
        a = t.detach().to("cpu").numpy()
        out = p.apply(a if t.dtype == torch.float64 else a.astype(np.float32), rng=rng,
                      state=state)
        return torch.from_numpy(np.ascontiguousarray(out)).to(t.device)
    x = t.detach().to(torch.float32)
    if backend is None:
        return quantize(x, p.format, rounding=p.rounding, overflow=p.overflow, rng=rng)
    return backend.qdq(p, x, rng, state, None)


def apply_(precision: Precision, t: torch.Tensor, *, rng: np.random.Generator | None = None,
           state: ScalingState | None = None,
           work: Workspace | None = None) -> torch.Tensor:
    """``apply`` written into ``t`` (a float32 tensor the caller owns: contiguous, or a
    transposed contiguous matrix), the same bits. Unscaled rounding and the dialects whose
    :data:`TORCH_SCALINGS` entry works in place (per-tensor, delayed), rounding
    deterministically, run in place on its memory (element-wise: its order does not matter), a
    format torch stores (nearest even, a finite tensor) through torch's cast and ``work``'s
    buffers; stochastic rounding (which draws in t's order) and every other dialect (MX blocks
    along an axis) are ``apply`` copied in. Returns ``t``."""
    _check_apply(precision, t)
    flat = _flat(t)
    if t.dtype != torch.float32 or flat is None or t.requires_grad:
        raise ValueError(f"t must be a float32 tensor without a gradient, contiguous or a "
                         f"transposed contiguous matrix; got {t.dtype}, strides {t.stride()}")
    s, p, work = precision.scaling, precision, work or Workspace()
    backend = None if s is None else TORCH_SCALINGS.get(s.kind)
    if p.rounding == "stochastic" or p.sr_bits is not None or (
            s is not None and (backend is None or not backend.in_place)):
        t.copy_(apply(p, t, rng=rng, state=state))
    elif backend is not None:
        backend.qdq(p, flat, rng, state, work)
    else:
        _unscaled_(p, flat, work)
    return t


def cast_from(p: Precision, src: torch.Tensor, dst: torch.Tensor, work: Workspace) -> bool:
    """``dst = apply(p, src)`` straight from ``src`` through torch's cast (one pass less than a
    copy and a rounding in place) where ``p`` is unscaled and rounds to nearest even to a
    format torch stores with an infinity, and ``src`` is finite float32 laid out as ``dst``:
    True; otherwise nothing is written: False."""
    fmt = p.format
    if p.scaling is not None or p.overflow == "saturate" or not fmt.has_inf or \
            src.dtype != torch.float32 or is_transposed(src) != is_transposed(dst):
        return False
    dt = _native(fmt, p.rounding, p.overflow, not fmt.subnormals)
    fs, fd = _flat(src), _flat(dst)
    if dt is None or fs is None or fd is None or not math.isfinite(float(torch.sum(fs))):
        return False
    work.cast_(fd, dt, src=fs)  # overflow past max: inf, normlab's and the cast's
    return True


def _unscaled_(p: Precision, x: torch.Tensor, work: Workspace) -> torch.Tensor:
    """An unscaled deterministic rounding of contiguous float32 x, in place."""
    fmt = p.format
    dt = _native(fmt, p.rounding, p.overflow, not fmt.subnormals)
    if dt is None or not (fmt.has_inf or p.overflow == "saturate") or \
            not math.isfinite(float(torch.sum(x))):  # (a NaN, an inf or a sum past max)
        return x.copy_(quantize(x, fmt, rounding=p.rounding, overflow=p.overflow))
    if p.overflow == "saturate":
        x.clamp_(-fmt.max_finite, fmt.max_finite)
    return work.cast_(x, dt)  # overflow past max: inf, normlab's and the cast's


def _tensor_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
                state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """Per-tensor scaling of float32 x (in place with ``work``)."""
    s: Any = p.scaling  # a TensorScaling (TORCH_SCALINGS["tensor"])
    overflow = "saturate" if p.overflow is None else p.overflow
    am = _amax(x)
    scale = tensor_scale(am, p.format, margin=s.margin, power_of_two=s.power_of_two)
    return _scaled_qdq(x, p.format, scale, p.rounding, overflow, rng, math.isfinite(am), work, am)


def _delayed_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
                 state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """Delayed scaling of float32 x with ``state``'s scale, x's amax recorded in its history
    (in place with ``work``)."""
    if not isinstance(state, DelayedScalingState):
        raise TypeError("this precision uses delayed scaling: pass state= (from "
                        "precision.new_state(), one per tensor, updated every step)")
    am = np.float32(_amax(x))
    overflow = "saturate" if p.overflow is None else p.overflow
    y = _scaled_qdq(x, state.fmt, state.scale, p.rounding, overflow, rng,
                    bool(np.isfinite(am)), work, float(am))
    state.record_amax(float(am))
    return y


class TorchScaling(NamedTuple):
    """A scaling dialect in torch operations: ``qdq(precision, x, rng, state, work)`` of a
    float32 tensor, the same bits as the dialect's own ``qdq``; ``in_place``: with a
    ``Workspace`` it rounds x in place (element-wise, for ``apply_``)."""

    qdq: Any
    in_place: bool = False


#: The dialects (``normlab.precision.scaling.SCALINGS``'s kinds) that normlab.torch computes in
#: torch operations; any other dialect goes through its NumPy ``qdq`` on a CPU copy. The block
#: dialects' entries are ``normlab.torch.blocks``'s (added when ``normlab.torch`` is imported).
TORCH_SCALINGS: dict[str, TorchScaling] = {
    "tensor": TorchScaling(_tensor_qdq, in_place=True),
    "delayed": TorchScaling(_delayed_qdq, in_place=True),
}
