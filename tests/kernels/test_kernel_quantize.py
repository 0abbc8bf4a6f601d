"""quantize kernel: bit-exact with normlab.precision.quantize for every format, rounding mode and
overflow mode (stochastic rounding included, for the same generator state); unbiased."""

import numpy as np
import pytest

from normlab import kernels as K
from normlab.precision import quantize as Q

FORMATS = ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn",
           "float4_e2m1fn", "float8_e8m0fnu", "float32", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "float8_e4m3b11fnuz"]
MODES = ["nearest_even", "nearest_away", "nearest_toward_zero", "toward_zero", "up", "down",
         "stochastic"]


def _values(rng, dtype):
    """Every binade from float32's subnormals to its overflow, plus the specials."""
    x = rng.normal(size=6000) * np.exp2(rng.uniform(-150, 130, size=6000))
    x = x.astype(dtype)
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 3.0]
    return x


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("overflow", [None, "saturate"])
def test_bit_exact_with_the_reference(rng, src, fmt, rounding, overflow):
    with np.errstate(over="ignore"):
        x = _values(rng, src)
    kw = dict(rounding=rounding, overflow=overflow)
    a = K.quantize(x, fmt, rng=np.random.default_rng(3), **kw)
    b = Q(x, fmt, rng=np.random.default_rng(3), **kw)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn",
                                 "float8_e8m0fnu"])
@pytest.mark.parametrize("k", [1, 3, 8, 13])
def test_k_bit_stochastic_rounding_is_bit_exact_with_the_reference(rng, src, fmt, k):
    with np.errstate(over="ignore"):
        x = _values(rng, src)
    a = K.quantize(x, fmt, rounding="stochastic", rng=np.random.default_rng(4), sr_bits=k)
    b = Q(x, fmt, rounding="stochastic", rng=np.random.default_rng(4), sr_bits=k)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_flush_and_low_precision_inputs(rng):
    with np.errstate(over="ignore"):
        x = _values(rng, np.float32).astype(np.float16)
    for sub in (True, False):
        a = K.quantize(x, "float8_e4m3fn", subnormals=sub)
        b = Q(x, "float8_e4m3fn", subnormals=sub)
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn"])
def test_stochastic_rounding_is_unbiased(fmt):
    """E[q(x)] = x: the mean of many roundings of one value is within 5 standard errors."""
    rng = np.random.default_rng(9)
    x = np.full(200_000, 1.0 + 1.0 / 3.0, np.float32)
    q = K.quantize(x, fmt, rounding="stochastic", rng=rng).astype(np.float64)
    assert len(np.unique(q)) == 2  # the two neighbours only
    se = q.std() / np.sqrt(q.size)
    assert abs(q.mean() - float(x[0])) < 5 * se


def test_stochastic_needs_rng():
    with pytest.raises(TypeError, match="needs rng"):
        K.quantize(np.ones(3, np.float32), "bfloat16", rounding="stochastic")
