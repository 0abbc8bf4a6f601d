"""The chapter's demonstrations (section 16.3, Listing 16.4) give the chapter's numbers."""

import ml_dtypes
import numpy as np
import pytest

from normlab.precision import demos


def test_fp16_overflows_where_bfloat16_keeps_the_range():
    fp16, bf16 = demos.fp16_overflows_but_bfloat16_keeps_range()
    assert np.isinf(fp16).all()
    assert np.isfinite(bf16).all()
    large = np.array([1e5, 1e30], np.float32)
    np.testing.assert_array_equal(bf16, large.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert bf16[0] == 99840.0
    assert abs(bf16[1] / 1e30 - 1) < 2**-8


def test_loss_scaling_recovers_a_tiny_fp16_gradient():
    without, with_scale = demos.tiny_gradient_survives_loss_scaling()
    assert without == 0.0
    assert abs(with_scale - 1e-8) / 1e-8 < 1e-3
    listing = (np.float32(1e-8) * 2**16).astype(np.float16).astype(np.float32) / 2**16
    assert demos.loss_scaled_gradient(1e-8, 2**16) == listing  # Listing 16.4's own arithmetic


def test_bfloat16_running_sum_stalls_at_256():
    bf16, fp32, exact = demos.bfloat16_running_sum(10_000)
    assert bf16 == 256.0
    assert abs(fp32 - exact) / exact < 1e-5
    assert 4900 < exact < 5100


@pytest.mark.parametrize("fmt, n, total", [("float16", 513, 7.0859375), ("bfloat16", 65, 5.0625),
                                           ("float8_e4m3fn", 9, 3.0), ("float8_e5m2", 5, 2.0)])
def test_harmonic_series_stagnates(fmt, n, total):
    assert demos.harmonic_stagnation(fmt) == (n, total)


def test_harmonic_series_keeps_growing_with_stochastic_rounding():
    n, total = demos.harmonic_stagnation("bfloat16", rounding="stochastic",
                                         rng=np.random.default_rng(0), max_terms=2000)
    exact = float(np.sum(1.0 / np.arange(1, 2001)))  # 8.18
    assert n == 2000 and total > 5.0625 + 1 and abs(total - exact) < 1.0


def test_update_stagnation_numbers():
    r = demos.update_stagnation()
    assert r["direct"] == 1.0 and r["exact"] == pytest.approx(0.0)
    assert abs(r["master"]) < 1e-4 and abs(r["kahan"]) < 2e-3 and abs(r["stochastic"]) < 0.1


def test_running_sum_with_bad_input():
    with pytest.raises(TypeError, match="values must be a floating-point array"):
        demos.running_sum(np.arange(3), "bfloat16")
    with pytest.raises(ValueError, match="unknown format"):
        demos.running_sum(np.ones(3), "bf16")
