"""The sigmoid output gate of gated attention (arXiv 2505.06708): finite differences in float64,
PyTorch (``y * torch.sigmoid(g)``, as the official code and Qwen3-Next compute it) in every
dtype, its range, and bad input refused by name."""

import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab.functional.gating import sigmoid_gate_backward, sigmoid_gate_forward
from normlab.testing import gradcheck, oracles


def _inputs(rng, shape):
    return {"y": rng.normal(0.0, 1.5, size=shape), "g": rng.normal(0.0, 3.0, size=shape)}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5)])
def test_gradcheck(rng, shape):
    report = gradcheck(sigmoid_gate_forward, sigmoid_gate_backward, _inputs(rng, shape), rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch(rng, shape, dtype):
    check_against_torch(sigmoid_gate_forward, sigmoid_gate_backward, oracles.sigmoid_gate,
                        _inputs(rng, shape), DTYPES[dtype], rng)


def test_the_gate_scales_each_value_by_a_factor_in_0_1_without_overflow():
    y = np.full(5, 2.0)
    g = np.array([-1000.0, -1.0, 0.0, 1.0, 1000.0])
    out, _ = sigmoid_gate_forward(y, g)
    np.testing.assert_allclose(out[1:4], 2.0 / (1.0 + np.exp(-g[1:4])), rtol=1e-15)
    assert out[0] == 0.0 and out[2] == 1.0 and out[4] == 2.0  # exp(-1000) is 0: no overflow


def test_bad_input_is_refused_by_name(rng):
    with pytest.raises(ValueError, match="g must have"):
        sigmoid_gate_forward(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(TypeError, match="y"):
        sigmoid_gate_forward(np.ones((2, 3), int), np.ones((2, 3)))
    _, cache = sigmoid_gate_forward(**_inputs(rng, (2, 3)))
    with pytest.raises(ValueError, match="dout"):
        sigmoid_gate_backward(np.ones((3, 2)), cache)
