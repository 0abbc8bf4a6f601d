"""Model set-ups shared by the lab's experiments: normlab's own GPT, initialized as the papers did.

normlab's GPT initializes like GPT-2 (N(0, 0.02^2), the residual-writing projections scaled by
1/sqrt(2L)); Xiong et al. and Liu et al. analyse Xavier-initialized Transformers, and DeepNet
uses Xavier with a gain beta on the value, output and MLP projections. These helpers rebuild the
weights of a normlab model in place to match; every forward and backward is still normlab's.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ...models import GPT, GPTConfig, deepnorm_beta
from ...nn import MLP, CausalSelfAttention


def xavier_(model: GPT, rng: np.random.Generator, *, beta: float = 1.0,
            zero_qk: bool = False) -> GPT:
    """Redraw every block weight from Xavier normal, N(0, 2 / (fan_in + fan_out)), per d x d
    matrix for q, k and v; the value, output and MLP projections times ``beta`` (DeepNet's gain;
    1 = plain Xavier). ``zero_qk`` sets W^Q = W^K = 0 (uniform attention, Xiong et al.'s model).
    """
    C = model.config.d_model
    for blk in model.blocks:
        attn = cast(CausalSelfAttention, blk.attn.branch)
        mlp = cast(MLP, blk.mlp.branch)
        W = attn.qkv.params["weight"]  # (3C, C): q rows, k rows, v rows
        dt = W.dtype
        W[: 2 * C] = 0.0 if zero_qk else rng.normal(0, C**-0.5, (2 * C, C)).astype(dt)
        W[2 * C :] = (beta * rng.normal(0, C**-0.5, (C, C))).astype(dt)
        for lin in (attn.proj, mlp.fc, mlp.proj):
            w = lin.params["weight"]  # (out, in)
            std = beta * np.sqrt(2.0 / sum(w.shape))
            w[...] = rng.normal(0.0, std, w.shape).astype(dt)
    return model


def gaussian_inputs_(model: GPT, rng: np.random.Generator) -> GPT:
    """Token embeddings N(0, 1) and no position table: inputs with E||x_0||^2 = d (Xiong et al.'s
    Gaussian inputs); the head N(0, 1/d) (their random W^emb)."""
    wte = model.wte.params["weight"]
    wte[...] = rng.normal(0.0, 1.0, wte.shape).astype(wte.dtype)
    if hasattr(model, "wpe"):
        model.wpe.params["weight"][...] = 0.0
    if hasattr(model, "head"):
        w = model.head.params["weight"]
        w[...] = rng.normal(0.0, w.shape[1] ** -0.5, w.shape).astype(w.dtype)
    return model


def xiong_model(placement: str, n_layers: int, *, d: int, vocab: int, seq_len: int,
                seed: int, norm: str = "layernorm", dtype: str = "float64") -> GPT:
    """Xiong et al.'s simplified Transformer (Sec. 3.1) built from normlab's GPT: one head,
    W^Q = W^K = 0 (uniform attention over every position: bidirectional, as the paper's encoder-
    decoder model and its analysis), a ReLU FFN d -> d, Xavier weights,
    no biases, LayerNorm with gamma = 1, beta = 0, Gaussian inputs. DeepNorm keeps its gain
    beta = (8L)^(-1/4) on the value, output and FFN weights."""
    cfg = GPTConfig(vocab_size=vocab, seq_len=seq_len, n_layers=n_layers, d_model=d, n_heads=1,
                    d_ff=d, activation="relu", placement=placement, norm=norm, bias=False,
                    init_std=d**-0.5, causal=False, dtype=dtype)
    rng = np.random.default_rng(seed)
    model = GPT(cfg, rng=rng, flatten=False)  # never trained: no flat optimizer buffers
    beta = deepnorm_beta(n_layers) if placement == "deepnorm" else 1.0
    xavier_(model, rng, beta=beta, zero_qk=True)
    return gaussian_inputs_(model, rng)


class _Tape(np.random.Generator):
    """``np.random.default_rng(seed)`` that records its draws on a first pass and replays them
    after ``rewind()``, so that set-ups which draw the same stream (the placements of one
    ``(seed, N)``) draw it once. ``normal(loc, scale, size)`` is recorded as its standard normals z
    and returned as ``loc + scale * z``, NumPy's own formula in the same order (so a replay may
    ask for another scale, as DeepNorm's gain does); a replay that asks for another kind or
    shape than the recording is refused."""

    def __init__(self, seed: Any):
        super().__init__(np.random.PCG64(seed))
        self.tape: list[tuple[str, Any, Any]] = []
        self.pos: int | None = None  # None: recording

    def rewind(self) -> _Tape:
        self.pos = 0
        return self

    def _next(self, kind: str, size: Any, draw: Any) -> Any:
        if self.pos is None:
            value = draw()
            self.tape.append((kind, size, value))
            return value
        k, s, value = self.tape[self.pos]
        if (k, s) != (kind, size):
            raise RuntimeError(f"replay {self.pos}: {kind}{size} asked, {k}{s} recorded")
        self.pos += 1
        return value

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        if dtype is not np.float64 or out is not None:
            raise TypeError("a _Tape records float64 draws without out=")
        return self._next("standard_normal", size, lambda: super(_Tape, self).standard_normal(size))

    def normal(self, loc=0.0, scale=1.0, size=None):
        z = self._next("normal", size, lambda: super(_Tape, self).standard_normal(size))
        return loc + scale * z

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return self._next(f"integers{(low, high, np.dtype(dtype).str, endpoint)}", size,
                          lambda: super(_Tape, self).integers(low, high, size, dtype, endpoint))


def output_changes(placements: tuple[str, ...], N: int, *, d: int, n_heads: int, seq_len: int,
                   inputs: int, delta_std: float, seed: int
                   ) -> dict[str, tuple[float, float, float]]:
    """``output_change`` of each of ``placements`` at one ``(seed, N)``; they draw the same
    weights, input and perturbation, drawn once here and replayed for each (``_Tape``)."""
    rng = _Tape([seed, N])
    out = {}
    for k, p in enumerate(placements):
        out[p] = _output_change(p, N, d=d, n_heads=n_heads, seq_len=seq_len, inputs=inputs,
                                delta_std=delta_std, seed=seed,
                                rng=rng if k == 0 else rng.rewind())
    return out


def output_change(placement: str, N: int, *, d: int, n_heads: int, seq_len: int, inputs: int,
                  delta_std: float, seed: int) -> tuple[float, float, float]:
    """Liu et al.'s output change of one model: N sublayers (N/2 normlab GPT blocks: causal
    attention and a ReLU FFN 4d, Xavier weights, DeepNorm's gain for deepnorm, Gaussian inputs)
    map a fixed input of ``inputs`` sequences of ``seq_len`` tokens to F(x0, W); every block
    weight is perturbed by delta ~ N(0, delta_std^2 / d). Returns ||F(x0, W) - F(x0, W + delta)||^2
    averaged over the tokens, Admin's last omega (1 for the other placements; profiled on another
    batch from its own generator) and how far the output's rows are from mean 0, variance 1. The
    placements draw the same weights, input and perturbation for one ``(seed, N)``
    (``output_changes`` draws them once for several)."""
    return _output_change(placement, N, d=d, n_heads=n_heads, seq_len=seq_len, inputs=inputs,
                          delta_std=delta_std, seed=seed, rng=np.random.default_rng([seed, N]))


def _output_change(placement: str, N: int, *, d: int, n_heads: int, seq_len: int, inputs: int,
                   delta_std: float, seed: int, rng: np.random.Generator
                   ) -> tuple[float, float, float]:
    L = N // 2
    mc = GPTConfig(vocab_size=64, seq_len=seq_len, n_layers=L, d_model=d, n_heads=n_heads,
                   d_ff=4 * d, activation="relu", placement=placement, norm="layernorm",
                   init_std=d**-0.5, dtype="float32")
    model = GPT(mc, rng=rng, flatten=False)  # never trained: no flat optimizer buffers
    xavier_(model, rng, beta=deepnorm_beta(L) if placement == "deepnorm" else 1.0)
    gaussian_inputs_(model, rng)
    idx = rng.integers(0, 64, size=(inputs, seq_len))  # (B, T) the fixed input x0
    omega = 1.0
    if placement == "admin":
        other = np.random.default_rng([seed, N, 1]).integers(0, 64, (4, seq_len))
        omega = model.profile_admin(other)[-1]
    F0 = model.hidden(idx).astype(np.float64)  # (B, T, C)
    for blk in model.blocks:
        attn = cast(CausalSelfAttention, blk.attn.branch)
        mlp = cast(MLP, blk.mlp.branch)
        for lin in (attn.qkv, attn.proj, mlp.fc, mlp.proj):
            w = lin.params["weight"]
            w += rng.normal(0.0, delta_std / np.sqrt(d), w.shape).astype(w.dtype)
    F1 = model.hidden(idx).astype(np.float64)
    norm_err = float(max(np.abs(F1.mean(-1)).max(), np.abs(F1.var(-1) - 1).max()))
    return float(np.mean(np.sum((F1 - F0) ** 2, axis=-1))), omega, norm_err
