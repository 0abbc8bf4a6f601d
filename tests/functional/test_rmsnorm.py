import math
from functools import partial

import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab.functional import rms_norm_backward, rms_norm_forward
from normlab.functional.rmsnorm import partial_width
from normlab.testing import gradcheck, oracles


def _inputs(rng, shape):
    return {"x": rng.normal(0.5, 2.0, size=shape), "weight": rng.normal(size=shape[-1])}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5), (3, 1)])
@pytest.mark.parametrize("options", [{}, {"partial": 0.25}, {"partial": 0.5, "offset": 1.0},
                                     {"offset": 1.0}, {"eps": 1e-2}])
def test_gradcheck(rng, shape, options):
    fwd = partial(rms_norm_forward, **options)
    report = gradcheck(fwd, rms_norm_backward, _inputs(rng, shape), rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch_fused_rms_norm(rng, shape, dtype):
    check_against_torch(rms_norm_forward, rms_norm_backward, oracles.rms_norm,
                        _inputs(rng, shape), DTYPES[dtype], rng, scales=_dx_scale)


def _dx_scale(inputs, dout):
    # dx = rstd * (g - xhat * mean(g * xhat)) cancels (to ~eps/x^2 when C = 1): measure its error
    # against the size of its first term.
    x, w = inputs["x"], inputs["weight"]
    rstd = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-8)
    return {"x": float(np.max(np.abs(dout * w * rstd)))}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("options", [{"partial": 0.0625}, {"offset": 1.0}])
def test_matches_torch_partial_and_offset(rng, dtype, options):
    check_against_torch(partial(rms_norm_forward, **options), rms_norm_backward,
                        partial(oracles.rms_norm, **options), _inputs(rng, (4, 5, 64)),
                        DTYPES[dtype], rng)


def test_scaling_a_row_by_a_positive_constant_changes_nothing(rng):
    # Invariance holds exactly with eps = 0; eps must be > 0, so use one far below the mean square.
    d = _inputs(rng, (5, 16))
    c = rng.uniform(0.1, 100.0, size=(5, 1))
    y0, _ = rms_norm_forward(d["x"], d["weight"], eps=1e-300)
    y1, _ = rms_norm_forward(d["x"] * c, d["weight"], eps=1e-300)
    np.testing.assert_allclose(y1, y0, rtol=1e-14, atol=1e-14)


def test_input_gradient_is_orthogonal_to_the_input(rng):
    # Scale invariance means the gradient has no component along x (eps -> 0).
    d = _inputs(rng, (4, 9))
    _, cache = rms_norm_forward(d["x"], d["weight"], eps=1e-300)
    dx, _ = rms_norm_backward(rng.normal(size=(4, 9)), cache)
    np.testing.assert_allclose(np.sum(dx * d["x"], axis=-1), 0.0, atol=1e-12)


def test_chapter_worked_number():
    # The RMS of (3, 4) is sqrt(12.5) = 3.54 to two decimals.
    _, cache = rms_norm_forward(np.array([3.0, 4.0]), np.ones(2), eps=1e-8)
    assert round(1.0 / float(cache.rstd[0]), 2) == 3.54


def test_chapter_listing_agrees(rng):
    x, w = rng.normal(size=(3, 4, 6)), rng.normal(size=6)
    dout = rng.normal(size=x.shape)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    inv_rms = 1.0 / np.sqrt(ms + 1e-8)
    ref = x * inv_rms * w
    gn = dout * w
    ref_dx = gn * inv_rms - x * inv_rms**3 * np.sum(gn * x, axis=-1, keepdims=True) / 6
    y, cache = rms_norm_forward(x, w)
    dx, dw = rms_norm_backward(dout, cache)
    np.testing.assert_allclose(y, ref, rtol=1e-13)
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dw, (dout * x * inv_rms).sum((0, 1)), rtol=1e-12)


@pytest.mark.parametrize("C,p,k", [(10, 0.1, 1), (30, 0.1, 3), (64, 0.0625, 4), (7, 0.5, 4),
                                   (5, 1.0, 5), (3, 0.01, 1)])
def test_partial_width_is_ceil(C, p, k):
    assert partial_width(C, p) == k == max(1, math.ceil(round(p * C, 9)))


def test_partial_estimates_from_the_leading_features_only(rng):
    x, w = rng.normal(size=(2, 8)), rng.normal(size=8)
    y, _ = rms_norm_forward(x, w, partial=0.5)
    x2 = x.copy()
    x2[:, 4:] *= 100.0  # the tail does not enter the RMS
    y2, _ = rms_norm_forward(x2, w, partial=0.5)
    np.testing.assert_allclose(y2[:, :4], y[:, :4], rtol=1e-14)


def test_offset_is_gemma_one_plus_w(rng):
    x, w = rng.normal(size=(3, 8)), rng.normal(size=8)
    y_off, _ = rms_norm_forward(x, w, offset=1.0)
    y_plain, _ = rms_norm_forward(x, 1.0 + w)
    np.testing.assert_allclose(y_off, y_plain, rtol=1e-15)
    # the weight gradient does not depend on the offset; dx does
    dout = rng.normal(size=(3, 8))
    _, c1 = rms_norm_forward(x, w, offset=1.0)
    _, c2 = rms_norm_forward(x, w)
    assert np.allclose(rms_norm_backward(dout, c1)[1], rms_norm_backward(dout, c2)[1])
