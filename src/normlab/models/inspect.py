"""What the lab measures, on a user's model: one forward and backward over a window of tokens,
then the norms, the residual stream, attention and the precision headroom of every tensor.

``inspect_model(model, tokens)`` returns a JSON-ready dict (``normlab inspect`` writes it as
``inspect.json`` and renders it as HTML):

- ``layers``: per block, the residual stream's RMS and max |x| after it (massive activations
  show as max |x| >> RMS), the gain statistics of each of its norms (the effective gain
  ``offset + w``), and per head the largest attention logit (after the scale, before any
  soft-cap, over the positions the mask keeps) and the mean entropy of the attention rows;
- ``output``: the mean log Z of the output softmax and the mean logit;
- ``tensors``: every weight, every activation a matrix multiply reads and the residual stream
  after each sublayer, every gradient operand of the backward, the residual-stream gradients and
  every parameter gradient: amax, RMS, a histogram of floor(log2 |x|), and for each format and
  scaling (``FORMAT_SCALINGS``) the fractions of the non-zero values that overflow (round past
  the largest finite value), flush (round to zero) or lose precision (land among the subnormals);
- ``policies``: the loss under each precision preset of ``normlab.precision.PRESETS``, emulated,
  beside float32's;
- ``blocks``: for every weight matrix, the per-block statistics of each block dialect of
  ``normlab.precision.blockstats.WHAT_IF`` (NVFP4 in 1x16 blocks and 16x16 tiles, MXFP8 and
  MXFP4, FP8 in 1x128 and 128x128 blocks): the distribution of the block scales, the share of
  values in the element format's top band ((4, 6] for E2M1), the blockwise dynamic range, and
  for 1D blocks how far the matrix quantized row-wise and column-wise differ
  (``normlab.precision.blockstats.block_stats``); what a recipe would do to the checkpoint.

Each tensor's statistics are ``normlab.precision.headroom.tensor_stats``. Scalings (s multiplies
x before the cast): ``none`` s = 1; ``tensor`` s = fmax / amax(x), the tensor's own amax
(TransformerEngine's current scaling); ``delayed`` s = fmax / amax of the same
tensor at the previous step (the preceding window of tokens when there is one; the tensor's own
amax otherwise: see ``delayed_from``); ``mx`` blocks of 32 along the last axis share
X = 2^(floor(log2 amax_block) - emax) (OCP MX v1.0), MXFP8 with float8_e4m3fn elements and MXFP4
with float4_e2m1fn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..nn.attention import CausalSelfAttention, recording_heads
from ..nn.numerics import FULL_PRECISION, Numerics, PolicyNumerics, numerics_scope
from ..precision import PRESETS, DelayedScaling
from ..precision.blockstats import WHAT_IF, what_if
from ..precision.headroom import (
    FORMAT_SCALINGS,
    HEADROOM_FORMATS,
    HIST_HI,
    HIST_LO,
    format_window,
    tensor_stats,
)
from .gpt import GPT

__all__ = ["FORMAT_SCALINGS", "HEADROOM_FORMATS", "HIST_HI", "HIST_LO", "inspect_model",
           "tensor_stats", "weight_block_stats"]


# ---- recording every tensor that passes a precision hook ------------------------------------
class _Probe(Numerics):
    """Full precision; hands every tensor that reaches a hook, with its site and key, to
    ``record`` (the forward's matrix-multiply inputs and residual stream, the backward's
    gradient operands and residual-stream gradients)."""

    def __init__(self, record: Callable[[str, str, np.ndarray], None], site: str = ""):
        self.record, self.site = record, site

    def bind(self, site: str) -> Numerics:
        return _Probe(self.record, site)

    def input(self, x, key="input"):
        self.record("activation", f"{self.site}.{key}", x)
        return x

    def stream(self, x, key="stream"):
        self.record("gradient" if key == "dx" else "activation", f"{self.site}.stream.{key}", x)
        return x

    def grad(self, g, key="grad"):
        self.record("gradient", f"{self.site}.{key}", g)
        return g

    def output(self, y, key="output"):
        if (self.site, key) in (("head", "output"), ("gpt", "head")):  # the logits (B, T, V)
            self.record("activation", "logits", y)
        return y


def _attention_stats(model: GPT) -> list[dict]:
    """Per block and head: the largest logit (after the scale, before a soft-cap, over the kept
    positions) and the mean entropy (nats) of the attention rows, as the attention op recorded
    them in the last forward (``recording_heads``)."""
    out = []
    for block in model.blocks:
        attn = block.attn.branch
        if not isinstance(attn, CausalSelfAttention) or attn.heads is None:
            raise RuntimeError("the attention of every block must have recorded its heads")
        out.append({"max_logit": attn.heads.max_logit.astype(float).tolist(),
                    "entropy": attn.heads.entropy.astype(float).tolist()})
    return out


def _norm_gains(model: GPT, layer: int) -> dict:
    """Gain statistics (offset + w) of the norms of block ``layer``."""
    out = {}
    block = model.blocks[layer]
    for sub in ("attn", "mlp"):
        for which in ("norm", "norm_out"):
            m = getattr(getattr(block, sub), which)
            w = m.params.get("weight", m.params.get("gamma"))
            if w is None:
                continue
            g = w.astype(np.float64) + getattr(m, "offset", 0.0)
            out[f"{sub}.{which}"] = {"mean": float(g.mean()), "std": float(g.std()),
                                     "min": float(g.min()), "max": float(g.max()),
                                     "max_abs": float(np.abs(g).max())}
    return out


def inspect_model(model: GPT, tokens: np.ndarray, *, seq_len: int | None = None,
                  policies: tuple[str, ...] | None = None,
                  progress: Callable[[str, float], None] | None = None,
                  blocks: bool = True) -> dict:
    """Measure ``model`` on ``tokens`` (1-D token ids): the last window of ``seq_len`` + 1 tokens
    (default: the model's seq_len, at most 256) is measured, a preceding window (when the tokens
    hold one) supplies delayed scaling's previous amax. ``policies``: preset names (default:
    every preset of ``normlab.precision.PRESETS`` but fp32, the reference).
    ``progress(step, fraction)`` is called along the way. ``blocks``: the weights' per-block
    statistics (False leaves ``blocks`` out). Returns the dict described in the module
    docstring. The model's numerics, mode and gradients are as they were afterwards."""
    T, window, previous, policies = _checked(model, tokens, seq_len, policies)
    progress = progress or (lambda step, fraction: None)
    idx, targets = window[None, :-1], window[None, 1:]  # (1, T)
    was_training = model.training
    model.eval()
    try:
        with numerics_scope(model, FULL_PRECISION):
            out, tensors, logits_mean = _measure(model, idx, targets, previous, progress)
            results = {"fp32": out["loss"]}
            for i, name in enumerate(policies):
                progress(f"loss under {name}", 0.6 + 0.4 * i / max(len(policies), 1))
                results[name] = _policy_loss(model, idx, targets, name)
            progress("done", 1.0)
    finally:
        model.zero_grad()
        model.train(was_training)
    windows = {key: format_window(fmt) for key, fmt, _ in FORMAT_SCALINGS}
    cfg = model.config
    extra = {"blocks": weight_block_stats(model)} if blocks else {}
    return {
        "model": {"config": cfg.to_dict(), "parameters": int(model.num_parameters())},
        "tokens": {"measured": int(T), "delayed_from": "previous window" if previous is not None
                   else "the same window (no earlier tokens)"},
        "loss": out["loss"], "nll": out["nll"],
        "output": {"log_z": out["log_z"], "mean_logit": logits_mean[0]},
        "layers": [{"layer": i, "residual_rms": tensors[f"blocks.{i}.mlp.stream.x"]["rms"],
                    "residual_max": tensors[f"blocks.{i}.mlp.stream.x"]["amax"],
                    **out["attention"][i], "norms": _norm_gains(model, i)}
                   for i in range(cfg.n_layers)],
        "tensors": tensors,
        "formats": [{"key": k, "format": f, "scaling": s, "window": windows[k]}
                    for k, f, s in FORMAT_SCALINGS],
        "policies": {name: {"loss": loss, "delta": loss - out["loss"]}
                     for name, loss in results.items()},
        **extra,
    }


def weight_block_stats(model: GPT) -> dict:
    """Every weight matrix's per-block statistics under each dialect of ``WHAT_IF``:
    ``{"dialects": {name: description}, "tensors": {weight name: {name: stats}}}`` (stats as
    ``BlockStats.to_dict``; a dialect a matrix's shape cannot take is left out)."""
    tensors: dict[str, dict] = {}
    described: dict[str, str] = {}
    for name, w in model.parameters().items():
        if np.ndim(w) < 2:
            continue
        stats = what_if(np.asarray(w, np.float32))
        tensors[name] = {k: v.to_dict() for k, v in stats.items()}
        described.update({k: v.dialect for k, v in stats.items()})
    return {"dialects": {k: described.get(k, "") for k in WHAT_IF}, "tensors": tensors}


def _checked(model: GPT, tokens: Any, seq_len: int | None,
             policies: tuple[str, ...] | None) -> tuple:
    """inspect_model's argument checks: (T, the measured window of T + 1 ids, the previous
    window or None, the policy names)."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a normlab GPT; got {type(model).__name__}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a 1-D array of token ids; got {tokens.dtype} "
                         f"{tokens.shape}")
    cfg = model.config
    if tokens.size and (tokens.min() < 0 or tokens.max() >= cfg.vocab_size):
        raise ValueError(f"tokens must lie in [0, vocab_size = {cfg.vocab_size}); got "
                         f"[{tokens.min()}, {tokens.max()}]")
    T = min(cfg.seq_len, 256) if seq_len is None else int(seq_len)
    if not 1 <= T <= cfg.seq_len:
        raise ValueError(f"seq_len must be in [1, the model's seq_len = {cfg.seq_len}]; got {T}")
    if tokens.size < 2:
        raise ValueError(f"tokens must hold at least 2 ids (an input and its next token); got "
                         f"{tokens.size}")
    T = min(T, tokens.size - 1)
    policies = tuple(p for p in PRESETS if p != "fp32") if policies is None else tuple(policies)
    unknown = [p for p in policies if p not in PRESETS]
    if unknown:
        raise ValueError(f"policies must be preset names {tuple(PRESETS)}; got {unknown}")
    previous = tokens[-2 * (T + 1):-(T + 1)] if tokens.size >= 2 * (T + 1) else None
    return T, tokens[-(T + 1):], previous, policies


def _measure(model: GPT, idx: np.ndarray, targets: np.ndarray, previous: np.ndarray | None,
             progress: Any) -> tuple[dict, dict, list]:
    """The full-precision pass with every tensor's statistics: (pass results, tensors, the mean
    logit)."""
    delayed: dict[str, float] = {}
    if previous is not None:
        progress("previous window (delayed scaling's amax)", 0.0)
        _pass(model, previous[None, :-1], previous[None, 1:],
              lambda kind, name, x: delayed.__setitem__(name, _amax(x)))
    progress("forward and backward", 0.1)
    tensors: dict[str, dict] = {}
    kinds: dict[str, str] = {}
    logits_mean: list[float] = []

    def record(kind: str, name: str, x: np.ndarray) -> None:
        if name == "logits":
            logits_mean.append(float(np.mean(x, dtype=np.float64)))
        kinds[name] = kind
        tensors[name] = tensor_stats(x, delayed_amax=delayed.get(name))

    out = _pass(model, idx, targets, record, attention=True)
    progress("weights and parameter gradients", 0.4)
    params, grads = model.parameters(), model.gradients()
    for name, w in params.items():
        tensors[f"weight:{name}"] = tensor_stats(w)
        kinds[f"weight:{name}"] = "weight"
        tensors[f"grad:{name}"] = tensor_stats(grads[name])
        kinds[f"grad:{name}"] = "gradient"
    for name in tensors:
        tensors[name]["kind"] = kinds[name]
    return out, tensors, logits_mean


def _policy_loss(model: GPT, idx: np.ndarray, targets: np.ndarray, name: str) -> float:
    """The loss of one forward under the precision preset ``name`` (emulated); a policy with
    delayed scaling runs a first forward to fill its amax histories, as a step before would."""
    numerics = PolicyNumerics(name, rng=np.random.default_rng(0))
    try:
        with numerics_scope(model, numerics):
            if any(isinstance(getattr(PRESETS[name], role).scaling, DelayedScaling)
                   for role in ("compute", "activations")):
                model.forward(idx, targets)
                numerics.end_step()
            loss = model.forward(idx, targets).loss
    finally:
        model.release()
    return float(loss)


def _amax(x: np.ndarray) -> float:
    a = np.abs(np.asarray(x, dtype=np.float32))
    return float(np.max(np.where(np.isfinite(a), a, 0.0), initial=0.0))


def _pass(model: GPT, idx: np.ndarray, targets: np.ndarray,
          record: Callable[[str, str, np.ndarray], None], *, attention: bool = False) -> dict:
    """One forward and backward at full precision with every hook's tensor recorded."""
    heads = recording_heads(model) if attention else contextlib.nullcontext()
    with numerics_scope(model, _Probe(record)), heads:
        parts = model.forward(idx, targets)
        res: dict[str, Any] = {"loss": parts.loss, "nll": parts.nll, "log_z": parts.log_z}
        if attention:
            res["attention"] = _attention_stats(model)
        model.zero_grad()
        model.backward()
    return res
