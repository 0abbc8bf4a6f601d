"""Multi-head self-attention (causal by default) as a module: fused QKV projection, the attention op
(optional QK-norm, RoPE, soft-cap, dropout on the probabilities) and the output projection."""

from __future__ import annotations

import numpy as np

from .. import _checks as ck
from ..functional import attention_backward, attention_forward
from ..functional.attention import QK_NORMS
from .linear import Linear
from .module import Module
from .numerics import FULL_PRECISION, Numerics


class CausalSelfAttention(Module):
    """``proj(attention(split(qkv(x))))`` over x (B, T, C) with H heads of width D = C / H.

    Parameters: ``qkv.weight`` (3C, C) with the rows of q, k and v stacked in that order,
    ``proj.weight`` (C, C), and with QK-norm the gains ``q_norm`` and ``k_norm`` (D,), shared by
    the heads. ``rope`` is a pair of (T_max, D/2) tables or None. ``rng`` draws the initial
    weights, ``dropout_rng`` (default: rng) the dropout masks. ``causal=False`` lets every
    position see every other (an encoder). After a forward, ``max_logit`` holds the largest raw
    attention logit.
    """

    numerics: Numerics = FULL_PRECISION

    def __init__(self, C: int, n_heads: int, *, rng: np.random.Generator,
                 dropout_rng: np.random.Generator | None = None, qk_norm: str = "none",
                 qk_norm_eps: float = 1e-6, softcap: float | None = None, p_drop: float = 0.0,
                 rope: tuple[np.ndarray, np.ndarray] | None = None, bias: bool = False,
                 std: float = 0.02, proj_std: float | None = None, causal: bool = True,
                 dtype=np.float32):
        super().__init__()
        if isinstance(n_heads, bool) or not isinstance(n_heads, (int, np.integer)) or n_heads < 1:
            raise ValueError(f"n_heads must be an integer >= 1; got {n_heads!r}")
        if C % n_heads:
            raise ValueError(f"n_heads ({n_heads}) must divide the width C ({C})")
        ck.choice(qk_norm, "qk_norm", QK_NORMS)
        self.n_heads, self.head_dim = int(n_heads), C // n_heads
        self.qk_norm, self.qk_norm_eps = qk_norm, ck.positive(qk_norm_eps, "qk_norm_eps")
        self.softcap = None if softcap is None else ck.positive(softcap, "softcap")
        self.p_drop = ck.probability(p_drop, "p_drop")
        self.rng = ck.generator(rng if dropout_rng is None else dropout_rng)  # for dropout
        self.rope = rope
        self.causal = ck.flag(causal, "causal")
        self.qkv = Linear(C, 3 * C, bias=bias, rng=rng, std=std, dtype=dtype)
        self.proj = Linear(C, C, bias=bias, rng=rng, std=std if proj_std is None else proj_std,
                           dtype=dtype)
        if qk_norm != "none":
            self.add_param("q_norm", np.ones(self.head_dim, dtype))
            self.add_param("k_norm", np.ones(self.head_dim, dtype))
        self.max_logit = float("nan")

    def forward(self, x: np.ndarray) -> np.ndarray:
        B, T, C = x.shape
        H, D = self.n_heads, self.head_dim
        n = self.numerics
        qkv = self.qkv(x).reshape(B, T, 3, H, D)  # (B, T, 3, H, D)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (B, H, T, D) views
        rope = None if self.rope is None else (self.rope[0][:T], self.rope[1][:T])
        y, self._cache = attention_forward(
            q, k, v, self.params.get("q_norm"), self.params.get("k_norm"), qk_norm=self.qk_norm,
            qk_norm_eps=self.qk_norm_eps, rope=rope, softcap=self.softcap, p_drop=self.p_drop,
            training=self.training, rng=self.rng, causal=self.causal,
        )  # (B, H, T, D)
        self.max_logit = self._cache.max_logit
        y = n.output(y, "attention").transpose(0, 2, 1, 3).reshape(B, T, C)  # (B, T, C)
        return self.proj(y)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        B, T, C = dout.shape
        H, D = self.n_heads, self.head_dim
        dy = self.proj.backward(dout).reshape(B, T, H, D).transpose(0, 2, 1, 3)  # (B, H, T, D)
        dq, dk, dv, dq_norm, dk_norm = attention_backward(dy, self._last_cache())
        if self.qk_norm != "none":
            self.accumulate("q_norm", dq_norm)
            self.accumulate("k_norm", dk_norm)
        dqkv = np.empty((B, T, 3, H, D), dq.dtype)  # (B, T, 3, H, D)
        for i, d in enumerate((dq, dk, dv)):
            dqkv[:, :, i] = d.transpose(0, 2, 1, 3)
        return self.qkv.backward(dqkv.reshape(B, T, 3 * C))
