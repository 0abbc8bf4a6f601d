"""The decoder-only model's configuration: one dataclass, a comment per field, checked on creation
so that an inconsistent config is refused before any work starts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .. import _checks as ck
from ..functional.attention import QK_NORMS
from ..nn.mlp import ACTIVATIONS

PLACEMENTS = ("post", "pre", "sandwich", "deepnorm", "rezero", "none")
NORMS = ("layernorm", "rmsnorm", "dyt", "none")
POSITIONS = ("learned", "rope")
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class GPTConfig:
    """A decoder-only Transformer language model (shapes: B batch, T time, C = d_model, H heads,
    D = C / H head width, V vocabulary, L layers)."""

    vocab_size: int = 64  # V: number of token ids
    seq_len: int = 64  # T_max: longest sequence the model reads (position table, RoPE tables)
    n_layers: int = 4  # L: number of Transformer blocks
    d_model: int = 128  # C: width of the residual stream
    n_heads: int = 4  # H: attention heads; must divide d_model
    d_ff: int | None = None  # hidden width of the MLP; None means 4 * d_model
    activation: str = "gelu_tanh"  # MLP nonlinearity: gelu (exact), gelu_tanh (GPT-2), relu, swiglu
    placement: str = "pre"  # where the norm sits: post, pre, sandwich, deepnorm, rezero, none
    norm: str = "layernorm"  # the norm: layernorm, rmsnorm, dyt, none (identity)
    norm_eps: float = 1e-5  # eps inside the square root of LayerNorm / RMSNorm
    dyt_alpha: float = 0.5  # DyT's initial alpha in gamma * tanh(alpha x) + beta (Zhu et al.: 0.5)
    causal: bool = True  # causal attention (a language model); False: every position sees every
    #                      other (an encoder, as in Xiong et al.'s analysis; an LM then sees its targets)
    qk_norm: str = "none"  # per-head norm of q and k before the dot product: none, rmsnorm, layernorm
    attn_softcap: float | None = None  # cap in cap * tanh(s / cap) on attention logits (Gemma 2: 50)
    final_softcap: float | None = None  # the same on the output logits (Gemma 2: 30)
    z_loss: float = 0.0  # weight of mean (log Z)^2 added to the loss (Wortsman et al.: 1e-4)
    label_smoothing: float = 0.0  # eps: the loss's target is (1 - eps) one-hot + eps uniform
    positions: str = "learned"  # position information: learned (a table) or rope (rotary, in q and k)
    rope_base: float = 10000.0  # RoPE's base: angle = t * base^(-2i / D)
    tie_embeddings: bool = False  # the LM head reuses the token embedding table
    bias: bool = False  # biases in the linear layers and LayerNorms (GPT-2: True)
    dropout: float = 0.0  # p_drop on the output of every residual branch (training only)
    attn_dropout: float = 0.0  # p_drop on the attention probabilities (training only)
    init_std: float = 0.02  # std of the normal init of weights and embeddings (GPT-2)
    dtype: str = "float32"  # parameter and activation dtype: float32, or float64 for checks

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "n_layers", "d_model", "n_heads"):
            ck.integer(getattr(self, name), f"config: {name}", lo=1)
        if self.d_ff is not None:
            ck.integer(self.d_ff, "config: d_ff", lo=1)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"config: n_heads ({self.n_heads}) must divide d_model ({self.d_model}); "
                f"the head width is d_model / n_heads"
            )
        for name, allowed in (("placement", PLACEMENTS), ("norm", NORMS), ("qk_norm", QK_NORMS),
                              ("activation", ACTIVATIONS), ("positions", POSITIONS),
                              ("dtype", DTYPES)):
            ck.choice(getattr(self, name), f"config: {name}", allowed)
        for name in ("attn_softcap", "final_softcap"):
            if getattr(self, name) is not None:
                ck.real(getattr(self, name), f"config: {name}", lo=0, lo_open=True)
        ck.real(self.norm_eps, "config: norm_eps", lo=0, lo_open=True)
        ck.real(self.dyt_alpha, "config: dyt_alpha", lo=0, lo_open=True)
        ck.real(self.rope_base, "config: rope_base", lo=1, lo_open=True)
        ck.real(self.init_std, "config: init_std", lo=0, lo_open=True)
        ck.real(self.z_loss, "config: z_loss", lo=0)
        for name in ("label_smoothing", "dropout", "attn_dropout"):
            ck.real(getattr(self, name), f"config: {name}", lo=0, hi=1, hi_open=True)
        for name in ("tie_embeddings", "bias", "causal"):
            ck.flag(getattr(self, name), f"config: {name}")
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"config: RoPE needs an even head width; d_model / n_heads = {self.head_dim}")

    @property
    def head_dim(self) -> int:
        """D = d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def hidden(self) -> int:
        """The MLP's hidden width: d_ff, or 4 * d_model."""
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    @property
    def final_norm(self) -> bool:
        """Whether a norm sits before the head: where the residual stream leaves the last block
        unnormalized (pre, sandwich, rezero, none), unless the norm is 'none'. Post-LN and DeepNorm
        end each block with a norm already."""
        return self.norm != "none" and self.placement in ("pre", "sandwich", "rezero", "none")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GPTConfig":
        """The config from ``to_dict``'s output; unknown keys are refused by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"config: unknown model fields {unknown}")
        return cls(**d)
