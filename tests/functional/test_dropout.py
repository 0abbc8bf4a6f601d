import ml_dtypes
import numpy as np
import pytest

from normlab.functional import dropout_backward, dropout_forward
from normlab.testing import gradcheck


def test_identity_at_inference(rng):
    x = rng.normal(size=(3, 4))
    y, cache = dropout_forward(x, 0.5, training=False)
    assert np.array_equal(y, x) and not np.shares_memory(y, x)
    assert np.array_equal(dropout_backward(np.ones_like(x), cache), np.ones_like(x))


def test_mask_and_scale(rng):
    x = rng.normal(size=(50, 40))
    y, cache = dropout_forward(x, 0.25, training=True, rng=np.random.default_rng(5))
    keep = cache.keep
    np.testing.assert_array_equal(y[~keep], 0.0)
    np.testing.assert_allclose(y[keep], x[keep] / 0.75, rtol=1e-15)
    dout = rng.normal(size=x.shape)
    dx = dropout_backward(dout, cache)
    np.testing.assert_allclose(dx, dout * keep / 0.75, rtol=1e-15)


def test_same_seed_same_mask():
    x = np.ones((8, 8))
    a, _ = dropout_forward(x, 0.5, training=True, rng=np.random.default_rng(1))
    b, _ = dropout_forward(x, 0.5, training=True, rng=np.random.default_rng(1))
    assert np.array_equal(a, b)


def test_gradcheck(rng):
    fwd = lambda x: dropout_forward(x, 0.3, training=True, rng=np.random.default_rng(2))  # noqa
    assert gradcheck(fwd, dropout_backward, {"x": rng.normal(size=(4, 6))}, rng=rng).passed


@pytest.mark.parametrize("p_drop", [0.1, 0.5, 0.9])
def test_keeps_the_expectation(p_drop):
    # Each output is x / (1 - p) with probability 1 - p, else 0: mean x, variance x^2 p / (1 - p).
    # With n samples the sample mean is within 5 standard errors of x (a failure rate of ~6e-7).
    n = 200_000
    x = np.full(n, 3.0)
    y, _ = dropout_forward(x, p_drop, training=True, rng=np.random.default_rng(11))
    se = 3.0 * np.sqrt(p_drop / (1 - p_drop) / n)
    assert abs(y.mean() - 3.0) < 5 * se
    # and the fraction kept is 1 - p within 5 binomial standard errors
    kept = np.mean(y != 0)
    assert abs(kept - (1 - p_drop)) < 5 * np.sqrt(p_drop * (1 - p_drop) / n)


def test_low_precision_rounds_once():
    x = np.array([1.0, 3.0, 7.0] * 100, dtype=ml_dtypes.bfloat16)
    y, cache = dropout_forward(x, 0.3, training=True, rng=np.random.default_rng(0))
    assert y.dtype == x.dtype
    expected = (x.astype(np.float32) * np.float32(1 / 0.7)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(y[cache.keep], expected[cache.keep])
