"""Weight updates in a low-precision format: direct, fp32 master, Kahan, stochastic."""

import numpy as np
import pytest

from normlab.precision import quantize
from normlab.precision.master import METHODS, WeightUpdater, apply_updates


def _final(method, fmt="bfloat16", w0=1.0, delta=-1e-3, steps=1000, seed=0):
    rng = np.random.default_rng(seed) if method == "stochastic" else None
    return float(apply_updates(np.array([w0]), [delta] * steps, fmt, method, rng=rng)[0])


def test_bfloat16_weight_stagnates_without_a_master_copy():
    """The chapter's claim: 1000 updates of -1e-3 leave a bfloat16 weight of 1.0 at 1.0; the
    fp32 master, Kahan compensation and stochastic rounding follow the exact answer 0."""
    assert _final("direct") == 1.0
    assert abs(_final("master")) < 1e-4
    assert abs(_final("kahan")) < 2e-3
    assert abs(_final("stochastic")) < 0.1
    assert abs(np.mean([_final("stochastic", seed=s) for s in range(8)])) < 0.05


def test_update_loss_threshold():
    """An update is lost when |w| / |d| > 2^p (bfloat16: 256, float16: 2048), under RNE."""
    assert _final("direct", "bfloat16", delta=1.0 / 600, steps=10) == 1.0
    assert _final("direct", "bfloat16", delta=1.0 / 200, steps=1) == 1.0078125
    assert _final("direct", "float16", delta=-1e-4) == 1.0
    # fp16 with -3e-4: rounding to a whole ulp every step overshoots (precision.md 7.2)
    assert _final("direct", "float16", delta=-3e-4) == 0.51171875
    assert abs(_final("master", "float16", delta=-3e-4) - 0.7) < 1e-3


def test_methods_keep_weights_on_the_grid_and_track_state():
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((4, 8))
    for method in METHODS:
        u = WeightUpdater(w0, "bfloat16", method, rng=np.random.default_rng(2))
        for _ in range(20):
            w = u.step(rng.standard_normal((4, 8)) * 1e-3)
        assert w.shape == (4, 8) and w.dtype == np.float32
        np.testing.assert_array_equal(quantize(w, "bfloat16"), w)
        assert (u.master is not None) == (method == "master")
        assert (u.compensation is not None) == (method == "kahan")
    u = WeightUpdater(w0, "bfloat16", "master")
    for _ in range(5):
        u.step(np.full((4, 8), 1e-4))
    np.testing.assert_allclose(u.master, (w0.astype(np.float32) + 5e-4), rtol=1e-6)
    np.testing.assert_array_equal(u.weight, quantize(u.master, "bfloat16"))
    u = WeightUpdater(np.zeros(3), "float8_e4m3fn", "direct")
    u.step(0.3)  # a scalar update broadcasts
    np.testing.assert_array_equal(u.weight, [0.3125] * 3)


def test_kahan_compensation_is_stored_in_the_weight_format():
    u = WeightUpdater(np.ones(2), "bfloat16", "kahan")
    u.step(-1e-3)
    np.testing.assert_array_equal(quantize(u.compensation, "bfloat16"), u.compensation)
    assert u.weight[0] == 1.0  # the update is lost from the weight ...
    assert u.compensation[0] == quantize(np.float32(1e-3), "bfloat16")  # ... and remembered
    u.step(-1e-3)  # 1 - 0.002 is nearer 0.99609375 than 1: the weight moves
    assert u.weight[0] == 0.99609375


def test_bad_arguments():
    with pytest.raises(ValueError, match="method must be one of"):
        WeightUpdater(np.ones(2), "bfloat16", "compensated")
    with pytest.raises(TypeError, match="needs rng"):
        WeightUpdater(np.ones(2), "bfloat16", "stochastic")
    with pytest.raises(ValueError, match="unknown format"):
        WeightUpdater(np.ones(2), "bf16")
    with pytest.raises(TypeError, match="w0 must be a floating-point array"):
        WeightUpdater(np.arange(2))
    with pytest.raises(ValueError, match="delta must broadcast"):
        WeightUpdater(np.ones(2)).step(np.ones(3))
