"""Transformer blocks with every norm placement.

A block is two residual sublayers, attention then MLP. ``Residual`` wraps one sublayer F with its
norm(s) N and its dropout; each placement's forward is one line, and its backward is the same
line read in reverse (the skip path's gradient added where the paths join):

    post      x = N(x + F(x))                 Vaswani et al. 2017
    pre       x = x + F(N(x))                 (a final norm before the head)
    sandwich  x = x + N_out(F(N_in(x)))       Peri-LN; Gemma 2 (a final norm before the head)
    deepnorm  x = N(alpha x + F(x))           Wang et al. 2022: alpha = (2L)^(1/4), and the MLP,
                                              value and output projections initialized times
                                              beta = (8L)^(-1/4) (decoder-only constants)
    rezero    x = x + a F(x)                  Bachlechner et al. 2020: a learned scalar, a = 0 at init
    none      x = x + F(x)
    branch    x = x + N(F(x))                 OLMo 2: the norm on the branch output (a final norm)

Dropout (p_drop) acts on F's output, inside the residual add.
"""

from __future__ import annotations

import numpy as np

from ..nn import MLP, CausalSelfAttention, Dropout, DyT, Identity, LayerNorm, Module, RMSNorm
from ..nn.numerics import FULL_PRECISION, Numerics
from .config import GPTConfig


def deepnorm_alpha(n_layers: int) -> float:
    """DeepNorm's residual weight for a decoder-only stack of L blocks: (2L)^(1/4)."""
    return (2.0 * n_layers) ** 0.25


def deepnorm_beta(n_layers: int) -> float:
    """DeepNorm's init gain for the MLP, value and output projections: (8L)^(-1/4)."""
    return (8.0 * n_layers) ** -0.25


def make_norm(kind: str, C: int, *, eps: float, bias: bool, dtype,
              dyt_alpha: float = 0.5, offset: float = 0.0) -> Module:
    """A norm module over the last axis: LayerNorm, RMSNorm (gain ``offset + w``), DyT (initial
    alpha ``dyt_alpha``), or the identity for 'none'."""
    if kind == "layernorm":
        return LayerNorm(C, eps, bias=bias, dtype=dtype)
    if kind == "rmsnorm":
        return RMSNorm(C, eps, offset=offset, dtype=dtype)
    if kind == "dyt":
        return DyT(C, dyt_alpha, dtype=dtype)
    if kind == "none":
        return Identity()
    raise ValueError(f"norm must be one of layernorm, rmsnorm, dyt, none; got {kind!r}")


def init_stds(cfg: GPTConfig) -> dict[str, float]:
    """The std of every weight's normal init under ``cfg.init``: ``table`` (token and position
    embeddings), ``head``, ``qkv``, ``attn_out`` (the attention's output projection), ``mlp_in``
    and ``mlp_out``. DeepNorm's beta multiplies the MLP and the output projection (and, in
    ``Block``, the value rows) in both schemes.

        gpt2    all init_std; attn_out, mlp_out times 1/sqrt(2L) (DeepNorm: beta instead)
        fan_in  1/sqrt(fan_in): qkv, mlp_in and head 1/sqrt(C), attn_out 1/sqrt(H D),
                mlp_out 1/sqrt(d_ff); tables 1/sqrt(C) (Wortsman et al. 2023, NanoDO)
    """
    deep = cfg.placement == "deepnorm"
    beta = deepnorm_beta(cfg.n_layers) if deep else 1.0
    if cfg.init == "fan_in":
        C = cfg.d_model
        return {"table": C**-0.5, "head": C**-0.5, "qkv": C**-0.5,
                "attn_out": (cfg.n_heads * cfg.head_dim) ** -0.5 * beta,
                "mlp_in": C**-0.5 * beta, "mlp_out": cfg.hidden**-0.5 * beta}
    s = cfg.init_std
    out = s * (beta if deep else (2.0 * cfg.n_layers) ** -0.5)
    return {"table": s, "head": s, "qkv": s, "attn_out": out, "mlp_in": s * beta, "mlp_out": out}


class Residual(Module):
    """One sublayer ``branch`` in a residual connection with the norm ``placement``.

    Children: ``branch`` (F), ``norm`` (N; N_in for sandwich), ``norm_out`` (sandwich only) and
    ``drop``; the learned scalar ``resweight`` (shape (), ReZero's a) for rezero.
    ``numerics.stream`` rounds the output and, in the backward, the incoming gradient (the
    identity at full precision).
    """

    numerics: Numerics = FULL_PRECISION

    def __init__(self, branch: Module, placement: str, norm: str, C: int, *, n_layers: int,
                 eps: float, bias: bool, p_drop: float, rng: np.random.Generator, dtype,
                 dyt_alpha: float = 0.5, norm_offset: float = 0.0):
        super().__init__()
        self.placement = placement
        self.branch = branch
        make = lambda: make_norm(norm, C, eps=eps, bias=bias, dtype=dtype,  # noqa: E731
                                 dyt_alpha=dyt_alpha, offset=norm_offset)
        self.norm = (make() if placement in ("post", "pre", "sandwich", "deepnorm", "branch")
                     else Identity())
        self.norm_out = make() if placement == "sandwich" else Identity()
        self.drop = Dropout(p_drop, rng=rng) if p_drop > 0 else Identity()
        self.alpha = deepnorm_alpha(n_layers) if placement == "deepnorm" else 1.0
        if placement == "rezero":
            self.add_param("resweight", np.zeros((), dtype))
        self._f: np.ndarray | None = None  # rezero: F(x) after dropout, for d resweight

    def forget(self) -> None:
        super().forget()
        self._f = None  # rezero's F(x)

    def forward(self, x: np.ndarray) -> np.ndarray:
        F, N, N_out, D = self.branch, self.norm, self.norm_out, self.drop
        p = self.placement
        if p == "post":
            y = N(x + D(F(x)))
        elif p == "pre":
            y = x + D(F(N(x)))
        elif p == "sandwich":
            y = x + D(N_out(F(N(x))))
        elif p == "deepnorm":
            y = N(self.alpha * x + D(F(x)))
        elif p == "rezero":
            self._f = D(F(x))
            y = x + self.params["resweight"] * self._f
        elif p == "branch":
            y = x + D(N(F(x)))
        else:  # none
            y = x + D(F(x))
        return self.numerics.stream(y, "x")

    def backward(self, dy: np.ndarray) -> np.ndarray:
        F, N, N_out, D = self.branch, self.norm, self.norm_out, self.drop
        p = self.placement
        dy = self.numerics.stream(dy, "dx")
        if p == "post":
            dz = N.backward(dy)
            dx = dz + F.backward(D.backward(dz))
        elif p == "pre":
            dx = dy + N.backward(F.backward(D.backward(dy)))
        elif p == "sandwich":
            dx = dy + N.backward(F.backward(N_out.backward(D.backward(dy))))
        elif p == "deepnorm":
            dz = N.backward(dy)
            dx = self.alpha * dz + F.backward(D.backward(dz))
        elif p == "rezero":
            a = self.params["resweight"]
            self.accumulate("resweight", np.sum(dy * self._f, dtype=np.float64))
            dx = dy + F.backward(D.backward(a * dy))
        elif p == "branch":
            dx = dy + F.backward(N.backward(D.backward(dy)))
        else:  # none
            dx = dy + F.backward(D.backward(dy))
        return dx


class Block(Module):
    """``x = mlp(attn(x))``: two ``Residual`` sublayers sharing the placement and the norm kind;
    ``window`` is this block's sliding attention window (None: full causal attention)."""

    def __init__(self, config: GPTConfig, *, rng: np.random.Generator,
                 dropout_rng: np.random.Generator, rope=None, window: int | None = None):
        super().__init__()
        cfg = config
        dtype = np.dtype(cfg.dtype)
        L, C = cfg.n_layers, cfg.d_model
        # GPT-2 scales the projections that write into the residual stream by 1/sqrt(2L);
        # DeepNorm instead scales the MLP, value and output projections by beta (init_stds).
        deep = cfg.placement == "deepnorm"
        beta = deepnorm_beta(L) if deep else 1.0
        std = init_stds(cfg)
        qkv_bias, out_bias, mlp_bias = cfg.biases()
        attn = CausalSelfAttention(
            C, cfg.n_heads, rng=rng, dropout_rng=dropout_rng, qk_norm=cfg.qk_norm, qk_norm_eps=cfg.norm_eps,
            softcap=cfg.attn_softcap, p_drop=cfg.attn_dropout, rope=rope, bias=qkv_bias,
            std=std["qkv"], proj_std=std["attn_out"], causal=cfg.causal, dtype=dtype,
            n_kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, scale=cfg.attn_scale, window=window,
            qk_norm_scope=cfg.qk_norm_scope, proj_bias=out_bias,
        )
        if deep:
            attn.qkv.params["weight"][attn.value_rows] *= dtype.type(beta)
        mlp = MLP(C, cfg.hidden, cfg.activation, rng=rng, bias=mlp_bias,
                  std=std["mlp_in"], proj_std=std["mlp_out"], dtype=dtype)
        common = dict(n_layers=L, eps=cfg.norm_eps, bias=cfg.bias, p_drop=cfg.dropout,
                      rng=dropout_rng, dtype=dtype, dyt_alpha=cfg.dyt_alpha,
                      norm_offset=cfg.norm_offset)
        self.attn = Residual(attn, cfg.placement, cfg.norm, C, **common)
        self.mlp = Residual(mlp, cfg.placement, cfg.norm, C, **common)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = self.attn(x)
        x = self.mlp(x)
        return x

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = self.mlp.backward(dout)
        dx = self.attn.backward(dx)
        return dx
