"""The fused attention (``normlab.kernels.attention_lanes``: every sequence a SIMD lane, one
compiled call each way) against the reference: forward, max_logit and every gradient within
tolerances derived from the format, caches interchangeable, the options it does not fuse run the
reference; and a sequence's bits do not depend on the other sequences of the call (an ensemble's
member is its single run)."""

import numpy as np
import pytest
from _kernel_tol import assert_rowwise

from normlab import kernels as K
from normlab.functional import attention as FA


def qkv(rng, shape, dtype, spread=2.0):
    return tuple((rng.normal(size=shape) * spread).astype(dtype) for _ in range(3))


def logit_tol(q, k, scale=None):
    """The absolute tolerance of a logit scale q.k summed in another order: D terms, each at
    most max|q| max|k|, 16 units of the compute format per term magnitude."""
    D = q.shape[-1]
    eps = float(np.finfo(np.result_type(q.dtype, np.float32)).eps)
    scale = D**-0.5 if scale is None else scale
    return 16 * eps * D * scale * float(np.max(np.abs(q))) * float(np.max(np.abs(k)))


def bounds(q, k, v, dy):
    """Magnitudes of the terms summed into out, dq, dk, dv (for the absolute tolerances): out and
    dv are averages of v and dy rows; ds is at most 2 max|dp| per row, dp = dy v^T."""
    D = q.shape[-1]
    m = {n: float(np.max(np.abs(a.astype(np.float64)))) for n, a in
         (("q", q), ("k", k), ("v", v), ("dy", dy))}
    dp = D * m["dy"] * m["v"]
    return {"out": m["v"], "dv": q.shape[-2] * m["dy"],
            "dq": 2 * dp * m["k"] * q.shape[-2] / np.sqrt(D),
            "dk": 2 * dp * m["q"] * q.shape[-2] / np.sqrt(D)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("softcap", [None, 5.0])
@pytest.mark.parametrize("shape", [(1, 1, 1, 4), (2, 3, 7, 8), (2, 4, 64, 32)])
def test_attention_matches_reference(rng, shape, dtype, causal, softcap):
    q, k, v = qkv(rng, shape, dtype)
    out, c = K.attention_forward(q, k, v, causal=causal, softcap=softcap)
    ref, c_ref = FA.attention_forward(q, k, v, causal=causal, softcap=softcap)
    assert type(c) is type(c_ref) and out.dtype == ref.dtype == q.dtype
    assert abs(c.max_logit - c_ref.max_logit) <= logit_tol(q, k)  # q.k summed in another order
    dy = rng.normal(size=shape).astype(dtype)
    b = bounds(q, k, v, dy)
    assert_rowwise(out, ref, ulps_ct=16, scale=b["out"])
    assert_rowwise(c.softmax.p, c_ref.softmax.p, ulps_ct=16, scale=1.0)
    grads = K.attention_backward(dy, c)
    grads_ref = FA.attention_backward(dy, c_ref)
    assert grads[3] is None and grads[4] is None
    for name, g, g_ref in zip(("dq", "dk", "dv"), grads, grads_ref):
        assert g.dtype == g_ref.dtype == dtype
        assert_rowwise(g, g_ref, ulps_ct=16, scale=b[name], what=name)
    # the caches are interchangeable: each backward takes the other's forward
    for g, g_ref in zip(K.attention_backward(dy, c_ref)[:3], FA.attention_backward(dy, c)[:3]):
        assert_rowwise(g, g_ref, ulps_ct=16, scale=max(b.values()))


def test_attention_float32_against_float64(rng):
    """The fused float32 path against the reference computed in float64 (an oracle it does not
    share a rounding with)."""
    q, k, v = qkv(rng, (2, 2, 16, 8), np.float64)
    f32 = [a.astype(np.float32) for a in (q, k, v)]
    out, c = K.attention_forward(*f32, softcap=3.0)
    ref, c_ref = FA.attention_forward(*[a.astype(np.float64) for a in f32], softcap=3.0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    dy = rng.normal(size=q.shape)
    for g, g_ref in zip(K.attention_backward(dy.astype(np.float32), c)[:3],
                        FA.attention_backward(dy, c_ref)[:3]):
        np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-4)


def test_options_it_does_not_fuse_run_the_reference(rng):
    """QK-norm, RoPE, dropout in training and mixed dtypes give the reference's results bitwise."""
    import ml_dtypes

    from normlab.functional import rope_tables

    shape = (2, 2, 6, 8)
    q, k, v = qkv(rng, shape, np.float32)
    w = rng.normal(size=8).astype(np.float32)
    cases = [
        ((q, k, v, w, w), {"qk_norm": "rmsnorm"}),
        ((q, k, v), {"rope": rope_tables(6, 8, 10000.0, np.float32)}),
        ((q.astype(ml_dtypes.bfloat16), k, v), {}),
    ]
    for args, opts in cases:
        out, c = K.attention_forward(*args, **opts)
        ref, c_ref = FA.attention_forward(*args, **opts)
        np.testing.assert_array_equal(out, ref)
        dy = np.ones(shape, np.float32)
        for g, g_ref in zip(K.attention_backward(dy, c), FA.attention_backward(dy, c_ref)):
            if g_ref is None:
                assert g is None
            else:
                np.testing.assert_array_equal(g, g_ref)
    out, _ = K.attention_forward(q, k, v, p_drop=0.5, training=True,
                                 rng=np.random.default_rng(3))
    ref, _ = FA.attention_forward(q, k, v, p_drop=0.5, training=True,
                                  rng=np.random.default_rng(3))
    np.testing.assert_array_equal(out, ref)


def test_bad_arguments_are_refused_before_any_work(rng):
    q, k, v = qkv(rng, (1, 2, 4, 8), np.float32)
    with pytest.raises(ValueError, match="k"):
        K.attention_forward(q, k[..., :4], v)
    with pytest.raises(ValueError, match="softcap"):
        K.attention_forward(q, k, v, softcap=-1.0)
    with pytest.raises(TypeError, match="q"):
        K.attention_forward(q.astype(np.int32), k.astype(np.int32), v.astype(np.int32))
    with pytest.raises(TypeError, match="causal"):
        K.attention_forward(q, k, v, causal="yes")
    with pytest.raises(ValueError, match="dout"):
        K.attention_backward(np.ones((1, 2, 4, 4), np.float32), K.attention_forward(q, k, v)[1])
    with pytest.raises(ValueError, match="p_drop"):
        K.attention_forward(q, k, v, p_drop=2.0, training=True, rng=np.random.default_rng(0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kv_heads, scale", [(1, None), (2, 0.3), (4, 0.125)])
def test_grouped_heads_and_scale_match_reference(rng, dtype, kv_heads, scale):
    """Grouped-query attention (k, v with Hkv < H heads) and a given scale take the fused path
    and agree with the reference, gradients summed over each query group."""
    B, H, T, D = 2, 4, 9, 8
    q = (rng.normal(size=(B, H, T, D)) * 2).astype(dtype)
    k, v = ((rng.normal(size=(B, kv_heads, T, D)) * 2).astype(dtype) for _ in range(2))
    out, c = K.attention_forward(q, k, v, softcap=5.0, scale=scale)
    ref, c_ref = FA.attention_forward(q, k, v, softcap=5.0, scale=scale)
    assert c.scale == c_ref.scale
    assert abs(c.max_logit - c_ref.max_logit) <= logit_tol(q, k, scale)
    dy = rng.normal(size=q.shape).astype(dtype)
    b = bounds(q, np.repeat(k, H // kv_heads, 1), np.repeat(v, H // kv_heads, 1), dy)
    assert_rowwise(out, ref, ulps_ct=16, scale=b["out"])
    for name, g, g_ref in zip(("dq", "dk", "dv"), K.attention_backward(dy, c),
                              FA.attention_backward(dy, c_ref)):
        assert g.shape == g_ref.shape
        assert_rowwise(g, g_ref, ulps_ct=16 * H, scale=b[name], what=name)


def test_sliding_window_runs_the_reference(rng):
    q, k, v = qkv(rng, (1, 2, 12, 4), np.float32)
    out, _ = K.attention_forward(q, k, v, window=3)
    ref, _ = FA.attention_forward(q, k, v, window=3)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal,softcap,kv_heads", [(True, None, 4), (True, 5.0, 2),
                                                     (False, None, 1), (False, 5.0, 4)])
def test_head_stats_match_reference(rng, dtype, causal, softcap, kv_heads):
    """The fused path's per-head statistics: the largest logit from the kernel's row maxima, the
    entropy from its probabilities (each within its tolerance)."""
    q = (rng.normal(size=(2, 4, 9, 8)) * 2.0).astype(dtype)
    k, v = ((rng.normal(size=(2, kv_heads, 9, 8)) * 2.0).astype(dtype) for _ in range(2))
    opts = dict(causal=causal, softcap=softcap, head_stats=True)
    out, c = K.attention_forward(q, k, v, **opts)
    _, c_ref = FA.attention_forward(q, k, v, **opts)
    assert c.heads is not None and c.heads.max_logit.shape == c.heads.entropy.shape == (4,)
    np.testing.assert_allclose(c.heads.max_logit, c_ref.heads.max_logit, rtol=0,
                               atol=logit_tol(q, k))
    assert float(c.heads.max_logit.max()) == c.max_logit
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c.heads.entropy, c_ref.heads.entropy, rtol=tol, atol=tol)
    np.testing.assert_array_equal(out, K.attention_forward(q, k, v, causal=causal,
                                                           softcap=softcap)[0])
    assert K.attention_forward(q, k, v, causal=causal)[1].heads is None
    # an option the kernel does not fuse (a window) runs the reference, heads included
    windowed = K.attention_forward(q, k, v, window=3, head_stats=True)[1]
    assert windowed.heads is not None


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal,softcap,kv_heads", [(True, None, 4), (True, 3.0, 2),
                                                     (False, None, 1), (False, 2.0, 4)])
def test_a_sequence_has_the_same_bits_whatever_else_the_call_computes(rng, dtype, causal,
                                                                     softcap, kv_heads):
    """Each batch row alone, the whole batch (another block size and padding: 70 rows of 4 heads
    are 3 blocks) and the batch inside a larger one: the same bits for the row's output, cache
    and every gradient (what makes an ensemble's member its single run)."""
    B, H, T, D = 70, 4, 6, 8
    q = (rng.normal(size=(B, H, T, D)) * 2).astype(dtype)
    k, v = ((rng.normal(size=(B, kv_heads, T, D)) * 2).astype(dtype) for _ in range(2))
    dy = rng.normal(size=q.shape).astype(dtype)
    opts = dict(causal=causal, softcap=softcap)
    out, c = K.attention_forward(q, k, v, **opts)
    grads = K.attention_backward(dy, c)[:3]
    for rows in (slice(0, 1), slice(33, 34), slice(2, 9), slice(69, 70)):
        o, cr = K.attention_forward(q[rows], k[rows], v[rows], **opts)
        assert _bits(o) == _bits(out[rows])
        assert _bits(cr.softmax.p) == _bits(c.softmax.p[rows])
        for g, g_all in zip(K.attention_backward(dy[rows], cr)[:3], grads):
            assert _bits(g) == _bits(g_all[rows])


def test_strided_inputs_and_outputs_give_the_same_bits(rng):
    """q, k, v as column blocks of one (B, T, (H + 2 Hkv) D) array (the fused projection's rows),
    the output into a (B, T, H, D) array's view and the gradients into the blocks of one
    gradient array: the same bits as contiguous arrays, nothing else written."""
    from normlab.kernels.attention import attention_backward_into, attention_forward_members

    B, T, H, Hkv, D = 5, 7, 4, 2, 8
    rows = rng.normal(size=(B, T, (H + 2 * Hkv) * D)).astype(np.float32)

    def heads(a, lo, n):
        return a[..., lo * D:(lo + n) * D].reshape(B, T, n, D).transpose(0, 2, 1, 3)

    q, k, v = heads(rows, 0, H), heads(rows, H, Hkv), heads(rows, H + Hkv, Hkv)
    out, c = K.attention_forward(*(np.ascontiguousarray(a) for a in (q, k, v)), softcap=4.0)
    into = np.full((B, T, H, D), np.nan, np.float32)
    got = attention_forward_members(1, q, k, v, out=into.transpose(0, 2, 1, 3), softcap=4.0)
    assert got is not None and _bits(into) == _bits(out.transpose(0, 2, 1, 3))
    dy = rng.normal(size=q.shape).astype(np.float32)
    want = K.attention_backward(dy, c)[:3]
    drows = np.full(rows.shape, np.nan, np.float32)
    assert attention_backward_into(dy, got[1], heads(drows, 0, H), heads(drows, H, Hkv),
                                   heads(drows, H + Hkv, Hkv))
    for g, w in zip((heads(drows, 0, H), heads(drows, H, Hkv), heads(drows, H + Hkv, Hkv)),
                    want):
        assert _bits(np.ascontiguousarray(g)) == _bits(w)
    assert not np.isnan(drows).any()


def test_the_cache_holds_the_inputs_and_the_members_maxima(rng):
    """The cache's q, k, v (views of the kernel's lane arrays) hold the inputs' values; the
    members' max logits are each member's rows' maxima."""
    from normlab.kernels.attention import attention_forward_members

    q, k, v = qkv(rng, (6, 2, 5, 4), np.float32)
    _, c, maxes = attention_forward_members(3, q, k, v)
    for a, b in ((c.q, q), (c.k, k), (c.v, v)):
        assert a.shape == b.shape and _bits(a) == _bits(b)
    for m in range(3):
        alone = K.attention_forward(q[2 * m:2 * m + 2], k[2 * m:2 * m + 2], v[2 * m:2 * m + 2])
        assert maxes[m] == alone[1].max_logit
    assert max(maxes) == c.max_logit


@pytest.mark.parametrize("D", [8, 16, 32])
def test_the_head_width_alone_chooses_the_path(rng, D):
    """Heads up to LANES_MAX_D run the lanes kernel (the cache's p a view of its lane array),
    wider ones the batched products (p an array of its own); any batch size, the same choice."""
    from normlab.kernels import attention_lanes
    from normlab.kernels.attention import LANES_MAX_D

    for B in (1, 5):
        q, k, v = qkv(rng, (B, 2, 6, D), np.float32)
        _, c = K.attention_forward(q, k, v)
        lanes = attention_lanes._lane_array(c.softmax.p, c.softmax.p.base.shape[2]
                                            if c.softmax.p.base is not None else 0, 1)
        assert (lanes is not None) == (D <= LANES_MAX_D)
