"""Multi-head scaled dot-product attention on heads already split: q (B, H, T, D), k and v
(B, Hkv, T, D); causal by default (a language model), bidirectional with ``causal=False`` (an
encoder). Hkv < H is grouped-query attention (Ainslie et al. 2023): query head h reads key/value
head h // (H / Hkv); Hkv = H is multi-head attention.

    q, k  <- QKnorm(q), QKnorm(k)       optional: RMSNorm or LayerNorm over D, per head, one gain
                                        (D,) shared by the heads (Henry et al. 2020; Dehghani et
                                        al. 2023; Qwen3 / Gemma 3 keep the 1/sqrt(D) scale)
    q, k  <- RoPE(q), RoPE(k)           optional, after the norm (as Qwen3 and Gemma 3)
    s     =  scale q k^T                (B, H, T, T) logits; scale = 1 / sqrt(D) unless given
                                        (Gemma 2: 1 / sqrt(query_pre_attn_scalar))
    s     <- cap * tanh(s / cap)        optional soft-cap on the scaled logits (Gemma 2: cap = 50)
    s     <- s + M                      M = -inf above the diagonal (the causal mask, after the cap;
                                        none with causal=False); with a sliding window W also
                                        -inf where the key is W or more steps back (Mistral)
    p     =  softmax(s)                 over the keys; or, with ``sigmoid_bias`` b, sigmoid
                                        attention: p = sigmoid(s + b) per key, masked keys 0
                                        (Ramapuram et al. 2025, "Theory, Analysis, and Best
                                        Practices for Sigmoid Self-Attention", arXiv
                                        2409.04431: b = -log n, n the sequence length;
                                        the official code, apple/ml-sigmoid-attention
                                        attention_simulator/layers/attention.py, adds its
                                        attn_bias after the mask, -7.62 = -log 2048 in its
                                        2048-token configs)
    p     <- dropout(p)                 optional, in training
    out   =  p v                        (B, H, T, D)

Backward, the same lines read upwards:

    dp = dout v^T        dv = p^T dout          (p after dropout)
    ds = softmax_backward(dropout_backward(dp))  (sigmoid: ds = dp p (1 - p))
    ds <- ds * (1 - tanh^2)                     with the cap
    dq = scale ds k      dk = scale ds^T q          (dk, dv summed over each query group)
    then RoPE's and the norm's backward on dq and dk.

The cache also holds the largest raw logit ``max_logit`` (before the cap, over the positions the
mask keeps): Wortsman et al. 2023's diagnostic for attention-logit growth. With
``head_stats=True`` it holds the same per query head, and the mean entropy of each head's rows
(``HeadStats``: what ``normlab inspect`` reports per head).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .activations import _sigmoid
from .dropout import DropoutCache, dropout_backward, dropout_forward
from .layernorm import layer_norm_backward, layer_norm_forward
from .norms import get as get_norm
from .norms import qk_names
from .rmsnorm import rms_norm_backward, rms_norm_forward
from .rope import RopeCache, rope_backward, rope_forward
from .softmax import SoftmaxCache, causal_mask, softmax_backward, softmax_forward

QK_NORMS = qk_names()  # the built-in vocabulary; ``norms.qk_names()`` is the registry's now


class HeadStats(NamedTuple):
    """Per query head, over the batch and the queries: the largest raw logit (scale q.k after
    QK-norm and RoPE, before the soft-cap, over the positions the mask keeps) and the mean
    entropy in nats of the attention rows (p before dropout)."""

    max_logit: Array  # (H,) compute dtype
    entropy: Array  # (H,) compute dtype


def row_entropy(p: Array) -> Array:
    """The mean over the batch and the queries of the entropy (nats) of the rows of
    p (B, H, T, T): (H,), a masked key (p = 0) contributing 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)  # (B, H, T)
    return ent.mean(axis=(0, 2))


class AttentionCache(NamedTuple):
    """Saved: q and k as they entered the product (after norm and RoPE), v, the probabilities
    (in the softmax cache), the tanh of the soft-cap and the caches of the optional steps."""

    q: Array  # (B, H, T, D) compute dtype, after QK-norm and RoPE
    k: Array  # (B, Hkv, T, D) compute dtype, after QK-norm and RoPE
    v: Array  # (B, Hkv, T, D) compute dtype
    softmax: SoftmaxCache  # holds p (B, H, T, T)
    p_used: Array  # (B, H, T, T) p after dropout (p itself without dropout)
    dropout: DropoutCache | None  # None when there was no dropout
    tanh: Array | None  # (B, H, T, T) tanh(s / cap), None without a cap
    softcap: float | None
    scale: float  # the factor on q.k: 1 / sqrt(D) by default
    q_norm: Any  # the norm cache of q (the entry's cache type), None without QK-norm
    k_norm: Any  # the norm cache of k
    qk_norm: str  # "none" or a QK-norm of the registry ("rmsnorm", "layernorm", ...)
    rope: tuple[RopeCache, RopeCache] | None  # caches of q's and k's rotation, None without RoPE
    dtypes: tuple  # (q, k, v) dtypes as given
    max_logit: float  # the largest raw logit scale q.k over the unmasked positions
    heads: HeadStats | None = None  # with head_stats=True; None otherwise
    sigmoid_bias: float | None = None  # sigmoid attention's b (``softmax`` then holds the
    #                                    sigmoid's p); None: softmax attention


def _grouped(a: Array, groups: int) -> Array:
    """(B, H, T, X) -> (B, Hkv, G, T, X), G = H / Hkv query heads per key/value head (a view)."""
    B, H, T, X = a.shape
    return a.reshape(B, H // groups, groups, T, X)


# The four products of attention with grouped key/value heads (shared with normlab.kernels):
# query head h reads key/value head h // G; the gradients of k and v sum over each group. A
# product given ``out`` (a view of the caller's array, e.g. a column block of the fused q, k, v
# rows) writes there: the same sgemm calls, only the destination's row stride differs.
def _into(out: Array, groups: int) -> Array:
    """``out`` (B, H, T, X) as the grouped view (B, H / groups, groups, T, X) the products write
    into; never a copy (a ValueError if it would have to be one)."""
    B, H, T, X = out.shape
    return np.reshape(out, (B, H // groups, groups, T, X), copy=False)


def _scores(q: Array, k: Array) -> Array:
    """s = q k^T: (B, H, T, D), (B, Hkv, T, D) -> (B, H, T, T)."""
    B, H, T, _ = q.shape
    return (_grouped(q, H // k.shape[1]) @ k[:, :, None].swapaxes(-1, -2)).reshape(B, H, T, T)


def _mix(p: Array, v: Array, out: Array | None = None) -> Array:
    """out = p v: (B, H, T, T), (B, Hkv, T, D) -> (B, H, T, D) (into ``out`` when given)."""
    B, H, T, _ = p.shape
    G = H // v.shape[1]
    if out is None:
        return (_grouped(p, G) @ v[:, :, None]).reshape(B, H, T, v.shape[-1])
    np.matmul(_grouped(p, G), v[:, :, None], out=_into(out, G))
    return out


def _mix_backward(dy: Array, p: Array, v: Array, dv: Array | None = None
                  ) -> tuple[Array, Array]:
    """``(dp, dv)`` of out = p v: dp = dy v^T (B, H, T, T), dv = p^T dy summed per group (into
    ``dv`` when given)."""
    dyg = _grouped(dy, p.shape[1] // v.shape[1])  # (B, Hkv, G, T, D)
    dv = _group_sum(_grouped(p, dyg.shape[2]).swapaxes(-1, -2), dyg, dv)  # (B, Hkv, T, D)
    dp = (dyg @ v[:, :, None].swapaxes(-1, -2)).reshape(p.shape)  # (B, H, T, T)
    return dp, dv


def _scores_backward(ds: Array, q: Array, k: Array, dq: Array | None = None,
                     dk: Array | None = None) -> tuple[Array, Array]:
    """``(dq, dk)`` of s = q k^T: dq = ds k (B, H, T, D), dk = ds^T q summed per group (into
    ``dq`` and ``dk`` when given)."""
    G = q.shape[1] // k.shape[1]
    dsg = _grouped(ds, G)  # (B, Hkv, G, T, T)
    if dq is None:
        dq = (dsg @ k[:, :, None]).reshape(q.shape)  # (B, H, T, D)
    else:
        np.matmul(dsg, k[:, :, None], out=_into(dq, G))
    dk = _group_sum(dsg.swapaxes(-1, -2), _grouped(q, G), dk)  # (B, Hkv, T, D)
    return dq, dk


def _group_sum(a: Array, b: Array, out: Array | None) -> Array:
    """``(a @ b).sum(axis=2)``: grouped products (B, Hkv, G, ...) summed over each key/value
    head's G query heads, into ``out`` (B, Hkv, T, X) when given. np.sum starts from 0, so with
    G = 1 it is 0 + x: the product is then written straight into ``out`` and 0 added in place
    (the same values, without a reduction over a strided destination)."""
    if out is None:
        return (a @ b).sum(axis=2)
    if a.shape[2] == 1:
        np.matmul(a, b, out=out[:, :, None])
        return np.add(out.dtype.type(0), out, out=out)
    return np.sum(a @ b, axis=2, out=out)


def qk_norm_forward(x: Array, weight: Array, *, norm: str, eps: float) -> tuple[Array, Any]:
    """QK-norm ``norm`` (a registry entry with ``qk``) over the last axis with the gain alone."""
    return get_norm(norm).forward(x, weight, eps=eps)


def qk_norm_backward(dout: Array, cache: Any, *, norm: str) -> tuple[Array, Array]:
    """``(dx, dweight)`` of ``qk_norm_forward`` (a gain-only norm's other gradients are None)."""
    dx, dweight, *_ = get_norm(norm).backward(dout, cache)
    return dx, dweight


class QKMembersCache(NamedTuple):
    """``qk_norm_members_forward``'s cache: the norm's own cache over every member's rows (the
    norm with a unit gain), each member's gain as its call multiplies by it, the weight dtype."""

    norm: str
    cache: Any
    gain: Array  # (M, C) compute dtype
    weight_dtype: np.dtype


def _by_member(a: Array, members: int) -> Array:
    """(M N, ...) -> (M, N, ...): a view (only the first axis is split)."""
    return a.reshape((members, a.shape[0] // members) + a.shape[1:])


def _member_gain(g: Array, ndim: int) -> Array:
    """(M, C) -> (M, 1, ..., 1, C) with ``ndim`` axes: broadcasting against ``_by_member``'s."""
    return g.reshape((g.shape[0],) + (1,) * (ndim - 2) + g.shape[-1:])


def qk_norm_members_forward(x: Array, weights: Array, *, norm: str,
                            eps: float) -> tuple[Array, QKMembersCache] | None:
    """An ensemble's QK-norm: x (M N, ..., C) holds the M members' rows one member after another
    along its first axis, and member m's rows are scaled by its own gain ``weights[m]`` (weights
    (M, C)). Each member's values equal ``qk_norm_forward(x_m, weights[m])``'s bit for bit: the
    norm runs once with a unit gain (its product by 1 is exact) and each member's gain is then
    applied as that call applies it, the last rounding of both. None for a norm other than
    "layernorm" and "rmsnorm", or for another dtype than float32 and float64 (the caller then
    runs each member alone)."""
    x, weights = ck.float_array(x, "x"), ck.float_array(weights, "weights")
    if weights.ndim != 2 or x.ndim < 2 or weights.shape[-1] != x.shape[-1] or (
            x.shape[0] % max(len(weights), 1)):
        raise ValueError(f"weights must have shape (M, C) with C = x's last axis and M dividing "
                         f"x's first; got weights {weights.shape}, x {x.shape}")
    if norm not in ("layernorm", "rmsnorm") or x.dtype not in (np.float32, np.float64):
        return None
    ct = x.dtype
    cache: Any
    if norm == "layernorm":  # out = xhat, then out *= g
        y, cache = layer_norm_forward(x, None, eps=eps)
        gain = weights.astype(ct)
    else:  # out = x rstd (1 + 0), where its call has x rstd (g + 0)
        y, cache = rms_norm_forward(x, np.ones(x.shape[-1], weights.dtype), eps=eps)
        gain = weights.astype(ct) + ct.type(0.0)
    rows = _by_member(y, len(weights))  # a view of the fresh output
    rows *= _member_gain(gain, rows.ndim)
    return y, QKMembersCache(norm, cache, gain, weights.dtype)


def qk_norm_members_backward(dout: Array, cache: QKMembersCache) -> tuple[Array, Array]:
    """``(dx, dweights)`` of ``qk_norm_members_forward``: dweights (M, C), each member's row
    that of ``qk_norm_backward`` alone (its rows reduced as that call reduces them)."""
    ck.cache(cache, QKMembersCache, "qk_norm_members")
    norm, inner, gain, weight_dt = cache
    M, x = len(gain), inner[0]
    ct = gain.dtype
    dy = dout.astype(ct, copy=False)
    gh = (_by_member(dy, M) * _member_gain(gain, dy.ndim + 1)).reshape(dy.shape)
    if norm == "layernorm":
        dx = layer_norm_backward(gh, inner)[0]
        xhat = (x.astype(ct, copy=False) - inner.mean) * inner.rstd
    else:
        dx = rms_norm_backward(gh, inner)[0]
        xhat = x.astype(ct, copy=False) * inner.rstd
    prod = _by_member(dy * xhat, M)
    dweights = np.stack([ck.reduce_rows(p) for p in prod]).astype(ck.compute_dtype(weight_dt))
    return dx, dweights


def check_args(q, k, v, q_norm_weight, k_norm_weight, qk_norm, softcap, p_drop, training, rng,
               causal, scale=None, window=None):
    """``attention_forward``'s arguments checked (shared with ``normlab.kernels``): q as a
    (B, H, T, D) float array, k and v as (B, Hkv, T, D) with Hkv dividing H, and the options as
    accepted values; ``scale`` None becomes 1 / sqrt(D)."""
    q, k, v = (ck.float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim != 4:
        raise ValueError(f"q must have shape (B, H, T, D); got {q.shape}")
    B, H, T, D = q.shape
    if k.ndim != 4 or k.shape[0] != B or k.shape[2:] != (T, D) or H % max(k.shape[1], 1):
        raise ValueError(f"k must have shape (B, Hkv, T, D) = ({B}, Hkv, {T}, {D}) with Hkv "
                         f"dividing H = {H}; got {k.shape}")
    ck.same_shape(v, "v", k.shape, "the shape of k")
    if qk_norm not in qk_names():
        raise ValueError(f"qk_norm must be one of {qk_names()}; got {qk_norm!r}")
    if qk_norm != "none":
        ck.param(q_norm_weight, "q_norm_weight", D)
        ck.param(k_norm_weight, "k_norm_weight", D)
    softcap = None if softcap is None else ck.positive(softcap, "softcap")
    p_drop = ck.probability(p_drop, "p_drop")
    training = ck.flag(training, "training")
    causal = ck.flag(causal, "causal")
    scale = 1.0 / math.sqrt(D) if scale is None else ck.positive(scale, "scale")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer >= 1 or None; got {window!r}")
        if not causal:
            raise ValueError("window (a sliding window) needs causal=True")
    if training and p_drop > 0.0:
        ck.generator(rng)
    return q, k, v, softcap, p_drop, training, causal, scale, window


def _check_nonempty(q: Array, k: Array, v: Array) -> None:
    """T = 0 (or any empty axis): no position to attend from or to."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        if np.ndim(a) == 4 and 0 in np.shape(a):
            raise ValueError(f"{name} must have B, heads, T and D >= 1 (attention over an empty "
                             f"sequence is undefined); got shape {np.shape(a)}")


def _normed_rotated(q: Array, k: Array, q_norm_weight: Array | None,
                    k_norm_weight: Array | None, qk_norm: str, qk_norm_eps: float,
                    rope: tuple[Array, Array] | None) -> tuple[Array, Array, Any, Any, Any]:
    """q and k (B, H, T, D) after the QK-norm, then RoPE: (q, k, q_norm, k_norm, rope_caches)."""
    q_norm = k_norm = rope_caches = None
    if qk_norm != "none":  # check_args refused a missing gain
        q, q_norm = qk_norm_forward(q, q_norm_weight,  # type: ignore[arg-type]
                                    norm=qk_norm, eps=qk_norm_eps)  # (B, H, T, D)
        k, k_norm = qk_norm_forward(k, k_norm_weight,  # type: ignore[arg-type]
                                    norm=qk_norm, eps=qk_norm_eps)
    if rope is not None:
        q, rq = rope_forward(q, *rope)
        k, rk = rope_forward(k, *rope)
        rope_caches = (rq, rk)
    return q, k, q_norm, k_norm, rope_caches


def _logits(q: Array, k: Array, scale: Any, softcap: float | None, mask: Array | None,
            per_head: bool = False, members: int | None = None
            ) -> tuple[Array, Any, Array | None, Array | None]:
    """The scaled, masked and (optionally) soft-capped logits (B, H, T, T), their largest value
    before the cap (with ``members``, an array: each member's, the batch being ``members``
    equal blocks), the cap's tanh (saved for the backward) and, with ``per_head``, each head's
    largest value before the cap (H,) (None without)."""
    s = _scores(q, k)  # (B, H, T, T)
    s *= scale
    if mask is not None:
        s += mask
    # over the kept positions: the masked ones are -inf
    max_logit = float(s.max()) if members is None else s.reshape(members, -1).max(axis=1)
    head_max = s.max(axis=(0, 2, 3)) if per_head else None  # (H,)
    tanh = None
    if softcap is not None:
        tanh = np.tanh(s / s.dtype.type(softcap))  # -1 where masked
        s = s.dtype.type(softcap) * tanh
        if mask is not None:
            s += mask  # the mask after the cap, as Gemma 2
    return s, max_logit, tanh, head_max


def attention_forward(
    q: Array,
    k: Array,
    v: Array,
    q_norm_weight: Array | None = None,
    k_norm_weight: Array | None = None,
    *,
    qk_norm: str = "none",
    qk_norm_eps: float = 1e-6,
    rope: tuple[Array, Array] | None = None,
    softcap: float | None = None,
    p_drop: float = 0.0,
    training: bool = False,
    rng: np.random.Generator | None = None,
    causal: bool = True,
    scale: float | None = None,
    window: int | None = None,
    head_stats: bool = False,
    sigmoid_bias: float | None = None,
) -> tuple[Array, AttentionCache]:
    """Scaled dot-product attention; optional QK-norm, RoPE, soft-cap, dropout, GQA, a window.

    Args:
        q: (B, H, T, D) float array (views are fine).
        k, v: (B, Hkv, T, D) with Hkv dividing H (Hkv = H: multi-head attention).
        q_norm_weight, k_norm_weight: (D,) gains of the QK-norm; required with ``qk_norm``.
        qk_norm: "none", "rmsnorm" or "layernorm" (gain only, no bias: ViT-22B), or any norm
            of ``normlab.functional.norms`` registered with ``qk=True``.
        qk_norm_eps: > 0, the norm's eps.
        rope: ``(cos, sin)``, each (T, D/2), from ``rope_tables``; None for no rotation.
        softcap: cap > 0 for ``cap * tanh(s / cap)`` on the scaled logits; None for none.
        p_drop: dropout probability on the attention probabilities, in [0, 1).
        training, rng: dropout is applied only in training, drawn from rng (a numpy
            Generator, required then).
        causal: position t sees positions <= t only; False: every position sees every other.
        scale: > 0, the factor on q.k; None for 1 / sqrt(D).
        window: W >= 1, position t sees positions t - W + 1 .. t (causal only); None for all.
        head_stats: also record each head's largest logit and mean row entropy (cache.heads).
        sigmoid_bias: b for sigmoid attention, p = sigmoid(s + b) (the rows then do not sum to
            1: the entropy of ``head_stats`` is that of the unnormalized rows); None: softmax.

    Returns:
        out: (B, H, T, D) in q's dtype; cache for ``attention_backward``.
    """
    out, cache, _ = _forward(q, k, v, q_norm_weight, k_norm_weight, qk_norm, qk_norm_eps, rope,
                             softcap, p_drop, training, rng, causal, scale, window, head_stats,
                             sigmoid_bias=sigmoid_bias)
    return out, cache


def attention_forward_members(
    members: int,
    q: Array,
    k: Array,
    v: Array,
    *,
    rope: tuple[Array, Array] | None = None,
    softcap: float | None = None,
    causal: bool = True,
    scale: float | None = None,
    window: int | None = None,
    sigmoid_bias: float | None = None,
) -> tuple[Array, AttentionCache, Array]:
    """An ensemble's attention: the batches of M = ``members`` members one after another along
    the batch axis (q (M B, H, T, D), k and v (M B, Hkv, T, D)), any QK-norm already applied
    (``qk_norm_members_forward``: each member has its own gains) and no dropout (each member
    draws its own masks). Returns ``(out, cache, max_logits)``: out and cache those of
    ``attention_forward`` over all the sequences, whose every step computes each sequence on
    its own, so that each member's rows are those of its own call, bit for bit; max_logits (M,)
    each member's ``max_logit``. ``attention_backward`` takes the cache."""
    ck.integer(members, "members", lo=1)
    if np.ndim(q) != 4 or np.shape(q)[0] % members:
        raise ValueError(f"q must have shape (M B, H, T, D) with M = members = {members} "
                         f"dividing its first axis; got {np.shape(q)}")
    return _forward(q, k, v, None, None, "none", 1e-6, rope, softcap, 0.0, False, None, causal,
                    scale, window, False, members, sigmoid_bias=sigmoid_bias)


def _forward(q, k, v, q_norm_weight, k_norm_weight, qk_norm, qk_norm_eps, rope, softcap, p_drop,
             training, rng, causal, scale, window, head_stats, members=None, *,
             sigmoid_bias=None):
    """``attention_forward``'s lines: ``(out, cache, max_logits)``, max_logits None without
    ``members`` (see ``attention_forward_members``)."""
    _check_nonempty(q, k, v)
    if sigmoid_bias is not None:
        sigmoid_bias = ck.real(sigmoid_bias, "sigmoid_bias")
    q, k, v, softcap, p_drop, training, causal, scale, window = check_args(
        q, k, v, q_norm_weight, k_norm_weight, qk_norm, softcap, p_drop, training, rng, causal,
        scale, window)
    T, dtypes, ct = q.shape[2], (q.dtype, k.dtype, v.dtype), ck.compute_dtype(q.dtype)
    q, k, v = (a.astype(ct, copy=False) for a in (q, k, v))
    q, k, q_norm, k_norm, rope_caches = _normed_rotated(q, k, q_norm_weight, k_norm_weight,
                                                       qk_norm, qk_norm_eps, rope)
    mask = causal_mask(T, ct, window) if causal else None  # (T, T) -inf above the diagonal
    s, max_logit, tanh, head_max = _logits(q, k, ct.type(scale), softcap, mask,
                                           ck.flag(head_stats, "head_stats"),
                                           members)  # (B, H, T, T)
    maxes = None
    if members is not None:
        maxes, max_logit = max_logit, float(max_logit.max())
    p, sm_cache = _probabilities(s, sigmoid_bias)  # (B, H, T, T)
    heads = None if head_max is None else HeadStats(head_max, row_entropy(sm_cache.p))
    p_used, drop = (dropout_forward(p, p_drop, training=True, rng=rng)
                    if training and p_drop > 0.0 else (p, None))
    out = _mix(p_used, v)  # (B, H, T, D)
    cache = AttentionCache(q, k, v, sm_cache, p_used, drop, tanh, softcap, scale, q_norm, k_norm,
                           qk_norm, rope_caches, dtypes, max_logit, heads, sigmoid_bias)
    return ck.out_cast(out, dtypes[0]), cache, maxes


def _probabilities(s: Array, sigmoid_bias: float | None) -> tuple[Array, SoftmaxCache]:
    """p (B, H, T, T) from the masked logits s: softmax over the keys, or sigmoid(s + b) per key
    with ``sigmoid_bias`` b (a masked key, s = -inf, gets 0), with the cache that holds p."""
    if sigmoid_bias is None:
        return softmax_forward(s, axis=-1)
    p = _sigmoid(s + s.dtype.type(sigmoid_bias))
    return p, SoftmaxCache(p, s.ndim - 1, s.dtype)


def attention_backward(
    dout: Array, cache: AttentionCache
) -> tuple[Array, Array, Array, Array | None, Array | None]:
    """Gradients of attention: ``(dq, dk, dv, dq_norm_weight, dk_norm_weight)`` (the weight
    gradients None without QK-norm); dq, dk, dv in the inputs' dtypes."""
    ck.cache(cache, AttentionCache, "attention")
    c = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", c.q.shape, "the shape of the forward's output")
    ct = c.v.dtype
    dy = dout.astype(ct, copy=False)  # (B, H, T, D)
    dp, dv = _mix_backward(dy, c.p_used, c.v)  # (B, H, T, T), (B, Hkv, T, D)
    if c.dropout is not None:
        dp = dropout_backward(dp, c.dropout)
    if c.sigmoid_bias is None:
        ds = softmax_backward(dp, c.softmax)  # (B, H, T, T), zero where masked
    else:  # sigmoid attention: p (1 - p) is zero where masked (p = 0)
        p = c.softmax.p
        ds = dp * p * (1.0 - p)
    if c.tanh is not None:
        ds *= 1.0 - c.tanh * c.tanh
    ds *= ct.type(c.scale)
    dq, dk = _scores_backward(ds, c.q, c.k)  # (B, H, T, D), (B, Hkv, T, D)
    if c.rope is not None:
        dq = rope_backward(dq, c.rope[0])[0]
        dk = rope_backward(dk, c.rope[1])[0]
    dwq = dwk = None
    if c.qk_norm != "none":
        dq, dwq = qk_norm_backward(dq, c.q_norm, norm=c.qk_norm)
        dk, dwk = qk_norm_backward(dk, c.k_norm, norm=c.qk_norm)
    q_dt, k_dt, v_dt = c.dtypes
    return ck.out_cast(dq, q_dt), ck.out_cast(dk, k_dt), ck.out_cast(dv, v_dt), dwq, dwk
