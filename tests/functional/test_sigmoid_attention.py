"""Sigmoid attention (arXiv 2410.10781): p = sigmoid(s + b) per key in place of the softmax, the
masked keys 0. Finite differences in float64 and PyTorch (``torch.sigmoid(s + b)`` after the
mask, as the official code) with every option of the op; the rows are no distribution; the
ensemble's members computed at once equal their own calls bit for bit."""

import math
from functools import partial

import numpy as np
import pytest
from _parity import GEMM, check_against_torch

from normlab.functional import attention_backward, attention_forward, rope_tables
from normlab.functional.attention import attention_forward_members
from normlab.testing import gradcheck, oracles

SHAPE = (2, 2, 5, 4)  # (B, H, T, D)
B_LOG = -math.log(5)  # b = -log n

CASES = {
    "plain": {},
    "cap+rope+rmsnorm": {"softcap": 2.0, "rope": True, "qk_norm": "rmsnorm"},
    "window": {"window": 2},
    "bidirectional": {"causal": False},
}


def _case(name, rng, shape=SHAPE):
    opts = dict(CASES[name])
    if opts.pop("rope", False):
        opts["rope"] = rope_tables(shape[2], shape[3], base=50.0)
    d = {n: rng.normal(0.0, 1.5, size=shape) for n in ("q", "k", "v")}
    if opts.get("qk_norm", "none") != "none":
        d["q_norm_weight"] = rng.normal(1.0, 0.5, size=shape[-1])
        d["k_norm_weight"] = rng.normal(1.0, 0.5, size=shape[-1])
    n_in = len(d)
    fwd = partial(attention_forward, sigmoid_bias=B_LOG, **opts)
    bwd = lambda dout, c: attention_backward(dout, c)[:n_in]  # noqa: E731
    ref_opts = {("eps" if k == "qk_norm_eps" else k): v for k, v in opts.items()}
    ref = partial(oracles.attention, sigmoid_bias=B_LOG, **ref_opts)
    return fwd, bwd, ref, d


@pytest.mark.parametrize("name", CASES)
def test_gradcheck(name):
    rng = np.random.default_rng(1)
    fwd, bwd, _, d = _case(name, rng)
    report = gradcheck(fwd, bwd, d, rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name, dtype):
    rng = np.random.default_rng(2)
    fwd, bwd, ref, d = _case(name, rng, (2, 3, 7, 8))
    check_against_torch(fwd, bwd, ref, d, dtype, rng, **GEMM)


def test_each_key_is_weighed_alone_and_masked_keys_get_zero():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(1, 1, 4, 2)) for _ in range(3))
    _, cache = attention_forward(q, k, v, sigmoid_bias=-1.0)
    p = cache.softmax.p[0, 0]  # (T, T)
    s = (q[0, 0] @ k[0, 0].T) / math.sqrt(2)
    want = np.tril(1.0 / (1.0 + np.exp(-(s - 1.0))))
    np.testing.assert_allclose(p, want, rtol=1e-14, atol=0)
    assert np.all(p[np.triu_indices(4, 1)] == 0.0)
    assert not np.allclose(p.sum(-1), 1.0)  # no distribution over the keys
    with pytest.raises(ValueError, match="sigmoid_bias must be a finite number"):
        attention_forward(q, k, v, sigmoid_bias=float("nan"))


def test_members_at_once_are_each_members_own_call_bit_for_bit():
    rng = np.random.default_rng(4)
    M, (B, H, T, D) = 3, SHAPE
    q, k, v = (rng.normal(size=(M * B, H, T, D)).astype(np.float32) for _ in range(3))
    out, cache, maxes = attention_forward_members(M, q, k, v, sigmoid_bias=B_LOG, softcap=3.0)
    dout = rng.normal(size=out.shape).astype(np.float32)
    grads = attention_backward(dout, cache)
    for m in range(M):
        rows = slice(m * B, (m + 1) * B)
        one, c1 = attention_forward(q[rows], k[rows], v[rows], sigmoid_bias=B_LOG, softcap=3.0)
        assert one.tobytes() == out[rows].tobytes() and c1.max_logit == maxes[m]
        for g, g1 in zip(grads[:3], attention_backward(dout[rows], c1)[:3], strict=True):
            assert g[rows].tobytes() == g1.tobytes()
