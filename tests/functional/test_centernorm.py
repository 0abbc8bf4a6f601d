"""The centering-only norm (LayerNorm without its rescaling): finite differences in float64, its
PyTorch twin in every dtype, its invariants (rows of mean zero, the input gradient summing to
zero per row, no scale invariance), the registry entry's module,
and bad input (the whole model: tests/models/test_centernorm_model.py)."""

import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab import nn as nnl
from normlab.functional import norms
from normlab.functional.centernorm import center_norm_backward, center_norm_forward
from normlab.functional.layernorm import layer_norm_forward
from normlab.testing import gradcheck
from normlab.testing.center_oracle import center_norm


def _inputs(rng, shape, *, weight=True, bias=True):
    C = shape[-1]
    return {"x": rng.normal(0.5, 2.0, size=shape),
            "weight": rng.normal(0.7, 0.3, size=C) if weight else None,
            "bias": rng.normal(0.0, 0.5, size=C) if bias else None}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5)])
@pytest.mark.parametrize("params", [2, 1, 0])
def test_gradcheck(rng, shape, params):
    """With gain and bias, the gain alone, neither: the gradients of the inputs given."""
    d = {k: v for k, v in list(_inputs(rng, shape).items())[:1 + params]}

    def backward(dout, cache):
        return center_norm_backward(dout, cache)[:1 + params]

    report = gradcheck(center_norm_forward, backward, d, rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch(rng, shape, dtype):
    check_against_torch(center_norm_forward, center_norm_backward, center_norm,
                        _inputs(rng, shape), DTYPES[dtype], rng)


def test_rows_are_centred_not_rescaled_and_the_input_gradient_sums_to_zero(rng):
    x = rng.normal(3.0, 5.0, size=(6, 16))
    y, cache = center_norm_forward(x)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y, x - x.mean(-1, keepdims=True), rtol=1e-14)
    # the scale passes through (LayerNorm's output would not change): not scale invariant
    y2, _ = center_norm_forward(10.0 * x)
    np.testing.assert_allclose(y2, 10.0 * y, rtol=1e-12)
    ln10, _ = layer_norm_forward(10.0 * x)
    ln1, _ = layer_norm_forward(x)
    np.testing.assert_allclose(ln10, ln1, atol=1e-6)
    dx, dweight, dbias = center_norm_backward(rng.normal(size=x.shape), cache)
    np.testing.assert_allclose(dx.sum(-1), 0.0, atol=1e-12)
    assert dweight is None and dbias is None


def test_the_registry_entry_builds_a_module_with_layernorms_parameters(rng):
    entry = norms.get("centernorm")
    assert "centernorm" in norms.block_names() and "centernorm" not in norms.qk_names()
    m = entry.build(6, dtype=np.float64)
    assert list(m.params) == ["weight", "bias"]
    np.testing.assert_array_equal(m.params["weight"], np.ones(6))
    np.testing.assert_array_equal(m.params["bias"], np.zeros(6))
    assert list(nnl.Norm("centernorm", 6, bias=False).params) == ["weight"]
    x = rng.normal(size=(2, 3, 6))
    np.testing.assert_allclose(m(x), x - x.mean(-1, keepdims=True), rtol=1e-14)


def test_bad_input_is_refused_by_name(rng):
    d = _inputs(rng, (2, 4))
    with pytest.raises(ValueError, match="weight must have shape"):
        center_norm_forward(d["x"], np.ones(3), d["bias"])
    with pytest.raises(TypeError, match="x"):
        center_norm_forward(np.ones((2, 4), int), d["weight"], d["bias"])
    _, cache = center_norm_forward(**d)
    with pytest.raises(ValueError, match="dout"):
        center_norm_backward(np.ones((2, 3)), cache)
    with pytest.raises(TypeError, match="CenterNormCache"):
        center_norm_backward(np.ones((2, 4)), layer_norm_forward(d["x"])[1])
