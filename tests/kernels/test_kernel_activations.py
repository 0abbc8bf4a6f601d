"""GELU kernels against the reference: the exact forward bitwise (the same libm erf in float64),
the tanh form's backward within a few roundings. (The tanh forward and the exact backward run
NumPy's vectorized tanh/exp: see normlab.kernels.activations.)"""

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
    y, c = K.gelu_forward(x, "none")
    y_ref, c_ref = FA.gelu_forward(x, "none")
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
    y, c = K.gelu_forward(x, "tanh")
    y_ref, c_ref = FA.gelu_forward(x, "tanh")
    assert_rowwise(y, y_ref, ulps_ct=4, scale=float(np.max(np.abs(as64(x)))))
    dy = rng.normal(size=x.shape).astype(x.dtype)
    # given the same cache the backward is plain arithmetic (a few roundings, in an order that
    # may differ from the reference's)
    scale = float(np.max(np.abs(as64(dy)) * (1 + np.abs(as64(x)))))
    assert_rowwise(K.gelu_backward(dy, c_ref), FA.gelu_backward(dy, c_ref), ulps_ct=8,
                   scale=scale)
