"""The decoder-only model's configuration: one dataclass, a comment per field, checked on creation
so that an inconsistent config is refused before any work starts."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .. import _checks as ck
from ..functional import norms as _norms
from ..nn.mlp import ACTIVATIONS

PLACEMENTS = ("post", "pre", "sandwich", "deepnorm", "rezero", "none", "branch", "admin", "lns",
              "mixln", "ngpt")
NORMS = _norms.block_names()  # ("layernorm", "rmsnorm", "dyt", "derf", "none"): the built-ins
QK_NORMS = _norms.qk_names()  # ("none", "layernorm", "rmsnorm")
POSITIONS = ("learned", "rope")
DTYPES = ("float32", "float64")
QK_NORM_SCOPES = ("head", "all")
ROPE_SCALINGS = ("none", "linear", "llama3")
INITS = ("normal", "xavier", "fan_in")
ATTN_FNS = ("softmax", "sigmoid")
NO_SKIP_PLACEMENTS = ("post", "pre", "none")  # the placements residual=False applies to


@dataclass(frozen=True)
class GPTConfig:
    """A decoder-only Transformer language model (shapes: B batch, T time, C = d_model, H heads,
    D head width (C / H unless ``d_head`` says otherwise), V vocabulary, L layers)."""

    vocab_size: int = 64  # V: number of token ids
    seq_len: int = 64  # T_max: longest sequence the model reads (position table, RoPE tables)
    n_layers: int = 4  # L: number of Transformer blocks
    d_model: int = 128  # C: width of the residual stream
    n_heads: int = 4  # H: attention heads; must divide d_model
    d_ff: int | None = None  # hidden width of the MLP; None means 4 * d_model
    activation: str = "gelu_tanh"  # MLP nonlinearity: gelu (exact), gelu_tanh (GPT-2), relu, swiglu
    placement: str = "pre"  # post pre sandwich deepnorm rezero none branch admin lns mixln ngpt
    #                         (where the norm sits: models/block.py) branch: x + N(F(x)), OLMo 2;
    #                         admin: N(omega x + F(x)), Liu et al. 2020, omega profiled by
    #                         GPT.profile_admin, as the Trainer does; lns: x + F(N(x) / sqrt(l))
    #                         in block l = 1..L, LayerNorm Scaling (Sun et al. 2025); mixln:
    #                         Post-LN in the first floor(mixln_fraction L) blocks, Pre-LN in the
    #                         rest, and a final norm (Mix-LN, Li et al. 2025); ngpt: the
    #                         normalized Transformer (nGPT, Loshchilov et al. 2024): no norm layers
    #                         (norm 'none', positions 'rope'), h <- Norm(h + a (Norm(F(h)) - h)),
    #                         q and k on the unit sphere, every matrix renormalized after each step
    norm: str = "layernorm"  # the norm: layernorm, rmsnorm, dyt, derf, centernorm, none (identity)
    #                          (or another name of the norm registry, normlab.functional.norms)
    norm_eps: float = 1e-5  # eps inside the square root of LayerNorm / RMSNorm
    dyt_alpha: float = 0.5  # DyT's initial alpha in gamma * tanh(alpha x) + beta (Zhu et al.: 0.5)
    # pRMSNorm's p: every RMSNorm estimates the RMS from the first ceil(p * C) features
    # (Zhang & Sennrich: 0.0625); None: all C
    norm_partial: float | None = None
    # causal attention (a language model); False: every position sees every other (an encoder,
    # as in Xiong et al.'s analysis; an LM then sees its targets)
    causal: bool = True
    # per-head norm of q and k before the dot product: none, rmsnorm, layernorm
    qk_norm: str = "none"
    # cap in cap * tanh(s / cap) on attention logits (Gemma 2: 50)
    attn_softcap: float | None = None
    final_softcap: float | None = None  # the same on the output logits (Gemma 2: 30)
    z_loss: float = 0.0  # weight of mean (log Z)^2 added to the loss (Wortsman et al.: 1e-4)
    label_smoothing: float = 0.0  # eps: the loss's target is (1 - eps) one-hot + eps uniform
    # position information: learned (a table) or rope (rotary, in q and k)
    positions: str = "learned"
    rope_base: float = 10000.0  # RoPE's base: angle = t * base^(-2i / D)
    tie_embeddings: bool = False  # the LM head reuses the token embedding table
    bias: bool = False  # biases in the linear layers and LayerNorms (GPT-2: True)
    dropout: float = 0.0  # p_drop on the output of every residual branch (training only)
    attn_dropout: float = 0.0  # p_drop on the attention probabilities (training only)
    init_std: float = 0.02  # std of the normal init of weights and embeddings (GPT-2)
    init: str = "normal"  # weight init: normal, xavier or fan_in (``block.init_stds``)
    #                       normal (GPT-2): every weight and table N(0, init_std^2), the
    #                       projections into the residual stream times 1 / sqrt(2L) (DeepNorm: its
    #                       beta instead). xavier (Xiong, Liu et al., DeepNet): the block matrices
    #                       Xavier normal, q, k, v each its own matrix, DeepNorm's beta on v, the
    #                       output and MLP projections; tables as normal. fan_in (Wortsman et al.
    #                       2023, NanoDO): every weight N(0, 1 / fan_in), the embedding and
    #                       position tables N(0, 1 / C); init_std is not read. DeepNorm's beta
    #                       applies to all three
    dtype: str = "float32"  # parameter and activation dtype: float32, or float64 for checks
    # ---- the features of released architectures (Llama 3, Mistral, Qwen 2/3, Gemma 2, OLMo 2) ----
    n_kv_heads: int | None = None  # key/value heads (grouped-query attention); None: n_heads
    d_head: int | None = None  # D, the head width, independent of d_model; None: d_model / n_heads
    # the factor on q.k; None: 1 / sqrt(D) (Gemma 2: 1 / sqrt(qpas))
    attn_scale: float | None = None
    sliding_window: int | None = None  # W: a query sees itself and the W - 1 keys before it
    window_layers: tuple[int, ...] | None = None  # the layers with the window; None: every layer
    qkv_bias: bool | None = None  # biases on q, k, v (Qwen 2: True alone); None: as ``bias``
    out_bias: bool | None = None  # bias on the attention output projection; None: as ``bias``
    mlp_bias: bool | None = None  # biases in the MLP; None: as ``bias``
    qk_norm_scope: str = "head"  # QK-norm per head over D (Qwen 3) or over all of q and k (OLMo 2)
    norm_offset: float = 0.0  # RMSNorm's gain is offset + w (Gemma: 1, w initialized to 0)
    embed_scale: float = 1.0  # the token embeddings are multiplied by this (Gemma: sqrt(d_model))
    rope_scaling: str = "none"  # RoPE frequency scaling: none, linear (Code Llama), llama3
    rope_factor: float = 1.0  # linear / llama3: low frequencies divided by this
    rope_low_freq_factor: float = 1.0  # llama3: wavelengths above L_orig / this are scaled fully
    rope_high_freq_factor: float = 4.0  # llama3: wavelengths below L_orig / this are kept
    rope_original_max: int = 8192  # llama3: L_orig, the context length of pretraining
    # ---- the normalization designs of 2024-26 (docs/norms.md) ----
    derf_alpha: float = 0.5  # Derf's initial alpha in gamma erf(alpha x + s) + beta (paper: 0.5)
    derf_shift: float = 0.0  # Derf's initial shift s (the official code's shift_init_value: 0)
    mixln_fraction: float = 0.25  # Mix-LN's alpha: the first floor(alpha L) blocks are Post-LN
    attn_gate: bool = False  # gated attention: y * sigmoid(x W_g) after SDPA (Qiu et al. 2025 G1)
    attn_fn: str = "softmax"  # attention's weights: softmax, or sigmoid (sigmoid(s + b) per key)
    attn_sigmoid_bias: float | None = None  # sigmoid attention's b (-log n); None: -log(seq_len)
    # ---- ablations of the block (the chapters' claims: residual-and-final-norm) ----
    residual: bool = True  # each sublayer's skip path; False (post, pre, none): the sublayer's
    #                        output replaces x (post N(F(x)), pre F(N(x)), none F(x)), a plain stack
    head_norm: bool | None = None  # a norm before the head; None: as the placement (final_norm)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "n_layers", "d_model", "n_heads"):
            ck.integer(getattr(self, name), f"config: {name}", lo=1)
        for name in ("d_ff", "n_kv_heads", "d_head", "sliding_window"):
            if getattr(self, name) is not None:
                ck.integer(getattr(self, name), f"config: {name}", lo=1)
        ck.integer(self.rope_original_max, "config: rope_original_max", lo=1)
        if self.d_head is None and self.d_model % self.n_heads:
            raise ValueError(
                f"config: n_heads ({self.n_heads}) must divide d_model ({self.d_model}); "
                f"the head width is d_model / n_heads unless d_head is given"
            )
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise ValueError(f"config: n_kv_heads ({self.n_kv_heads}) must divide n_heads "
                             f"({self.n_heads}); each key/value head serves a group of query heads")
        for name, allowed in (("placement", PLACEMENTS), ("norm", _norms.block_names()),
                              ("qk_norm", _norms.qk_names()),
                              ("activation", ACTIVATIONS), ("positions", POSITIONS),
                              ("dtype", DTYPES), ("qk_norm_scope", QK_NORM_SCOPES),
                              ("rope_scaling", ROPE_SCALINGS), ("init", INITS),
                              ("attn_fn", ATTN_FNS)):
            ck.choice(getattr(self, name), f"config: {name}", allowed)
        for name in ("attn_softcap", "final_softcap", "attn_scale"):
            if getattr(self, name) is not None:
                ck.real(getattr(self, name), f"config: {name}", lo=0, lo_open=True)
        ck.real(self.norm_eps, "config: norm_eps", lo=0, lo_open=True)
        ck.real(self.dyt_alpha, "config: dyt_alpha", lo=0, lo_open=True)
        self._check_designs()
        self._check_ngpt()
        self._check_rope()
        ck.real(self.init_std, "config: init_std", lo=0, lo_open=True)
        ck.real(self.norm_offset, "config: norm_offset")
        ck.real(self.embed_scale, "config: embed_scale", lo=0, lo_open=True)
        if self.norm_offset and "norm_offset" not in self._norm_reads():
            raise ValueError(f"config: norm_offset applies to the RMSNorm gain; "
                             f"norm is {self.norm!r}")
        if self.norm_partial is not None:
            ck.real(self.norm_partial, "config: norm_partial", lo=0, hi=1, lo_open=True)
            if "norm_partial" not in self._norm_reads():
                raise ValueError(f"config: norm_partial is pRMSNorm's p and applies to RMSNorm; "
                                 f"norm is {self.norm!r}")
        if self.sliding_window is not None and not self.causal:
            raise ValueError("config: sliding_window needs causal attention (causal=True)")
        self._check_window_layers()
        ck.real(self.z_loss, "config: z_loss", lo=0)
        for name in ("label_smoothing", "dropout", "attn_dropout"):
            ck.real(getattr(self, name), f"config: {name}", lo=0, hi=1, hi_open=True)
        for name in ("tie_embeddings", "bias", "causal", "qkv_bias", "out_bias", "mlp_bias",
                     "attn_gate"):
            if name.endswith("_bias") and getattr(self, name) is None:
                continue
            ck.flag(getattr(self, name), f"config: {name}")
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"config: RoPE needs an even head width; got D = {self.head_dim}")

    def _check_rope(self) -> None:
        """RoPE's base and its scaling's factors."""
        ck.real(self.rope_base, "config: rope_base", lo=1, lo_open=True)
        ck.real(self.rope_factor, "config: rope_factor", lo=1)
        ck.real(self.rope_low_freq_factor, "config: rope_low_freq_factor", lo=0, lo_open=True)
        ck.real(self.rope_high_freq_factor, "config: rope_high_freq_factor", lo=0, lo_open=True)
        if not self.rope_high_freq_factor > self.rope_low_freq_factor:
            raise ValueError(f"config: rope_high_freq_factor must be a finite number > "
                             f"rope_low_freq_factor ({self.rope_low_freq_factor!r}); got "
                             f"{self.rope_high_freq_factor!r}")

    def _check_designs(self) -> None:
        """The fields of the designs of 2024-26 (Derf, Mix-LN, ...)."""
        ck.real(self.derf_alpha, "config: derf_alpha", lo=0, lo_open=True)
        ck.real(self.derf_shift, "config: derf_shift")
        ck.real(self.mixln_fraction, "config: mixln_fraction", lo=0, hi=1)
        if self.mixln_fraction != 0.25 and self.placement != "mixln":
            raise ValueError(f"config: mixln_fraction applies to placement 'mixln'; placement "
                             f"is {self.placement!r}")
        ck.flag(self.residual, "config: residual")
        if not self.residual and self.placement not in NO_SKIP_PLACEMENTS:
            raise ValueError(f"config: residual=False (no skip path) applies to placements "
                             f"{NO_SKIP_PLACEMENTS}; placement is {self.placement!r}")
        if self.head_norm is not None:
            ck.flag(self.head_norm, "config: head_norm")
            if self.head_norm and self.norm == "none":
                raise ValueError("config: head_norm=True needs a norm; norm is 'none'")
        if self.attn_sigmoid_bias is not None:
            ck.real(self.attn_sigmoid_bias, "config: attn_sigmoid_bias")
            if self.attn_fn != "sigmoid":
                raise ValueError(f"config: attn_sigmoid_bias applies to attn_fn 'sigmoid'; "
                                 f"attn_fn is {self.attn_fn!r}")

    def _check_ngpt(self) -> None:
        """Placement 'ngpt' refuses by name every field that contradicts it (arXiv 2410.01131;
        NVIDIA/ngpt model.py: no norm layers, RoPE, no biases, no soft-caps)."""
        if self.placement != "ngpt":
            return
        bad = [f"{name}={getattr(self, name)!r} (ngpt: {want})" for name, want, ok in (
            ("norm", "'none', no norm layers", self.norm == "none"),
            ("qk_norm", "'none', q and k on the unit sphere", self.qk_norm == "none"),
            ("attn_softcap", "None", self.attn_softcap is None),
            ("final_softcap", "None, the logits scaled by s_z", self.final_softcap is None),
            ("attn_scale", "None, sqrt(D)", self.attn_scale is None),
            ("positions", "'rope', no position table", self.positions == "rope"),
            ("embed_scale", "1, unit embeddings", self.embed_scale == 1.0),
            ("bias", "False, the matrices alone", not any(self.biases())),
            ("n_kv_heads", "n_heads, one s_qk for q and k", self.kv_heads == self.n_heads),
        ) if not ok]
        if bad:
            raise ValueError(f"config: placement 'ngpt' contradicts {', '.join(bad)}")

    @property
    def sigmoid_bias(self) -> float | None:
        """Sigmoid attention's b: ``attn_sigmoid_bias``, or -log(seq_len) (arXiv 2409.04431's
        -log n at the model's context length, as the official configs' -7.62 at 2048); None
        with softmax attention."""
        if self.attn_fn != "sigmoid":
            return None
        return -math.log(self.seq_len) if self.attn_sigmoid_bias is None else float(
            self.attn_sigmoid_bias)

    def _norm_reads(self) -> tuple[str, ...]:
        """The fields the chosen norm's registry entry reads (none for 'none')."""
        if self.norm == _norms.NONE:
            return ()
        return tuple(_norms.get(self.norm).config.values())

    def norm_fields(self) -> dict[str, Any]:
        """The fields any registered norm reads (``norm_eps``, ``bias``, ``dyt_alpha``, ...), by
        name: what ``models.block.make_norm`` builds a norm from."""
        return {name: getattr(self, name) for name in _norms.config_fields()}

    def _check_window_layers(self) -> None:
        wl = self.window_layers
        if wl is None:
            return
        if self.sliding_window is None:
            raise ValueError("config: window_layers names the layers of a sliding_window; "
                             "sliding_window is None")
        if isinstance(wl, (list, tuple)):
            object.__setattr__(self, "window_layers", wl := tuple(wl))  # JSON gives a list
        if not isinstance(wl, tuple) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n_layers
                for i in wl):
            raise ValueError(f"config: window_layers must be a tuple of layer indices in "
                             f"[0, n_layers = {self.n_layers}); got {wl!r}")

    @property
    def head_dim(self) -> int:
        """D: ``d_head``, or d_model / n_heads."""
        return self.d_model // self.n_heads if self.d_head is None else self.d_head

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads: ``n_kv_heads``, or n_heads (multi-head attention)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def mixln_post_layers(self) -> int:
        """Mix-LN's Post-LN blocks: floor(mixln_fraction L) (arXiv 2412.13795; the official
        code's POST_NUM); 0 for every other placement."""
        if self.placement != "mixln":
            return 0
        return math.floor(self.mixln_fraction * self.n_layers + 1e-9)  # 0.29 * 100 is 29

    def block_placement(self, layer: int) -> str:
        """The placement of block ``layer`` (from 0): ``placement``, except Mix-LN's: post in
        the first ``mixln_post_layers`` blocks, pre in the rest."""
        if self.placement == "mixln":
            return "post" if layer < self.mixln_post_layers else "pre"
        return self.placement

    def window(self, layer: int) -> int | None:
        """The sliding window of block ``layer`` (None: full causal attention)."""
        wl = self.window_layers
        return self.sliding_window if wl is None or layer in wl else None

    def biases(self) -> tuple[bool, bool, bool]:
        """``(qkv, out, mlp)``: whether each projection has a bias (``bias`` unless overridden)."""
        qkv, out, mlp = (self.bias if b is None else b
                         for b in (self.qkv_bias, self.out_bias, self.mlp_bias))
        return qkv, out, mlp

    @property
    def hidden(self) -> int:
        """The MLP's hidden width: d_ff, or 4 * d_model."""
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    @property
    def final_norm(self) -> bool:
        """Whether a norm sits before the head: where the residual stream leaves the last block
        unnormalized (pre, sandwich, rezero, none, branch, lns), unless the norm is 'none';
        and Mix-LN's, as its official code (a LLaMA) always has one. Post-LN, DeepNorm and
        Admin end each block with a norm already. ``head_norm`` overrides the placement's
        choice."""
        if self.head_norm is not None:
            return self.head_norm
        return self.norm != "none" and self.placement in ("pre", "sandwich", "rezero", "none",
                                                          "branch", "lns", "mixln")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GPTConfig:
        """The config from ``to_dict``'s output; unknown keys are refused by name."""
        return ck.dataclass_from(cls, d, "config: unknown model fields")
