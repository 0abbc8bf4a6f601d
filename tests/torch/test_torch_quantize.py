"""normlab.torch.quantize and mx_quantize: the bits of normlab.precision's."""

import ml_dtypes
import numpy as np
import pytest
import torch

from normlab.precision import FORMATS, ROUNDINGS, get_format
from normlab.precision import mx_quantize as np_mx_quantize
from normlab.precision import quantize as np_quantize
from normlab.precision.scaling import SCALE_RULES
from normlab.torch import mx_quantize, quantize

DETERMINISTIC = tuple(r for r in ROUNDINGS if r != "stochastic")  # every one normlab has
SMALL = ("float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn")
EIGHT = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu")
SIXTEEN = ("bfloat16", "float16")


def _overflows(fmt):
    f = get_format(fmt)
    return [None, "saturate"] + (["inf"] if f.has_inf else []) + (["nan"] if f.has_nan else [])


def _same(x, fmt, **kw):
    want = np_quantize(x, fmt, **kw)
    got = quantize(torch.from_numpy(x), fmt, **kw).numpy()
    assert got.dtype == want.dtype
    ut = np.uint32 if want.dtype == np.float32 else np.uint64
    bad = np.flatnonzero(got.view(ut) != want.view(ut))
    assert bad.size == 0, (fmt, kw, x[bad[:5]], got[bad[:5]], want[bad[:5]])


def _all_16bit_inputs():
    """Every float16 and bfloat16 value, as float32, and their float32 neighbours."""
    codes = np.arange(1 << 16, dtype=np.uint16)
    x = np.concatenate([codes.view(np.float16).astype(np.float32),
                        codes.view(ml_dtypes.bfloat16).astype(np.float32)])
    with np.errstate(invalid="ignore"):  # (NaN's neighbours are NaN)
        return np.concatenate([x, np.nextafter(x, np.float32(np.inf)),
                               np.nextafter(x, np.float32(-np.inf))])


def _codes_and_midpoints(fmt):
    """Every code of ``fmt``, the midpoints of neighbours, and float32's neighbours of both,
    beyond max and below the smallest subnormal too."""
    f = get_format(fmt)
    codes = np.arange(1 << (1 + f.exponent_bits + f.mantissa_bits), dtype=np.uint8)
    v = np.unique(codes.view(f.dtype).astype(np.float32))
    v = v[np.isfinite(v) & (v >= 0)]
    v = np.concatenate([v, [f.max_finite * 2, f.max_finite * 1.5, np.inf, np.nan]])
    v = np.sort(np.unique(v.astype(np.float32)))
    mids = (v[:-1].astype(np.float64) + v[1:]) / 2
    x = np.concatenate([v, mids.astype(np.float32), [v[1] / 4 if v.size > 1 else 0]])
    with np.errstate(invalid="ignore"):
        up, down = np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(0))
    x = np.concatenate([x, up, down])
    return np.concatenate([x, -x]).astype(np.float32)


@pytest.mark.parametrize("fmt", SMALL + EIGHT)
@pytest.mark.parametrize("rounding", DETERMINISTIC)
def test_small_formats_every_code_and_midpoint(fmt, rounding):
    x = _codes_and_midpoints(fmt) if fmt in SMALL else _all_16bit_inputs()
    for overflow in _overflows(fmt):
        for subnormals in (True, False):
            _same(x, fmt, rounding=rounding, overflow=overflow, subnormals=subnormals)


@pytest.mark.parametrize("fmt", ["float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"])
@pytest.mark.parametrize("rounding", DETERMINISTIC)
def test_fnuz_formats_every_16bit_value(fmt, rounding):
    """FNUZ formats have no -0: a negative value rounding to zero is +0 (the exhaustive run
    found torch's -0 for those, 973078529 of 2^32 float32 inputs of float8_e4m3fnuz)."""
    x = _all_16bit_inputs()
    for overflow in _overflows(fmt):
        for subnormals in (True, False):
            _same(x, fmt, rounding=rounding, overflow=overflow, subnormals=subnormals)


@pytest.mark.parametrize("fmt", SIXTEEN + ("tfloat32", "float32"))
@pytest.mark.parametrize("rounding", DETERMINISTIC)
def test_sixteen_bit_formats_every_value(fmt, rounding):
    x = _all_16bit_inputs()
    for overflow in _overflows(fmt):
        _same(x, fmt, rounding=rounding, overflow=overflow)
    _same(x, fmt, rounding=rounding, subnormals=False)


@pytest.mark.parametrize("fmt", ["bfloat16", "float16", "float8_e4m3fn", "float4_e2m1fn",
                                 "float8_e8m0fnu"])
@pytest.mark.parametrize("rounding", DETERMINISTIC + ("stochastic",))
def test_float64_and_random_float32(rng, fmt, rounding):
    x = rng.standard_normal(300_000) * np.exp2(rng.integers(-150, 130, 300_000))
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    for dt in (np.float64, np.float32):
        with np.errstate(over="ignore"):
            xs = x.astype(dt)
        kw = {"rng": np.random.default_rng(7)} if rounding == "stochastic" else {}
        want = np_quantize(xs, fmt, rounding=rounding, **kw)
        kw = {"rng": np.random.default_rng(7)} if rounding == "stochastic" else {}
        got = quantize(torch.from_numpy(xs), fmt, rounding=rounding, **kw).numpy()
        ut = np.uint32 if dt == np.float32 else np.uint64
        assert np.array_equal(got.view(ut), want.view(ut)), (fmt, rounding, dt)


@pytest.mark.parametrize("n", [1, (1 << 17) + 3, 3 << 17])
def test_stochastic_draws_the_same_bits_at_any_size(rng, n):
    x = rng.standard_normal(n).astype(np.float32) * np.float32(2.0**-130)
    x[::3] = rng.standard_normal(x[::3].size).astype(np.float32) * np.float32(2.0**10)
    for fmt in ("bfloat16", "float8_e5m2"):
        want = np_quantize(x, fmt, rounding="stochastic", rng=np.random.default_rng(5))
        got = quantize(torch.from_numpy(x), fmt, rounding="stochastic",
                       rng=np.random.default_rng(5)).numpy()
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_stochastic_rounding_is_unbiased():
    lo, hi = 1.0, 1.0 + 2.0**-7  # neighbours in bfloat16
    x = torch.full((200_000,), lo + 0.3 * (hi - lo))
    y = quantize(x, "bfloat16", rounding="stochastic", rng=np.random.default_rng(1)).double()
    assert set(y.unique().tolist()) == {lo, hi}
    p = (y == hi).double().mean().item()
    assert abs(p - 0.3) < 4 * np.sqrt(0.3 * 0.7 / x.numel())  # 4 s.e.


def test_low_precision_tensors_and_gradients():
    x = torch.tensor([1.0, 3.3, -7.9], dtype=torch.bfloat16, requires_grad=True)
    y = quantize(x, "float8_e4m3fn")
    assert y.dtype == torch.float32 and not y.requires_grad
    assert np.array_equal(y.numpy(), np_quantize(x.detach().float().numpy(), "float8_e4m3fn"))


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "float6_e2m3fn",
                                 "float4_e2m1fn"])
@pytest.mark.parametrize("scale_rule", SCALE_RULES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_mx_quantize_equals_normlab(rng, fmt, scale_rule, rounding):
    x = (rng.standard_normal((5, 70)) * np.exp2(rng.integers(-30, 30, (5, 1)))).astype(np.float32)
    x[0, :32] = 0.0
    x[1, 3] = np.nan
    for axis in (-1, 0):
        kw = dict(block_size=32, axis=axis, scale_rule=scale_rule, rounding=rounding)
        want = np_mx_quantize(x, fmt, rng=np.random.default_rng(3), **kw)
        got = mx_quantize(torch.from_numpy(x), fmt, rng=np.random.default_rng(3), **kw)
        for a, b in ((got.elements, want.elements), (got.scales, want.scales),
                     (got.dequantize(), want.dequantize())):
            assert np.array_equal(a.numpy(), b, equal_nan=True)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2", "float6_e3m2fn",
                                 "float4_e2m1fn"])
@pytest.mark.parametrize("scale_rule", SCALE_RULES)
def test_mx_scale_equals_normlab_at_every_edge(fmt, scale_rule):
    """Every scale rule on block maxima at and around the powers of two and the element
    format's max times them, from the float32 subnormals to past float32's range."""
    from normlab.precision.scaling import mx_scale as np_mx_scale
    from normlab.torch.quantize import mx_scale

    f = get_format(fmt)
    base = np.ldexp(1.0, np.arange(-149, 128)).astype(np.float32)
    with np.errstate(over="ignore"):
        a = np.concatenate([base, base * np.float32(f.max_finite), base * np.float32(1.5)])
    a = a[np.isfinite(a)]
    a = np.concatenate([a, np.nextafter(a, np.float32(0)), np.nextafter(a, np.float32(np.inf)),
                        [0.0, np.inf, np.nan, np.finfo(np.float32).max]]).astype(np.float64)
    a = np.concatenate([a, [1e39, 1e300]])  # past float32: amax given in float64
    want = np_mx_scale(a, fmt, scale_rule)
    got = mx_scale(torch.from_numpy(a), fmt, scale_rule).numpy()
    assert np.array_equal(got, want, equal_nan=True)


def test_bad_input_is_refused():
    t = torch.ones(3)
    with pytest.raises(TypeError, match="t must be a floating-point tensor"):
        quantize(torch.ones(3, dtype=torch.int32), "bfloat16")
    with pytest.raises(TypeError, match=r"t must be a torch\.Tensor"):
        quantize(np.ones(3, np.float32), "bfloat16")
    with pytest.raises(ValueError, match="rounding"):
        quantize(t, "bfloat16", rounding="nearest")
    with pytest.raises(ValueError, match="overflow='inf'"):
        quantize(t, "float8_e4m3fn", overflow="inf")
    with pytest.raises(TypeError, match="stochastic rounding needs rng"):
        quantize(t, "bfloat16", rounding="stochastic")
    with pytest.raises(TypeError, match="random_bits"):
        quantize(t, "bfloat16", rounding="stochastic", random_bits=torch.zeros(2))
    with pytest.raises(ValueError, match="scalar"):
        mx_quantize(torch.tensor(1.0))
    assert "float8_e4m3fn" in FORMATS
