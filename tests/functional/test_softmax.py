import numpy as np
import pytest
import torch
from _parity import GEMM, check_against_torch

from normlab.functional import softmax_backward, softmax_forward
from normlab.testing import gradcheck


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_gradcheck(axis):
    rng = np.random.default_rng(1)
    fwd = lambda x: softmax_forward(x, axis)  # noqa: E731
    assert gradcheck(fwd, softmax_backward, {"x": rng.normal(size=(3, 4, 5))}, rng=rng).passed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_torch(dtype):
    rng = np.random.default_rng(2)
    check_against_torch(softmax_forward, softmax_backward, lambda x: torch.softmax(x, -1),
                        {"x": rng.normal(0, 5, size=(16, 50))}, dtype, rng, **GEMM)


def test_sums_to_one_masks_and_large_logits():
    x = np.array([[1000.0, 999.0, -np.inf], [0.0, -np.inf, -np.inf]])
    p, cache = softmax_forward(x)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-15)
    assert p[0, 2] == 0 and p[1, 0] == 1.0
    np.testing.assert_allclose(p[0, :2], [1 / (1 + np.exp(-1)), 1 / (1 + np.e)], rtol=1e-14)
    dx = softmax_backward(np.ones_like(x), cache)  # a constant upstream gradient has no effect
    np.testing.assert_allclose(dx, 0.0, atol=1e-15)


def test_bad_axis():
    with pytest.raises(ValueError, match="axis must be an integer"):
        softmax_forward(np.ones((2, 3)), 2)
