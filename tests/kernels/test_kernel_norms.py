"""LayerNorm and RMSNorm kernels against the NumPy reference over the shape and dtype grid."""

import ml_dtypes
import numpy as np
import pytest
from _kernel_tol import as64, assert_param_grad, assert_rowwise
from conftest import DTYPES

from normlab import _checks as ck
from normlab import functional as F
from normlab import kernels as K

# 2-D and 3-D, single rows, odd widths (1, 7, 33, 1000) and a width past one vector of 16.
SHAPES = [(1, 1), (5, 1), (1, 7), (3, 4, 7), (1, 33), (6, 33), (2, 3, 1000), (37, 64)]


def _inputs(rng, shape, dtype, pdtype=None):
    C = shape[-1]
    pdtype = dtype if pdtype is None else pdtype
    x = rng.normal(0.5, 2.0, size=shape).astype(dtype)
    return x, rng.normal(size=C).astype(pdtype), rng.normal(size=C).astype(pdtype)


def _terms(dy, g, rstd):
    """The magnitude of the terms of dx = rstd * (g dy - ...): they can cancel (width 1)."""
    return float(np.max(np.abs(as64(dy) * as64(g) * as64(rstd))))


def _y_scale(x, rstd, g):
    """The magnitude of the terms of y = (x - mean) * rstd * g: an error in the statistics moves
    y by up to about this much times eps."""
    return float(np.abs(as64(x)).max() * as64(rstd).max() * np.abs(as64(g)).max())


def _dy(rng, shape, dtype):
    return rng.normal(size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_matches_reference(rng, shape, dtype):
    x, g, b = _inputs(rng, shape, DTYPES[dtype])
    y, cache = K.layer_norm_forward(x, g, b, eps=1e-5)
    y_ref, cache_ref = F.layer_norm_forward(x, g, b, eps=1e-5)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert_rowwise(y, y_ref, scale=_y_scale(x, cache_ref.rstd, g), what="y")
    ct = ck.compute_dtype(x.dtype)
    assert cache.mean.dtype == ct and cache.mean.shape == cache_ref.mean.shape
    assert_close_stat(cache.mean, cache_ref.mean, as64(x), "mean")
    assert_rowwise(cache.rstd, cache_ref.rstd, what="rstd")

    dy = _dy(rng, shape, x.dtype)
    dx, dg, db = K.layer_norm_backward(dy, cache)
    dx_ref, dg_ref, db_ref = F.layer_norm_backward(dy, cache_ref)
    assert_rowwise(dx, dx_ref, ulps_ct=16, scale=_terms(dy, g, cache_ref.rstd), what="dx")
    xhat = (as64(x) - as64(cache_ref.mean)) * as64(cache_ref.rstd)
    assert_param_grad(dg, dg_ref, as64(dy) * xhat, ct, what="dweight")
    assert_param_grad(db, db_ref, as64(dy), ct, what="dbias")


def assert_close_stat(a, e, x, what):
    """A row mean: a sum of C terms, so compared against the scale of its terms."""
    ct = a.dtype
    tol = 8 * ck.np.finfo(ct).eps * np.abs(x).max(axis=-1, keepdims=True)
    assert (np.abs(as64(a) - as64(e)) <= tol).all(), what


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("partial,offset", [(None, 0.0), (0.5, 1.0)])
def test_rms_norm_matches_reference(rng, shape, dtype, partial, offset):
    x, w, _ = _inputs(rng, shape, DTYPES[dtype])
    y, cache = K.rms_norm_forward(x, w, eps=1e-6, partial=partial, offset=offset)
    y_ref, cache_ref = F.rms_norm_forward(x, w, eps=1e-6, partial=partial, offset=offset)
    assert y.dtype == x.dtype and cache.k == cache_ref.k
    assert_rowwise(y, y_ref, scale=_y_scale(x, cache_ref.rstd, cache_ref.scale), what="y")
    assert_rowwise(cache.rstd, cache_ref.rstd, what="rstd")
    np.testing.assert_array_equal(cache.scale, cache_ref.scale)

    dy = _dy(rng, shape, x.dtype)
    dx, dw = K.rms_norm_backward(dy, cache)
    dx_ref, dw_ref = F.rms_norm_backward(dy, cache_ref)
    assert_rowwise(dx, dx_ref, ulps_ct=16, scale=_terms(dy, cache_ref.scale, cache_ref.rstd),
                   what="dx")
    xhat = as64(x) * as64(cache_ref.rstd)
    assert_param_grad(dw, dw_ref, as64(dy) * xhat, ck.compute_dtype(x.dtype), what="dweight")


@pytest.mark.parametrize("op", ["layer", "rms"])
def test_caches_are_interchangeable(rng, op):
    """The kernel backward consumes a reference cache and the other way round."""
    x, g, b = _inputs(rng, (4, 9, 40), np.float32)
    dy = _dy(rng, x.shape, np.float32)
    if op == "layer":
        fwd = lambda m: m.layer_norm_forward(x, g, b)  # noqa: E731
        bwd = lambda m, c: m.layer_norm_backward(dy, c)  # noqa: E731
    else:
        fwd = lambda m: m.rms_norm_forward(x, g)  # noqa: E731
        bwd = lambda m, c: m.rms_norm_backward(dy, c)  # noqa: E731
    ck_, cf = fwd(K)[1], fwd(F)[1]
    assert type(ck_) is type(cf)
    for a, e in zip(bwd(K, cf), bwd(F, ck_)):
        assert_rowwise(a, e, ulps_ct=16)


def test_mixed_dtypes_and_no_affine(rng):
    """bfloat16 input with float32 parameters; LayerNorm without gain or bias; a float32
    gradient for a bfloat16 forward."""
    x, g, b = _inputs(rng, (5, 48), ml_dtypes.bfloat16, np.float32)
    for weight, bias in ((g, b), (None, None), (g, None)):
        y, c = K.layer_norm_forward(x, weight, bias)
        y_ref, c_ref = F.layer_norm_forward(x, weight, bias)
        assert_rowwise(y, y_ref)
        dy = _dy(rng, x.shape, np.float32)
        got, ref = K.layer_norm_backward(dy, c), F.layer_norm_backward(dy, c_ref)
        for a, e in zip(got, ref):
            assert (a is None) == (e is None)
            if a is not None:
                assert a.dtype == e.dtype
        assert_rowwise(got[0], ref[0], ulps_ct=16)


def test_non_contiguous_input(rng):
    x, g, _b = _inputs(rng, (40, 24), np.float32)
    xt = x.T  # (24, 40), a transposed view
    y, _c = K.layer_norm_forward(xt, g[:1].repeat(40), None)
    y_ref, _ = F.layer_norm_forward(xt, g[:1].repeat(40), None)
    assert_rowwise(y, y_ref)


def test_low_formats_fall_back_to_the_reference(rng):
    """float8 is not read by the kernels: the reference runs, so the result is identical."""
    x, g, b = _inputs(rng, (4, 16), ml_dtypes.float8_e4m3fn)
    y, _c = K.layer_norm_forward(x, g, b)
    y_ref, _ = F.layer_norm_forward(x, g, b)
    np.testing.assert_array_equal(y.view(np.uint8), y_ref.view(np.uint8))


def test_non_finite_values_propagate_per_row(rng):
    x, g, b = _inputs(rng, (4, 16), np.float32)
    x[1, 3] = np.nan
    x[2, 5] = np.inf
    y, _ = K.layer_norm_forward(x, g, b)
    with np.errstate(invalid="ignore"):
        y_ref, _ = F.layer_norm_forward(x, g, b)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(y_ref))
    assert np.isfinite(y[[0, 3]]).all()


def test_rows_have_mean_zero_and_variance_one(rng):
    x = rng.normal(3.0, 5.0, size=(6, 9, 33))
    y, _ = K.layer_norm_forward(x, np.ones(33), np.zeros(33), eps=1e-12)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-10)


@pytest.mark.parametrize("bad,exc,match", [
    (dict(x=np.arange(6).reshape(2, 3)), TypeError, "x must be a floating-point array"),
    (dict(weight=np.ones(4)), ValueError, "weight must have shape"),
    (dict(eps=0.0), ValueError, "eps must be a finite number > 0"),
])
def test_bad_input_is_refused_like_the_reference(bad, exc, match):
    args = dict(x=np.ones((2, 3)), weight=np.ones(3), bias=None, eps=1e-5) | bad
    with pytest.raises(exc, match=match):
        K.layer_norm_forward(**args)
    with pytest.raises(exc, match=match):
        F.layer_norm_forward(**args)


@pytest.mark.parametrize("op", ["layer", "rms"])
def test_parallel_path_matches_reference(rng, op):
    """Past PARALLEL_MIN elements the rows are split across threads and the parameter gradients
    reduced across them: the same results."""
    from normlab.kernels._common import PARALLEL_MIN

    x, g, b = _inputs(rng, (PARALLEL_MIN // 500 + 37, 1000), np.float32)
    assert x.size >= PARALLEL_MIN
    dy = _dy(rng, x.shape, np.float32)
    if op == "layer":
        (y, c), (y_ref, c_ref) = K.layer_norm_forward(x, g, b), F.layer_norm_forward(x, g, b)
        got, want = K.layer_norm_backward(dy, c), F.layer_norm_backward(dy, c_ref)
        xhat = (as64(x) - as64(c_ref.mean)) * as64(c_ref.rstd)
    else:
        (y, c), (y_ref, c_ref) = K.rms_norm_forward(x, g), F.rms_norm_forward(x, g)
        got, want = K.rms_norm_backward(dy, c), F.rms_norm_backward(dy, c_ref)
        xhat = as64(x) * as64(c_ref.rstd)
    assert_rowwise(y, y_ref, scale=_y_scale(x, c_ref.rstd, g))
    assert_rowwise(got[0], want[0], ulps_ct=16, scale=_terms(dy, g, c_ref.rstd))
    assert_param_grad(got[1], want[1], as64(dy) * xhat, np.float32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8"])
@pytest.mark.parametrize("op", ["layer", "rms"])
def test_forward_into_a_caller_buffer(rng, op, dtype):
    """``out=``: y is written into the given array (returned as y), bit for bit the result
    without it, the cache the same; the input untouched (the float8 fallback copies)."""
    dt = ml_dtypes.float8_e4m3fn if dtype == "float8" else DTYPES[dtype]
    x, g, b = _inputs(rng, (6, 33), dt)
    x_before = x.copy()
    fwd = ((lambda **kw: K.layer_norm_forward(x, g, b, **kw)) if op == "layer"
           else (lambda **kw: K.rms_norm_forward(x, g, **kw)))
    y, c = fwd()
    out = np.full(x.shape, 7, x.dtype)
    y_out, c_out = fwd(out=out)
    assert y_out is out
    np.testing.assert_array_equal(out.view(np.uint8), y.view(np.uint8))
    np.testing.assert_array_equal(as64(c_out.rstd), as64(c.rstd))
    np.testing.assert_array_equal(x.view(np.uint8), x_before.view(np.uint8))


@pytest.mark.parametrize("op", ["layer", "rms"])
def test_bad_out_is_refused(rng, op):
    x, g, b = _inputs(rng, (4, 8), np.float32)
    fwd = ((lambda out: K.layer_norm_forward(x, g, b, out=out)) if op == "layer"
           else (lambda out: K.rms_norm_forward(x, g, out=out)))
    with pytest.raises(TypeError, match="out"):
        fwd([[0.0] * 8] * 4)
    with pytest.raises(ValueError, match="out"):
        fwd(np.empty((4, 7), np.float32))
    with pytest.raises(ValueError, match="out"):
        fwd(np.empty((4, 8), np.float64))
    with pytest.raises(ValueError, match="out"):
        fwd(np.empty((8, 4), np.float32).T)
    with pytest.raises(ValueError, match="out"):
        fwd(x)  # the input is never overwritten


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", ["layer", "rms"])
def test_members_kernels_give_each_member_its_single_call_bits(rng, op, dtype):
    """The ensemble's norms (M members' rows, each with its own parameters, in one call): member
    m's y, dx and parameter gradients are those of a call on its rows alone, bit for bit, on the
    plain kernels (float32, float64) and the chunked ones (bfloat16)."""
    from normlab.kernels import norms as N

    M, R, C = 3, 37, 33
    x = rng.normal(0.5, 2.0, size=(M, R, C)).astype(dtype)
    w = rng.normal(size=(M, C)).astype(np.float32)
    b = rng.normal(size=(M, C)).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(dtype)
    if op == "layer":
        y, c = N.layer_norm_forward_members(x, w, b, eps=1e-5)
        grads = N.layer_norm_backward_members(dy, c)
    else:
        y, c = N.rms_norm_forward_members(x, w, eps=1e-6, partial=0.5)
        grads = N.rms_norm_backward_members(dy, c)
    for m in range(M):
        if op == "layer":
            ym, cm = K.layer_norm_forward(x[m], w[m], b[m], eps=1e-5)
            gm = K.layer_norm_backward(dy[m], cm)
        else:
            ym, cm = K.rms_norm_forward(x[m], w[m], eps=1e-6, partial=0.5)
            gm = K.rms_norm_backward(dy[m], cm)
        assert _bits(y[m]) == _bits(ym)
        for got, want in zip(grads, gm):
            assert _bits(got[m]) == _bits(want)


@pytest.mark.parametrize("op", ["layer", "rms"])
def test_plain_forward_keeps_the_chunked_kernels_bits(rng, op):
    """The plain kernels' forward is the chunked kernels' lines: the same y and statistics as the
    chunked kernel with one chunk (their backward sums in another order: within the tolerances
    of test_layer_norm_matches_reference and test_rms_norm_matches_reference)."""
    from normlab.kernels import norms as N
    from normlab.kernels._rows import F16_TABLE, NATIVE
    from normlab.kernels.accumulate import acc_spec

    x, g, b = _inputs(rng, (300, 33), np.float32)
    assert N.plain(x, np.dtype(np.float32), x.size)
    y, c = (K.layer_norm_forward(x, g, b) if op == "layer" else K.rms_norm_forward(x, g))
    y2 = np.empty_like(x)
    if op == "layer":
        mean, rstd = np.empty(300, np.float32), np.empty(300, np.float32)
        N._layer_norm_fwd(x, g, b, np.float32(1e-5), y2, mean, rstd, NATIVE, F16_TABLE, 1,
                          acc_spec(None))
        assert _bits(mean) == _bits(c.mean) and _bits(rstd) == _bits(c.rstd)
    else:
        rstd = np.empty(300, np.float32)
        N._rms_norm_fwd(x, g, np.float32(1e-8), 33, y2, rstd, NATIVE, F16_TABLE, 1,
                        acc_spec(None))
        assert _bits(rstd) == _bits(c.rstd)
    assert _bits(y) == _bits(y2)
