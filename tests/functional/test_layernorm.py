from functools import partial

import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab.functional import layer_norm_backward, layer_norm_forward
from normlab.testing import gradcheck, oracles


def _inputs(rng, shape):
    C = shape[-1]
    return {"x": rng.normal(0.5, 2.0, size=shape), "weight": rng.normal(size=C),
            "bias": rng.normal(size=C)}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5), (3, 1)])
def test_gradcheck(rng, shape):
    report = gradcheck(layer_norm_forward, layer_norm_backward, _inputs(rng, shape), rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("weight_none,bias_none", [(True, False), (False, True), (True, True)])
def test_gradcheck_without_affine(rng, weight_none, bias_none):
    d = _inputs(rng, (3, 6))
    g = None if weight_none else d["weight"]
    b = None if bias_none else d["bias"]
    fwd = lambda x: layer_norm_forward(x, g, b)  # noqa: E731
    bwd = lambda dout, c: layer_norm_backward(dout, c)[0]  # noqa: E731
    assert gradcheck(fwd, bwd, {"x": d["x"]}, rng=rng).passed
    _, dg, db = layer_norm_backward(np.ones((3, 6)), layer_norm_forward(d["x"], g, b)[1])
    assert (dg is None) == weight_none and (db is None) == bias_none


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch(rng, shape, dtype):
    # With one feature xhat = 0, the output is bias, and dx and dweight are exactly 0; torch returns
    # rounding noise there (about 1e-14 in float64), so they are checked for exactness instead.
    width_one = shape[-1] == 1
    _, grads = check_against_torch(layer_norm_forward, layer_norm_backward, oracles.layer_norm,
                                   _inputs(rng, shape), DTYPES[dtype], rng,
                                   skip=("x", "weight") if width_one else ())
    if width_one:
        assert not np.any(grads["x"].astype(np.float64)) and not np.any(grads["weight"])


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_matches_torch_eps(rng, eps):
    check_against_torch(partial(layer_norm_forward, eps=eps), layer_norm_backward,
                        partial(oracles.layer_norm, eps=eps), _inputs(rng, (8, 16)),
                        DTYPES["float64"], rng)


def test_rows_have_mean_zero_and_variance_one(rng):
    x = rng.normal(3.0, 5.0, size=(6, 9, 33))
    y, _ = layer_norm_forward(x, np.ones(33), np.zeros(33), eps=1e-12)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-10)


def test_input_gradient_sums_to_zero_per_row(rng):
    d = _inputs(rng, (5, 4, 17))
    _, cache = layer_norm_forward(**d)
    dx, _, _ = layer_norm_backward(rng.normal(size=(5, 4, 17)), cache)
    np.testing.assert_allclose(dx.sum(axis=-1), 0.0, atol=1e-12)


def test_adding_a_constant_to_a_row_changes_nothing(rng):
    d = _inputs(rng, (4, 12))
    shift = rng.normal(size=(4, 1)) * 10
    y0, _ = layer_norm_forward(**d)
    y1, _ = layer_norm_forward(d["x"] + shift, d["weight"], d["bias"])
    np.testing.assert_allclose(y1, y0, rtol=1e-10, atol=1e-10)


def test_chapter_worked_numbers():
    # x = (1, 2, 3, 4): mean 2.5, variance 1.25.
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    y, cache = layer_norm_forward(x, np.ones(4), np.zeros(4), eps=1e-5)
    assert cache.mean[0, 0] == 2.5
    assert cache.rstd[0, 0] == pytest.approx(1 / np.sqrt(1.25 + 1e-5), rel=1e-15)
    np.testing.assert_allclose(y[0], (x[0] - 2.5) / np.sqrt(1.25 + 1e-5), rtol=1e-15)


def test_chapter_listing_agrees():
    # The chapter's Listing 16.1, transcribed, as an independent reference in float64.
    rng = np.random.default_rng(3)
    x, weight, bias = rng.normal(size=(4, 5, 8)), rng.normal(size=8), rng.normal(size=8)
    dout = rng.normal(size=x.shape)
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    inv_std = 1.0 / np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True) + 1e-5)
    normalized = centered * inv_std
    ref = normalized * weight + bias
    gn = dout * weight
    ref_dx = inv_std * (gn - gn.sum(-1, keepdims=True) / 8
                        - normalized * (gn * normalized).sum(-1, keepdims=True) / 8)
    y, cache = layer_norm_forward(x, weight, bias)
    dx, dweight, dbias = layer_norm_backward(dout, cache)
    np.testing.assert_allclose(y, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dweight, (dout * normalized).sum((0, 1)), rtol=1e-12)
    np.testing.assert_allclose(dbias, dout.sum((0, 1)), rtol=1e-12)


def test_low_precision_keeps_statistics_and_parameter_gradients_in_float32(rng):
    import ml_dtypes

    x = rng.normal(size=(4, 16)).astype(ml_dtypes.bfloat16)
    g = np.ones(16, ml_dtypes.bfloat16)
    y, cache = layer_norm_forward(x, g, g)
    assert y.dtype == x.dtype and cache.mean.dtype == np.float32 and cache.rstd.dtype == np.float32
    dx, dg, db = layer_norm_backward(np.ones_like(y), cache)
    assert dx.dtype == x.dtype and dg.dtype == np.float32 and db.dtype == np.float32


def test_backward_does_not_touch_dout(rng):
    d = _inputs(rng, (3, 5))
    _, cache = layer_norm_forward(**d)
    dout = rng.normal(size=(3, 5))
    before = dout.copy()
    dx, _, _ = layer_norm_backward(dout, cache)
    assert np.array_equal(dout, before) and not np.shares_memory(dx, dout)
