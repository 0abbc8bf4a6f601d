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
    admin     x = N(omega * x + F(x))         Liu et al. 2020: omega a learned (C,) vector, filled
                                              by ``profile_omega`` before training (see there)
    rezero    x = x + a F(x)                  Bachlechner et al. 2020: a learned scalar a, 0 at init
    none      x = x + F(x)
    branch    x = x + N(F(x))                 OLMo 2: the norm on the branch output (a final norm)
    lns       x = x + F(N(x) / sqrt(l))       LayerNorm Scaling (Sun et al. 2025, "The Curse of
                                              Depth in Large Language Models", arXiv 2502.05795):
                                              Pre-LN with the norm's output scaled by 1/sqrt(l)
                                              in block l = 1..L, both sublayers (the
                                              official code, lmsdss/LayerNorm-Scaling
                                              peft_pretraining/modeling_llama.py, NORM_TYPE=LNS:
                                              1 / math.sqrt(layer_index + 1)); a final norm,
                                              unscaled
    mixln     post in blocks l < floor(a L),  Mix-LN (Li, Yin & Liu 2025, arXiv 2412.13795):
              pre in the rest                 a = ``mixln_fraction`` (0.25); the official code
                                              (pixeli99/MixLN peft_pretraining/modeling_llama.py,
                                              NORM_TYPE=post_pre) runs the first POST_NUM layers
                                              Post-LN, the rest Pre-LN, then its final norm.
                                              ``Block`` gives each ``Residual`` its block's
                                              placement (``GPTConfig.block_placement``)
    ngpt      x = Norm(Norm(x) + |a| (Norm(F(x)) - Norm(x)))
                                              nGPT (Loshchilov et al. 2024, arXiv 2410.01131
                                              section 2.3; NVIDIA/ngpt model.py Block.forward):
                                              no norm layers, Norm(v) = v / ||v||, a the learned
                                              per-channel eigen learning rate ``alpha`` (C,),
                                              stored at 1 / sqrt(C) and read times 0.05 sqrt(C)
                                              (the code's alpha_init_value 0.05, alpha_init_
                                              scaling base_scale = 1 / sqrt(C)); the attention's
                                              q, k and the MLP's s_uv in ``nn``, s_z and the
                                              matrices' renormalization in ``models.gpt``

Dropout (p_drop) acts on F's output, inside the residual add. Without the skip path
(``GPTConfig.residual`` False; post, pre and none only) the add is dropped: post x = N(F(x)),
pre x = F(N(x)), none x = F(x), a plain stack (the ablation of residual-and-final-norm).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .._checks import reduce_rows
from ..functional import norms
from ..functional.dyt import ALPHA_INIT
from ..functional.ngpt import ngpt_update_backward, ngpt_update_forward
from ..nn import MLP, CausalSelfAttention, Dropout, Identity, Module
from ..nn.numerics import FULL_PRECISION, Numerics
from .config import GPTConfig


def deepnorm_alpha(n_layers: int) -> float:
    """DeepNorm's residual weight for a decoder-only stack of L blocks: (2L)^(1/4)."""
    return (2.0 * n_layers) ** 0.25


def deepnorm_beta(n_layers: int) -> float:
    """DeepNorm's init gain for the MLP, value and output projections: (8L)^(-1/4)."""
    return (8.0 * n_layers) ** -0.25


def make_norm(kind: str, C: int, *, dtype: Any, **fields: Any) -> Module:
    """The norm ``kind`` over the last axis, built from its registry entry
    (``normlab.functional.norms``), or the identity for 'none'.

    ``fields`` are ``GPTConfig`` field values by name (``GPTConfig.norm_fields()``: ``norm_eps``,
    ``bias``, ``dyt_alpha``, ``norm_offset``, ``norm_partial``); the entry's ``config`` says which
    module option each one sets (LayerNorm: eps and bias; RMSNorm: eps, offset and partial; DyT:
    its initial alpha), and fields it does not read are ignored."""
    if kind == norms.NONE:
        return Identity()
    entry = norms.get(kind)
    options = {opt: fields[f] for opt, f in entry.config.items() if f in fields}
    return entry.build(C, dtype=dtype, **options)


def init_stds(cfg: GPTConfig) -> dict[str, float]:
    """The std of every weight's normal init under ``cfg.init``: ``table`` (token and position
    embeddings), ``head``, ``qkv``, ``attn_out`` (the attention's output projection), ``mlp_in``
    and ``mlp_out``. DeepNorm's beta multiplies the MLP and the output projection (and, in
    ``Block``, the value rows) in every scheme. ``xavier`` draws these normal stds first, then
    ``Block`` redraws the block matrices (``xavier_init_``).

        normal  all init_std; attn_out, mlp_out times 1/sqrt(2L) (DeepNorm: beta instead)
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
    ``drop``; the learned scalar ``resweight`` (shape (), ReZero's a) for rezero; the learned
    vector ``omega`` (shape (C,), Admin's skip-path weight, ones until ``profile_omega``) for admin;
    the constant ``scale`` = 1 / sqrt(layer + 1) for lns (``layer``: the block's index from 0).
    ``numerics.stream`` rounds the output and, in the backward, the incoming gradient (the
    identity at full precision). The norm is ``make_norm(norm, ...)`` from ``eps``, ``bias``,
    ``dyt_alpha``, ``norm_offset`` and ``norm_partial``, or from ``norm_fields`` (a
    ``GPTConfig.norm_fields()``, which ``Block`` passes) where given.
    """

    numerics: Numerics = FULL_PRECISION

    def __init__(self, branch: Module, placement: str, norm: str, C: int, *, n_layers: int,
                 eps: float, bias: bool, p_drop: float, rng: np.random.Generator, dtype: DTypeLike,
                 dyt_alpha: float = ALPHA_INIT, norm_offset: float = 0.0,
                 norm_partial: float | None = None, norm_fields: dict | None = None,
                 layer: int = 0, skip: bool = True):
        super().__init__()
        if not skip and placement not in ("post", "pre", "none"):
            raise ValueError(f"Residual: skip=False applies to placements post, pre and none; "
                             f"got {placement!r}")
        self.placement = placement
        self.skip = skip  # False: no skip path (post N(F(x)), pre F(N(x)), none F(x))
        self.branch = branch
        fields = dict(norm_eps=eps, bias=bias, dyt_alpha=dyt_alpha, norm_offset=norm_offset,
                      norm_partial=norm_partial)
        fields.update(norm_fields or {})  # the config's fields (Block), over the single ones
        make = lambda: make_norm(norm, C, dtype=dtype, **fields)  # noqa: E731
        self.norm = (make() if placement in ("post", "pre", "sandwich", "deepnorm", "branch",
                                             "admin", "lns") else Identity())
        self.norm_out = make() if placement == "sandwich" else Identity()
        self.drop = Dropout(p_drop, rng=rng) if p_drop > 0 else Identity()
        self.alpha = deepnorm_alpha(n_layers) if placement == "deepnorm" else 1.0
        self.scale = 1.0 / np.sqrt(layer + 1.0) if placement == "lns" else 1.0  # a Python float
        if placement == "rezero":
            self.add_param("resweight", np.zeros((), dtype))
        if placement == "admin":
            self.add_param("omega", np.ones(C, dtype))
        if placement == "ngpt":  # nGPT's eigen learning rate: stored 1 / sqrt(C), read 0.05 / that
            self.alpha_scale = 0.05 * float(np.sqrt(C))
            self.add_param("alpha", np.full(C, 1.0 / np.sqrt(C), dtype))
        self._ngpt: list = []  # ngpt: the update's cache (one per ensemble member)
        self._f: np.ndarray | None = None  # rezero, admin: F(x) after dropout (for d resweight,
        #                                    and for Admin's profile)
        self._x: np.ndarray | None = None  # admin: the input x, for d omega

    def forget(self) -> None:
        super().forget()
        self._f = self._x = None  # rezero's and admin's saved F(x), admin's x
        self._ngpt = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        F, N, N_out, D = self.branch, self.norm, self.norm_out, self.drop
        p = self.placement
        if not self.skip:
            y = N(D(F(x))) if p == "post" else D(F(N(x)))  # none: N is the identity
        elif p == "post":
            y = N(x + D(F(x)))
        elif p == "pre":
            y = x + D(F(N(x)))
        elif p == "sandwich":
            y = x + D(N_out(F(N(x))))
        elif p == "deepnorm":
            y = N(self.alpha * x + D(F(x)))
        elif p == "rezero":
            self._f = D(F(x))
            y = x + self._param("resweight", x) * self._f
        elif p == "admin":
            self._x, self._f = x, D(F(x))
            y = N(self._param("omega", x) * x + self._f)
        elif p == "branch":
            y = x + D(N(F(x)))
        elif p == "lns":
            y = x + D(F(self.scale * N(x)))
        elif p == "ngpt":
            y = self._update(x, D(F(x)))
        else:  # none
            y = x + D(F(x))
        return self.numerics.stream(y, "x")

    def backward(self, dy: np.ndarray) -> np.ndarray:
        F, N, N_out, D = self.branch, self.norm, self.norm_out, self.drop
        p = self.placement
        dy = self.numerics.stream(dy, "dx")
        if not self.skip:
            return (F.backward(D.backward(N.backward(dy))) if p == "post"
                    else N.backward(F.backward(D.backward(dy))))
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
            a = self._param("resweight", dy)
            self.accumulate("resweight", self._reduce(_sum64, dy * self._f))
            dx = dy + F.backward(D.backward(a * dy))
        elif p == "admin":
            dz = N.backward(dy)
            self.accumulate("omega", self._reduce(reduce_rows, dz * self._x))
            dx = self._param("omega", dz) * dz + F.backward(D.backward(dz))
        elif p == "branch":
            dx = dy + F.backward(N.backward(D.backward(dy)))
        elif p == "lns":
            dx = dy + N.backward(self.scale * F.backward(D.backward(dy)))
        elif p == "ngpt":
            dh, df = self._update_backward(dy)
            dx = dh + F.backward(D.backward(df))
        else:  # none
            dx = dy + F.backward(D.backward(dy))
        return dx

    def _update(self, h: np.ndarray, f: np.ndarray) -> np.ndarray:
        """nGPT's update of h by f (B, T, C) with alpha times its scale; an ensemble's member by
        member (``functional.ngpt.ngpt_update_forward``)."""
        w = self.params["alpha"]
        a = w * w.dtype.type(self.alpha_scale)  # (C,), or (M, C)
        if not self.members:
            y, cache = ngpt_update_forward(h, f, a)
            self._ngpt = [cache]
            return y
        parts = [ngpt_update_forward(h[m], f[m], a[m]) for m in range(self.members)]
        self._ngpt = [c for _, c in parts]
        return np.stack([y for y, _ in parts])

    def _update_backward(self, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of ``_update``: (dh, df); alpha's gradient (times its scale) added."""
        caches, self._ngpt = self._ngpt, []
        k = self.alpha_scale
        if not self.members:
            dh, df, da = ngpt_update_backward(dy, caches[0])
            self.accumulate("alpha", da * da.dtype.type(k))
            return dh, df
        parts = [ngpt_update_backward(dy[m], c) for m, c in enumerate(caches)]
        self.accumulate("alpha", np.stack([p[2] * p[2].dtype.type(k) for p in parts]))
        return np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts])

    def _param(self, name: str, x: np.ndarray) -> np.ndarray:
        """The parameter ``name`` as it broadcasts against ``x``: itself, or an ensemble's
        (M, ...) stack with x's batch axes inserted after the member axis."""
        w = self.params[name]
        if not self.members:
            return w
        return w.reshape(w.shape[:1] + (1,) * (x.ndim - w.ndim) + w.shape[1:])

    def _reduce(self, fn: Any, a: np.ndarray) -> np.ndarray:
        """``fn(a)``, the reduction of a parameter's gradient; an ensemble's member by member."""
        return np.stack([fn(part) for part in a]) if self.members else fn(a)

    def profile_omega(self, x: np.ndarray, omega: float) -> tuple[np.ndarray, float]:
        """Admin's profiling step for this sublayer (Liu et al. 2020, the official code's
        ``adaptive-profiling``): fill ``omega`` with the running scalar ``omega`` (1 for the first
        sublayer), run the sublayer on ``x`` (B, T, C), and return its output with the next
        sublayer's scalar

            omega_next = sqrt(Var[omega * x] + Var[F(x)])

        where Var is the variance over every value of the batch (as the official code's
        ``np.var`` of the flattened tensor), computed here in float64. Since every admin sublayer
        ends with a norm, Var[x] = 1 past the first one and omega_i^2 = Var[x_0] + sum_{j<i}
        Var[F_j] (= 1 + sum_{j<i} Var[F_j] when the embeddings have unit variance)."""
        if self.placement != "admin":
            raise ValueError(f"profile_omega needs placement 'admin'; this sublayer is "
                             f"{self.placement!r}")
        w = self.params["omega"]
        w[...] = omega
        y = self.forward(x)  # (B, T, C); keeps x and F(x)
        var = (np.var((w * self._x).astype(np.float64))
               + np.var(self._f.astype(np.float64)))  # type: ignore[union-attr]  # forward set it
        return y, float(np.sqrt(var))


def _sum64(a: np.ndarray) -> np.float64:
    """Sum of every value, accumulated in float64 (ReZero's scalar gradient)."""
    return np.sum(a, dtype=np.float64)


def xavier_init_(attn: CausalSelfAttention, mlp: MLP, rng: np.random.Generator,
                 beta: float = 1.0) -> None:
    """Redraw a block's matrices from Xavier normal, N(0, 2 / (fan_in + fan_out)): q, k and v
    each as its own matrix, the output and MLP projections whole; v, the output and both MLP
    projections times ``beta`` (DeepNorm's gain, 1 otherwise). Biases and norms are kept."""
    W = attn.qkv.params["weight"]  # ((H + 2K) D, C): q rows, k rows, v rows
    C, q_rows = W.shape[1], attn.n_heads * attn.head_dim
    kv_rows = attn.n_kv_heads * attn.head_dim
    for rows, gain in ((slice(0, q_rows), 1.0), (slice(q_rows, q_rows + kv_rows), 1.0),
                       (attn.value_rows, beta)):
        n = W[rows].shape[0]
        W[rows] = (gain * rng.normal(0.0, np.sqrt(2.0 / (C + n)), (n, C))).astype(W.dtype)
    for lin in (attn.proj, mlp.fc, mlp.proj):
        w = lin.params["weight"]  # (out, in)
        w[...] = (beta * rng.normal(0.0, np.sqrt(2.0 / sum(w.shape)), w.shape)).astype(w.dtype)


class Block(Module):
    """``x = mlp(attn(x))``: two ``Residual`` sublayers sharing the placement and the norm kind;
    ``window`` is this block's sliding attention window (None: full causal attention), ``layer``
    its index from 0 (LNS's scale, Mix-LN's placement: ``GPTConfig.block_placement``)."""

    def __init__(self, config: GPTConfig, *, rng: np.random.Generator,
                 dropout_rng: np.random.Generator, rope: Any = None, window: int | None = None,
                 layer: int = 0):
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
            C, cfg.n_heads, rng=rng, dropout_rng=dropout_rng, qk_norm=cfg.qk_norm,
            qk_norm_eps=cfg.norm_eps,
            softcap=cfg.attn_softcap, p_drop=cfg.attn_dropout, rope=rope, bias=qkv_bias,
            std=std["qkv"], proj_std=std["attn_out"], causal=cfg.causal, dtype=dtype,
            n_kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, scale=cfg.attn_scale, window=window,
            qk_norm_scope=cfg.qk_norm_scope, proj_bias=out_bias, gate=cfg.attn_gate,
            sigmoid_bias=cfg.sigmoid_bias, ngpt=cfg.placement == "ngpt",
        )
        if deep:
            attn.qkv.params["weight"][attn.value_rows] *= dtype.type(beta)
        mlp = MLP(C, cfg.hidden, cfg.activation, rng=rng, bias=mlp_bias,
                  std=std["mlp_in"], proj_std=std["mlp_out"], dtype=dtype,
                  ngpt=cfg.placement == "ngpt")
        if cfg.init == "xavier" and rng is not None:  # the papers' init (after the normal one)
            xavier_init_(attn, mlp, rng, beta)
        common: dict[str, Any] = dict(n_layers=L, eps=cfg.norm_eps, bias=cfg.bias,
                                      p_drop=cfg.dropout, rng=dropout_rng, dtype=dtype,
                                      norm_fields=cfg.norm_fields(), layer=layer,
                                      skip=cfg.residual)
        placement = cfg.block_placement(layer)
        self.attn = Residual(attn, placement, cfg.norm, C, **common)
        self.mlp = Residual(mlp, placement, cfg.norm, C, **common)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = self.attn(x)
        x = self.mlp(x)
        return x

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = self.mlp.backward(dout)
        dx = self.attn.backward(dx)
        return dx
