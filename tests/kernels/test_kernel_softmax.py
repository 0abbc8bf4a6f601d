"""Softmax (plain, capped + causal) and cross-entropy kernels against the reference."""

import numpy as np
import pytest
from _kernel_tol import as64, assert_rowwise
from conftest import DTYPES

from normlab import functional as F
from normlab import kernels as K
from normlab.functional import losses as FL
from normlab.functional import softmax as FS
from normlab.kernels import softmax as KS

SHAPES = [(1, 1), (1, 7), (3, 4, 7), (6, 33), (2, 3, 1000)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_matches_reference(rng, shape, dtype):
    x = (rng.normal(size=shape) * 3).astype(DTYPES[dtype])
    y, c = K.softmax_forward(x)
    y_ref, c_ref = F.softmax_forward(x)
    assert type(c) is type(c_ref) and c.p.dtype == c_ref.p.dtype and y.dtype == x.dtype
    assert_rowwise(y, y_ref, scale=1.0)
    assert_rowwise(c.p, c_ref.p, scale=1.0)
    dy = rng.normal(size=shape).astype(x.dtype)
    scale = float(np.max(np.abs(as64(dy))))
    assert_rowwise(K.softmax_backward(dy, c), F.softmax_backward(dy, c_ref), scale=scale)
    assert_rowwise(K.softmax_backward(dy, c_ref), F.softmax_backward(dy, c), scale=scale)


def test_softmax_other_axis_and_masked_entries(rng):
    x = rng.normal(size=(4, 5, 6)).astype(np.float32)
    x[0, 1, 2] = -np.inf
    for axis in (0, 1, -1):
        y, _ = K.softmax_forward(x, axis=axis)
        assert_rowwise(y, F.softmax_forward(x, axis=axis)[0], scale=1.0)
    assert K.softmax_forward(x)[0][0, 1, 2] == 0.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("softcap,causal", [(None, True), (20.0, False), (5.0, True)])
def test_capped_causal_softmax_matches_the_unfused_steps(rng, dtype, softcap, causal):
    s = (rng.normal(size=(2, 3, 9, 9)) * 4).astype(DTYPES[dtype])
    p, c = KS.capped_softmax_forward(s, softcap=softcap, causal=causal)
    p_ref, c_ref = FS.capped_softmax_forward(s, softcap=softcap, causal=causal)
    assert p.dtype == s.dtype
    assert_rowwise(p, p_ref, scale=1.0)
    if causal:
        assert not np.triu(as64(p), k=1).any()  # nothing above the diagonal
    dp = rng.normal(size=s.shape).astype(s.dtype)
    assert_rowwise(KS.capped_softmax_backward(dp, c),
                   FS.capped_softmax_backward(dp, c_ref), ulps_ct=16,
                   scale=float(np.max(np.abs(as64(dp)))))


def test_capped_softmax_against_attention_reference(rng):
    """The capped causal softmax is the middle of functional.attention: same probabilities."""
    from normlab.functional.attention import attention_forward

    B, H, T, D = 1, 2, 6, 4
    q, k, v = (rng.normal(size=(B, H, T, D)) for _ in range(3))
    _, cache = attention_forward(q, k, v, softcap=3.0)
    s = (cache.q @ cache.k.swapaxes(-1, -2)) * cache.scale
    p, _ = KS.capped_softmax_forward(s, softcap=3.0, causal=True)
    assert_rowwise(p, cache.softmax.p, scale=1.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [{}, dict(softcap=3.0, z_loss=1e-2, label_smoothing=0.1)])
def test_cross_entropy_matches_reference(rng, dtype, kw):
    logits = (rng.normal(size=(4, 6, 11)) * 3).astype(DTYPES[dtype])
    targets = rng.integers(0, 11, size=(4, 6))
    targets[0, 1] = targets[3, 5] = -100  # ignored rows
    loss, c = K.cross_entropy_forward(logits, targets, **kw)
    loss_ref, c_ref = FL.cross_entropy_forward(logits, targets, **kw)
    assert type(c) is type(c_ref) and loss.dtype == loss_ref.dtype
    assert_rowwise(loss.reshape(1), loss_ref.reshape(1), ulps_ct=16)
    assert_rowwise(c.p, c_ref.p, scale=1.0)
    assert_rowwise(c.log_z, c_ref.log_z)
    np.testing.assert_array_equal(c.targets, c_ref.targets)
    # the backward is element-wise given the cache: bitwise
    for cache in (c, c_ref):
        got = K.cross_entropy_backward(0.5, cache)[0]
        want = FL.cross_entropy_backward(0.5, cache)[0]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(as64(got), as64(want))
