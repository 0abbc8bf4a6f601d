"""Fused residual add + dropout + norm: the kernel against the composition of the reference ops
(dropout, add, LayerNorm/RMSNorm), in both rounding options, over shapes and dtypes; the dropout
mask against its NumPy definition."""

import ml_dtypes
import numpy as np
import pytest
from _kernel_tol import as64, assert_param_grad, assert_rowwise
from conftest import DTYPES

from normlab import _checks as ck
from normlab import functional as F
from normlab import kernels as K
from normlab.functional import add_norm as ref

SHAPES = [(1, 1), (1, 7), (3, 4, 7), (6, 33), (2, 3, 1000)]


def _case(rng, shape, dtype, stream):
    """x, residual (None, x's dtype or float32/float64: the stream's dtype) and parameters."""
    ct = ck.compute_dtype(dtype)
    x = rng.normal(size=shape).astype(dtype)
    r = None if stream == "none" else rng.normal(size=shape).astype(dtype if stream == "x" else ct)
    C = shape[-1]
    return x, r, rng.normal(size=C).astype(dtype), rng.normal(size=C).astype(dtype)


def _y_scale(c):
    """The magnitude of the terms of y = (n - mean) * rstd * w (+ b): an error in the row
    statistics moves y by up to about this much times eps."""
    n = as64(c.norm_in)
    return float(np.abs(n).max() * as64(c.rstd).max() * np.abs(as64(c.weight)).max())


def _composed(x, r, w, b, keep, scale, norm, round_sum, res_dt, eps):
    """The unfused graph from the reference ops, step by step."""
    ct = ck.compute_dtype(x.dtype)
    xd = as_ct = x.astype(ct)
    if keep is not None:
        xd = np.where(keep, as_ct * ct.type(scale), ct.type(0))  # dropout_forward's arithmetic
        if round_sum:
            xd = xd.astype(x.dtype).astype(ct)
    s = xd + (r.astype(ct) if r is not None else 0)
    n = s.astype(x.dtype) if round_sum else s
    if norm == "layer":
        y, c = F.layer_norm_forward(n, w, b, eps=eps)
    else:
        y, c = F.rms_norm_forward(n, w, eps=eps)
    return y.astype(x.dtype), s.astype(res_dt), c


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("round_sum", [True, False])
def test_forward_equals_the_composition_of_reference_ops(rng, shape, dtype, norm, round_sum):
    dtype = DTYPES[dtype]
    for stream in ("x", "fp32", "none"):
        x, r, w, b = _case(rng, shape, dtype, stream)
        b = b if norm == "layer" else None
        (y, res), cache = K.add_norm_forward(
            x, r, w, b, eps=1e-5, norm=norm, p_drop=0.25, training=True,
            rng=np.random.default_rng(7), round_sum=round_sum)
        keep = K.keep_mask(cache.key, x.shape)
        res_dt = x.dtype if r is None else r.dtype
        y_ref, res_ref, _ = _composed(x, r, w, b, keep, cache.key.scale, norm, round_sum, res_dt,
                                      1e-5)
        assert y.dtype == x.dtype and res.dtype == res_dt
        # the residual stream is element-wise: bitwise
        np.testing.assert_array_equal(as64(res), as64(res_ref))
        assert_rowwise(y, y_ref, scale=_y_scale(cache), what=f"y ({stream} stream)")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm", ["layer", "rms"])
@pytest.mark.parametrize("round_sum", [True, False])
def test_kernel_equals_reference_forward_and_backward(rng, shape, dtype, norm, round_sum):
    dtype = DTYPES[dtype]
    ct = ck.compute_dtype(dtype)
    for stream in ("x", "fp32", "none"):
        x, r, w, b = _case(rng, shape, dtype, stream)
        b = b if norm == "layer" else None
        kw = dict(norm=norm, p_drop=0.3, training=True, round_sum=round_sum,
                  residual_in_fp32=stream == "none" and round_sum)
        (y, res), c = K.add_norm_forward(x, r, w, b, eps=1e-5, rng=np.random.default_rng(3), **kw)
        (y_r, res_r), c_r = ref.add_norm_forward(x, r, w, b, eps=1e-5, rng=np.random.default_rng(3),
                                                 **kw)
        assert type(c) is type(c_r) and c.key == c_r.key
        np.testing.assert_array_equal(as64(res), as64(res_r))
        assert res.dtype == res_r.dtype
        assert_rowwise(y, y_r, scale=_y_scale(c_r))
        dy = rng.normal(size=x.shape).astype(dtype)
        dres = rng.normal(size=x.shape).astype(res.dtype)
        for dout in ((dy, dres), (dy, None)):
            got = K.add_norm_backward(dout, c)
            want = ref.add_norm_backward(dout, c_r)
            names = ("dx", "dresidual", "dweight", "dbias")
            n = as64(c_r.norm_in if c_r.round_to is None else c_r.norm_in.astype(c_r.round_to))
            xhat = (n - (0 if c_r.mean is None else as64(c_r.mean))) * as64(c_r.rstd)
            terms = float(np.max(np.abs(as64(dy) * as64(c_r.weight) * as64(c_r.rstd))))
            for name, a, e in zip(names, got, want):
                assert (a is None) == (e is None), name
                if a is None:
                    continue
                assert a.dtype == e.dtype, name
                if name in ("dx", "dresidual"):
                    assert_rowwise(a, e, ulps_ct=16, scale=terms, what=name)
                elif name == "dweight":
                    assert_param_grad(a, e, as64(dy) * xhat, ct, what=name)
                else:
                    assert_param_grad(a, e, as64(dy), ct, what=name)


def test_round_sum_decides_what_is_normalized(rng):
    """bfloat16: round_sum=True normalizes the bfloat16 sum, False the float32 sum."""
    x, r, w, b = _case(rng, (8, 64), ml_dtypes.bfloat16, "x")
    (y1, s1), _ = K.add_norm_forward(x, r, w, b, round_sum=True)
    (y0, s0), _ = K.add_norm_forward(x, r, w, b, round_sum=False)
    np.testing.assert_array_equal(as64(s1), as64(s0))  # the stored stream is the same
    exact = as64(x) + as64(r)
    y_from_rounded = F.layer_norm_forward(s1, w, b)[0]
    y_from_exact = F.layer_norm_forward(exact.astype(np.float32), w, b)[0].astype(x.dtype)
    assert_rowwise(y1, y_from_rounded)
    assert_rowwise(y0, y_from_exact)
    assert not np.array_equal(as64(y1), as64(y0))


def test_gradient_reaches_x_only_through_kept_values(rng):
    x, r, w, b = _case(rng, (16, 40), np.float32, "x")
    (_y, _res), c = K.add_norm_forward(x, r, w, b, p_drop=0.5, training=True,
                                     rng=np.random.default_rng(1))
    keep = K.keep_mask(c.key, x.shape)
    dx, dr, _, _ = K.add_norm_backward((rng.normal(size=x.shape), None), c)
    assert not dx[~keep].any()
    np.testing.assert_allclose(dx[keep], 2.0 * dr[keep], rtol=1e-6)


def test_inference_and_p_zero_need_no_rng(rng):
    x, r, w, b = _case(rng, (3, 8), np.float32, "x")
    (_y, res), c = K.add_norm_forward(x, r, w, b, p_drop=0.5, training=False)
    assert c.key is None
    np.testing.assert_array_equal(res, x + r)
    with pytest.raises(TypeError, match="needs rng"):
        K.add_norm_forward(x, r, w, b, p_drop=0.5, training=True)


@pytest.mark.parametrize("bad,exc,match", [
    (dict(residual=np.ones((2, 4), np.float16)), ValueError, "residual must have x's dtype"),
    (dict(norm="batch"), ValueError, "norm must be one of"),
    (dict(norm="rms"), ValueError, "bias must be None"),
    (dict(p_drop=1.0), ValueError, "p_drop must be in"),
    (dict(residual=np.ones((2, 5), np.float32)), ValueError, "residual must have shape"),
])
def test_bad_input(bad, exc, match):
    args = dict(x=np.ones((2, 4), np.float32), residual=None, weight=np.ones(4),
                bias=np.zeros(4)) | bad
    for module in (K, ref):
        with pytest.raises(exc, match=match):
            module.add_norm_forward(**args)


# ---- the dropout mask -----------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 33)])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_kernel_mask_is_the_numpy_mask(shape, p):
    key = ref.dropout_key(p, np.random.default_rng(11))
    C = shape[-1]
    expected = ref.keep_mask(key, int(np.prod(shape[:-1])), C).reshape(shape)
    np.testing.assert_array_equal(K.keep_mask(key, shape), expected)


def test_mask_is_reproducible_from_the_generator():
    a = ref.dropout_key(0.3, np.random.default_rng(5))
    b = ref.dropout_key(0.3, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    c, d = ref.dropout_key(0.3, rng), ref.dropout_key(0.3, rng)
    assert a == b == c and c != d
    assert not np.array_equal(K.keep_mask(c, (64, 64)), K.keep_mask(d, (64, 64)))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_mask_keeps_the_expectation(p):
    """Keep rate 1 - p overall, per row and per column (binomial bounds, 5 sigma), and no
    correlation between neighbouring rows and columns."""
    rows, C = 512, 512
    keep = K.keep_mask(ref.dropout_key(p, np.random.default_rng(2)), (rows, C)).astype(float)
    q = 1.0 - p
    sd = np.sqrt(p * q)
    assert abs(keep.mean() - q) < 5 * sd / np.sqrt(keep.size)
    assert np.all(np.abs(keep.mean(axis=1) - q) < 5.5 * sd / np.sqrt(C))
    assert np.all(np.abs(keep.mean(axis=0) - q) < 5.5 * sd / np.sqrt(rows))
    z = keep - q
    for a, b in ((z[1:], z[:-1]), (z[:, 1:], z[:, :-1])):
        corr = (a * b).mean() / (p * q)
        assert abs(corr) < 5 / np.sqrt(a.size)
    # inverted dropout keeps E[x]: the mean of dropout(1) is 1
    assert abs((keep / q).mean() - 1.0) < 5 * sd / q / np.sqrt(keep.size)


def test_parallel_path_matches_reference(rng):
    from normlab.kernels._common import PARALLEL_MIN

    x, r, w, b = _case(rng, (PARALLEL_MIN // 300 + 11, 300), np.float32, "x")
    kw = dict(p_drop=0.2, training=True)
    (y, res), c = K.add_norm_forward(x, r, w, b, rng=np.random.default_rng(2), **kw)
    (y_r, res_r), c_r = ref.add_norm_forward(x, r, w, b, rng=np.random.default_rng(2), **kw)
    np.testing.assert_array_equal(res, res_r)
    assert_rowwise(y, y_r, scale=_y_scale(c_r))
    dy = rng.normal(size=x.shape).astype(np.float32)
    got, want = K.add_norm_backward((dy, dy), c), ref.add_norm_backward((dy, dy), c_r)
    xhat = (as64(res_r) - as64(c_r.mean)) * as64(c_r.rstd)
    terms = float(np.max(np.abs(as64(dy) * as64(c_r.weight) * as64(c_r.rstd)))
                  + np.max(np.abs(as64(dy))))  # ds = dnorm + dresidual_out
    assert_rowwise(got[0], want[0], ulps_ct=16, scale=terms)
    assert_param_grad(got[2], want[2], as64(dy) * xhat, np.float32)
    assert_param_grad(got[3], want[3], as64(dy), np.float32)
