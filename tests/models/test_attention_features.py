"""The attention features of released architectures at the op and module level: grouped-query
attention, a sliding window, a free scale and head width, QK-norm over whole projections."""

from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from normlab.functional import attention_backward, attention_forward, rope_tables
from normlab.functional.attention import causal_mask
from normlab.nn import CausalSelfAttention
from normlab.testing import errors, gradcheck

B, H, K, T, D = 2, 4, 2, 6, 4


def _qkv(rng):
    return (rng.normal(0, 1.5, (B, H, T, D)), rng.normal(0, 1.5, (B, K, T, D)),
            rng.normal(0, 1.0, (B, K, T, D)))


@pytest.mark.parametrize("window", [None, 1, 3])
@pytest.mark.parametrize("softcap", [None, 2.0])
def test_gradcheck_grouped_windowed_scaled(window, softcap):
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng)
    fwd = partial(attention_forward, window=window, scale=0.37, softcap=softcap,
                  rope=rope_tables(T, D, 50.0))
    bwd = lambda dout, c: attention_backward(dout, c)[:3]  # noqa: E731
    report = gradcheck(fwd, bwd, {"q": q, "k": k, "v": v}, rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("window", [None, 2])
def test_matches_torch_sdpa_with_groups_and_window(window):
    rng = np.random.default_rng(1)
    q, k, v = _qkv(rng)
    out, cache = attention_forward(q, k, v, window=window, scale=0.5)
    dout = rng.normal(size=out.shape)
    dq, dk, dv, _, _ = attention_backward(dout, cache)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t = torch.arange(T)
    allowed = t[None, :] <= t[:, None]
    if window is not None:
        allowed &= t[None, :] > t[:, None] - window
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=allowed, scale=0.5, enable_gqa=True)
    ref.backward(torch.tensor(dout))
    for mine, theirs in ((out, ref), (dq, tq.grad), (dk, tk.grad), (dv, tv.grad)):
        assert errors(mine, theirs.detach().numpy())[1] <= 1e-12


def test_a_window_at_least_t_is_no_window_and_the_mask_keeps_w_keys():
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng)
    np.testing.assert_array_equal(
        attention_forward(q, k, v, window=T)[0], attention_forward(q, k, v)[0]
    )
    kept = np.isfinite(causal_mask(T, np.float64, 3))
    assert kept.sum(axis=1).tolist() == [1, 2, 3, 3, 3, 3]
    with pytest.raises(ValueError, match=r"window .* needs causal=True"):
        attention_forward(q, k, v, window=2, causal=False)
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        attention_forward(q, k, v, window=0)
    with pytest.raises(ValueError, match=r"k must have shape \(B, Hkv, T, D\)"):
        attention_forward(q, rng.normal(size=(B, 3, T, D)), rng.normal(size=(B, 3, T, D)))


def test_module_qk_norm_over_whole_projections_and_its_gradients():
    rng = np.random.default_rng(3)
    C = 12
    attn = CausalSelfAttention(C, 4, n_kv_heads=2, head_dim=6, qk_norm="rmsnorm",
                               qk_norm_scope="all", rng=rng, dtype=np.float64,
                               rope=rope_tables(T, 6, 50.0))  # D = 6 != C / H = 3
    assert attn.params["q_norm"].shape == (24,) and attn.params["k_norm"].shape == (12,)
    assert attn.qkv.params["weight"].shape == (48, C) and attn.proj.params["weight"].shape == (
        C,
        24,
    )
    for p in attn.parameters().values():
        p[...] = rng.normal(1.0 if p.ndim == 1 else 0.0, 0.4, p.shape)
    x = rng.normal(size=(B, T, C))
    dout = rng.normal(size=(B, T, C))

    def loss() -> float:
        return float(np.sum(attn(x) * dout))

    loss()
    attn.zero_grad()
    dx = attn.backward(dout)
    h = 1e-6
    for name in ("q_norm", "k_norm", "qkv.weight"):
        p = attn.parameters()[name].reshape(-1)
        g = attn.gradients()[name].reshape(-1)
        for i in (0, 7):
            old = p[i]
            p[i] = old + h
            plus = loss()
            p[i] = old - h
            minus = loss()
            p[i] = old
            assert g[i] == pytest.approx((plus - minus) / (2 * h), rel=1e-6, abs=1e-8), (name, i)
    flat = x.reshape(-1)
    for i in (0, 13):
        old = flat[i]
        flat[i] = old + h
        plus = loss()
        flat[i] = old - h
        minus = loss()
        flat[i] = old
        assert dx.reshape(-1)[i] == pytest.approx((plus - minus) / (2 * h), rel=1e-6, abs=1e-8)
    with pytest.raises(ValueError, match=r"n_kv_heads \(3\) must divide n_heads \(4\)"):
        CausalSelfAttention(C, 4, n_kv_heads=3, rng=rng)
    with pytest.raises(ValueError, match="qk_norm_scope must be"):
        CausalSelfAttention(C, 4, qk_norm="rmsnorm", qk_norm_scope="layer", rng=rng)
