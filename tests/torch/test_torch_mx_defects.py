"""torch's ``mx_quantize`` on the two MX corner cases fixed in NumPy
(``tests/precision/test_mx_defects.py``): element formats whose subnormals reach below float32's
normal range (x / X formed in float32 rounded twice) and the MX value 2^128 (a round-up scale
rule with amax next to float32's max), which ``MXTensor.dequantize`` turned into inf."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normlab.precision import FloatFormat, mx_quantize, quantize
from normlab.torch.quantize import mx_quantize as torch_mx_quantize

F32_MAX = float(np.finfo(np.float32).max)
DEEP = FloatFormat(8, 3, bias=140)  # subnormals down to 2^-142


def test_the_reported_double_rounding():
    x = np.zeros(32, np.float32)
    x[0], x[1] = 2.0**127, 2.0**-126 + 2.0**-130 + 2.0**-149
    t = torch_mx_quantize(torch.from_numpy(x), DEEP)
    want = quantize(np.float64(x[1]) / float(t.scales[0]), DEEP, overflow="saturate")
    assert float(t.elements[1]) == float(want) == pytest.approx(1.6143e-42, rel=1e-4)


@pytest.mark.parametrize("rounding", ["nearest_even", "toward_zero"])
@pytest.mark.parametrize("fmt", [DEEP, FloatFormat(8, 2, bias=130), FloatFormat(6, 5, bias=60),
                                 "float8_e4m3fn", "float4_e2m1fn"])
def test_elements_are_numpys_exact_quotient_rounded_once(fmt, rounding):
    """Blocks spanning up to 260 binades: torch's elements and scales are NumPy's (which form
    the quotient exactly, ``test_mx_defects``), bit for bit."""
    rng = np.random.default_rng(3)
    top = rng.integers(-60, 128, (800, 1))
    x = (rng.uniform(1, 2, (800, 32)) * rng.choice([-1, 1], (800, 32))
         * np.exp2(top - rng.uniform(0, 260, (800, 32)))).astype(np.float32)
    x[:, 0] = np.exp2(top[:, 0]).astype(np.float32)
    x = np.concatenate([x, _midpoint_blocks(fmt, rng)])
    t = torch_mx_quantize(torch.from_numpy(x), fmt, rounding=rounding)
    n = mx_quantize(x, fmt, rounding=rounding)
    np.testing.assert_array_equal(t.elements.numpy(), n.elements)
    np.testing.assert_array_equal(t.scales.numpy(), n.scales)


def _midpoint_blocks(fmt, rng) -> np.ndarray:
    """Blocks of amax 2^127 whose other values are X times a midpoint of the element grid
    below 2^-126, off by +-2^-150 (float32's x / X rounds them onto the midpoint)."""
    from normlab.precision import get_format

    f = get_format(fmt)
    X = 2.0 ** (127 - f.emax)
    lo = f.emin - f.mantissa_bits
    if lo >= -126:  # the OCP formats: their grid stops far above float32's subnormals
        return np.zeros((0, 32), np.float32)
    e = rng.integers(lo, -126, (200, 31))
    step = np.exp2(np.maximum(e, f.emin) - f.mantissa_bits)
    mid = (rng.integers(1, 1 << f.mantissa_bits, (200, 31)) + 0.5) * step + np.exp2(e) * (
        e >= f.emin)
    q = mid + rng.choice([-1, 1], (200, 31)) * 2.0**-150
    return np.concatenate([np.full((200, 1), 2.0**127), q * X], axis=1).astype(np.float32)


@pytest.mark.parametrize("rule", ["ceil", "rceil", "even", "ceil_amax", "nearest"])
def test_dequantize_never_makes_inf_of_a_finite_block(rule):
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = F32_MAX, -F32_MAX
    t = torch_mx_quantize(torch.from_numpy(x), "float8_e4m3fn", scale_rule=rule)
    v = t.dequantize().numpy()
    assert np.isfinite(v).all()
    np.testing.assert_array_equal(v, mx_quantize(x, "float8_e4m3fn", scale_rule=rule)
                                  .dequantize())
    if rule == "ceil":
        assert v[0, 0] == F32_MAX and v[0, 1] == -F32_MAX


def test_dequantize_keeps_nan_and_inf_of_blocks_that_hold_them():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((50, 64)) * np.exp2(rng.integers(-130, 120, (50, 1)))).astype(
        np.float32)
    x[3, 5] = np.nan
    x[4, 40] = np.inf
    t = torch_mx_quantize(torch.from_numpy(x), "float6_e3m2fn", scale_rule="rceil")
    n = mx_quantize(x, "float6_e3m2fn", scale_rule="rceil")
    np.testing.assert_array_equal(t.dequantize().numpy(), n.dequantize())
