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
  beside float32's.

Scalings (s multiplies x before the cast): ``none`` s = 1; ``tensor`` s = fmax / amax(x), the
tensor's own amax (TransformerEngine's current scaling); ``delayed`` s = fmax / amax of the same
tensor at the previous step (the preceding window of tokens when there is one; the tensor's own
amax otherwise: see ``delayed_from``); ``mx`` blocks of 32 along the last axis share
X = 2^(floor(log2 amax_block) - emax) (OCP MX v1.0), MXFP8 with float8_e4m3fn elements and MXFP4
with float4_e2m1fn.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..functional.attention import causal_mask
from ..nn.numerics import FULL_PRECISION, Numerics
from ..precision import PRESETS, DelayedScaling, get_format, mx_scale
from .gpt import GPT

FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
FORMAT_SCALINGS: tuple[tuple[str, str, str], ...] = tuple(
    (f"{f}/{s}", f, s) for f in FORMATS for s in ("none", "tensor", "delayed")
) + (("mxfp8", "float8_e4m3fn", "mx"), ("mxfp4", "float4_e2m1fn", "mx"))
HIST_LO, HIST_HI = -64, 32  # histogram bins floor(log2 |x|) in [LO, HI), clipped at the ends
MX_BLOCK = 32


# ---- one tensor's precision headroom -------------------------------------------------------
def _window(fmt) -> dict:
    """A format's representable magnitudes as log2 bounds: smallest subnormal, smallest normal,
    largest finite."""
    f = get_format(fmt)
    return {"min_subnormal": float(np.log2(f.min_subnormal)), "min_normal": float(np.log2(f.min_normal)),
            "max": float(np.log2(f.max_finite))}


def _fractions(a: np.ndarray, nonzero: int, fmt, scale) -> dict:
    """Fractions of the ``nonzero`` non-zero magnitudes ``a`` that, times ``scale`` (a scalar,
    or per element broadcastable) and rounded to nearest (ties to even), overflow (past the
    largest finite value), flush (to zero) or stay subnormal (fewer significant bits)."""
    f = get_format(fmt)
    # the rounding boundaries, as normlab.precision.error_stats draws them: round to nearest
    # leaves the format from max + ulp(max)/2 on (at the tie itself only when max is odd),
    # a tie at half the smallest subnormal goes to 0, one at min_normal - ulp/2 up to min_normal
    beyond = f.max_finite + 2.0 ** (f.emax - f.mantissa_bits - 1)
    tie_stays = f.inf_nan == "fn" and f.mantissa_bits > 0  # an even max keeps its tie
    half_tiny = f.min_subnormal / 2
    top_sub = f.min_normal - f.min_subnormal / 2 if f.subnormals else half_tiny
    if np.isscalar(scale):
        s = float(scale)
        v, lim = a, (beyond / s, half_tiny / s, top_sub / s)
    else:
        v, lim = a * scale, (beyond, half_tiny, top_sub)
    over = np.count_nonzero(v > lim[0] if tie_stays else v >= lim[0])
    flush = np.count_nonzero((v <= lim[1]) & (a > 0))
    sub = np.count_nonzero((v < lim[2]) & (v > lim[1]))
    n = max(nonzero, 1)
    return {"overflow": over / n, "flush": flush / n, "subnormal": sub / n}


def tensor_stats(x: np.ndarray, *, delayed_amax: float | None = None) -> dict:
    """amax, RMS, the log2 |x| histogram and the headroom of ``x`` in every format and scaling
    (``FORMAT_SCALINGS``); ``delayed_amax`` is the previous step's amax (None: this one's)."""
    x = np.asarray(x)
    a = np.abs(x.astype(np.float32, copy=False)).reshape(-1)  # (N,)
    finite = np.isfinite(a)
    if not finite.all():
        a = np.where(finite, a, 0.0).astype(np.float32)
    nonzero = int(np.count_nonzero(a))
    amax = float(a.max(initial=0.0))
    u = a / np.float32(amax) if amax > 0 else a  # in [0, 1]: the sum of squares cannot overflow
    rms = amax * float(np.sqrt(np.dot(u, u) / max(a.size, 1))) if amax > 0 else 0.0
    _, e = np.frexp(a[a > 0])  # a = m 2^e, m in [0.5, 1): floor(log2 a) = e - 1
    counts = np.bincount(np.clip(e - 1, HIST_LO, HIST_HI - 1) - HIST_LO, minlength=HIST_HI - HIST_LO)
    out: dict[str, Any] = {
        "shape": list(x.shape), "size": int(a.size), "amax": amax, "rms": rms,
        "nonfinite": int(np.count_nonzero(~finite)), "zeros": int(a.size - nonzero),
        "hist": {"lo": HIST_LO, "counts": counts.tolist()}, "formats": {},
    }
    delayed = amax if delayed_amax is None else delayed_amax
    mx = {}
    for key, fmt, scaling in FORMAT_SCALINGS:
        fmax = get_format(fmt).max_finite
        if scaling == "none":
            s: Any = 1.0
        elif scaling in ("tensor", "delayed"):
            ref = amax if scaling == "tensor" else delayed
            s = fmax / ref if ref > 0 else 1.0
        else:
            if fmt not in mx:
                mx[fmt] = _mx_inverse_scales(np.abs(x.astype(np.float32, copy=False)), fmt)
            blocks, inv = mx[fmt]
            out["formats"][key] = _fractions(blocks, nonzero, fmt, inv)
            continue
        out["formats"][key] = _fractions(a, nonzero, fmt, s)
    return out


def _mx_inverse_scales(a: np.ndarray, fmt) -> tuple[np.ndarray, np.ndarray]:
    """(|x| as (n_blocks, 32) zero-padded blocks along the last axis, 1 / X per block (n, 1))."""
    flat = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
    pad = (-flat.shape[-1]) % MX_BLOCK
    if pad:
        flat = np.concatenate([flat, np.zeros((flat.shape[0], pad), flat.dtype)], axis=1)
    blocks = np.where(np.isfinite(flat), flat, 0).reshape(-1, MX_BLOCK)  # (n, 32)
    X = mx_scale(blocks.max(axis=1), fmt, "floor")  # (n,)
    return blocks, (1.0 / X)[:, None]


# ---- recording every tensor that passes a precision hook ------------------------------------
class _Probe(Numerics):
    """Full precision; hands every tensor that reaches a hook, with its site and key, to
    ``record`` (the forward's matrix-multiply inputs and residual stream, the backward's
    gradient operands and residual-stream gradients)."""

    def __init__(self, record: Callable[[str, str, np.ndarray], None], site: str = ""):
        self.record, self.site = record, site

    def bind(self, site: str) -> "Numerics":
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
    positions) and the mean entropy (nats) of the attention rows, from the forward's caches."""
    out = []
    for block in model.blocks:
        c = block.attn.branch._cache
        B, H, T, D = c.q.shape
        G = H // c.k.shape[1]
        s = (c.q.reshape(B, H // G, G, T, D) @ c.k[:, :, None].swapaxes(-1, -2)).reshape(B, H, T, T)
        s = s * s.dtype.type(c.scale)
        if block.attn.branch.causal:
            s = s + causal_mask(T, s.dtype, block.attn.branch.window)
        p = c.softmax.p  # (B, H, T, T)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)  # (B, H, T)
        out.append({"max_logit": s.max(axis=(0, 2, 3)).astype(float).tolist(),
                    "entropy": ent.mean(axis=(0, 2)).astype(float).tolist()})
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
                  progress: Callable[[str, float], None] | None = None) -> dict:
    """Measure ``model`` on ``tokens`` (1-D token ids): the last window of ``seq_len`` + 1 tokens
    (default: the model's seq_len, at most 256) is measured, a preceding window (when the tokens
    hold one) supplies delayed scaling's previous amax. ``policies``: preset names (default:
    every preset of ``normlab.precision.PRESETS`` but fp32, the reference). ``progress(step, fraction)`` is called along
    the way. Returns the dict described in the module docstring."""
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a normlab GPT; got {type(model).__name__}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a 1-D array of token ids; got {tokens.dtype} {tokens.shape}")
    cfg = model.config
    if tokens.size and (tokens.min() < 0 or tokens.max() >= cfg.vocab_size):
        raise ValueError(f"tokens must lie in [0, vocab_size = {cfg.vocab_size}); got "
                         f"[{tokens.min()}, {tokens.max()}]")
    T = min(cfg.seq_len, 256) if seq_len is None else int(seq_len)
    if not 1 <= T <= cfg.seq_len:
        raise ValueError(f"seq_len must be in [1, the model's seq_len = {cfg.seq_len}]; got {T}")
    if tokens.size < 2:
        raise ValueError(f"tokens must hold at least 2 ids (an input and its next token); got {tokens.size}")
    T = min(T, tokens.size - 1)
    policies = tuple(p for p in PRESETS if p != "fp32") if policies is None else tuple(policies)
    unknown = [p for p in policies if p not in PRESETS]
    if unknown:
        raise ValueError(f"policies must be preset names {tuple(PRESETS)}; got {unknown}")
    progress = progress or (lambda step, fraction: None)
    window = tokens[-(T + 1):]
    idx, targets = window[None, :-1], window[None, 1:]  # (1, T)
    previous = tokens[-2 * (T + 1):-(T + 1)] if tokens.size >= 2 * (T + 1) else None
    was_training = model.training
    model.eval()
    try:
        delayed: dict[str, float] = {}
        if previous is not None:
            progress("previous window (delayed scaling's amax)", 0.0)
            _pass(model, previous[None, :-1], previous[None, 1:],
                  lambda kind, name, x: delayed.__setitem__(name, _amax(x)))
        progress("forward and backward", 0.1)
        tensors: dict[str, dict] = {}
        kinds: dict[str, str] = {}

        def record(kind: str, name: str, x: np.ndarray) -> None:
            kinds[name] = kind
            tensors[name] = tensor_stats(x, delayed_amax=delayed.get(name))

        logits_mean: list[float] = []

        def record_all(kind: str, name: str, x: np.ndarray) -> None:
            if name == "logits":
                logits_mean.append(float(np.mean(x, dtype=np.float64)))
            record(kind, name, x)

        out = _pass(model, idx, targets, record_all, attention=True)
        progress("weights and parameter gradients", 0.4)
        params, grads = model.parameters(), model.gradients()
        for name, w in params.items():
            tensors[f"weight:{name}"] = tensor_stats(w)
            kinds[f"weight:{name}"] = "weight"
            tensors[f"grad:{name}"] = tensor_stats(grads[name])
            kinds[f"grad:{name}"] = "gradient"
        for name in tensors:
            tensors[name]["kind"] = kinds[name]
        results = {"fp32": out["loss"]}
        for i, name in enumerate(policies):
            progress(f"loss under {name}", 0.6 + 0.4 * i / max(len(policies), 1))
            results[name] = _policy_loss(model, idx, targets, name)
        progress("done", 1.0)
    finally:
        model.set_numerics(FULL_PRECISION)
        model.zero_grad()
        model.train(was_training)
    windows = {key: _window(fmt) for key, fmt, _ in FORMAT_SCALINGS}
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
        "policies": {name: {"loss": loss, "delta": loss - out["loss"]} for name, loss in results.items()},
    }


def _policy_loss(model: GPT, idx, targets, name: str) -> float:
    """The loss of one forward under the precision preset ``name`` (emulated); a policy with
    delayed scaling runs a first forward to fill its amax histories, as a step before would."""
    from ..nn.numerics import PolicyNumerics

    numerics = PolicyNumerics(name, rng=np.random.default_rng(0))
    model.set_numerics(numerics)
    try:
        if any(isinstance(getattr(PRESETS[name], role).scaling, DelayedScaling)
               for role in ("compute", "activations")):
            model.forward(idx, targets)
            numerics.end_step()
        loss = model.forward(idx, targets).loss
    finally:
        model.set_numerics(FULL_PRECISION)
        model.release()
    return float(loss)


def _amax(x: np.ndarray) -> float:
    a = np.abs(np.asarray(x, dtype=np.float32))
    return float(np.max(np.where(np.isfinite(a), a, 0.0), initial=0.0))


def _pass(model: GPT, idx, targets, record, *, attention: bool = False) -> dict:
    """One forward and backward at full precision with every hook's tensor recorded."""
    model.set_numerics(_Probe(record))
    try:
        parts = model.forward(idx, targets)
        res = {"loss": parts.loss, "nll": parts.nll, "log_z": parts.log_z}
        if attention:
            res["attention"] = _attention_stats(model)
        model.zero_grad()
        model.backward()
    finally:
        model.set_numerics(FULL_PRECISION)
    return res
