"""The 16-bit formats inside the kernels: decoding is exact and encoding rounds bit for bit as
NumPy (float16) and ml_dtypes (bfloat16) do, NaN, inf, subnormals and ties included."""

import ml_dtypes
import numpy as np
import pytest

from normlab.kernels._rows import BF16, F16, F16_TABLE, decode_array, encode_array

FORMATS = {"bfloat16": (BF16, np.dtype(ml_dtypes.bfloat16)), "float16": (F16, np.dtype(np.float16))}


@pytest.mark.parametrize("name", FORMATS)
def test_decodes_every_pattern_exactly(name):
    fmt, dtype = FORMATS[name]
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    out = np.empty(bits.size, np.float32)
    decode_array(bits, out, fmt, F16_TABLE)
    expected = bits.view(dtype).astype(np.float32)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(out), nan)
    assert np.array_equal(out.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])


def _hard_float32_bits(rng):
    """Random patterns plus every tie, near-tie, overflow and subnormal boundary of both formats."""
    rand = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    halves = np.arange(1 << 16, dtype=np.uint32)
    around = [halves << 16 | low for low in (0x7FFF, 0x8000, 0x8001)]  # bfloat16 ties
    f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    f16 = f16[np.isfinite(f16)].astype(np.float32).view(np.uint32)
    near = [f16 + d for d in (np.uint32(0x1000), np.uint32(0xFFF), np.uint32(0x1001))]  # ties
    specials = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x477FF000,
                         0x477FEFFF, 0x47800000, 0x33000000, 0x33000001, 0x32FFFFFF, 0x38800000,
                         0, 0x80000000, 0x7F7FFFFF], dtype=np.uint32)
    return np.concatenate([rand, *around, *near, specials])


@pytest.mark.parametrize("name", FORMATS)
def test_encodes_to_nearest_even_as_numpy_and_ml_dtypes(name, rng):
    fmt, dtype = FORMATS[name]
    bits = _hard_float32_bits(rng)
    values = bits.view(np.float32)
    out = np.empty(bits.size, np.uint16)
    with np.errstate(over="ignore", invalid="ignore"):
        encode_array(values, out, fmt)
        expected = values.astype(dtype).view(np.uint16)
    nan = np.isnan(values)
    assert np.array_equal(out[~nan], expected[~nan])
    # NaNs stay NaNs with their sign (payload bits are a convention; both keep them quiet here)
    got = out[nan].view(dtype).astype(np.float32)
    assert np.isnan(got).all()
    assert np.array_equal(np.signbit(got), np.signbit(values[nan]))
