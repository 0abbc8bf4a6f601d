"""Scaled dot-product attention, the fused path: the contract and the cache of
``normlab.functional.attention_forward`` / ``attention_backward``.

For heads of width up to ``LANES_MAX_D`` (the lab's), the products, the soft-cap, the causal mask
and the softmax of every sequence of a call (batch rows and heads; an ensemble's members, their
batches one after another) run in one compiled call forward and one backward
(``attention_lanes``: each sequence a SIMD lane, every sum in a fixed order, so a sequence's bits
do not depend on the others; exp and tanh the vectorized polynomials of ``vmath``). Wider heads
run the reference's batched products (one sgemm call per batch row and head) around the fused
capped causal softmax kernel (one pass over the logits, ``softmax``), scaled in place:

    s = q k^T / sqrt(D)   p = capped_softmax(s, cap, causal)   out = p v

and upwards ``ds = capped_softmax_backward(dy v^T) scale``, ``dq = ds k``, ``dk = ds^T q``,
``dv = p^T dy``. The reference runs about ten NumPy passes over the (B, H, T, T) logits (divide,
tanh, scale, add the mask, max, subtract, exp, sum, divide) around the same products.

The fused path covers attention without QK-norm, RoPE, a sliding window or dropout in training
(grouped key/value heads, soft-cap, causal or not, and any scale included), on float32 or float64
q, k and v of one dtype; anything else (and any option this module does not know) runs the
reference, so the two are interchangeable: the cache is the reference's ``AttentionCache`` (its
q, k, v and p views of the kernel's lane arrays) and either backward takes either forward's
cache. The lanes kernel sums in another order than the reference's BLAS calls, and the softmax
kernel's row sums are reordered, so results agree within the tolerances of
tests/kernels/test_kernel_attention.py.
"""

from __future__ import annotations

import numpy as np

from .. import _checks as ck
from ..functional import attention as _ref
from ..functional.attention import (
    AttentionCache,
    HeadStats,
    _mix,
    _mix_backward,
    _scores,
    _scores_backward,
    row_entropy,
)
from ..functional.softmax import SoftmaxCache
from . import attention_lanes as _lanes
from .qk_norm import qk_norm_backward, qk_norm_forward
from .softmax import _backward as _softmax_backward
from .softmax import _forward as _softmax_forward

# Heads of width D <= LANES_MAX_D run the lanes kernel; wider heads run NumPy's batched products
# (one sgemm call per batch row and head) around the fused softmax kernel. The lanes kernel's
# cost grows with D, where sgemm's per-call cost is what it saves: measured forward and backward
# on one core (benchmarks/attention_paths.py), it is faster up to D = 16 at T 16 to 64 and slower
# at D = 32. The choice depends on the head width alone, so a member and its single run take
# the same path.
LANES_MAX_D = 16

_FAST_OPTIONS = {"qk_norm", "qk_norm_eps", "rope", "softcap", "p_drop", "training", "rng",
                 "causal", "scale", "window", "head_stats"}


def _fast(q: np.ndarray, k: np.ndarray, v: np.ndarray, options: dict) -> bool:
    """Whether the fused path computes this call (else the reference does)."""
    if set(options) - _FAST_OPTIONS:
        return False
    if options.get("qk_norm", "none") != "none" or options.get("rope") is not None:
        return False
    if options.get("window") is not None:
        return False  # a sliding window: the reference's banded mask
    if options.get("training", False) is not False and options.get("p_drop", 0.0) != 0.0:
        return False  # dropout (or an argument the reference refuses)
    dtypes = {np.asarray(a).dtype for a in (q, k, v)}
    return len(dtypes) == 1 and dtypes.pop() in (np.float32, np.float64)


def attention_forward(q, k, v, q_norm_weight=None, k_norm_weight=None, **options):
    """Attention; as ``normlab.functional.attention_forward`` (same arguments and cache)."""
    if _qk_layer_norm(q, k, options):
        return _normed_reference(q, k, v, q_norm_weight, k_norm_weight, options)
    if not _fast(q, k, v, options):
        return _ref.attention_forward(q, k, v, q_norm_weight, k_norm_weight, **options)
    out, cache, _ = _fused_forward(q, k, v, q_norm_weight, k_norm_weight, options)
    return out, cache


# ---- a LayerNorm QK-norm: the reference attention around the fused norm ------------------------
# The products and the softmax stay the reference's (a QK-norm model's runs keep their bits); the
# norm, about ten NumPy passes over q and over k each way, is ``qk_norm``'s kernel, bit for bit.
def _qk_layer_norm(q: object, k: object, options: dict) -> bool:
    """Whether the call has a LayerNorm QK-norm on float32 or float64 q, k of one dtype."""
    dtypes = {getattr(a, "dtype", None) for a in (q, k)}
    return (options.get("qk_norm") == "layernorm" and not set(options) - _FAST_OPTIONS
            and len(dtypes) == 1
            and dtypes.pop() in (np.float32, np.float64))


def _normed_reference(q, k, v, q_norm_weight, k_norm_weight, options):
    """The reference attention of q and k normed by the fused QK-norm, with the norm's caches
    where the reference keeps them (its backward runs the norm's backward from them)."""
    o = {"qk_norm_eps": 1e-6, "softcap": None, "p_drop": 0.0, "training": False, "rng": None,
         "causal": True, "scale": None, "window": None, **options}
    _ref._check_nonempty(q, k, v)
    _ref.check_args(q, k, v, q_norm_weight, k_norm_weight, o["qk_norm"], o["softcap"],
                    o["p_drop"], o["training"], o["rng"], o["causal"], o["scale"], o["window"])
    eps = ck.positive(o["qk_norm_eps"], "qk_norm_eps")
    qn, cq = qk_norm_forward(q, q_norm_weight, norm="layernorm", eps=eps)
    kn, ck_ = qk_norm_forward(k, k_norm_weight, norm="layernorm", eps=eps)
    out, cache = _ref.attention_forward(qn, kn, v, **{**options, "qk_norm": "none"})
    return out, cache._replace(q_norm=cq, k_norm=ck_, qk_norm="layernorm")


def attention_forward_members(members: int, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                              out: np.ndarray | None = None, **options: object) -> tuple | None:
    """The fused attention of an ensemble's M = ``members`` members at once, their batches
    concatenated along the batch axis (q (M B, H, T, D), ...): ``(out, cache, max_logits)``,
    ``max_logits[m]`` the largest raw logit of member m's rows (each member's ``max_logit``);
    ``out``, when given, the (M B, H, T, D) array (a view) the heads' outputs are written into.
    None where the fused path does not compute the call (the caller then runs each member
    alone)."""
    if not _fast(q, k, v, options) or q.shape[0] % members:
        return None
    y, cache, rowmax = _fused_forward(q, k, v, None, None, options, out)
    per_member = rowmax.reshape(members, -1).max(axis=1)  # rowmax (B, H, T)
    return y, cache, [float(r) for r in per_member]


def _fused_forward(q, k, v, q_norm_weight, k_norm_weight, options, out=None):
    """The fused path: ``(out, cache, rowmax)``, rowmax (B, H, T) the raw logits' maximum per
    row; the heads' outputs written into ``out`` when given."""
    o = {"qk_norm": "none", "softcap": None, "p_drop": 0.0, "training": False, "rng": None,
         "causal": True, "scale": None, **options}
    _ref._check_nonempty(q, k, v)
    q, k, v, softcap, _, _, causal, scale, _ = _ref.check_args(
        q, k, v, q_norm_weight, k_norm_weight, o["qk_norm"], o["softcap"], o["p_drop"],
        o["training"], o["rng"], o["causal"], o["scale"])
    ck.positive(o.get("qk_norm_eps", 1e-6), "qk_norm_eps")
    head_stats = ck.flag(o.get("head_stats", False), "head_stats")
    ct = q.dtype
    if q.shape[-1] <= LANES_MAX_D:
        y, (q, k, v), p, tanh, rowmax = _lanes.forward(q, k, v, causal=causal, scale=scale,
                                                       softcap=softcap, out=out)
    else:
        s = _scores(q, k)  # (B, H, T, T)
        s *= ct.type(scale)
        p, _, tanh, rowmax = _softmax_forward(s, causal, softcap)  # rows (B H T,)
        y, rowmax = _mix(p, v, out), rowmax.reshape(p.shape[:3])  # (B, H, T, D), (B, H, T)
    heads = (HeadStats(rowmax.max(axis=(0, 2)), row_entropy(p))
             if head_stats else None)  # (H,) each: the rows' maxima are the raw logits'
    cache = AttentionCache(q, k, v, SoftmaxCache(p, p.ndim - 1, ct), p, None, tanh, softcap,
                           scale, None, None, "none", None, (ct, ct, ct), float(rowmax.max()),
                           heads)
    return y, cache, rowmax


def attention_backward(
    dout: np.ndarray, cache: AttentionCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Gradients ``(dq, dk, dv, None, None)``; as ``normlab.functional.attention_backward``."""
    ck.cache(cache, AttentionCache, "attention")
    if cache.qk_norm == "layernorm" and len(set(cache.dtypes)) == 1:
        dq, dk, dv, _, _ = _ref.attention_backward(
            dout, cache._replace(qk_norm="none", q_norm=None, k_norm=None))
        dq, dwq = qk_norm_backward(dq, cache.q_norm, norm="layernorm")
        dk, dwk = qk_norm_backward(dk, cache.k_norm, norm="layernorm")
        return dq, dk, dv, dwq, dwk
    if not _fused_cache(cache):
        return _ref.attention_backward(dout, cache)
    dq, dk, dv = _fused_backward(dout, cache)
    return dq, dk, dv, None, None


def attention_backward_into(dout: np.ndarray, cache: AttentionCache, dq: np.ndarray,
                            dk: np.ndarray, dv: np.ndarray) -> bool:
    """``attention_backward``'s dq, dk and dv written into the given arrays (views: the column
    blocks of the fused projection's gradient rows, so that nothing is concatenated); False,
    with nothing written, where the fused path does not cover the cache."""
    ck.cache(cache, AttentionCache, "attention")
    if not _fused_cache(cache) or dq.dtype != cache.v.dtype:
        return False
    _fused_backward(dout, cache, dq, dk, dv)
    return True


def _fused_cache(c: AttentionCache) -> bool:
    """Whether the fused backward computes a forward's cache (else the reference does)."""
    return (c.dropout is None and c.qk_norm == "none" and c.rope is None
            and len(set(c.dtypes)) == 1 and c.v.dtype in (np.float32, np.float64))


def _fused_backward(dout, c, dq=None, dk=None, dv=None):
    """The fused backward's ``(dq, dk, dv)``, into the arrays given (fresh ones otherwise): the
    lanes kernel's or the batched products', as the forward chose by the head width."""
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", c.q.shape, "the shape of the forward's output")
    ct = c.v.dtype
    dy = dout.astype(ct, copy=False)  # (B, H, T, D)
    if c.q.shape[-1] <= LANES_MAX_D:
        return _lanes.backward(dy, c.q, c.k, c.v, c.softmax.p, c.tanh, scale=c.scale,
                               softcap=c.softcap, dq=dq, dk=dk, dv=dv)
    p = c.softmax.p  # (B, H, T, T)
    dp, dv = _mix_backward(dy, p, c.v, dv)  # (B, H, T, T), (B, Hkv, T, D)
    ds = _softmax_backward(dp, p, c.tanh, ct)  # (B, H, T, T), zero where masked
    ds *= ct.type(c.scale)
    dq, dk = _scores_backward(ds, c.q, c.k, dq, dk)  # (B, H, T, D), (B, Hkv, T, D)
    return dq, dk, dv


__all__ = ["attention_backward", "attention_backward_into", "attention_forward",
           "attention_forward_members"]
