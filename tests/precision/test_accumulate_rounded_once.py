"""Each addition of a low-precision accumulator is the exact sum rounded once, in
``precision.accumulate_sum``, the numba kernel (``kernels.accumulate_sum``, the norms' and
softmax's ``accumulate=``) and ``matmul``'s accumulate role.

A plain float64 addition followed by a rounding to the format rounds twice when the exact sum
needs more than 53 bits (a bfloat16 or tfloat32 accumulator and float32 terms span float32's
exponent range): ``[2^-60, 1 + 2^-8]`` in bfloat16 came out 1.0, the exact sum rounded once is
1.0078125. The exhaustive check: every float32 value halfway between two bfloat16 numbers (the
only place where a second rounding can land), perturbed by every power of two from bfloat16's
smallest subnormal up to a quarter of its spacing, both signs, must round to the neighbour on the
perturbation's side. The exact check: random sums of wide exponent spread against exact rational
arithmetic rounded by a rule written here from the definition of round-to-nearest-even.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from normlab import kernels
from normlab.precision import (
    FloatFormat,
    PrecisionPolicy,
    accumulate_sum,
    get_format,
    get_policy,
    matmul,
    quantize,
)
from normlab.precision.accumulate import add_to_odd


def _policy(fmt: str) -> PrecisionPolicy:
    data = {**get_policy("fp32").to_dict(), "name": "acc", "accumulate": fmt}
    return PrecisionPolicy.from_json(json.dumps(data))


@pytest.mark.parametrize("fmt, terms, want", [
    ("bfloat16", [2.0**-60, 1 + 2.0**-8], 1.0078125),
    ("bfloat16", [-(2.0**-60), -(1 + 2.0**-8)], -1.0078125),
    ("tfloat32", [2.0**-70, 1 + 2.0**-11], 1.0009765625),
])
def test_the_reported_sums(fmt, terms, want):
    x = np.array(terms, np.float32)
    assert accumulate_sum(x, fmt) == want
    assert kernels.accumulate_sum(x, fmt) == want
    a = np.array([[x[0] / 2.0**-30, x[1]]], np.float32)  # products 2^-30 a0 and 1 * a1
    b = np.array([[2.0**-30], [1.0]], np.float32)
    assert matmul(a, b, _policy(fmt))[0, 0] == want


def _bf16_ties(sign: float) -> tuple[np.ndarray, np.ndarray]:
    """Every finite float32 halfway between two bfloat16 numbers (low 16 bits 0x8000), with
    its unbiased exponent."""
    hi = np.arange(1 << 15, dtype=np.uint32)  # exponent field and 7 mantissa bits
    bits = (hi << 16) | 0x8000
    bits = bits[((hi >> 7) & 0xFF) != 0]  # (field 0: float32 subnormals, no perturbation fits)
    bits = bits[((bits >> 23) & 0xFF) != 0xFF]
    t = bits.view(np.float32) * np.float32(sign)
    return t, ((bits >> 23) & 0xFF).astype(np.int64) - 127


def _exhaustive_pairs(k: int):
    """(accumulator a = +-2^k, term b a tie with |a| <= spacing / 4, the correct sum)."""
    for sb in (1.0, -1.0):
        ties, e = _bf16_ties(sb)
        keep = e - 9 >= k  # 2^k at most a quarter of bfloat16's spacing 2^(e - 7)
        b = ties[keep]
        if b.size == 0:
            continue
        for sa in (1.0, -1.0):
            a = np.full(b.size, sa * 2.0**k, np.float32)
            up = quantize(b.astype(np.float64), "bfloat16", rounding="up")
            down = quantize(b.astype(np.float64), "bfloat16", rounding="down")
            yield a, b, up if sa > 0 else down


KS = range(-133, 119)  # bfloat16's smallest subnormal 2^-133 up to a quarter spacing of its max


def test_every_bfloat16_tie_with_every_perturbation_rounds_once():
    """The one algorithm (float64 rounded to odd, then the format) and the three entry points
    that run it; 16,321,536 pairs."""
    count = 0
    for k in KS:
        for a, b, want in _exhaustive_pairs(k):
            got = quantize(add_to_odd(a, b), "bfloat16")
            np.testing.assert_array_equal(got, want, err_msg=f"2^{k}")
            count += a.size
    assert count == 252 * 253 // 2 * 128 * 2 * 2  # sum over exponents of (e + 125)


@pytest.mark.parametrize("k", [-133, -126, -100, -60, -30, -9, 20, 118])
def test_entry_points_on_the_ties(k):
    """accumulate_sum, the kernel and matmul on every tie at a few perturbations each."""
    for a, b, want in _exhaustive_pairs(k):
        x = np.stack([a, b], axis=-1)
        np.testing.assert_array_equal(accumulate_sum(x, "bfloat16"), want)
        np.testing.assert_array_equal(kernels.accumulate_sum(x, "bfloat16"), want)
        ones = np.ones((2, 1), np.float32)
        got = matmul(x, ones, _policy("bfloat16"))[:, 0]
        np.testing.assert_array_equal(got, want.astype(np.float32))


def _round_exact(q: Fraction, fmt: FloatFormat) -> float:
    """q rounded to nearest even on fmt's grid, from the definition (no overflow here)."""
    if q == 0:
        return 0.0
    sign, m = (1, q) if q > 0 else (-1, -q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    step = Fraction(2) ** (max(e, fmt.emin) - fmt.mantissa_bits)  # the grid's spacing at m
    n, r = divmod(m, step)
    if r * 2 > step or (r * 2 == step and n % 2 == 1):
        n += 1
    return sign * float(n * step)


@pytest.mark.parametrize("fmt", ["bfloat16", "tfloat32", "float16", "float8_e4m3fn",
                                 FloatFormat(8, 13, name="e8m13")])
def test_random_wide_sums_against_exact_arithmetic(fmt):
    """Sums of an accumulator value and a float32 term whose exponents lie up to 150 binades
    apart, rounded once: 3000 per format, against Fraction arithmetic."""
    f = get_format(fmt)
    rng = np.random.default_rng(7)
    n = 3000
    lo = max(f.emin - f.mantissa_bits, -149)
    hi = min(f.emax, 120)
    ea, eb = rng.integers(lo, hi, n), rng.integers(-140, hi, n)
    a = quantize(rng.uniform(1, 2, n) * np.exp2(ea) * rng.choice([-1, 1], n), f)
    b = (rng.uniform(1, 2, n) * np.exp2(eb) * rng.choice([-1, 1], n)).astype(np.float32)
    # half of them aimed at a midpoint of the format near b, off by a tiny a
    tie = rng.random(n) < 0.5
    mid = quantize(b.astype(np.float64), f, rounding="down") + 2.0 ** (
        np.floor(np.log2(np.abs(b.astype(np.float64)) + 1e-300)) - f.mantissa_bits - 1)
    b = np.where(tie, mid.astype(np.float32), b).astype(np.float32)
    got = quantize(add_to_odd(a, b.astype(np.float64)), f)
    want = [_round_exact(Fraction(float(x)) + Fraction(float(y)), f) for x, y in zip(a, b)]
    ok = np.isfinite(got) & (np.abs(np.array(want)) <= f.max_finite)
    assert ok.sum() > n * 0.9
    np.testing.assert_array_equal(got[ok], np.array(want)[ok])
    # and the accumulator of accumulate_sum, pair by pair
    acc = accumulate_sum(np.stack([a, b], -1).astype(np.float32), f)
    np.testing.assert_array_equal(acc[ok], np.array(want)[ok])


def test_add_to_odd():
    """Exact sums stay; inexact ones land on the odd float64 neighbour on the exact side."""
    assert add_to_odd(1.0, 0.5) == 1.5
    assert add_to_odd(1.0, 2.0**-60) == 1 + 2.0**-52
    assert add_to_odd(1.0, -(2.0**-60)) == 1 - 2.0**-53
    assert add_to_odd(-1.0, -(2.0**-60)) == -(1 + 2.0**-52)
    assert add_to_odd(1 + 2.0**-52, 2.0**-60) == 1 + 2.0**-52  # already odd
    assert np.isinf(add_to_odd(np.inf, 1.0)) and np.isnan(add_to_odd(np.nan, 1.0))
    assert add_to_odd([1.0, 2.0], 2.0**-80).tolist() == [1 + 2.0**-52, 2 + 2.0**-51]
