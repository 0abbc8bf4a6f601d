"""The emulated matmul: rounded inputs, float32 or low-precision accumulation, rounded output."""

import ml_dtypes
import numpy as np
import pytest

from normlab.precision import get_policy, mx_quantize, quantize, scaled_qdq
from normlab.precision.matmul import matmul


def test_fp32_policy_is_a_float32_matmul():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 16)), rng.standard_normal((16, 5))
    out = matmul(a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(out, a.astype(np.float32) @ b.astype(np.float32))
    assert matmul(a, b).dtype == np.float64  # float64 in: float64 out (float32 values)


def test_amp_bf16_rounds_inputs_and_output():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 32)).astype(np.float32)
    b = rng.standard_normal((32, 6)).astype(np.float32)
    want = quantize(quantize(a, "bfloat16") @ quantize(b, "bfloat16"), "bfloat16")
    np.testing.assert_array_equal(matmul(a, b, "amp_bf16"), want)


def test_low_precision_accumulation_is_a_running_sum_and_swamps():
    """accumulate='bfloat16', every term: the same as ml_dtypes' sequential bfloat16 sum; it
    stalls (swamping), and accumulating 32 products in float32 first loses less."""
    rng = np.random.default_rng(2)
    K = 4096
    a = quantize(rng.uniform(0.5, 1.0, (1, K)).astype(np.float32), "bfloat16")
    b = np.ones((K, 1), np.float32)
    pol = get_policy("amp_bf16").replace(accumulate="bfloat16", activations="float32")
    seq = matmul(a, b, pol)[0, 0]
    assert seq == float(a.astype(ml_dtypes.bfloat16).sum())  # ml_dtypes sums in bfloat16
    exact = float(a.astype(np.float64).sum())
    chunked = matmul(a, b, pol.replace(accumulate_every=32))[0, 0]
    full = matmul(a, b, "amp_bf16")[0, 0]
    assert abs(seq - exact) > abs(chunked - exact) > 0
    assert seq < 0.2 * exact  # stalled near 512
    assert abs(full - exact) <= 0.004 * exact  # float32 accumulation, bfloat16 output


def test_scaled_inputs_and_roles():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    mx = get_policy("mxfp8")
    want = (mx_quantize(a, "float8_e4m3fn", axis=-1, scale_rule="ceil").dequantize()
            @ mx_quantize(w, "float8_e4m3fn", axis=-2, scale_rule="ceil").dequantize())
    np.testing.assert_array_equal(matmul(a, w, mx), quantize(want, "bfloat16"))
    hybrid = get_policy("fp8_hybrid")
    with pytest.raises(TypeError, match="delayed scaling: pass state="):
        matmul(a, w, hybrid)
    sg, sw = hybrid.gradients.new_state(), hybrid.compute.new_state()
    out = matmul(a, w, hybrid, roles=("gradients", "compute"), states=(sg, sw))
    want = quantize(scaled_qdq(a, "float8_e5m2", 1.0) @ scaled_qdq(w, "float8_e4m3fn", 1.0),
                    "bfloat16")
    np.testing.assert_array_equal(out, want)
    assert sg.amax_history[0] == np.abs(a).max()


def test_bad_arguments():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="must match"):
        matmul(a, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        matmul(np.ones(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="unknown policy"):
        matmul(a, a.T, "bf16")
    with pytest.raises(ValueError, match="roles: 'weights'"):
        matmul(a, a.T, roles=("weights", "compute"))
    with pytest.raises(TypeError, match="policy must be a PrecisionPolicy"):
        matmul(a, a.T, policy=3)
    with pytest.raises(TypeError, match="a must be a floating-point array"):
        matmul(np.ones((2, 3), int), a.T)
