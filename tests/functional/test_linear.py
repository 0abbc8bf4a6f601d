import numpy as np
import pytest
import torch.nn.functional as TF
from _parity import GEMM, check_against_torch

from normlab.functional import linear_backward, linear_forward
from normlab.testing import gradcheck


def _inputs(rng, lead=(2, 3), C_in=5, C_out=4, bias=True):
    d = {"x": rng.normal(size=(*lead, C_in)), "weight": rng.normal(size=(C_out, C_in))}
    if bias:
        d["bias"] = rng.normal(size=C_out)
    return d


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead", [(4,), (2, 3), (2, 1, 3)])
def test_gradcheck(bias, lead):
    rng = np.random.default_rng(1)
    bwd = linear_backward if bias else (lambda dout, c: linear_backward(dout, c)[:2])
    report = gradcheck(linear_forward, bwd, _inputs(rng, lead, bias=bias), rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_torch(dtype, bias):
    rng = np.random.default_rng(2)
    check_against_torch(linear_forward, linear_backward, TF.linear,
                        _inputs(rng, (3, 7), 32, 24, bias), dtype, rng, **GEMM)


def test_no_bias_gradient_is_none_and_dtypes_follow_the_contract():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    w = rng.normal(size=(5, 4)).astype(np.float32)
    y, cache = linear_forward(x, w)
    assert y.dtype == np.float32 and y.shape == (2, 3, 5)
    dx, dw, db = linear_backward(np.ones_like(y), cache)
    assert db is None and dx.dtype == np.float32 and dw.dtype == np.float32
    np.testing.assert_array_equal(dw, np.ones((6, 5), np.float32).T @ x.reshape(6, 4))


def test_bad_input():
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    with pytest.raises(ValueError, match="weight must have shape"):
        linear_forward(x, w.T)
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        linear_forward(np.ones((3, 4), int), w)
    with pytest.raises(ValueError, match="bias must have shape"):
        linear_forward(x, w, np.zeros(4))
    _, cache = linear_forward(x, w)
    with pytest.raises(ValueError, match="dout must have shape"):
        linear_backward(np.ones((3, 4)), cache)
