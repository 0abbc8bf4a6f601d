"""Hypothesis: random shapes, dtypes and arguments. Only the documented exceptions are raised, and
finite input never gives a NaN or an infinity."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from normlab import functional as F

FLOATS = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16]
shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)
dtypes = st.sampled_from(FLOATS)
scales = st.sampled_from([1e-3, 1.0, 1e3])
settings.register_profile("normlab", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("normlab")


def _data(seed, shape, dtype, scale):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=shape) * scale).astype(dtype)
    C = shape[-1]
    return rng, x, rng.normal(size=C).astype(dtype), rng.normal(size=C).astype(dtype)


def _all_finite(*arrays):
    return all(a is None or np.all(np.isfinite(np.asarray(a).astype(np.float64))) for a in arrays)


@given(st.integers(0, 2**32 - 1), shapes, dtypes, scales)
def test_norms_never_produce_nan_from_finite_input(seed, shape, dtype, scale):
    rng, x, g, b = _data(seed, shape, dtype, scale)
    dout = rng.normal(size=shape).astype(dtype)
    for fwd, bwd, params in [
        (F.layer_norm_forward, F.layer_norm_backward, (g, b)),
        (F.rms_norm_forward, F.rms_norm_backward, (g,)),
        (F.dyt_forward, F.dyt_backward, (np.array(0.5, dtype), g, b)),
    ]:
        out, cache = fwd(x, *params)
        assert out.dtype == x.dtype and out.shape == x.shape
        grads = bwd(dout, cache)
        assert _all_finite(out, *grads)
        assert grads[0].dtype == x.dtype


@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(1, 4), dtypes, scales,
       st.booleans())
def test_batchnorm_never_produces_nan_from_finite_input(seed, n, C, dtype, scale, training):
    rng, x, g, b = _data(seed, (n, C), dtype, scale)
    out, cache, rm, rv = F.batch_norm_forward(x, g, b, np.zeros(C), np.ones(C), training=training)
    grads = F.batch_norm_backward(rng.normal(size=(n, C)).astype(dtype), cache)
    assert _all_finite(out, rm, rv, *grads)


@given(st.integers(0, 2**32 - 1), shapes, dtypes, st.floats(0.0, 0.99))
def test_dropout_never_produces_nan_from_finite_input(seed, shape, dtype, p):
    rng, x, _, _ = _data(seed, shape, dtype, 1.0)
    out, cache = F.dropout_forward(x, p, training=True, rng=rng)
    assert out.dtype == x.dtype and _all_finite(out, F.dropout_backward(np.ones_like(out), cache))


@given(shapes, st.integers(1, 5))
def test_wrong_parameter_width_is_refused(shape, other):
    assume(other != shape[-1])
    x = np.ones(shape)
    for call in [lambda: F.layer_norm_forward(x, np.ones(other), np.ones(shape[-1])),
                 lambda: F.layer_norm_forward(x, np.ones(shape[-1]), np.ones(other)),
                 lambda: F.rms_norm_forward(x, np.ones(other)),
                 lambda: F.dyt_forward(x, np.array(0.5), np.ones(other), np.ones(shape[-1]))]:
        with pytest.raises(ValueError, match=r"weight|bias"):
            call()


@given(st.sampled_from([0.0, -1e-5, float("nan"), float("inf"), -3]))
def test_bad_eps_is_refused(eps):
    x, p = np.ones((2, 3)), np.ones(3)
    for call in [lambda: F.layer_norm_forward(x, p, p, eps=eps),
                 lambda: F.rms_norm_forward(x, p, eps=eps),
                 lambda: F.batch_norm_forward(x, p, p, None, None, training=True, eps=eps)]:
        with pytest.raises(ValueError, match="eps"):
            call()


@given(st.sampled_from([np.int64, np.int32, np.bool_, np.complex128, object]))
def test_non_float_arrays_are_refused(dtype):
    x = np.ones((2, 3), dtype=dtype)
    p = np.ones(3)
    for call in [lambda: F.layer_norm_forward(x, p, p),
                 lambda: F.rms_norm_forward(x, p),
                 lambda: F.dyt_forward(x, np.array(0.5), p, p),
                 lambda: F.batch_norm_forward(x, p, p, None, None, training=True),
                 lambda: F.dropout_forward(x, 0.1, training=False),
                 lambda: F.layer_norm_forward(np.ones((2, 3)), p.astype(dtype), p)]:
        with pytest.raises(TypeError, match="floating-point"):
            call()


@given(st.sampled_from([-0.1, 1.0, 1.5, float("nan")]))
def test_bad_p_drop_is_refused(p):
    with pytest.raises(ValueError, match=r"p_drop must be in \[0, 1\)"):
        F.dropout_forward(np.ones(3), p, training=True, rng=np.random.default_rng(0))


def test_dropout_in_training_needs_an_rng():
    with pytest.raises(TypeError, match="rng"):
        F.dropout_forward(np.ones(3), 0.5, training=True)
    with pytest.raises(TypeError, match="Generator"):
        F.dropout_forward(np.ones(3), 0.5, training=True, rng=0)


def test_bad_masks_are_refused():
    x, p = np.ones((2, 3, 4)), np.ones(4)
    with pytest.raises(ValueError, match="mask must have shape"):
        F.batch_norm_forward(x, p, p, None, None, training=True, mask=np.ones((3, 2), bool))
    with pytest.raises(ValueError, match="at least one True"):
        F.batch_norm_forward(x, p, p, None, None, training=True, mask=np.zeros((2, 3), bool))
    with pytest.raises(TypeError, match="boolean"):
        F.batch_norm_forward(x, p, p, None, None, training=True, mask=np.ones((2, 3)))


@pytest.mark.parametrize("kwargs,match", [
    ({"momentum": 1.5}, "momentum"), ({"momentum": "0.1"}, "momentum"),
    ({"training": "yes"}, "training"), ({"num_batches_tracked": -1}, "num_batches_tracked"),
])
def test_bad_batchnorm_options_are_refused(kwargs, match):
    x, p = np.ones((4, 3)), np.ones(3)
    kw = {"training": True, **kwargs}
    with pytest.raises((TypeError, ValueError), match=match):
        F.batch_norm_forward(x, p, p, np.zeros(3), np.ones(3), **kw)


def test_eval_batchnorm_needs_running_statistics():
    p = np.ones(3)
    with pytest.raises(ValueError, match="running_mean"):
        F.batch_norm_forward(np.ones((4, 3)), p, p, None, None, training=False)
    with pytest.raises(ValueError, match="both"):
        F.batch_norm_forward(np.ones((4, 3)), p, p, np.zeros(3), None, training=True)


@pytest.mark.parametrize("partial", [0.0, -0.5, 1.5, "half"])
def test_bad_partial_is_refused(partial):
    with pytest.raises((TypeError, ValueError), match="partial"):
        F.rms_norm_forward(np.ones((2, 4)), np.ones(4), partial=partial)


def test_dout_of_the_wrong_shape_is_refused():
    _, cache = F.layer_norm_forward(np.ones((2, 3)), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="dout must have shape"):
        F.layer_norm_backward(np.ones((3, 2)), cache)
