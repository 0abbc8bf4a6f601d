"""GELU kernels against the reference: the exact forward bitwise (the same libm erf in float64),
the tanh form within a few roundings (its float32 forward evaluates tanh with a rational
approximation, checked against float64 tanh here; the exact backward runs NumPy's vectorized exp:
see normlab.kernels.activations)."""

import numpy as np
import pytest
from _kernel_tol import as64, assert_rowwise
from conftest import DTYPES

from normlab import kernels as K
from normlab.functional import activations as FA


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 4, 33), (5000,)])
def test_gelu_exact_forward_is_bitwise(rng, shape, dtype):
    x = (rng.normal(size=shape) * 3).astype(DTYPES[dtype])
    y, c = K.gelu_forward(x, approximate="none")
    y_ref, c_ref = FA.gelu_forward(x, approximate="none")
    assert type(c) is type(c_ref) and y.dtype == x.dtype
    np.testing.assert_array_equal(as64(y), as64(y_ref))
    np.testing.assert_array_equal(as64(c.s), as64(c_ref.s))
    dy = rng.normal(size=shape).astype(x.dtype)
    # the backward's exp(-x^2/2): NumPy's vectorized exp vs libm's, an ulp apart at most
    assert_rowwise(K.gelu_backward(dy, c), FA.gelu_backward(dy, c_ref), ulps_ct=2,
                   scale=float(np.max(np.abs(as64(dy)))))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_tanh_form(rng, dtype):
    x = (rng.normal(size=(6, 50)) * 3).astype(DTYPES[dtype])
    y, _c = K.gelu_forward(x, approximate="tanh")
    y_ref, c_ref = FA.gelu_forward(x, approximate="tanh")
    assert_rowwise(y, y_ref, ulps_ct=4, scale=float(np.max(np.abs(as64(x)))))
    dy = rng.normal(size=x.shape).astype(x.dtype)
    # given the same cache the backward is plain arithmetic (a few roundings, in an order that
    # may differ from the reference's)
    scale = float(np.max(np.abs(as64(dy)) * (1 + np.abs(as64(x)))))
    assert_rowwise(K.gelu_backward(dy, c_ref), FA.gelu_backward(dy, c_ref), ulps_ct=8,
                   scale=scale)


def test_tanh_f32_against_float64_tanh():
    """The tanh form's float32 tanh (a rational approximation) on a dense grid and near 0: within
    4 units of 2^-23 relative to the result (ulp of 1) of NumPy's float64 tanh rounded to
    float32, exact at 0 and +-inf, NaN in NaN out, odd."""
    from numba import njit

    from normlab.kernels.activations import tanh_f32

    @njit
    def apply(x, out):
        for i in range(x.shape[0]):
            out[i] = tanh_f32(x[i])

    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-12, 12, 1_000_001), rng.normal(size=200_000) * 1e-2,
                        rng.normal(size=200_000) * 3]).astype(np.float32)
    t = np.empty_like(x)
    apply(x, t)
    exact = np.tanh(x.astype(np.float64))
    err = np.abs(t.astype(np.float64) - exact)
    eps = float(np.finfo(np.float32).eps)
    assert np.all(err <= 4 * eps * np.maximum(np.abs(exact), np.finfo(np.float32).tiny))
    np.testing.assert_array_equal(t[x == 0], 0)
    xm = -x
    tm = np.empty_like(x)
    apply(xm, tm)
    np.testing.assert_array_equal(tm, -t)
    special = np.array([np.inf, -np.inf, np.nan], np.float32)
    out = np.empty_like(special)
    apply(special, out)
    np.testing.assert_array_equal(out[:2], [1, -1])
    assert np.isnan(out[2])


@pytest.mark.parametrize("shape", [(7,), (64, 512)])
def test_gelu_tanh_form_float32_fast_path(rng, shape):
    """The float32 path (one loop, rational tanh): y within 4 float32 units of the reference and
    the saved x the input itself; the backward of its cache matches the reference's."""
    x = (rng.normal(size=shape) * 3).astype(np.float32)
    y, c = K.gelu_forward(x, approximate="tanh")  # the default: the fast path
    y_ref, c_ref = FA.gelu_forward(x, approximate="tanh")
    assert_rowwise(y, y_ref, ulps_ct=4, scale=float(np.max(np.abs(x))))
    assert_rowwise(c.s, c_ref.s, ulps_ct=4, scale=1.0)
    y_exact, _ = K.gelu_forward(x, approximate="tanh", fast_tanh=False)  # the reference
    np.testing.assert_array_equal(y_exact, y_ref)
    np.testing.assert_array_equal(c.x, x)
    dy = rng.normal(size=shape).astype(np.float32)
    assert_rowwise(K.gelu_backward(dy, c), FA.gelu_backward(dy, c_ref), ulps_ct=8,
                   scale=float(np.max(np.abs(dy) * (1 + np.abs(x)))))


def test_gelu_tanh_form_float32_blocks_are_the_plain_loop_bitwise(rng):
    """From PARALLEL_MIN values on, the float32 tanh form runs the plain loop a block at a time
    (in parallel where numba has threads): every value is its own computation, so the forward's
    y and cache and the backward's dx are the plain loop's over the whole array, bit for bit."""
    from normlab.kernels._common import PARALLEL_MIN
    from normlab.kernels.activations import _gelu_tanh_bwd_plain, _gelu_tanh_fwd_f32

    x = (rng.normal(size=PARALLEL_MIN + 4099) * 3).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    y, c = K.gelu_forward(x, approximate="tanh")
    s_plain, y_plain, dx_plain = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    _gelu_tanh_fwd_f32(x, s_plain, y_plain)
    _gelu_tanh_bwd_plain(x, s_plain, dy, dx_plain)
    np.testing.assert_array_equal(y.view(np.uint32), y_plain.view(np.uint32))
    np.testing.assert_array_equal(c.s.view(np.uint32), s_plain.view(np.uint32))
    np.testing.assert_array_equal(K.gelu_backward(dy, c).view(np.uint32),
                                  dx_plain.view(np.uint32))
