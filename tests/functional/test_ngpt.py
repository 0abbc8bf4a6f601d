"""nGPT's ops (arXiv 2410.01131; NVIDIA/ngpt model.py): the unit-sphere normalization, the
residual update and the normalized q/k, by finite differences in float64 and against PyTorch
twins written after the official code's ``justnorm`` and ``Block.forward``; their invariants
(unit norms, alpha's sign) and bad input refused by name."""

import numpy as np
import pytest
from _parity import check_against_torch
from conftest import DTYPES, SHAPES

from normlab.functional.ngpt import (
    l2_normalize_backward,
    l2_normalize_forward,
    ngpt_qk_backward,
    ngpt_qk_forward,
    ngpt_update_backward,
    ngpt_update_forward,
    normalize_rows_,
)
from normlab.functional.rope import rope_tables
from normlab.testing import gradcheck
from normlab.testing.oracles import justnorm, ngpt_qk, ngpt_update


def _update_inputs(rng, shape):
    C = shape[-1]
    return {"h": rng.normal(size=shape), "f": rng.normal(0.0, 0.3, size=shape),
            "alpha": rng.normal(0.0, 0.4, size=C)}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5)])
def test_gradcheck(rng, shape):
    for fwd, bwd, inputs in (
        (l2_normalize_forward, l2_normalize_backward, {"x": rng.normal(size=shape)}),
        (ngpt_update_forward, ngpt_update_backward, _update_inputs(rng, shape)),
    ):
        report = gradcheck(fwd, bwd, inputs, rng=rng)
        assert report.passed, str(report)


@pytest.mark.parametrize("with_rope", [False, True])
def test_qk_gradcheck(rng, with_rope):
    B, H, T, D = 2, 3, 5, 6
    rope = rope_tables(T, D, 100.0, np.float64) if with_rope else None
    inputs = {"x": rng.normal(size=(B, H, T, D)), "s": rng.normal(1.0, 0.5, size=(H, D))}
    report = gradcheck(lambda x, s: ngpt_qk_forward(x, s, rope=rope), ngpt_qk_backward, inputs,
                       rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES[1:])  # a width of 1 is +-1 everywhere
def test_l2_normalize_matches_torch(rng, shape, dtype):
    check_against_torch(l2_normalize_forward, l2_normalize_backward, justnorm,
                        {"x": rng.normal(size=shape)}, DTYPES[dtype], rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES[1:])
def test_update_matches_torch(rng, shape, dtype):
    check_against_torch(ngpt_update_forward, ngpt_update_backward, ngpt_update,
                        _update_inputs(rng, shape), DTYPES[dtype], rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_rope", [False, True])
def test_qk_matches_torch(rng, dtype, with_rope):
    B, H, T, D = 2, 3, 7, 8
    rope = rope_tables(T, D, 100.0, np.float64) if with_rope else None
    inputs = {"x": rng.normal(size=(B, H, T, D)), "s": rng.normal(1.0, 0.5, size=(H, D))}
    check_against_torch(lambda x, s: ngpt_qk_forward(x, s, rope=rope), ngpt_qk_backward,
                        lambda x, s: ngpt_qk(x, s, rope), inputs, DTYPES[dtype], rng)


def test_the_update_stays_on_the_sphere_and_reads_alpha_by_its_absolute_value(rng):
    h, f, alpha = _update_inputs(rng, (3, 4, 16)).values()
    out, _ = ngpt_update_forward(h, f, alpha)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, rtol=1e-14)
    np.testing.assert_array_equal(out, ngpt_update_forward(h, f, -alpha)[0])
    # alpha 0 keeps Norm(h), alpha 1 gives Norm(f)
    hn = h / np.linalg.norm(h, axis=-1, keepdims=True)
    fn = f / np.linalg.norm(f, axis=-1, keepdims=True)
    np.testing.assert_allclose(ngpt_update_forward(h, f, np.zeros(16))[0], hn, rtol=1e-14)
    np.testing.assert_allclose(ngpt_update_forward(h, f, np.ones(16))[0], fn, rtol=1e-14)


def test_a_zero_row_gives_zeros_not_nan():
    out, cache = l2_normalize_forward(np.zeros((2, 3)))
    assert np.all(out == 0.0)
    assert np.all(np.isfinite(l2_normalize_backward(np.ones((2, 3)), cache)[0]))


def test_normalize_rows_puts_each_vector_along_the_axis_on_the_sphere(rng):
    w = rng.normal(size=(5, 7)).astype(np.float32)
    v = w.copy()
    normalize_rows_(w, 1)
    normalize_rows_(v, 0)
    np.testing.assert_allclose(np.linalg.norm(w, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1.0, rtol=1e-6)
    assert w.dtype == np.float32
    with pytest.raises(TypeError, match="w must be a float ndarray"):
        normalize_rows_(np.ones((2, 2), np.int64), 0)


def test_bad_input_is_refused_by_name(rng):
    h = rng.normal(size=(2, 4))
    with pytest.raises(ValueError, match="f must have"):
        ngpt_update_forward(h, h[:, :3], np.ones(4))
    with pytest.raises(ValueError, match="alpha must have"):
        ngpt_update_forward(h, h, np.ones(3))
    with pytest.raises(ValueError, match="s must have"):
        ngpt_qk_forward(rng.normal(size=(1, 2, 3, 4)), np.ones((3, 4)))
    with pytest.raises(TypeError, match="l2_normalize"):
        l2_normalize_backward(h, "not a cache")
