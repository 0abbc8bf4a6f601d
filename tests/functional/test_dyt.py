import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab.functional import dyt_backward, dyt_forward
from normlab.testing import gradcheck, oracles
from normlab.testing.parity import dyt_scales


def _inputs(rng, shape, alpha_shape=()):
    C = shape[-1]
    return {"x": rng.normal(0.0, 2.0, size=shape), "alpha": np.full(alpha_shape, 0.7),
            "weight": rng.normal(size=C), "bias": rng.normal(size=C)}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5)])
@pytest.mark.parametrize("alpha_shape", [(), (1,)])
def test_gradcheck(rng, shape, alpha_shape):
    report = gradcheck(dyt_forward, dyt_backward, _inputs(rng, shape, alpha_shape), rng=rng)
    assert report.passed, str(report)
    _, cache = dyt_forward(**_inputs(rng, shape, alpha_shape))
    assert dyt_backward(np.ones(shape), cache)[1].shape == alpha_shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch(rng, shape, dtype):
    check_against_torch(dyt_forward, dyt_backward, oracles.dyt, _inputs(rng, shape),
                        DTYPES[dtype], rng, scales=dyt_scales)


def test_is_an_s_curve_bounded_by_gamma(rng):
    x = np.linspace(-50, 50, 101)[None, :].repeat(2, 0).T.copy()  # (101, 2)
    weight, bias = np.array([2.0, 3.0]), np.array([0.5, -1.0])
    y, _ = dyt_forward(x, np.array(0.5), weight, bias)
    assert np.all(np.diff(y, axis=0) >= 0)
    np.testing.assert_allclose(y[-1], weight + bias, rtol=1e-12)
    np.testing.assert_allclose(y[0], -weight + bias, rtol=1e-12)
    np.testing.assert_allclose(y[50], bias, rtol=0, atol=1e-15)
