from functools import partial

import numpy as np
import pytest
from _parity import GEMM, check_against_torch

from normlab.functional import attention_backward, attention_forward, rope_tables
from normlab.testing import gradcheck, oracles

SHAPE = (2, 2, 5, 4)  # (B, H, T, D)


def _inputs(rng, shape=SHAPE, qk_norm="none"):
    d = {n: rng.normal(0.0, 1.5, size=shape) for n in ("q", "k", "v")}
    if qk_norm != "none":
        d["q_norm_weight"] = rng.normal(1.0, 0.5, size=shape[-1])
        d["k_norm_weight"] = rng.normal(1.0, 0.5, size=shape[-1])
    return d


def _ops(qk_norm, softcap, use_rope, T=SHAPE[2], D=SHAPE[3]):
    rope = rope_tables(T, D, base=50.0) if use_rope else None
    opts = dict(qk_norm=qk_norm, softcap=softcap, rope=rope)
    fwd = partial(attention_forward, **opts)
    n_in = 5 if qk_norm != "none" else 3
    bwd = lambda dout, c: attention_backward(dout, c)[:n_in]  # noqa: E731
    ref = partial(oracles.attention, **opts)
    return fwd, bwd, ref


GRID = [
    (n, c, r) for n in ("none", "rmsnorm", "layernorm") for c in (None, 2.0) for r in (False, True)
]


@pytest.mark.parametrize("qk_norm,softcap,use_rope", GRID)
def test_gradcheck(qk_norm, softcap, use_rope):
    rng = np.random.default_rng(1)
    fwd, bwd, _ = _ops(qk_norm, softcap, use_rope)
    report = gradcheck(fwd, bwd, _inputs(rng, qk_norm=qk_norm), rng=rng)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("qk_norm,softcap,use_rope", GRID)
def test_matches_torch(qk_norm, softcap, use_rope, dtype):
    rng = np.random.default_rng(2)
    shape = (2, 3, 16, 8)
    fwd, bwd, ref = _ops(qk_norm, softcap, use_rope, T=16, D=8)
    check_against_torch(fwd, bwd, ref, _inputs(rng, shape, qk_norm), dtype, rng, **GEMM)


def test_causal_future_keys_do_not_matter():
    rng = np.random.default_rng(3)
    d = _inputs(rng)
    out, _ = attention_forward(**d)
    for name in ("k", "v"):
        moved = dict(d)
        moved[name] = d[name].copy()
        moved[name][:, :, 3:] += 10.0  # change keys/values at positions 3 and later
        out2, _ = attention_forward(**moved)
        np.testing.assert_array_equal(out2[:, :, :3], out[:, :, :3])
        assert not np.allclose(out2[:, :, 3:], out[:, :, 3:])
    np.testing.assert_allclose(out[:, :, 0], d["v"][:, :, 0], rtol=1e-15)  # attends to itself


def test_max_logit_and_softcap_bound():
    rng = np.random.default_rng(4)
    d = _inputs(rng)
    d["q"] *= 30.0
    _, cache = attention_forward(**d)
    s = np.einsum("bhtd,bhsd->bhts", d["q"], d["k"]) / 2.0
    keep = np.tri(SHAPE[2], dtype=bool)
    assert cache.max_logit == pytest.approx(s[..., keep].max(), rel=1e-14)
    _, capped = attention_forward(**d, softcap=5.0)
    assert capped.max_logit == cache.max_logit  # the raw logit, before the cap
    assert np.all(np.abs(5.0 * capped.tanh) <= 5.0)  # tanh rounds to 1 when saturated


@pytest.mark.parametrize("softcap,window", [(None, None), (5.0, None), (None, 2)])
def test_head_stats_are_each_heads_largest_logit_and_mean_row_entropy(softcap, window):
    rng = np.random.default_rng(9)
    d = _inputs(rng, shape=(2, 4, 5, 4))
    d["k"] = d["k"][:, :2]  # grouped: query heads 0, 1 read key head 0; 2, 3 read head 1
    d["v"] = d["v"][:, :2]
    out, cache = attention_forward(**d, softcap=softcap, window=window, head_stats=True)
    plain, without = attention_forward(**d, softcap=softcap, window=window)
    assert without.heads is None
    np.testing.assert_array_equal(out, plain)  # recording changes nothing computed
    assert without.max_logit == cache.max_logit
    k = np.repeat(d["k"], 2, axis=1)  # (B, H, T, D)
    s = np.einsum("bhtd,bhsd->bhts", d["q"], k) / 2.0  # scale 1 / sqrt(D), before the cap
    T = s.shape[-1]
    keep = np.tri(T, dtype=bool) & ~np.tri(T, k=-(window or T), dtype=bool)
    np.testing.assert_allclose(cache.heads.max_logit, s[..., keep].max(axis=(0, 2)),
                               rtol=1e-14)
    assert cache.heads.max_logit.max() == cache.max_logit
    p = cache.softmax.p
    entropy = -np.sum(np.where(keep, p * np.log(np.where(keep, p, 1.0)), 0.0), axis=-1)
    np.testing.assert_allclose(cache.heads.entropy, entropy.mean(axis=(0, 2)), rtol=1e-13)
    assert cache.heads.entropy[0] <= np.log(np.minimum(np.arange(1, T + 1), window or T)).mean()
    with pytest.raises(TypeError, match="head_stats"):
        attention_forward(**d, head_stats="yes")


def test_dropout_on_probabilities_is_seeded_and_checked():
    rng = np.random.default_rng(5)
    d = _inputs(rng)
    a, ca = attention_forward(**d, p_drop=0.5, training=True, rng=np.random.default_rng(0))
    b, _ = attention_forward(**d, p_drop=0.5, training=True, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(a, b)
    assert ca.dropout is not None and not np.array_equal(a, attention_forward(**d)[0])
    _ev, ce = attention_forward(**d, p_drop=0.5, training=False)
    assert ce.dropout is None
    fwd = lambda q, k, v: attention_forward(q, k, v, p_drop=0.3, training=True,  # noqa: E731
                                            rng=np.random.default_rng(7))
    bwd = lambda dout, c: attention_backward(dout, c)[:3]  # noqa: E731
    assert gradcheck(fwd, bwd, d, rng=rng).passed  # the same mask in every call


def test_bad_input():
    rng = np.random.default_rng(6)
    d = _inputs(rng)
    with pytest.raises(ValueError, match="qk_norm must be one of"):
        attention_forward(**d, qk_norm="l2")
    with pytest.raises(TypeError, match="q_norm_weight"):
        attention_forward(**d, qk_norm="rmsnorm")
    with pytest.raises(ValueError, match="softcap must be a finite number > 0"):
        attention_forward(**d, softcap=0.0)
    with pytest.raises(ValueError, match="k must have shape"):
        attention_forward(d["q"], d["k"][:, :, :3], d["v"])
    with pytest.raises(TypeError, match="rng"):
        attention_forward(**d, p_drop=0.1, training=True)
    with pytest.raises(ValueError, match="q must have shape"):
        attention_forward(d["q"][0], d["k"][0], d["v"][0])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("softcap", [None, 2.0])
def test_bidirectional_matches_torch_and_finite_differences(dtype, softcap):
    rng = np.random.default_rng(4)
    fwd = partial(attention_forward, softcap=softcap, causal=False)
    bwd = lambda dout, c: attention_backward(dout, c)[:3]  # noqa: E731
    assert gradcheck(fwd, bwd, _inputs(rng), rng=rng).passed
    check_against_torch(fwd, bwd, partial(oracles.attention, softcap=softcap, causal=False),
                        _inputs(rng, (2, 3, 16, 8)), dtype, rng, **GEMM)


def test_bidirectional_sees_the_future():
    rng = np.random.default_rng(5)
    d = _inputs(rng)
    y0, _ = attention_forward(**d, causal=False)
    d["v"][:, :, -1] += 1.0  # change the last position's value
    y1, _ = attention_forward(**d, causal=False)
    assert np.all(np.abs(y1 - y0)[:, :, 0] > 0)  # the first position sees it
    y2, _ = attention_forward(**d)
    d["v"][:, :, -1] -= 2.0
    y3, _ = attention_forward(**d)
    assert np.array_equal(y2[:, :, :-1], y3[:, :, :-1])  # causal: it does not


@pytest.mark.parametrize("shape", [(1, 2, 0, 4), (0, 2, 3, 4), (1, 2, 3, 0)])
def test_attention_over_an_empty_sequence_is_refused_by_name(shape):
    from normlab.functional import attention_forward

    q = np.zeros(shape, np.float32)
    with pytest.raises(ValueError, match=r"q must have B, heads, T and D >= 1 .*got shape"):
        attention_forward(q, q, q)


# ---- an ensemble's members: one call over every member's batch, each member's bits its own ----

def _bits(a):
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qk_norm_of_members_is_each_members_own_call_bit_for_bit(norm, dtype):
    from normlab.functional.attention import (
        qk_norm_backward,
        qk_norm_forward,
        qk_norm_members_backward,
        qk_norm_members_forward,
    )

    rng = np.random.default_rng(7)
    M, B, T, H, D = 3, 2, 5, 2, 8
    # the heads as attention sees them: a transposed view of the projection's rows
    x = rng.normal(0.5, 2.0, size=(M * B, T, H, D)).astype(dtype).transpose(0, 2, 1, 3)
    w = rng.normal(1.0, 0.5, size=(M, D)).astype(dtype)
    w[1, 3] = -0.0  # the sign of a zero gain is kept as each call keeps it
    dout = rng.normal(size=x.shape).astype(dtype)
    y, cache = qk_norm_members_forward(x, w, norm=norm, eps=1e-6)
    dx, dw = qk_norm_members_backward(dout, cache)
    assert dw.shape == (M, D)
    for m in range(M):
        rows = slice(m * B, (m + 1) * B)
        y_m, c_m = qk_norm_forward(x[rows], w[m], norm=norm, eps=1e-6)
        dx_m, dw_m = qk_norm_backward(dout[rows], c_m, norm=norm)
        assert _bits(y[rows]) == _bits(y_m)
        assert _bits(dx[rows]) == _bits(dx_m)
        assert _bits(dw[m]) == _bits(dw_m)


def test_qk_norm_of_members_declines_what_it_cannot_batch_and_refuses_bad_gains():
    from normlab.functional.attention import qk_norm_members_forward

    x = np.ones((6, 4), np.float32)
    assert qk_norm_members_forward(x.astype(np.float16), np.ones((3, 4), np.float16),
                                   norm="rmsnorm", eps=1e-6) is None
    for w in (np.ones((4, 4)), np.ones((3, 5)), np.ones(4)):  # 4 members do not divide 6 rows
        with pytest.raises(ValueError, match="weights must have shape"):
            qk_norm_members_forward(x, w.astype(np.float32), norm="rmsnorm", eps=1e-6)
    from normlab.functional.attention import qk_norm_members_backward

    with pytest.raises(TypeError, match="QKMembersCache"):
        qk_norm_members_backward(x, (1, 2, 3, 4))


@pytest.mark.parametrize("opts", [
    dict(), dict(softcap=2.0, window=3), dict(rope=True, scale=0.3), dict(causal=False),
])
def test_attention_of_members_is_each_members_own_call_bit_for_bit(opts):
    from normlab.functional.attention import attention_forward_members

    rng = np.random.default_rng(3)
    M, B, H, Hkv, T, D = 3, 2, 4, 2, 6, 4
    q = rng.normal(0.0, 2.0, size=(M * B, H, T, D)).astype(np.float32)
    k, v = (rng.normal(0.0, 2.0, size=(M * B, Hkv, T, D)).astype(np.float32) for _ in "kv")
    opts = dict(opts, rope=rope_tables(T, D) if opts.get("rope") else None)
    out, cache, maxes = attention_forward_members(M, q, k, v, **opts)
    dout = rng.normal(size=out.shape).astype(np.float32)
    grads = attention_backward(dout, cache)[:3]
    for m in range(M):
        rows = slice(m * B, (m + 1) * B)
        out_m, c_m = attention_forward(q[rows], k[rows], v[rows], **opts)
        assert _bits(out[rows]) == _bits(out_m)
        assert maxes[m] == c_m.max_logit
        for got, want in zip(grads, attention_backward(dout[rows], c_m)[:3]):
            assert _bits(got[rows]) == _bits(want)
    with pytest.raises(ValueError, match="members = 4"):
        attention_forward_members(4, q, k, v)
