import numpy as np
import pytest

from normlab.functional import rope_backward, rope_forward, rope_tables
from normlab.testing import gradcheck


def test_gradcheck():
    rng = np.random.default_rng(1)
    cos, sin = rope_tables(5, 6, base=100.0)
    fwd = lambda x: rope_forward(x, cos, sin)  # noqa: E731
    bwd = lambda dout, c: rope_backward(dout, c)[0]  # noqa: E731
    assert gradcheck(fwd, bwd, {"x": rng.normal(size=(2, 3, 5, 6))}, rng=rng).passed


def test_rotation_keeps_norms_and_depends_on_relative_position_only():
    rng = np.random.default_rng(2)
    T, D = 12, 8
    cos, sin = rope_tables(T, D)
    q, k = rng.normal(size=D), rng.normal(size=D)
    Q = rope_forward(np.tile(q, (T, 1)), cos, sin)[0]  # q at every position
    K = rope_forward(np.tile(k, (T, 1)), cos, sin)[0]
    np.testing.assert_allclose(np.linalg.norm(Q, axis=-1), np.linalg.norm(q), rtol=1e-14)
    scores = Q @ K.T  # scores[m, n] depends on m - n only
    for offset in range(-3, 4):
        diag = np.diagonal(scores, offset)
        np.testing.assert_allclose(diag, diag[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Q[0], q)  # position 0 is not rotated


def test_matches_the_complex_rotation():
    rng = np.random.default_rng(3)
    T, D, base = 4, 6, 10000.0
    x = rng.normal(size=(T, D))
    y = rope_forward(x, *rope_tables(T, D, base))[0]
    theta = base ** (-np.arange(0, D, 2) / D)
    z = (x[:, : D // 2] + 1j * x[:, D // 2 :]) * np.exp(1j * np.arange(T)[:, None] * theta)
    np.testing.assert_allclose(y, np.concatenate([z.real, z.imag], axis=-1), rtol=1e-13)


def test_bad_input():
    with pytest.raises(ValueError, match="even"):
        rope_tables(4, 5)
    cos, sin = rope_tables(4, 6)
    with pytest.raises(ValueError, match="cos must have shape"):
        rope_forward(np.ones((5, 6)), cos, sin)
