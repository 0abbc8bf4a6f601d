"""The reference fused add + dropout + norm: finite differences in float64 (the mask fixed by a
seeded generator), and the pre-norm identities."""

import numpy as np
import pytest

from normlab.functional.add_norm import add_norm_backward, add_norm_forward, keep_mask
from normlab.testing import gradcheck


def _op(norm, p_drop, with_bias):
    def fwd(x, r, w, *b):
        (y, res), cache = add_norm_forward(x, r, w, b[0] if b else None, eps=1e-5, norm=norm,
                                           p_drop=p_drop, training=True,
                                           rng=np.random.default_rng(4))
        return np.stack([y, res]), cache

    def bwd(dout, cache):
        dx, dr, dw, db = add_norm_backward((dout[0], dout[1]), cache)
        return (dx, dr, dw, db) if with_bias else (dx, dr, dw)

    return fwd, bwd


@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("p_drop", [0.0, 0.4])
def test_gradcheck(rng, norm, p_drop):
    with_bias = norm == "layer"
    inputs = {"x": rng.normal(size=(3, 2, 9)), "r": rng.normal(size=(3, 2, 9)),
              "w": rng.normal(size=9)}
    if with_bias:
        inputs["b"] = rng.normal(size=9)
    fwd, bwd = _op(norm, p_drop, with_bias)
    report = gradcheck(fwd, bwd, inputs, rng=rng)
    assert report.passed, str(report)


def test_residual_out_is_the_sum_and_y_its_norm(rng):
    x, r = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    w, b = rng.normal(size=6), rng.normal(size=6)
    (y, res), _ = add_norm_forward(x, r, w, b)
    np.testing.assert_array_equal(res, x + r)
    from normlab.functional import layer_norm_forward
    np.testing.assert_allclose(y, layer_norm_forward(x + r, w, b)[0], rtol=1e-14, atol=1e-14)


def test_backward_regenerates_the_forward_mask(rng):
    x = rng.normal(size=(5, 32))
    (y, res), cache = add_norm_forward(x, None, np.ones(32), None, p_drop=0.5, training=True,
                                       rng=rng)
    keep = keep_mask(cache.key, 5, 32)
    np.testing.assert_array_equal(res == 0, ~keep)
    dx, dr, _, _ = add_norm_backward((np.zeros_like(y), np.ones_like(res)), cache)
    assert dr is None
    np.testing.assert_array_equal(dx, np.where(keep, 2.0, 0.0))
