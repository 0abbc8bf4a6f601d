"""FloatFormat: the format table against ml_dtypes.finfo and the reference table, custom formats,
bad arguments."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normlab.precision import FORMATS, FloatFormat, format_table, get_format

ML_NAMES = [n for n in FORMATS if n != "tfloat32"]


def _finfo(name):
    dt = np.dtype(getattr(ml_dtypes, name) if hasattr(ml_dtypes, name) else name)
    return dt, ml_dtypes.finfo(dt)


@pytest.mark.parametrize("name", ML_NAMES)
def test_constants_match_ml_dtypes_finfo(name):
    fmt = FORMATS[name]
    dt, fi = _finfo(name)
    assert fmt.max_finite == float(fi.max)
    assert fmt.min_normal == float(fi.smallest_normal)
    assert fmt.min_subnormal == float(fi.smallest_subnormal)
    assert fmt.eps == float(fi.eps)
    assert fmt.dtype == dt
    assert fmt.bits == (32 if name == "float32" else ml_dtypes.finfo(dt).bits)


@pytest.mark.parametrize("name", [n for n in ML_NAMES if n != "float32"])
def test_values_and_finite_count_match_every_code(name):
    """Decode every code with ml_dtypes: the finite ones are exactly fmt.values()."""
    fmt = FORMATS[name]
    dt, _ = _finfo(name)
    codes = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint8 if dt.itemsize == 1 else np.uint16)
    if fmt.bits < 8 * dt.itemsize:  # fp6/fp4 are stored one per byte, in the low bits
        codes = codes[: 2**fmt.bits]
    with np.errstate(invalid="ignore"):
        decoded = codes.view(dt).astype(np.float64)
    finite = decoded[np.isfinite(decoded)]
    assert finite.size == fmt.finite_count
    np.testing.assert_array_equal(np.unique(finite), fmt.values())


def test_reference_table():
    """Numbers from the reference format table (precision.md section 3.1)."""
    t = FORMATS
    assert t["tfloat32"].max_finite == (2 - 2**-10) * 2.0**127
    assert t["tfloat32"].min_subnormal == 2.0**-136
    assert t["tfloat32"].eps == 2.0**-10
    assert t["float16"].max_finite == 65504 and t["float16"].min_normal == 2.0**-14
    assert t["float8_e4m3fn"].max_finite == 448 and t["float8_e4m3fn"].min_subnormal == 2.0**-9
    assert t["float8_e5m2"].max_finite == 57344 and t["float8_e5m2"].min_subnormal == 2.0**-16
    assert t["float6_e3m2fn"].max_finite == 28 and t["float6_e3m2fn"].min_subnormal == 0.0625
    assert t["float6_e2m3fn"].max_finite == 7.5 and t["float6_e2m3fn"].min_subnormal == 0.125
    assert t["float4_e2m1fn"].max_finite == 6.0
    np.testing.assert_array_equal(t["float4_e2m1fn"].values()[7:],
                                  [0, 0.5, 1, 1.5, 2, 3, 4, 6])
    e8m0 = t["float8_e8m0fnu"]
    assert (e8m0.max_finite, e8m0.min_normal, e8m0.finite_count) == (2.0**127, 2.0**-127, 255)
    assert not e8m0.signed and not e8m0.zero and e8m0.has_nan and not e8m0.has_inf
    assert t["float8_e4m3"].max_finite == 240  # IEEE-style e4m3 (chop's 'q43')
    assert t["float32"].finite_count == 2**32 - 2**24


def test_default_overflow_follows_the_encoding():
    assert FORMATS["bfloat16"].default_overflow == "inf"
    assert FORMATS["float8_e4m3fn"].default_overflow == "nan"
    assert FORMATS["float4_e2m1fn"].default_overflow == "saturate"


def test_custom_formats_and_equality():
    assert FloatFormat(5, 2) == FORMATS["float8_e5m2"]  # equality is by bits, not by name
    assert FloatFormat(5, 2).name == "e5m2"
    assert FloatFormat(4, 3, inf_nan="fn").dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert FloatFormat(6, 5).dtype is None
    # an fp16-like format without the reserved top binade (QPyTorch's FloatingPoint(5, 10)):
    qpt = FloatFormat(5, 10, inf_nan="none")
    assert qpt.max_finite == 131008.0
    ftz = FloatFormat(8, 7, subnormals=False)
    assert ftz.min_subnormal == ftz.min_normal and ftz.finite_count == 65280 - 2 * 127
    small = FloatFormat(3, 1, bias=2, inf_nan="fn")
    v = small.values()
    assert v.size == small.finite_count - 1  # -0 and +0 are one value
    assert math.isclose(v.max(), small.max_finite) and v.min() == -small.max_finite


def test_get_format():
    assert get_format("bfloat16") is FORMATS["bfloat16"]
    assert get_format(ml_dtypes.float8_e5m2) is FORMATS["float8_e5m2"]
    assert get_format(np.float16) is FORMATS["float16"]
    f = FloatFormat(3, 3)
    assert get_format(f) is f
    with pytest.raises(ValueError, match="known formats: float32, tfloat32, bfloat16"):
        get_format("bf16")
    with pytest.raises(ValueError, match="not one of the formats"):
        get_format(np.float64)
    with pytest.raises(TypeError, match="fmt must be a FloatFormat"):
        get_format(3.5)


def test_format_table_lists_every_format():
    table = format_table()
    for name in FORMATS:
        assert name in table
    assert "448" in table and "57344" in table


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(exponent_bits=0, mantissa_bits=3), ValueError, r"exponent_bits .* in \[1, 8\]"),
        (dict(exponent_bits=9, mantissa_bits=3), ValueError, r"exponent_bits .* in \[1, 8\]"),
        (dict(exponent_bits=4, mantissa_bits=24), ValueError, r"mantissa_bits .* in \[0, 23\]"),
        (dict(exponent_bits=4.0, mantissa_bits=3), TypeError, "exponent_bits must be an integer"),
        (dict(exponent_bits=True, mantissa_bits=3), TypeError, "exponent_bits"),
        (dict(exponent_bits=4, mantissa_bits=3, inf_nan="ocp"), ValueError, "inf_nan must be"),
        (dict(exponent_bits=4, mantissa_bits=0), ValueError, "needs mantissa_bits >= 1"),
        (dict(exponent_bits=8, mantissa_bits=7, bias=100), ValueError, "beyond float32"),
        (dict(exponent_bits=8, mantissa_bits=7, bias=145), ValueError, "below float32"),
        (dict(exponent_bits=4, mantissa_bits=3, zero=False), ValueError, "no subnormals"),
        (dict(exponent_bits=4, mantissa_bits=3, signed=False, inf_nan="none"), ValueError,
         "unsigned"),
        (dict(exponent_bits=1, mantissa_bits=3), ValueError, "no normal binade"),
        (dict(exponent_bits=4, mantissa_bits=3, subnormals=1), TypeError, "subnormals"),
    ],
)
def test_bad_formats(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        FloatFormat(**kwargs)


@given(st.integers(1, 8), st.integers(0, 23), st.integers(-10, 140),
       st.sampled_from(["ieee", "fn", "none"]))
def test_any_valid_format_is_consistent(E, M, bias, inf_nan):
    """Either a clear ValueError, or a format whose derived constants are ordered and exact."""
    try:
        f = FloatFormat(E, M, bias=bias, inf_nan=inf_nan)
    except ValueError:
        return
    assert 0 < f.min_subnormal <= f.min_normal <= f.max_finite < 2.0**128
    assert f.min_subnormal >= 2.0**-149
    assert np.float32(f.max_finite) == f.max_finite  # float32 holds every value
    if f.bits <= 12:
        assert f.values().size == f.finite_count - 1


def test_fnuz_formats_and_dialects():
    """The FNUZ formats match ml_dtypes' finfo; the tool dialects resolve by name and have the
    ranges their sources give (unit-scaling: bias 2^(E-1), max 240 / 57344, min normal 2^-7 /
    2^-15; QPyTorch's float16: max (2 - 2^-10) 2^16)."""
    from normlab.precision import DIALECTS

    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"):
        f, fi = FORMATS[name], ml_dtypes.finfo(getattr(ml_dtypes, name))
        assert (f.max_finite, f.min_normal, f.min_subnormal, f.eps) == (
            float(fi.max), float(fi.tiny), float(fi.smallest_subnormal), float(fi.eps))
        assert not f.has_inf and f.has_nan and not f.signed_zero and f.default_overflow == "nan"
        assert f.dtype == np.dtype(getattr(ml_dtypes, name))
    us4, us5 = get_format("unit_scaling_e4m3"), get_format("unit_scaling_e5m2")
    assert (us4.max_finite, us4.min_normal, us4.bias) == (240.0, 2.0**-7, 8)
    assert (us5.max_finite, us5.min_normal, us5.bias) == (57344.0, 2.0**-15, 16)
    assert us4.signed_zero and us4.default_overflow == "saturate" and us4.dtype is None
    assert DIALECTS["qpytorch_e5m10"].max_finite == (2 - 2.0**-10) * 2.0**16
    with pytest.raises(ValueError, match="fnuz"):
        FloatFormat(4, 3, inf_nan="fnuz", signed=False)
