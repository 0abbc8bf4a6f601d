"""Covariate-shift noise (Santurkar et al. 2018's noisy BatchNorm): the gradient, the identity
at inference, the per-step statistics it draws, and bad arguments."""

import ml_dtypes
import numpy as np
import pytest

from normlab.functional import shift_noise_backward, shift_noise_forward
from normlab.nn import ShiftNoise
from normlab.testing import gradcheck

KW = dict(mean_range=1.0, max_scale=2.0, spread=0.1)


def test_gradcheck(rng):
    def fwd(x):
        return shift_noise_forward(x, **KW, training=True, rng=np.random.default_rng(3))

    assert gradcheck(fwd, shift_noise_backward, {"x": rng.normal(size=(5, 7))}, rng=rng).passed
    assert gradcheck(fwd, shift_noise_backward, {"x": rng.normal(size=(2, 3, 4))}, rng=rng).passed


def test_identity_at_inference_and_without_noise(rng):
    x = rng.normal(size=(4, 6))
    y, cache = shift_noise_forward(x, **KW, training=False)
    assert np.array_equal(y, x) and not np.shares_memory(y, x)
    assert np.array_equal(shift_noise_backward(np.ones_like(x), cache), np.ones_like(x))
    y0, _ = shift_noise_forward(x, mean_range=0.0, max_scale=1.0, spread=0.0, training=True,
                                rng=np.random.default_rng(0))
    assert np.array_equal(y0, x)


def test_the_statistics_move_every_call():
    """Per channel the output's mean is the step's shift m_c in [-mean_range, mean_range] and its
    std the step's scale s_c in [1/max_scale, max_scale] (x standard normal, small spread); two
    calls draw different m and s."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20_000, 8))
    gen = np.random.default_rng(2)
    stats = []
    for _ in range(2):
        y, cache = shift_noise_forward(x, mean_range=1.0, max_scale=2.0, spread=0.0,
                                       training=True, rng=gen)
        s = cache.a[0]  # spread 0: a = s_c in every row
        assert np.array_equal(cache.a, np.broadcast_to(s, x.shape))
        assert np.all((s >= 0.5) & (s <= 2.0))
        m = y.mean(0) - s * x.mean(0)
        assert np.all(np.abs(m) <= 1.0)
        np.testing.assert_allclose(y.std(0), s * x.std(0), rtol=1e-12)
        stats.append((m, s))
    assert not np.allclose(stats[0][0], stats[1][0]) and not np.allclose(stats[0][1], stats[1][1])


def test_same_generator_state_same_noise(rng):
    x = rng.normal(size=(3, 5))
    a, _ = shift_noise_forward(x, **KW, training=True, rng=np.random.default_rng(7))
    b, _ = shift_noise_forward(x, **KW, training=True, rng=np.random.default_rng(7))
    assert np.array_equal(a, b)


def test_low_precision_rounds_once():
    x = np.linspace(-2, 2, 64).reshape(8, 8).astype(ml_dtypes.bfloat16)
    y, cache = shift_noise_forward(x, **KW, training=True, rng=np.random.default_rng(0))
    assert y.dtype == x.dtype and cache.a.dtype == np.float32
    assert shift_noise_backward(np.ones((8, 8), np.float32), cache).dtype == x.dtype


@pytest.mark.parametrize("kw, match", [
    (dict(KW, mean_range=-1.0), "mean_range"),
    (dict(KW, max_scale=0.5), "max_scale"),
    (dict(KW, spread=-0.1), "spread"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        shift_noise_forward(np.zeros((2, 3)), **kw, training=True, rng=np.random.default_rng(0))


def test_training_needs_a_generator_and_the_cache_is_checked():
    with pytest.raises(TypeError, match="rng"):
        shift_noise_forward(np.zeros((2, 3)), **KW, training=True)
    with pytest.raises(TypeError, match="ShiftNoiseCache"):
        shift_noise_backward(np.zeros((2, 3)), None)
    _, cache = shift_noise_forward(np.zeros((2, 3)), **KW, training=False)
    with pytest.raises(ValueError, match="dout"):
        shift_noise_backward(np.zeros((3, 3)), cache)


def test_module_train_and_eval(rng):
    x = rng.normal(size=(6, 4))
    mod = ShiftNoise(1.0, 2.0, 0.1, rng=np.random.default_rng(4))
    y = mod(x)
    assert not np.allclose(y, x) and mod.params == {}
    dout = rng.normal(size=x.shape)
    np.testing.assert_allclose(mod.backward(dout), mod._cache.a * dout, rtol=1e-15)
    mod.eval()
    assert np.array_equal(mod(x), x)
    with pytest.raises(ValueError, match="max_scale"):
        ShiftNoise(1.0, 0.9, 0.1, rng=np.random.default_rng(0))
