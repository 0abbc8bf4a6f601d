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

from numba import njit

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


_SHIFT = 13  # a bucket keeps 10 mantissa bits of |x|: 2^18 buckets, each 2^-10 wide relative
_BUCKETS = 1 << (31 - _SHIFT)


@njit(cache=True)
def _count_buckets(bits, shift, counts):  # pragma: no cover - compiled
    """counts[key] += 1 for each non-zero value; key = (bits >> _SHIFT) - shift[i] (row i of
    ``bits`` shares a shift: 0 for plain counting, k * 2^10 for v = |x| / 2^k)."""
    n, block = bits.shape
    top = counts.size - 1
    for i in range(n):
        s = shift[i]
        for j in range(block):
            b = bits[i, j]
            if b != 0:
                counts[min(max((b >> _SHIFT) - s, 0), top)] += 1


@njit(cache=True)
def _gather_buckets(bits, shift, table):  # pragma: no cover - compiled
    """(positions, keys) of the non-zero values whose bucket ``table`` marks."""
    n, block = bits.shape
    top = table.size - 1
    m = 0
    for i in range(n):
        for j in range(block):
            b = bits[i, j]
            if b != 0 and table[min(max((b >> _SHIFT) - shift[i], 0), top)]:
                m += 1
    pos = np.empty(m, np.int64)
    keys = np.empty(m, np.int64)
    m = 0
    for i in range(n):
        for j in range(block):
            b = bits[i, j]
            if b != 0:
                key = min(max((b >> _SHIFT) - shift[i], 0), top)
                if table[key]:
                    pos[m] = i * block + j
                    keys[m] = key
                    m += 1
    return pos, keys


class _Magnitudes:
    """The non-zero finite magnitudes of a tensor (optionally divided by a power of two per
    block), counted by bucket of their float32 bit pattern (monotonic in the value), so that
    "how many exceed t" is a sum over buckets plus exact comparisons on the few values in the
    buckets next to t: the fractions are exact, and the tensor is read twice whatever the number
    of thresholds (numba kernels: one pass to count, one to gather)."""

    def __init__(self, bits: np.ndarray, shift: np.ndarray,
                 exact: Callable[[np.ndarray], np.ndarray]):
        self.bits, self.shift = bits, shift  # (n, block) uint32 |x| bits; (n,) int64 key shift
        self.counts = np.zeros(_BUCKETS, np.int64)
        _count_buckets(bits, shift, self.counts)
        self.above = np.concatenate([np.cumsum(self.counts[::-1])[::-1], [0]])  # >= bucket k
        self.exact = exact  # positions -> the exact (float64) values, for boundary buckets
        self.sub_keys = self.sub_vals = None

    def prepare(self, thresholds: list[float]) -> None:
        """Gather, once, the values in the buckets around every threshold."""
        table = np.zeros(_BUCKETS, np.bool_)
        for t in thresholds:
            k = _key(t)
            table[max(k - 1, 0):k + 2] = True
        pos, self.sub_keys = _gather_buckets(self.bits, self.shift, table)
        self.sub_vals = self.exact(pos)

    def count_above(self, t: float, strict: bool = True) -> int:
        """How many values exceed ``t`` (``>`` or, not strict, ``>=``); zeros never do."""
        if t < 0:
            t = 0.0
        k = _key(t)
        if k - 1 >= _BUCKETS:
            return 0
        near = (self.sub_keys >= k - 1) & (self.sub_keys <= k + 1)
        v = self.sub_vals[near]
        return int(self.above[min(k + 2, _BUCKETS)]) + int(np.count_nonzero(v > t if strict else v >= t))


def _key(t: float) -> int:
    """The bucket of a non-negative value (float32's largest finite beyond: past the last)."""
    f = np.float32(min(t, float(np.finfo(np.float32).max)))
    return int(np.array(f).view(np.uint32) >> _SHIFT) + (1 if t > float(np.finfo(np.float32).max) else 0)


def _thresholds(fmt) -> tuple[float, float, float, bool]:
    """(beyond, half_tiny, top_sub, tie_stays): round to nearest (ties to even) leaves the format
    from max + ulp(max)/2 on (at the tie itself only when max is odd), sends |v| <= half the
    smallest subnormal to 0 and |v| >= min_normal - ulp/2 up to the normal range (the boundaries
    of ``normlab.precision.error_stats``)."""
    f = get_format(fmt)
    beyond = f.max_finite + 2.0 ** (f.emax - f.mantissa_bits - 1)
    half_tiny = f.min_subnormal / 2
    top_sub = f.min_normal - f.min_subnormal / 2 if f.subnormals else half_tiny
    return beyond, half_tiny, top_sub, f.inf_nan == "fn" and f.mantissa_bits > 0


def _fractions(m: _Magnitudes, nonzero: int, fmt, scale: float) -> dict:
    """Fractions of the ``nonzero`` values of ``m`` that, times ``scale`` and rounded to
    ``fmt``, overflow (past the largest finite value), flush (to zero) or stay subnormal."""
    beyond, half_tiny, top_sub, tie_stays = _thresholds(fmt)
    over = m.count_above(beyond / scale, strict=tie_stays)
    not_flushed = m.count_above(half_tiny / scale)
    normal = m.count_above(top_sub / scale, strict=False)
    n = max(nonzero, 1)
    return {"overflow": over / n, "flush": (nonzero - not_flushed) / n,
            "subnormal": (not_flushed - normal) / n}


def tensor_stats(x: np.ndarray, *, delayed_amax: float | None = None) -> dict:
    """amax, RMS, the log2 |x| histogram and the headroom of ``x`` in every format and scaling
    (``FORMAT_SCALINGS``); ``delayed_amax`` is the previous step's amax (None: this one's).
    Non-finite values are counted apart and left out of the rest."""
    x = np.asarray(x)
    shape = x.shape
    a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)  # (N,)
    bits = a.view(np.uint32) & np.uint32(0x7FFFFFFF)  # (N,) |x| as bits, a new array
    bad = bits >= np.uint32(0x7F800000)
    nonfinite = int(np.count_nonzero(bad))
    if nonfinite:
        bits[bad] = 0
    mag = bits.view(np.float32)  # (N,) |x|, non-finite as 0
    nonzero = int(np.count_nonzero(bits))
    amax = float(mag.max(initial=0.0))
    u = mag / np.float32(amax) if amax > 0 else mag  # in [0, 1]: the sum of squares cannot overflow
    rms = amax * float(np.sqrt(np.dot(u, u) / max(a.size, 1))) if amax > 0 else 0.0
    size = a.size
    del u, a
    m = _Magnitudes(bits.reshape(-1, 1), np.zeros(bits.size, np.int64),
                    lambda pos: mag[pos].astype(np.float64))
    exponents = m.counts.reshape(256, -1).sum(axis=1)  # by float32 exponent field
    e = np.arange(256) - 127  # floor(log2 |x|) of each exponent field (0: subnormals, below)
    counts = np.bincount(np.clip(e, HIST_LO, HIST_HI - 1) - HIST_LO, weights=exponents,
                         minlength=HIST_HI - HIST_LO).astype(np.int64)
    out: dict[str, Any] = {
        "shape": list(shape), "size": int(size), "amax": amax, "rms": rms,
        "nonfinite": nonfinite, "zeros": int(size - nonzero - nonfinite),
        "hist": {"lo": HIST_LO, "counts": counts.tolist()}, "formats": {},
    }
    delayed = amax if delayed_amax is None else delayed_amax
    scales = {}
    for key, fmt, scaling in FORMAT_SCALINGS:
        fmax = get_format(fmt).max_finite
        ref = {"none": None, "tensor": amax, "delayed": delayed, "mx": None}[scaling]
        scales[key] = 1.0 if ref is None or ref <= 0 else fmax / ref
    plain = [(k, f) for k, f, sc in FORMAT_SCALINGS if sc != "mx"]
    m.prepare([t / scales[k] for k, f in plain for t in _thresholds(f)[:3]])
    for key, fmt in plain:
        out["formats"][key] = _fractions(m, nonzero, fmt, scales[key])
    del m
    for key, fmt, scaling in FORMAT_SCALINGS:
        if scaling == "mx":
            out["formats"][key] = _mx_fractions(bits, mag, shape, nonzero, fmt)
    return out


def _mx_fractions(bits: np.ndarray, mag: np.ndarray, shape: tuple, nonzero: int, fmt) -> dict:
    """The fractions under MX block scaling: blocks of 32 along the last axis share
    X = 2^k, k = floor(log2 amax_block) - emax (OCP MX v1.0); v = |x| / X."""
    last = shape[-1] if len(shape) else 1
    rows = bits.reshape(-1, last)
    pad = (-last) % MX_BLOCK
    if pad:
        rows = np.concatenate([rows, np.zeros((rows.shape[0], pad), rows.dtype)], axis=1)
    blocks = rows.reshape(-1, MX_BLOCK)  # (n, 32) bit patterns, zero padded
    block_max = blocks.max(axis=1).view(np.float32)  # (n,) monotonic bits: the amax
    k = np.log2(mx_scale(block_max, fmt, "floor")).astype(np.int64)  # (n,) X = 2^k
    shift = np.ldexp(1.0, -k)  # (n,) 1 / X

    def exact(pos: np.ndarray) -> np.ndarray:
        return blocks.reshape(-1)[pos].view(np.float32).astype(np.float64) * shift[pos // MX_BLOCK]

    m = _Magnitudes(blocks, k << (23 - _SHIFT), exact)  # keys of v = |x| / X
    m.prepare(list(_thresholds(fmt)[:3]))
    return _fractions(m, nonzero, fmt, 1.0)


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
    every preset of ``normlab.precision.PRESETS`` but fp32, the reference).
    ``progress(step, fraction)`` is called along the way. Returns the dict described in the
    module docstring."""
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
