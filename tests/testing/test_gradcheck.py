import numpy as np
import pytest

from normlab.functional import layer_norm_backward, layer_norm_forward
from normlab.testing import assert_close, assert_no_worse_than, errors, format_eps, gradcheck


def test_reports_errors_per_input(rng):
    x, g, b = rng.normal(size=(3, 5)), rng.normal(size=5), rng.normal(size=5)
    report = gradcheck(layer_norm_forward, layer_norm_backward, {"x": x, "weight": g, "bias": b})
    assert report.passed and [e.name for e in report.inputs] == ["x", "weight", "bias"]
    assert report["x"].max_rel < 1e-7 and report["x"].shape == (3, 5)
    assert "max abs err" in str(report)


def test_catches_a_wrong_backward(rng):
    def wrong_backward(dout, cache):  # the classic bug: forgetting the mean(g * xhat) term
        dx, dg, db = layer_norm_backward(dout, cache)
        xhat = (cache.x - cache.mean) * cache.rstd
        gh = dout * cache.weight
        return dx + cache.rstd * xhat * np.mean(gh * xhat, axis=-1, keepdims=True), dg, db

    x, g, b = rng.normal(size=(3, 5)), rng.normal(size=5), rng.normal(size=5)
    report = gradcheck(layer_norm_forward, wrong_backward, {"x": x, "weight": g, "bias": b})
    assert not report.passed
    assert not report["x"].passed and report["weight"].passed and report["bias"].passed
    assert report["x"].max_rel > 1e-2


def test_catches_a_wrong_parameter_gradient(rng):
    def wrong(dout, cache):
        dx, dg, db = layer_norm_backward(dout, cache)
        return dx, dg * 1.01, db

    x, g, b = rng.normal(size=(3, 5)), rng.normal(size=5), rng.normal(size=5)
    assert not gradcheck(layer_norm_forward, wrong, [x, g, b]).passed


def test_does_not_modify_the_callers_inputs(rng):
    x = rng.normal(size=(2, 3))
    before = x.copy()
    gradcheck(layer_norm_forward, layer_norm_backward, [x, np.ones(3), np.zeros(3)])
    assert np.array_equal(x, before)


def test_rejects_unknown_wrt_and_gradient_count(rng):
    x = rng.normal(size=(2, 3))
    with pytest.raises(ValueError, match="unknown input"):
        gradcheck(layer_norm_forward, layer_norm_backward,
                  {"x": x, "weight": np.ones(3), "bias": np.ones(3)}, wrt=["y"])
    with pytest.raises(ValueError, match="gradients"):
        gradcheck(layer_norm_forward, lambda d, c: layer_norm_backward(d, c)[:2],
                  [x, np.ones(3), np.ones(3)])


def test_compare_helpers():
    assert format_eps(np.float32) == np.finfo(np.float32).eps
    assert format_eps("bfloat16") == 2.0**-7
    assert errors([1.0, np.nan], [1.0, np.nan]) == (0.0, 0.0)
    assert errors([1.0, 2.0], [1.0, np.nan])[0] == np.inf
    assert_close(np.float32(1.0) + np.float32(2**-23), 1.0, ulps=1)
    with pytest.raises(AssertionError, match="out of tolerance"):
        assert_close(np.float32([1.0, 1.001]), [1.0, 1.0], ulps=4)
    assert_no_worse_than([1.0001], [1.0002], [1.0], dtype=np.float32)
    with pytest.raises(AssertionError, match="baseline"):
        assert_no_worse_than([1.01], [1.0001], [1.0], dtype=np.float32)
