"""Multi-head self-attention (causal by default) as a module: fused QKV projection, the attention op
(optional QK-norm, RoPE, soft-cap, dropout on the probabilities, grouped key/value heads, a
sliding window), an optional sigmoid output gate (gated attention) and the output projection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from ..functional.attention import HeadStats
from ..functional.gating import sigmoid_gate_backward, sigmoid_gate_forward
from ..functional.norms import qk_names
from .linear import Linear
from .module import Module
from .numerics import FULL_PRECISION, Numerics


class CausalSelfAttention(Module):
    """``proj(attention(split(qkv(x))))`` over x (B, T, C) with H query heads of width D = C / H
    (or ``head_dim``) and Hkv = ``n_kv_heads`` key/value heads (default H).

    Parameters: ``qkv.weight`` ((H + 2 Hkv) D, C) with the rows of q (H D), k (Hkv D) and v
    (Hkv D) stacked in that order, ``proj.weight`` (C, H D), and with QK-norm the gains ``q_norm``
    and ``k_norm``: (D,) shared by the heads with ``qk_norm_scope="head"`` (Qwen 3), or (H D,) and
    (Hkv D,) over the whole projections, before the heads are split, with ``"all"`` (OLMo 2).
    ``bias`` switches the qkv bias, ``proj_bias`` (default: ``bias``) the output projection's.
    ``scale`` is the factor on q.k (default 1 / sqrt(D)), ``window`` a sliding window. ``rope``
    is a pair of (T_max, D/2) tables or None. ``rng`` draws the initial
    weights, ``dropout_rng`` (default: rng) the dropout masks. ``causal=False`` lets every
    position see every other (an encoder). After a forward, ``max_logit`` holds the largest raw
    attention logit; with ``record_heads`` set (``recording_heads(model)``), ``heads`` holds the
    op's per-head statistics (``normlab.functional.attention.HeadStats``: each head's largest
    logit and mean row entropy), None otherwise.

    ``gate=True`` is gated attention (Qiu et al. 2025, arXiv 2505.06708, its G1 elementwise
    gate; the official code's ``elementwise_attn_output_gate``, qiuzh20/gated_attention
    ``modeling_qwen3.py``): the heads' outputs y (B, T, H D) are multiplied by sigmoid(x W_g)
    before ``proj``, W_g the ``gate.weight`` (H D, C) of a projection of its own (drawn after
    the others; its bias with ``bias``, as the official gate rows share q_proj's), x the
    attention's input (``functional.gating``).

    ``sigmoid_bias=b`` is sigmoid attention (Ramapuram et al. 2025, arXiv 2409.04431): p =
    sigmoid(s + b) per key in place of the softmax (``functional.attention``), always on the
    reference path (the fused kernels compute the softmax only).

    ``ngpt=True`` is the normalized Transformer's attention (nGPT, arXiv 2410.01131 section
    2.3.2; NVIDIA/ngpt ``model.py``, ``Block.forward``): q and k are rotated (RoPE), put on the
    unit sphere per head and multiplied by s_qk (``functional.ngpt.ngpt_qk_forward``), and the
    logits scaled by sqrt(D) (``scale``, unless given). The parameter ``sqk`` (H D,) is stored
    at 1 / sqrt(C) and read times sqrt(C) (the code's ``sqk_init_scaling = base_scale``,
    ``sqk_init_value = 1``: 1 at init); one s_qk for q and k, so n_kv_heads must equal n_heads.
    """

    numerics: Numerics = FULL_PRECISION
    record_heads: bool = False  # ask the attention op for its per-head statistics
    heads: HeadStats | None = None  # the last forward's, when recorded

    def __init__(self, C: int, n_heads: int, *, rng: np.random.Generator,
                 dropout_rng: np.random.Generator | None = None, qk_norm: str = "none",
                 qk_norm_eps: float = 1e-6, softcap: float | None = None, p_drop: float = 0.0,
                 rope: tuple[np.ndarray, np.ndarray] | None = None, bias: bool = False,
                 std: float = 0.02, proj_std: float | None = None, causal: bool = True,
                 dtype: DTypeLike = np.float32, n_kv_heads: int | None = None,
                 head_dim: int | None = None, scale: float | None = None, window: int | None = None,
                 qk_norm_scope: str = "head", proj_bias: bool | None = None,
                 gate: bool = False, sigmoid_bias: float | None = None, ngpt: bool = False):
        super().__init__()
        ck.flag(gate, "gate")
        self.ngpt = ck.flag(ngpt, "ngpt")
        self.sigmoid_bias = None if sigmoid_bias is None else ck.real(sigmoid_bias,
                                                                      "sigmoid_bias")
        for name, value in (("n_heads", n_heads), ("n_kv_heads", n_kv_heads),
                            ("head_dim", head_dim)):
            if value is not None:
                ck.integer(value, name, lo=1)
        if head_dim is None and C % n_heads:
            raise ValueError(f"n_heads ({n_heads}) must divide the width C ({C}) unless "
                             f"head_dim is given")
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")
        ck.choice(qk_norm, "qk_norm", qk_names())
        ck.choice(qk_norm_scope, "qk_norm_scope", ("head", "all"))
        self.n_heads, self.n_kv_heads = int(n_heads), int(n_kv_heads)
        self.head_dim = C // n_heads if head_dim is None else int(head_dim)
        self.scale = None if scale is None else ck.positive(scale, "scale")
        if ngpt:
            if qk_norm != "none" or self.n_kv_heads != self.n_heads:
                raise ValueError("ngpt attention normalizes q and k itself (qk_norm must be "
                                 "'none') and scales both by one s_qk (n_kv_heads = n_heads)")
            self.scale = self.head_dim ** 0.5 if scale is None else self.scale
        self.window = window
        self.qk_norm_scope = qk_norm_scope
        self.qk_norm, self.qk_norm_eps = qk_norm, ck.positive(qk_norm_eps, "qk_norm_eps")
        self.softcap = None if softcap is None else ck.positive(softcap, "softcap")
        self.p_drop = ck.probability(p_drop, "p_drop")
        self.rng = ck.generator(rng if dropout_rng is None else dropout_rng)  # for dropout
        self.rope = rope
        self.causal = ck.flag(causal, "causal")
        HD, KD = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        self.qkv = Linear(C, HD + 2 * KD, bias=bias, rng=rng, std=std, dtype=dtype)
        self.proj = Linear(HD, C, bias=bias if proj_bias is None else proj_bias, rng=rng,
                           std=std if proj_std is None else proj_std, dtype=dtype)
        if qk_norm != "none":
            whole = qk_norm_scope == "all"
            self.add_param("q_norm", np.ones(HD if whole else self.head_dim, dtype))
            self.add_param("k_norm", np.ones(KD if whole else self.head_dim, dtype))
        if ngpt:  # nGPT's s_qk, stored at 1 / sqrt(C) and read times sqrt(C)
            self.sqk_scale = float(np.sqrt(C))
            self.add_param("sqk", np.full(HD, 1.0 / self.sqk_scale, dtype))
        self.gated = bool(gate)
        if gate:  # after every other draw: a model without the gate draws what it drew before
            self.gate = Linear(C, HD, bias=bias, rng=rng, std=std, dtype=dtype)
        self._gate_cache: Any = None  # the sigmoid gate's cache (gated attention)
        self.max_logit = float("nan")
        # qk_norm_scope "all": the norm caches of q and k
        self._qk_caches: tuple[Any, Any] | None = None

    def forget(self) -> None:
        super().forget()
        self._qk_caches = self._gate_cache = None  # QK-norm's and the output gate's caches

    @property
    def value_rows(self) -> slice:
        """The rows of ``qkv.weight`` that make v."""
        return slice((self.n_heads + self.n_kv_heads) * self.head_dim, None)

    def _split(self, qkv: np.ndarray, q_norm: Any = None,
               k_norm: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(B, T, (H + 2 Hkv) D) -> q (B, H, T, D), k and v (B, Hkv, T, D), with the QK-norm
        over the whole projections (gains ``q_norm``, ``k_norm``) applied first (scope
        "all")."""
        B, T, _ = qkv.shape
        H, K, D = self.n_heads, self.n_kv_heads, self.head_dim
        q, k, v = qkv[..., : H * D], qkv[..., H * D : (H + K) * D], qkv[..., (H + K) * D :]
        if self.qk_norm != "none" and self.qk_norm_scope == "all":
            norm = self.op("qk_norm_forward")
            q, cq = norm(q, q_norm, norm=self.qk_norm, eps=self.qk_norm_eps)
            k, ck_ = norm(k, k_norm, norm=self.qk_norm, eps=self.qk_norm_eps)
            self._qk_caches = (cq, ck_)
        heads = lambda a, n: a.reshape(B, T, n, D).transpose(0, 2, 1, 3)  # noqa: E731
        return heads(q, H), heads(k, K), heads(v, K)

    def _merge(self, dq: np.ndarray, dk: np.ndarray, dv: np.ndarray, qk_caches: Any = None
               ) -> tuple[np.ndarray, Any, Any]:
        """The inverse of ``_split`` for gradients: (B, T, (H + 2 Hkv) D), and the gradients of
        the whole-projection QK-norm gains (None otherwise)."""
        B, _, T, _D = dq.shape
        flat = lambda a: a.transpose(0, 2, 1, 3).reshape(B, T, -1)  # noqa: E731
        dq, dk, dv = flat(dq), flat(dk), flat(dv)  # (B, T, H D), (B, T, Hkv D) x 2
        dwq = dwk = None
        if self.qk_norm != "none" and self.qk_norm_scope == "all":
            cq, ck_ = qk_caches
            norm_backward = self.op("qk_norm_backward")
            dq, dwq = norm_backward(dq, cq, norm=self.qk_norm)
            dk, dwk = norm_backward(dk, ck_, norm=self.qk_norm)
        return np.concatenate([dq, dk, dv.astype(dq.dtype, copy=False)], axis=-1), dwq, dwk

    def _core(self, qkv: np.ndarray, member: int | None = None) -> tuple[np.ndarray, Any, Any]:
        """qkv (B, T, (H + 2 Hkv) D) -> the heads' outputs (B, H, T, D), the op's cache and the
        whole-projection QK-norm caches (None without); with ``member``, an ensemble member's
        gains and dropout generator."""
        T = qkv.shape[1]
        pick = (lambda a: a) if member is None else (lambda a: None if a is None else a[member])
        q_norm, k_norm = pick(self.params.get("q_norm")), pick(self.params.get("k_norm"))
        rng = self.rng if member is None else self.member_rngs[member]
        self._qk_caches = None
        q, k, v = self._split(qkv, q_norm, k_norm)  # (B, H, T, D), (B, Hkv, T, D) x 2
        per_head = self.qk_norm if self.qk_norm_scope == "head" else "none"
        rope = None if self.rope is None else (self.rope[0][:T], self.rope[1][:T])
        if self.ngpt:  # RoPE, the unit sphere and s_qk here; the op gets neither
            sqk = self.params["sqk"] if member is None else self.params["sqk"][member]
            q, k, self._qk_caches = self._ngpt_qk(q, k, rope, sqk)
            rope = None
        forward, extra = self._attention_op("forward")
        y, cache = forward(
            q, k, v, q_norm if per_head != "none" else None,
            k_norm if per_head != "none" else None, qk_norm=per_head,
            qk_norm_eps=self.qk_norm_eps, rope=rope, softcap=self.softcap, p_drop=self.p_drop,
            training=self.training, rng=rng, causal=self.causal, scale=self.scale,
            window=self.window, head_stats=self.record_heads, **extra,
        )  # (B, H, T, D)
        return y, cache, self._qk_caches

    def _ngpt_qk(self, q: np.ndarray, k: np.ndarray, rope: Any, sqk: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, Any]:
        """nGPT's q and k (B, H, T, D): s_qk * Norm(RoPE(.)), s_qk = sqk * sqrt(C) as (H, D);
        and the two caches."""
        from ..functional.ngpt import ngpt_qk_forward

        s = (sqk * sqk.dtype.type(self.sqk_scale)).reshape(self.n_heads, self.head_dim)
        q, cq = ngpt_qk_forward(q, s, rope=rope)
        k, ck_ = ngpt_qk_forward(k, s, rope=rope)
        return q, k, (cq, ck_)

    def _attention_op(self, which: str) -> tuple[Any, dict[str, Any]]:
        """The attention op (``which``: "forward" or "backward") and its extra options: the
        module's choice of implementation, or with sigmoid attention the reference with its
        ``sigmoid_bias``."""
        if self.sigmoid_bias is None:
            return self.op(f"attention_{which}"), {}
        from ..functional import attention as reference

        op = getattr(reference, f"attention_{which}")
        return op, ({"sigmoid_bias": self.sigmoid_bias} if which == "forward" else {})

    def _core_backward(self, dy: np.ndarray, saved: Any) -> tuple[np.ndarray, Any, Any]:
        """The inverse of ``_core``: d qkv (B, T, (H + 2 Hkv) D) and the QK-norm gains'
        gradients (None without QK-norm)."""
        cache, qk_caches = saved
        dqkv = self._fused_backward(dy, cache)
        if dqkv is not None:
            return dqkv, None, None
        dq, dk, dv, dq_norm, dk_norm = self._attention_op("backward")[0](dy, cache)
        if self.ngpt:  # d q, d k through s_qk * Norm(RoPE(.)); d sqk = (ds_q + ds_k) sqrt(C)
            from ..functional.ngpt import ngpt_qk_backward

            (dq, dsq), (dk, dsk) = (ngpt_qk_backward(dq, qk_caches[0]),
                                    ngpt_qk_backward(dk, qk_caches[1]))
            dsqk = ((dsq + dsk) * dsq.dtype.type(self.sqk_scale)).reshape(-1)
            return self._merge(dq, dk, dv)[0], dsqk, None
        dqkv, dwq, dwk = self._merge(dq, dk, dv, qk_caches)
        if self.qk_norm_scope == "all":
            dq_norm, dk_norm = dwq, dwk
        return dqkv, dq_norm, dk_norm

    def _fused_backward(self, dy: np.ndarray, cache: Any) -> np.ndarray | None:
        """d qkv (B, T, (H + 2 Hkv) D) from the fused kernel writing dq, dk and dv straight into
        their columns (``_split``'s views: nothing to merge); None where the fused path does not
        cover the cache (QK-norm, RoPE, dropout, the reference implementation)."""
        if (self.impl != "kernel" or self.qk_norm != "none" or self.sigmoid_bias is not None
                or self.ngpt):
            return None
        from ..kernels.attention import attention_backward_into

        B, _H, T, _D = dy.shape
        dqkv = np.empty((B, T, self.qkv.params["weight"].shape[-2]), cache.v.dtype)
        return dqkv if attention_backward_into(dy, cache, *self._split(dqkv)) else None

    def forward(self, x: np.ndarray) -> np.ndarray:
        if self.members:
            return self._members_forward(x)
        B, T, _C = x.shape
        H, D = self.n_heads, self.head_dim
        y, self._cache, self._qk_caches = self._core(self.qkv(x))  # (B, H, T, D)
        self.max_logit, self.heads = self._cache.max_logit, self._cache.heads
        y = self.numerics.output(y, "attention").transpose(0, 2, 1, 3).reshape(B, T, H * D)
        return self.proj(self._gate_forward(x, y))

    def _gate_forward(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """y (..., T, H D) times sigmoid(gate(x)) with the gate on, else y itself."""
        if not self.gated:
            return y
        out, self._gate_cache = sigmoid_gate_forward(y, self.gate(x))
        return out

    def _gate_backward(self, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The inverse of ``_gate_forward``: d y, and the gate projection's dx (None without)."""
        if not self.gated:
            return dy, None
        dy, dg = sigmoid_gate_backward(dy, self._gate_cache)
        self._gate_cache = None
        return dy, self.gate.backward(dg)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if self.members:
            return self._members_backward(dout)
        B, T, _C = dout.shape
        H, D = self.n_heads, self.head_dim
        dy, dx_gate = self._gate_backward(self.proj.backward(dout))  # (B, T, H D)
        dy = dy.reshape(B, T, H, D).transpose(0, 2, 1, 3)  # (B, H, T, D)
        dqkv, dq_norm, dk_norm = self._core_backward(dy, (self._last_cache(), self._qk_caches))
        self._qk_caches = None
        if self.qk_norm != "none":
            self.accumulate("q_norm", dq_norm)
            self.accumulate("k_norm", dk_norm)
        if self.ngpt:
            self.accumulate("sqk", dq_norm)  # _core_backward's s_qk gradient
        dx = self.qkv.backward(dqkv)  # (B, T, C)
        return dx if dx_gate is None else dx + dx_gate

    # ---- an ensemble's members (``members`` = M, x (M, B, T, C)) ------------------------------
    member_rngs: tuple[np.random.Generator, ...] = ()  # member m's dropout generator
    member_max_logit: tuple[float, ...] = ()  # after a forward: each member's max_logit

    def _members_forward(self, x: np.ndarray) -> np.ndarray:
        """The members' attention: the projections batched over the members, the attention op
        once over the M B sequences where each member's rows are then computed as its own call
        computes them (``_stacked``), else member by member."""
        M, B, T, _C = x.shape
        H, D = self.n_heads, self.head_dim
        qkv = self.qkv(x).reshape(M * B, T, -1)  # (M B, T, (H + 2 Hkv) D)
        stacked = self._stacked(M, qkv)
        if stacked is not None:
            y, self._cache, maxes = stacked  # (M B, H, T, D)
            self.member_max_logit = tuple(float(m) for m in maxes)
        else:
            parts = [self._core(qkv[m * B:(m + 1) * B], m) for m in range(M)]
            y = np.concatenate([p[0] for p in parts])  # (M B, H, T, D)
            self._cache = ("members", [(p[1], p[2]) for p in parts])
            self.member_max_logit = tuple(p[1].max_logit for p in parts)
        self.max_logit, self.heads = float(np.max(self.member_max_logit)), None
        y = self.numerics.output(y.reshape(M, B, H, T, D), "attention")
        return self.proj(self._gate_forward(x, y.transpose(0, 1, 3, 2, 4).reshape(M, B, T, H * D)))

    def _stacked(self, M: int, qkv: np.ndarray) -> tuple[np.ndarray, Any, Any] | None:
        """The M members' attention in one call over qkv (M B, T, (H + 2 Hkv) D): ``(y, cache,
        max_logits)``, y (M B, H, T, D); the path a member's own call takes (the fused op where
        ``kernels.attention`` computes it, else the reference), its QK-norm with each member's
        gains. None where that cannot be done at once: dropout in training (each member draws
        its own masks), a QK-norm ``qk_norm_members_forward`` does not know, another dtype."""
        from ..functional.attention import attention_forward_members

        qk_norm_members_forward = self.op("qk_norm_members_forward")
        if ((self.training and self.p_drop > 0.0) or qkv.dtype not in (np.float32, np.float64)
                or self.ngpt):  # nGPT's q and k: member by member
            return None
        H, K, D = self.n_heads, self.n_kv_heads, self.head_dim
        T = qkv.shape[1]
        q, k, v = qkv[..., : H * D], qkv[..., H * D : (H + K) * D], qkv[..., (H + K) * D :]
        norms: list[Any] = []

        def normed(a: np.ndarray, gains: str) -> np.ndarray | None:
            got = qk_norm_members_forward(a, self.params[gains], norm=self.qk_norm,
                                          eps=self.qk_norm_eps)
            if got is not None:
                norms.append(got[1])
                return got[0]
            return None

        heads = lambda a, n: a.reshape(a.shape[0], T, n, D).transpose(0, 2, 1, 3)  # noqa: E731
        if self.qk_norm != "none" and self.qk_norm_scope == "all":
            q, k = normed(q, "q_norm"), normed(k, "k_norm")  # type: ignore[assignment]
            if q is None or k is None:
                return None
        q, k, v = heads(q, H), heads(k, K), heads(v, K)
        per_head = self.qk_norm != "none" and self.qk_norm_scope == "head"
        if per_head:
            q, k = normed(q, "q_norm"), normed(k, "k_norm")  # type: ignore[assignment]
            if q is None or k is None:
                return None
        options: dict[str, Any] = dict(softcap=self.softcap, causal=self.causal,
                                       scale=self.scale, window=self.window)
        got = None
        if self.impl == "kernel" and not per_head and self.sigmoid_bias is None:
            from ..kernels.attention import attention_forward_members as fused

            rows = np.empty((q.shape[0], T, H, D), qkv.dtype)  # as proj reads the heads' outputs
            got = fused(M, q, k, v, out=rows.transpose(0, 2, 1, 3), rope=self.rope, p_drop=0.0,
                        training=False, rng=None, **options)
        how = "fused" if got is not None else "stacked"
        if got is None:
            rope = None if self.rope is None else (self.rope[0][:T], self.rope[1][:T])
            got = attention_forward_members(M, q, k, v, rope=rope,
                                            sigmoid_bias=self.sigmoid_bias, **options)
        y, cache, maxes = got
        return y, (how, (cache, norms)), maxes

    def _members_backward(self, dout: np.ndarray) -> np.ndarray:
        M, B, T, _C = dout.shape
        H, D = self.n_heads, self.head_dim
        dy, dx_gate = self._gate_backward(self.proj.backward(dout))  # (M, B, T, H D)
        dy = dy.reshape(M * B, T, H, D).transpose(0, 2, 1, 3)
        dx = self._members_core_backward(dy, M, B, T)  # (M, B, T, C)
        return dx if dx_gate is None else dx + dx_gate

    def _members_core_backward(self, dy: np.ndarray, M: int, B: int, T: int) -> np.ndarray:
        """The members' backward from the heads' outputs' gradient dy (M B, H, T, D) to dx
        (M, B, T, C) through the attention op and the qkv projection."""
        from ..functional.attention import attention_backward

        qk_norm_members_backward = self.op("qk_norm_members_backward")
        how, saved = self._last_cache()
        if how == "members":
            parts = [self._core_backward(dy[m * B:(m + 1) * B], s) for m, s in enumerate(saved)]
            dqkv = np.concatenate([p[0] for p in parts])
            if self.qk_norm != "none":
                self.accumulate("q_norm", np.stack([p[1] for p in parts]))
                self.accumulate("k_norm", np.stack([p[2] for p in parts]))
            if self.ngpt:
                self.accumulate("sqk", np.stack([p[1] for p in parts]))
            return self.qkv.backward(dqkv.reshape(M, B, T, -1))  # (M, B, T, C)
        cache, norms = saved
        if not norms:  # as each member's call: its backward, straight into d qkv's columns
            dqkv = self._core_backward(dy, (cache, None))[0]
            return self.qkv.backward(dqkv.reshape(M, B, T, -1))
        per_head = self.qk_norm_scope == "head"
        # as each member's call: a per-head QK-norm's cache takes the reference, the others
        # the backward of the op's choice (the fused one where it computed the forward)
        dq, dk, dv = (attention_backward if per_head
                      else self._attention_op("backward")[0])(dy, cache)[:3]
        flat = lambda a: a.transpose(0, 2, 1, 3).reshape(M * B, T, -1)  # noqa: E731
        if per_head:
            (dq, dwq), (dk, dwk) = (qk_norm_members_backward(dq, norms[0]),
                                    qk_norm_members_backward(dk, norms[1]))
        dq, dk, dv = flat(dq), flat(dk), flat(dv)
        if not per_head:  # over the whole projections
            (dq, dwq), (dk, dwk) = (qk_norm_members_backward(dq, norms[0]),
                                    qk_norm_members_backward(dk, norms[1]))
        self.accumulate("q_norm", dwq)
        self.accumulate("k_norm", dwk)
        dqkv = np.concatenate([dq, dk, dv.astype(dq.dtype, copy=False)], axis=-1)
        return self.qkv.backward(dqkv.reshape(M, B, T, -1))  # (M, B, T, C)


@contextmanager
def recording_heads(model: Module) -> Iterator[list[CausalSelfAttention]]:
    """Every ``CausalSelfAttention`` of ``model`` (in ``model.modules()`` order, yielded) records
    its per-head statistics (``heads``) in the forwards inside the ``with`` block; each then
    records as it did before, also when the block raises. An ensemble's stacked attention
    records none."""
    attentions = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    before = [a.record_heads for a in attentions]
    for a in attentions:
        a.record_heads = True
    try:
        yield attentions
    finally:
        for a, was in zip(attentions, before):
            a.record_heads = was
