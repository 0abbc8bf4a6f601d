"""The statistical conformance test of stochastic rounding (``precision.stochastic.sr_check``):
normlab's roundings pass it, and deliberately broken ones fail it by many standard deviations:
one of the k random bits dropped, one repeated, a random word used for two values.

Each statistic is tested at a false-alarm rate of 1e-6 (its limit: the two-sided normal quantile
4.89, the chi-square's upper 1e-6 quantile), so a correct rounding fails one of the four with
probability below 4e-6; the seeds are fixed, so the outcome here is deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from normlab import kernels
from normlab.precision import (
    fp8_block_quantize,
    get_format,
    mx_quantize,
    nvfp4_quantize,
    quantize,
    sr_check,
)
from normlab.precision.stochastic import chi2_quantile, normal_quantile, quantize_sr


def test_quantiles():
    """Against scipy 1.17.1's norm.ppf and chi2.ppf (run in the conformance venv)."""
    assert normal_quantile(0.975) == pytest.approx(1.959963984540054, rel=1e-12)
    assert normal_quantile(1 - 5e-7) == pytest.approx(4.89163847571478, rel=1e-10)
    assert normal_quantile(1e-6) == pytest.approx(-4.753424308822899, rel=1e-10)
    assert chi2_quantile(1 - 1e-6, 255) == pytest.approx(377.0781154988172, rel=1e-3)
    assert chi2_quantile(1 - 1e-6, 1275) == pytest.approx(1529.5896344601763, rel=1e-3)
    assert chi2_quantile(1 - 1e-6, 50) == pytest.approx(112.60809249886348, rel=5e-3)
    assert chi2_quantile(0.95, 1000) == pytest.approx(1074.679448803441, rel=1e-4)


@pytest.mark.parametrize("fmt", ["float4_e2m1fn", "float8_e4m3fn", "float8_e5m2", "bfloat16",
                                 "float6_e3m2fn"])
@pytest.mark.parametrize("k", [8, 4, None])
def test_quantize_passes(fmt, k):
    r = sr_check(quantize_sr(fmt, k), fmt, sr_bits=k)
    assert r.passed, r.summary()
    assert r.off_grid == 0 and r.draws == r.cells * (1 << 14)


def test_the_fused_kernel_passes():
    r = sr_check(quantize_sr("float4_e2m1fn", 8, kernels.quantize), "float4_e2m1fn", sr_bits=8)
    assert r.passed, r.summary()


# --- deliberately broken roundings -----------------------------------------------------------

def _two_neighbours(v, fmt):
    """(toward zero, away from zero) neighbours of v on fmt's grid."""
    up, down = quantize(v, fmt, rounding="up"), quantize(v, fmt, rounding="down")
    return quantize(v, fmt, rounding="toward_zero"), np.where(v >= 0, up, down)


def _broken(fmt, k, how):
    """A k-bit stochastic rounding written from its definition (up when r < floor(2^k f)),
    broken as ``how`` says."""
    def run(v, rng):
        lo, hi = _two_neighbours(v, fmt)
        span = (hi.astype(np.float64) - lo)
        f = np.divide(v.astype(np.float64) - lo, span, out=np.zeros(v.shape), where=span != 0)
        r = rng.integers(0, 1 << k, v.size)
        if how == "repeat":  # bit 0 is a copy of bit 1
            r = (r & ~1) | ((r >> 1) & 1)
        elif how == "drop":  # bit 0 is always 0
            r = r & ~1
        elif how == "reuse":  # one random word for each pair of neighbouring values
            r = np.repeat(r[::2], 2)[: v.size]
        up = r < np.floor(np.ldexp(f, k))
        return np.where(up, hi, lo)
    return run


def test_the_reference_written_here_passes():
    """The test-side rounding unbroken: the failures below are the breakages', not its."""
    r = sr_check(_broken("float4_e2m1fn", 8, "none"), "float4_e2m1fn", sr_bits=8)
    assert r.passed, r.summary()


@pytest.mark.parametrize("how", ["drop", "repeat", "reuse"])
@pytest.mark.parametrize("fmt", ["float4_e2m1fn", "float8_e4m3fn"])
def test_a_broken_random_bit_fails(how, fmt):
    r = sr_check(_broken(fmt, 8, how), fmt, sr_bits=8)
    assert not r.passed, r.summary()
    if how == "reuse":
        assert r.z_lag > 10 * r.z_limit  # neighbours share their random word
    else:
        assert r.chi2 > r.chi2_limit + 10 * np.sqrt(2 * r.df)  # ten standard deviations


def test_normlab_sr_with_a_bit_missing_fails():
    """quantize with 7 bits checked as the 8-bit rounding it would claim to be."""
    r = sr_check(quantize_sr("float4_e2m1fn", 7), "float4_e2m1fn", sr_bits=8)
    assert not r.passed and r.chi2 > 2 * r.chi2_limit, r.summary()


# --- the block dialects' element rounding -------------------------------------------------------

def _in_blocks(quantizer, block, top, extra=None):
    """``round_fn`` for a block dialect: each value in a block of its own beside ``top`` (so
    that the block's encode scale is 1), and ``extra`` as one more row (NVFP4's tensor amax);
    the elements come back with the values the dialect actually rounded (v times its encode
    scale, checked to be v)."""
    def run(v, rng):
        n = v.size
        x = np.zeros((n + (extra is not None), block), np.float32)
        x[:n, 0], x[:n, 1] = v, top
        if extra is not None:
            x[n, 0] = extra
        t = quantizer(x, rng)
        enc = np.asarray(t.encode, np.float64).reshape(x.shape[0], -1)[:n, 0]
        assert (enc == 1).all()
        return t.elements[:n, 0], (v.astype(np.float64) * enc).astype(np.float32)
    return run


def test_nvfp4_stochastic_rounding_passes():
    """TE's NVFP4 with 8-bit SR (its gradients), on the values it rounds: a tensor amax of 10.5
    makes S_enc = 2688 / 10.5 = 256, a block amax of 6 its E4M3 scale 256, its encode 1."""
    def q(x, rng):
        return nvfp4_quantize(x, rounding="stochastic", rng=rng, sr_bits=8)

    fmt = get_format("float4_e2m1fn")
    r = sr_check(_in_blocks(q, 16, 6.0, extra=10.5), fmt, sr_bits=8, draws=1 << 12)
    assert r.passed, r.summary()


def test_fp8_blocks_and_mx_stochastic_rounding_pass():
    def q(x, rng):
        return fp8_block_quantize(x, dialect="te", rounding="stochastic", rng=rng, sr_bits=8)

    r = sr_check(_in_blocks(q, 128, 448.0), "float8_e4m3fn", sr_bits=8, draws=1 << 10)
    assert r.passed, r.summary()

    def m(v, rng):  # MX: a block of 32 whose max fixes X = 2^0 for E2M1 (floor rule)
        x = np.zeros((v.size, 32), np.float32)
        x[:, 0], x[:, 1] = v, 6.0
        return mx_quantize(x, "float4_e2m1fn", rounding="stochastic", rng=rng,
                           sr_bits=8).elements[:, 0]

    r = sr_check(m, "float4_e2m1fn", sr_bits=8, draws=1 << 12)
    assert r.passed, r.summary()


def test_bad_arguments():
    with pytest.raises(ValueError, match="draws"):
        sr_check(quantize_sr("bfloat16"), "bfloat16", draws=1)
    with pytest.raises(ValueError, match="alpha"):
        sr_check(quantize_sr("bfloat16"), "bfloat16", alpha=2.0)
    with pytest.raises(ValueError, match="p must lie"):
        normal_quantile(1.0)
