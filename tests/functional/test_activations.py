import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _parity import GEMM, check_against_torch

from normlab.functional import (
    gelu_backward,
    gelu_forward,
    relu_backward,
    relu_forward,
    swiglu_backward,
    swiglu_forward,
)
from normlab.testing import gradcheck


def _x(rng, shape=(3, 4, 5)):
    return rng.normal(0.0, 2.0, size=shape)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck(approximate):
    rng = np.random.default_rng(1)
    fwd = lambda x: gelu_forward(x, approximate=approximate)  # noqa: E731
    assert gradcheck(fwd, gelu_backward, {"x": _x(rng)}, rng=rng).passed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(approximate, dtype):
    rng = np.random.default_rng(2)
    check_against_torch(lambda x: gelu_forward(x, approximate=approximate), gelu_backward,
                        lambda x: TF.gelu(x, approximate=approximate), {"x": _x(rng, (64, 33))},
                        dtype, rng, **GEMM)


def test_relu_gradcheck_and_torch():
    rng = np.random.default_rng(3)
    x = _x(rng)
    x[np.abs(x) < 1e-3] = 0.5  # keep finite differences away from the kink
    assert gradcheck(relu_forward, relu_backward, {"x": x}, rng=rng).passed
    for dtype in (np.float64, np.float32):
        check_against_torch(relu_forward, relu_backward, lambda x: TF.relu(x),
                            {"x": _x(rng, (8, 9))}, dtype, rng, **GEMM)


def test_relu_gradient_at_zero_is_zero():
    _y, cache = relu_forward(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(relu_backward(np.ones(3), cache), [0.0, 0.0, 1.0])


def test_swiglu_gradcheck_and_torch():
    rng = np.random.default_rng(4)
    d = {"a": _x(rng), "b": _x(rng)}
    assert gradcheck(swiglu_forward, swiglu_backward, d, rng=rng).passed
    for dtype in (np.float64, np.float32):
        check_against_torch(swiglu_forward, swiglu_backward, lambda a, b: TF.silu(a) * b,
                  {"a": _x(rng, (16, 40)), "b": _x(rng, (16, 40))}, dtype, rng, **GEMM)


def test_swiglu_sigmoid_does_not_overflow():
    a = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    with np.errstate(over="raise"):
        y, cache = swiglu_forward(a, np.ones_like(a))
        da, db = swiglu_backward(np.ones_like(a), cache)
    ref = TF.silu(torch.from_numpy(a)).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    assert np.all(np.isfinite(da)) and np.all(np.isfinite(db))


def test_low_precision_returns_input_dtype():
    import ml_dtypes

    x = np.linspace(-3, 3, 11).astype(ml_dtypes.bfloat16)
    for fwd, bwd in (
        (lambda v: gelu_forward(v, approximate="tanh"), gelu_backward),
        (relu_forward, relu_backward),
    ):
        y, cache = fwd(x)
        assert y.dtype == x.dtype and bwd(np.ones_like(x), cache).dtype == x.dtype


def test_bad_input():
    with pytest.raises(ValueError, match="approximate must be"):
        gelu_forward(np.ones(3), approximate="erf")
    with pytest.raises(ValueError, match="b must have shape"):
        swiglu_forward(np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        relu_forward(np.arange(3))
