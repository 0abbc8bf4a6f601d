"""QK-norm's fused LayerNorm against the NumPy reference, bit for bit: NumPy's pairwise sum, the
forward's values, statistics and memory layout, every gradient, the ensemble's members, the
attention around it, and the calls it leaves to the reference."""

import numpy as np
import pytest

from normlab import kernels as K
from normlab.functional import attention as FA
from normlab.functional.rope import rope_tables
from normlab.kernels.qk_norm import pairwise_sum


def same(a, b):
    """Equal bit for bit (the sign of zero and NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def rows(rng, shape, dtype, spread=True):
    x = rng.standard_normal(shape)
    if spread:  # rows of very different scales and offsets: the roundings differ by row
        x = x * rng.uniform(1e-3, 1e3, shape[:-1] + (1,)) + rng.uniform(-50, 50, shape[:-1] + (1,))
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [*range(1, 34), 64, 127, 128, 129, 136, 255, 256, 300, 1000, 4100])
def test_pairwise_sum_is_numpys(rng, n, dtype):
    x = rows(rng, (50, n), dtype)
    got = np.array([dtype(0.0) + pairwise_sum(r, 0, n) for r in x])
    same(got, x.sum(axis=-1))
    strided = rows(rng, (50, 2 * n), dtype)[:, ::2]  # a row with a stride
    same(np.array([dtype(0.0) + pairwise_sum(r, 0, n) for r in strided]),
         strided.sum(axis=-1))


def heads(rng, B, T, H, D, dtype):
    """q as attention sees it: the heads of a fused projection's rows (B, H, T, D), a view
    whose last axis alone is contiguous."""
    qkv = rows(rng, (B, T, 3 * H * D), dtype)
    return qkv[..., : H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3)


LAYOUTS = {
    "heads": lambda rng, dt: heads(rng, 3, 5, 2, 16, dt),
    "projection": lambda rng, dt: rows(rng, (3, 5, 3 * 32), dt)[..., 32:64],
    "contiguous": lambda rng, dt: rows(rng, (4, 7, 24), dt),
    "one row": lambda rng, dt: rows(rng, (1, 8), dt),
    "vector": lambda rng, dt: rows(rng, (130,), dt),
    "wide": lambda rng, dt: rows(rng, (2, 3, 300), dt),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_qk_norm_is_the_reference_bit_for_bit(rng, layout, dtype):
    x = LAYOUTS[layout](rng, dtype)
    w = (1 + 0.3 * rng.standard_normal(x.shape[-1])).astype(np.float32)
    y, c = K.qk_norm_forward(x, w, norm="layernorm", eps=1e-6)
    y_ref, c_ref = FA.qk_norm_forward(x, w, norm="layernorm", eps=1e-6)
    same(y, y_ref)
    assert y.strides == y_ref.strides  # the products that read it see the same layout
    assert type(c) is type(c_ref)
    for a, b in zip(c, c_ref):
        if isinstance(a, np.ndarray):
            same(a, b)
        else:
            assert a == b
    dy = rows(rng, x.shape, dtype)
    for cache in (c, c_ref):  # either cache, either backward
        dx, dw = K.qk_norm_backward(dy, cache, norm="layernorm")
        dx_ref, dw_ref = FA.qk_norm_backward(dy, cache, norm="layernorm")
        same(dx, dx_ref)
        same(dw, dw_ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("M", [1, 3])
@pytest.mark.parametrize("scope", ["head", "all"])
def test_qk_norm_members_is_the_reference_bit_for_bit(rng, M, dtype, scope):
    x = heads(rng, 2 * M, 5, 2, 16, dtype)  # (M B, H, T, D): a per-head QK-norm
    if scope == "all":  # (M B, T, H D): over the whole projection
        x = rows(rng, (2 * M, 5, 3 * 32), dtype)[..., :32]
    C = x.shape[-1]
    w = (1 + 0.3 * rng.standard_normal((M, C))).astype(np.float32)
    y, c = K.qk_norm_members_forward(x, w, norm="layernorm", eps=1e-6)
    y_ref, c_ref = FA.qk_norm_members_forward(x, w, norm="layernorm", eps=1e-6)
    same(y, y_ref)
    assert y.strides == y_ref.strides
    same(c.gain, c_ref.gain)
    same(c.cache.mean, c_ref.cache.mean)
    same(c.cache.rstd, c_ref.cache.rstd)
    dy = rows(rng, x.shape, dtype)
    for cache in (c, c_ref):
        dx, dw = K.qk_norm_members_backward(dy, cache)
        dx_ref, dw_ref = FA.qk_norm_members_backward(dy, cache)
        same(dx, dx_ref)
        same(dw, dw_ref)
    for m in range(M):  # and each member is its own call
        rows_m = slice(2 * m, 2 * m + 2)
        same(y[rows_m], FA.qk_norm_forward(x[rows_m], w[m], norm="layernorm", eps=1e-6)[0])


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("softcap", [None, 30.0])
def test_attention_with_a_layernorm_qk_norm_is_the_reference_bit_for_bit(rng, rope, softcap):
    B, H, T, D = 2, 2, 9, 16
    q, k, v = (heads(rng, B, T, H, D, np.float32) for _ in range(3))
    wq, wk = (1 + 0.3 * rng.standard_normal((2, D))).astype(np.float32)
    opts = dict(qk_norm="layernorm", qk_norm_eps=1e-6, softcap=softcap, head_stats=True,
                rope=rope_tables(T, D, dtype=np.float32) if rope else None)
    out, c = K.attention_forward(q, k, v, wq, wk, **opts)
    ref, c_ref = FA.attention_forward(q, k, v, wq, wk, **opts)
    same(out, ref)
    assert c.max_logit == c_ref.max_logit and c.qk_norm == c_ref.qk_norm == "layernorm"
    same(c.q, c_ref.q)
    same(c.heads.entropy, c_ref.heads.entropy)
    dy = rows(rng, out.shape, np.float32)
    for cache in (c, c_ref):
        for got, want in zip(K.attention_backward(dy, cache), FA.attention_backward(dy, cache)):
            same(got, want)


def test_what_the_kernel_leaves_to_the_reference(rng):
    x = heads(rng, 2, 4, 2, 8, np.float32)
    w = np.ones(8, np.float32)
    for args in ((x.astype(np.float16), w, "layernorm"), (x, w, "rmsnorm")):
        y, _ = K.qk_norm_forward(args[0], args[1], norm=args[2], eps=1e-6)
        same(y, FA.qk_norm_forward(args[0], args[1], norm=args[2], eps=1e-6)[0])
    with pytest.raises(ValueError, match="weight"):
        K.qk_norm_forward(x, np.ones(7, np.float32), norm="layernorm", eps=1e-6)
    with pytest.raises(ValueError, match="eps"):
        K.qk_norm_forward(x, w, norm="layernorm", eps=0.0)
    with pytest.raises(ValueError, match="weights must have shape"):
        K.qk_norm_members_forward(x, np.ones((3, 8), np.float32), norm="layernorm", eps=1e-6)
    with pytest.raises(TypeError, match="QKMembersCache"):
        K.qk_norm_members_backward(x, None)
