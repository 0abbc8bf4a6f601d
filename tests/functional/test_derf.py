"""Dynamic erf (arXiv 2512.10938): finite differences in float64, the PyTorch twin (the official
code's ``weight * torch.erf(alpha * x + shift) + bias``) in every dtype, its shape and bad input."""

import math

import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab import nn as nnl
from normlab.functional import derf_backward, derf_forward
from normlab.functional.derf import erf
from normlab.testing import gradcheck, oracles
from normlab.testing.parity import derf_scales


def _inputs(rng, shape, scalar_shape=()):
    C = shape[-1]
    return {"x": rng.normal(0.0, 2.0, size=shape), "alpha": np.full(scalar_shape, 0.7),
            "shift": np.full(scalar_shape, -0.3), "weight": rng.normal(size=C),
            "bias": rng.normal(size=C)}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5)])
@pytest.mark.parametrize("scalar_shape", [(), (1,)])
def test_gradcheck(rng, shape, scalar_shape):
    d = _inputs(rng, shape, scalar_shape)
    report = gradcheck(derf_forward, derf_backward, d, rng=rng)
    assert report.passed, str(report)
    _, cache = derf_forward(**d)
    grads = derf_backward(np.ones(shape), cache)
    assert grads[1].shape == grads[2].shape == scalar_shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch(rng, shape, dtype):
    check_against_torch(derf_forward, derf_backward, oracles.derf, _inputs(rng, shape),
                        DTYPES[dtype], rng, scales=derf_scales)


def test_erf_is_math_erf_and_the_curve_is_bounded_by_gamma():
    z = np.linspace(-4, 4, 33)
    np.testing.assert_array_equal(erf(z), [math.erf(v) for v in z])
    x = np.linspace(-50, 50, 101)[:, None].repeat(2, 1)  # (101, 2)
    weight, bias = np.array([2.0, 3.0]), np.array([0.5, -1.0])
    y, _ = derf_forward(x, np.array(0.5), np.array(0.25), weight, bias)
    assert np.all(np.diff(y, axis=0) >= 0)
    np.testing.assert_allclose(y[-1], weight + bias, rtol=1e-12)
    np.testing.assert_allclose(y[0], -weight + bias, rtol=1e-12)
    # the shift moves the centre: y = bias where alpha x + s = 0, at x = -0.5
    y0, _ = derf_forward(np.full((1, 2), -0.5), np.array(0.5), np.array(0.25), weight, bias)
    np.testing.assert_allclose(y0[0], bias, atol=1e-15)


def test_module_starts_at_the_official_inits():
    m = nnl.Derf(5, dtype=np.float64)
    assert list(m.params) == ["alpha", "shift", "weight", "bias"]
    assert m.params["alpha"] == 0.5 and m.params["shift"] == 0.0
    np.testing.assert_array_equal(m.params["weight"], np.ones(5))
    np.testing.assert_array_equal(m.params["bias"], np.zeros(5))
    assert nnl.Derf(5, alpha_init=0.2, shift_init=0.1).params["shift"] == np.float32(0.1)


def test_bad_input_is_refused_by_name(rng):
    d = _inputs(rng, (2, 4))
    with pytest.raises(ValueError, match="shift must be a scalar"):
        derf_forward(d["x"], d["alpha"], np.zeros(2), d["weight"], d["bias"])
    with pytest.raises(ValueError, match="weight must have shape"):
        derf_forward(d["x"], d["alpha"], d["shift"], np.ones(3), d["bias"])
    with pytest.raises(TypeError, match="x"):
        derf_forward(np.ones((2, 4), int), d["alpha"], d["shift"], d["weight"], d["bias"])
    _, cache = derf_forward(**d)
    with pytest.raises(ValueError, match="dout"):
        derf_backward(np.ones((2, 3)), cache)
    with pytest.raises(ValueError, match="shift_init"):
        nnl.Derf(4, shift_init=float("nan"))
