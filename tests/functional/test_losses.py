from functools import partial

import numpy as np
import pytest
from _parity import GEMM, check_against_torch

from normlab.functional import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward
from normlab.testing import gradcheck, oracles

OPTIONS = [
    {},
    {"softcap": 3.0},
    {"z_loss": 0.1},
    {"label_smoothing": 0.2},
    {"softcap": 3.0, "z_loss": 1e-2, "label_smoothing": 0.1},
]


def _case(rng, shape=(2, 3), V=7, ignore=False):
    logits = rng.normal(0.0, 3.0, size=(*shape, V))
    targets = rng.integers(0, V, size=shape)
    if ignore:
        targets[0, 1] = IGNORE_INDEX
        targets[1, 0] = IGNORE_INDEX
    return logits, targets


@pytest.mark.parametrize("ignore", [False, True])
@pytest.mark.parametrize("opts", OPTIONS)
def test_gradcheck(opts, ignore):
    rng = np.random.default_rng(1)
    logits, targets = _case(rng, ignore=ignore)
    fwd = lambda x: cross_entropy_forward(x, targets, **opts)  # noqa: E731
    bwd = lambda dout, c: cross_entropy_backward(dout, c)[0]  # noqa: E731
    assert gradcheck(fwd, bwd, {"logits": logits}, rng=rng).passed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ignore", [False, True])
@pytest.mark.parametrize("opts", OPTIONS)
def test_matches_torch(opts, ignore, dtype):
    rng = np.random.default_rng(2)
    logits, targets = _case(rng, (4, 16), 50, ignore)
    fwd = lambda x: cross_entropy_forward(x, targets, **opts)  # noqa: E731
    bwd = lambda dout, c: cross_entropy_backward(dout, c)[0]  # noqa: E731
    check_against_torch(
        fwd,
        bwd,
        partial(oracles.cross_entropy, targets=targets, **opts),
        {"logits": logits},
        dtype,
        rng,
        **GEMM,
    )


def test_diagnostics_and_known_values():
    V = 5
    logits = np.zeros((3, V))
    targets = np.array([0, 1, IGNORE_INDEX])
    loss, cache = cross_entropy_forward(logits, targets, z_loss=0.5)
    assert cache.nll == pytest.approx(np.log(V), rel=1e-15)  # uniform prediction
    np.testing.assert_allclose(cache.log_z, np.log(V), rtol=1e-15)
    assert float(loss) == pytest.approx(np.log(V) + 0.5 * np.log(V) ** 2, rel=1e-15)
    dlogits, none = cross_entropy_backward(1.0, cache)
    assert none is None and not dlogits[2].any()  # the ignored row gets no gradient
    big = np.array([[1000.0, 0.0, -1000.0]])
    loss, cache = cross_entropy_forward(big, np.array([0]))
    assert np.isfinite(float(loss)) and float(loss) == 0.0


def test_softcap_bounds_the_loss_floor():
    # with cap 30 and V values, the best loss is log(1 + (V-1) exp(-60)) (Gemma 2)
    V = 4
    logits = np.array([[1e6, -1e6, -1e6, -1e6]])
    loss, _ = cross_entropy_forward(logits, np.array([0]), softcap=30.0)
    assert float(loss) == pytest.approx(np.log1p((V - 1) * np.exp(-60.0)), rel=1e-10)


def test_loss_scale_flows_through_dout():
    rng = np.random.default_rng(3)
    logits, targets = _case(rng)
    _, cache = cross_entropy_forward(logits, targets)
    np.testing.assert_allclose(cross_entropy_backward(1024.0, cache)[0],
                               1024.0 * cross_entropy_backward(1.0, cache)[0], rtol=1e-15)


def test_bad_input():
    logits = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"targets must hold values in \[0, 3\)"):
        cross_entropy_forward(logits, np.array([0, 3]))
    with pytest.raises(ValueError, match="targets must have shape"):
        cross_entropy_forward(logits, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="every target equals ignore_index"):
        cross_entropy_forward(logits, np.array([IGNORE_INDEX, IGNORE_INDEX]))
    with pytest.raises(ValueError, match="z_loss"):
        cross_entropy_forward(logits, np.array([0, 1]), z_loss=-1.0)
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy_forward(logits, np.array([0, 1]), label_smoothing=1.0)
    with pytest.raises(TypeError, match="targets must be an integer array"):
        cross_entropy_forward(logits, np.array([0.0, 1.0]))
