"""Probes: the measurements a training run records, kept apart from the update.

A run names its probes in ``TrainConfig.probes`` (strings, so they travel with the config to sweep
workers); ``update_probe = n`` and ``eval_headroom`` switch on the two probes that need a
parameter or ran at evaluation before probes existed. Each probe adds keys to the step's record
at one of four points of ``Trainer.train_step``, and may add to an evaluation's record:

    forward(record, y)         after the training forward (y: the batch's targets (B, T))
    backward(record, grad_sq)  after the unscale: grad_sq[name] = ||g_name||^2
    update(record, update_sq)  after the optimizer step: update_sq[name] = ||w_t - w_{t-1}||^2
    evaluate(record)           at every evaluation

A probe that needs tensors inside the forward asks for them through the numerics hooks every
module already calls (``normlab.nn.numerics``; ``normlab inspect`` reads the same ones): its
``hooks()`` maps ``(site, hook, key)`` to a function of the tensor, and the Trainer installs a
``Watch`` around the precision policy's hooks that calls it during the training forward only.
A model outside training pays for nothing: ``GPT`` computes no statistics of its own.

| probe            | records                                                             |
|------------------|---------------------------------------------------------------------|
| residual_stats   | residual_rms, residual_max, max_attn_logit: per block, the residual |
|                  | stream's RMS and max abs after it (NaN propagates), its largest raw |
|                  | attention logit                                                     |
| logit_drift      | mean_logit, head_norm, mean_logit_unseen (Wortsman et al.'s output  |
|                  | logit drift: the head's logits before any soft-cap, averaged; the   |
|                  | head's Frobenius norm; the mean logit of tokens never yet a target) |
| grad_stats       | layer_grad_norm, layer_grad_rms: per block, before clipping         |
| update_stats     | update_rms, layer_update_rms: of the whole model and per block      |
| update_probe     | model_update, logit_update after each of the first update_probe     |
|                  | steps (DeepNet's ||F(x, W_t) - F(x, W_0)|| on a fixed probe batch)  |
| headroom         | an evaluation's "headroom": ``residual_headroom`` (below)           |
| attention_sink   | an evaluation's "attention_sink": ``attention_sink`` (below), Gu et |
|                  | al.'s share of attention each head puts on the first token and the  |
|                  | share of heads past their threshold (0.3)                           |

Probes draw no random numbers from the run's streams (the update probe's batch has its own
stream, spawned from the seed), run the model at full precision when they run it at all, and so
leave the training itself bit for bit as it is without them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..nn.numerics import FULL_PRECISION, Numerics, numerics_scope
from ..precision.headroom import HEADROOM_FORMATS, tensor_stats

if TYPE_CHECKING:  # pragma: no cover
    from ..models import GPT
    from .trainer import Trainer

Hook = tuple[str, str, str]  # (site, hook, key): ("blocks.0.mlp", "stream", "x")
Watcher = Callable[[np.ndarray], None]


class Probe:
    """A named measurement; every method is optional (the base class records nothing)."""

    name = ""

    def hooks(self) -> dict[Hook, Watcher]:
        """The tensors this probe reads inside the training forward, by numerics hook."""
        return {}

    def forward(self, record: dict, y: np.ndarray) -> None:
        """Add to the step's record after the forward."""

    def backward(self, record: dict, grad_sq: dict[str, float]) -> None:
        """Add to the step's record after the backward and the unscale."""

    def update(self, record: dict, update_sq: dict[str, float]) -> None:
        """Add to the step's record after the optimizer step."""

    def evaluate(self, record: dict) -> None:
        """Add to an evaluation's record."""

    def state(self) -> dict[str, np.ndarray]:
        """Arrays a checkpoint keeps (full names, as stored)."""
        return {}

    def load_state(self, arrays: dict[str, np.ndarray], path: Any) -> None:
        """Restore what ``state`` saved."""


# ---- the probes --------------------------------------------------------------------------------
class ResidualStats(Probe):
    """Per block: the residual stream's RMS and max |x| after it, its largest attention logit."""

    name = "residual_stats"

    def __init__(self, model: GPT):
        self.model = model
        self.rms: list[float] = []
        self.amax: list[float] = []

    def hooks(self) -> dict[Hook, Watcher]:
        # a block's output is its MLP sublayer's stream
        return {(f"blocks.{i}.mlp", "stream", "x"): self._block_output
                for i in range(len(self.model.blocks))}

    def _block_output(self, x: np.ndarray) -> None:
        flat = x.reshape(-1)
        self.rms.append(float(np.sqrt(np.dot(flat, flat) / flat.size)))
        self.amax.append(float(np.maximum(flat.max(), -flat.min())))  # max |x|, NaN propagates

    def forward(self, record: dict, y: np.ndarray) -> None:
        record["residual_rms"], record["residual_max"] = self.rms, self.amax
        record["max_attn_logit"] = [b.attn.branch.max_logit  # type: ignore[attr-defined]
                                    for b in self.model.blocks]
        self.rms, self.amax = [], []


class LogitDrift(Probe):
    """The output logits' drift: ``mean_logit``, ``head_norm`` and, while some token has never
    been a training target, ``mean_logit_unseen``; the batch's targets are then counted."""

    name = "logit_drift"

    def __init__(self, model: GPT):
        self.model = model
        self.tied = model.config.tie_embeddings
        self.token_logit: np.ndarray | None = None  # (V,) this step's mean logit per token
        self.target_counts = np.zeros(model.config.vocab_size, np.int64)  # (V,) targets seen

    def hooks(self) -> dict[Hook, Watcher]:
        # the head's output: its own Linear, or the model's product with the token table
        return {("gpt", "output", "head") if self.tied else ("head", "output", "output"):
                self._logits}

    def _logits(self, z: np.ndarray) -> None:
        self.token_logit = z.reshape(-1, z.shape[-1]).mean(axis=0, dtype=np.float64)  # (V,)

    def forward(self, record: dict, y: np.ndarray) -> None:
        m = self.model
        head = m.wte.params["weight"] if self.tied else m.head.params["weight"]  # (V, C)
        token_logit, unseen = self.token_logit, self.target_counts == 0
        if token_logit is None:
            raise RuntimeError("logit_drift: no logits seen (the forward ran unwatched)")
        record["mean_logit"] = float(token_logit.mean())
        record["head_norm"] = math.sqrt(float(np.vdot(head, head)))
        if unseen.any():
            record["mean_logit_unseen"] = float(token_logit[unseen].mean())
        self.target_counts += np.bincount(y[y >= 0].reshape(-1), minlength=len(unseen))

    def state(self) -> dict[str, np.ndarray]:
        return {"data/target_counts": self.target_counts}

    def load_state(self, arrays: dict[str, np.ndarray], path: Any) -> None:
        """The saved counts; a checkpoint written before they were saved has none: every token
        then counts as seen (``mean_logit_unseen`` is not recorded)."""
        from .checkpoint import CheckpointError

        counts = arrays.get("data/target_counts")
        if counts is None:
            self.target_counts[...] = 1
            return
        V = self.target_counts.shape[0]
        if (counts.dtype.kind not in "iu" or counts.shape != (V,)
                or (counts.size and int(counts.min()) < 0)):
            raise CheckpointError(f"checkpoint {str(path)!r}: data/target_counts must be {V} "
                                  f"counts >= 0; got {counts.dtype} {counts.shape}")
        self.target_counts[...] = counts


class _PerLayer(Probe):
    """Sums of squares per block (``GPT.layer_of``): the norm or the RMS of each block."""

    def __init__(self, model: GPT):
        self.L = len(model.blocks)
        params = model.parameters()
        self.layer_of = {name: model.layer_of(name) for name in params}
        self.sizes = {name: p.size for name, p in params.items()}

    def per_layer(self, values: dict[str, float], how: str) -> list[float]:
        sq, n = [0.0] * self.L, [0] * self.L
        for name, v in values.items():
            layer = self.layer_of[name]
            if layer is not None:
                sq[layer] += v
                n[layer] += self.sizes[name]
        if how == "norm":
            return [math.sqrt(s) for s in sq]
        return [math.sqrt(s / c) if c else 0.0 for s, c in zip(sq, n)]


class GradStats(_PerLayer):
    """Every block's gradient norm and RMS, before clipping."""

    name = "grad_stats"

    def backward(self, record: dict, grad_sq: dict[str, float]) -> None:
        record["layer_grad_norm"] = self.per_layer(grad_sq, "norm")
        record["layer_grad_rms"] = self.per_layer(grad_sq, "rms")


class UpdateStats(_PerLayer):
    """The update's RMS over the whole model and per block."""

    name = "update_stats"

    def update(self, record: dict, update_sq: dict[str, float]) -> None:
        record["update_rms"] = math.sqrt(sum(update_sq.values()) / sum(self.sizes.values()))
        record["layer_update_rms"] = self.per_layer(update_sq, "rms")


class UpdateProbe(Probe):
    """Wang et al. 2022 (DeepNet): after each of the first ``steps`` steps, the L2 norm per token
    of the change of the stack's output F(x, W) = ``GPT.hidden`` (``model_update``) and of the
    logits (``logit_update``) on a fixed probe batch, averaged over its tokens."""

    name = "update_probe"

    def __init__(self, run: Trainer):
        cfg, self.model = run.config, run.model
        self.steps, self.run = cfg.update_probe, run
        rng = np.random.default_rng(run.probe_seq)  # the probe batch's own stream
        self.probe = run.source.train_batch(cfg.batch_size, cfg.model.seq_len, rng)[0]  # (B, T)
        self.at_init = self.outputs()  # (B, T, C), (B, T, V): at W_0, float64

    def outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """The stack's output (B, T, C) and the logits (B, T, V) on the probe batch, in eval mode
        and at full precision (no rounding noise drawn, no amax recorded), as float64."""
        model = self.model
        model.eval()
        with numerics_scope(model, FULL_PRECISION), np.errstate(over="ignore", invalid="ignore"):
            h = model.hidden(self.probe).astype(np.float64)  # (B, T, C)
            z = model.logits(self.probe).astype(np.float64)  # (B, T, V)
        model.release()
        model.train()
        return h, z

    def model_update(self) -> tuple[float, float]:
        """``(||F(x, W) - F(x, W_0)||, the same for the logits)``, per token, averaged."""
        (h, z), (h0, z0) = self.outputs(), self.at_init
        per_token = [float(np.mean(np.sqrt(np.sum((a - b) ** 2, axis=-1)))) for a, b in
                     ((h, h0), (z, z0))]
        return per_token[0], per_token[1]

    def update(self, record: dict, update_sq: dict[str, float]) -> None:
        if self.run.step < self.steps:
            record["model_update"], record["logit_update"] = self.model_update()

    def state(self) -> dict[str, np.ndarray]:
        return {"probe/hidden0": self.at_init[0], "probe/logits0": self.at_init[1]}

    def load_state(self, arrays: dict[str, np.ndarray], path: Any) -> None:
        """The saved run's W_0 outputs, not those of the restored W."""
        self.at_init = (np.asarray(arrays["probe/hidden0"], np.float64),
                        np.asarray(arrays["probe/logits0"], np.float64))


def residual_headroom(model: GPT, idx: np.ndarray) -> list[dict]:
    """Per block, the residual stream after it on ``idx`` (B, T): ``{"rms", "amax", "nonfinite",
    "formats"}``: RMS and max |x| (non-finite values read as 0), the fraction of its values that
    are not finite, and ``formats[f] = {"overflow", "flush", "subnormal"}``, the fractions of its
    non-zero finite values that, cast to ``f`` without scaling, round past the largest finite
    value, to zero, or into the subnormals, for every format of
    ``precision.headroom.HEADROOM_FORMATS`` (``precision.headroom.tensor_stats``, exact)."""
    out = []
    for x in model.residual_stream(idx):  # (B, T, C) each
        s = tensor_stats(x)
        out.append({"rms": s["rms"], "amax": s["amax"], "nonfinite": s["nonfinite"] / s["size"],
                    "formats": {f: s["formats"][f"{f}/none"] for f in HEADROOM_FORMATS}})
    return out


class Headroom(Probe):
    """At every evaluation, the residual stream's precision headroom on the first validation
    batch (:func:`residual_headroom`)."""

    name = "headroom"

    def __init__(self, run: Trainer):
        self.run = run

    def evaluate(self, record: dict) -> None:
        model: GPT = self.run.model
        model.eval()
        with np.errstate(over="ignore", invalid="ignore"):
            record["headroom"] = residual_headroom(model, self.run.val[0][0])
        model.train()


# ---- the attention sink (Gu et al. 2025, arXiv 2410.10781) -------------------------------------
SINK_EPS = 0.3  # Gu et al.'s threshold on a head's first-token share (section 3.1, the official
#                 code's eval_sink_open_source.py: compute_attention_sink(..., epsilon=0.3))


def first_token_share(p: np.ndarray) -> np.ndarray:
    """Gu et al.'s importance score of the first token, per sequence and head: the attention
    weights p (B, H, T, T) (query t, key j; masked keys 0) -> alpha (B, H), the mean over the T
    queries of p[..., t, 0] / sum_j p[..., t, j]. Each row is read normalized, as the official
    code reads every attention it scores (``model_attn_sim_infer.py`` returns sigmoid
    attention's weights divided by their row sums): a softmax row is unchanged, sigmoid
    attention's row becomes the share of its weight on each key. Every query of a causal model
    sees token 1, so the mean is over all T (the code divides column j's sum by T - j)."""
    p = np.asarray(p)
    if p.dtype.kind != "f":
        raise TypeError(f"p: attention weights must be a float array; got {p.dtype}")
    if p.ndim != 4 or p.shape[-1] != p.shape[-2] or p.shape[-1] == 0:
        raise ValueError(f"p: attention weights must be (B, H, T, T) with T >= 1; got shape "
                         f"{p.shape}")
    p = p.astype(np.float64)
    total = p.sum(axis=-1)  # (B, H, T) each row's weight
    first = np.divide(p[..., 0], total, out=np.zeros_like(total), where=total > 0)
    return first.mean(axis=-1)  # (B, H)


def sink_rate(share: np.ndarray, eps: float = SINK_EPS) -> float:
    """Gu et al.'s Sink_1^eps: the fraction of the (sequence, layer, head) triples whose
    first-token share (``first_token_share``, any shape) exceeds ``eps`` (in (0, 1))."""
    if not 0.0 < float(eps) < 1.0:
        raise ValueError(f"eps: the sink threshold must lie in (0, 1); got {eps}")
    share = np.asarray(share, dtype=np.float64)
    if share.size == 0:
        raise ValueError("share: no heads to count")
    return float(np.mean(share > eps))


def attention_probabilities(model: GPT, idx: np.ndarray) -> list[np.ndarray]:
    """Every block's attention probabilities on ``idx`` (B, T): L arrays (B, H, T, T), float64,
    from one forward in eval mode at full precision (no dropout, no rounding drawn) through the
    model's own attention op (softmax, or sigmoid attention's p = sigmoid(s + b)); the caches
    are released afterwards. An ensemble's stacked model is refused (read a member's model)."""
    if model.members:
        raise ValueError("model: an ensemble's stacked model; read each member's own model")
    was_training = model.training
    model.eval()
    try:
        with numerics_scope(model, FULL_PRECISION), np.errstate(over="ignore",
                                                                   invalid="ignore"):
            model.logits(idx)
            # the op's cache keeps p (softmax cache) for the backward: read, not recomputed
            out = [np.array(b.attn.branch._cache.softmax.p, dtype=np.float64)
                   for b in model.blocks]
    finally:
        model.release()
        if was_training:
            model.train()
    return out


def attention_sink(model: GPT, idx: np.ndarray, eps: float = SINK_EPS) -> dict:
    """The attention sink on ``idx`` (B, T): ``{"share", "rate", "mean_share", "eps"}``:
    ``share`` (L, H) each head's first-token share averaged over the sequences, ``rate`` Gu et
    al.'s Sink_1^eps (the fraction of sequence x layer x head triples with share > eps),
    ``mean_share`` the share averaged over every sequence, layer and head."""
    shares = np.stack([first_token_share(p) for p in attention_probabilities(model, idx)])
    return {"share": shares.mean(axis=1).tolist(), "rate": sink_rate(shares, eps),  # (L, H)
            "mean_share": float(shares.mean()), "eps": float(eps)}


class AttentionSink(Probe):
    """At every evaluation, the attention sink on the first validation batch
    (:func:`attention_sink`)."""

    name = "attention_sink"

    def __init__(self, run: Trainer):
        self.run = run

    def evaluate(self, record: dict) -> None:
        record["attention_sink"] = attention_sink(self.run.model, self.run.val[0][0])


# ---- the registry ------------------------------------------------------------------------------
PROBES: dict[str, Callable[[Trainer], Probe]] = {
    "residual_stats": lambda run: ResidualStats(run.model),
    "logit_drift": lambda run: LogitDrift(run.model),
    "grad_stats": lambda run: GradStats(run.model),
    "update_stats": lambda run: UpdateStats(run.model),
    "update_probe": UpdateProbe,
    "headroom": Headroom,
    "attention_sink": AttentionSink,
}
PROBE_NAMES = tuple(PROBES)
DEFAULT_PROBES = ("residual_stats", "logit_drift", "grad_stats", "update_stats")


def build(names: tuple[str, ...], run: Trainer) -> dict[str, Probe]:
    """The probes ``names`` (known names, in order) for the run, by name."""
    return {name: PROBES[name](run) for name in names}


# ---- observing through the numerics hooks ------------------------------------------------------
class Watch(Numerics):
    """``inner``'s hooks, unchanged, that also hand the tensors named in ``watchers`` (by
    ``(site, hook, key)``) to their functions while ``armed``. State and ``end_step`` are the
    inner hooks' own, so a checkpoint or delayed scaling sees no difference."""

    def __init__(self, inner: Numerics, watchers: dict[Hook, Watcher]):
        self.inner, self.watchers, self.armed = inner, watchers, False

    def bind(self, site: str) -> Numerics:
        mine = {(h, k): f for (s, h, k), f in self.watchers.items() if s == site}
        inner = self.inner.bind(site)
        return _WatchSite(self, inner, mine) if mine else inner

    def end_step(self) -> None:
        self.inner.end_step()

    def state(self) -> dict:
        return self.inner.state()

    def load_state(self, state: dict) -> None:
        self.inner.load_state(state)

    @contextlib.contextmanager
    def armed_for(self) -> Iterator[None]:
        """Watch the tensors within the block (the training forward)."""
        self.armed = True
        try:
            yield
        finally:
            self.armed = False


class _WatchSite(Numerics):
    """One module's view: the inner site's hooks, the watched ones also observed."""

    def __init__(self, watch: Watch, inner: Numerics, watchers: dict[tuple[str, str], Watcher]):
        self.watch, self.inner, self.watchers = watch, inner, watchers

    def bind(self, site: str) -> Numerics:
        return self.watch.bind(site)

    def _seen(self, hook: str, key: str, x: np.ndarray) -> np.ndarray:
        f = self.watchers.get((hook, key))
        if f is not None and self.watch.armed:
            f(x)
        return x

    def param(self, w, key="param"):
        return self._seen("param", key, self.inner.param(w, key))

    def weight(self, w, key="weight"):
        return self._seen("weight", key, self.inner.weight(w, key))

    def input(self, x, key="input"):
        return self._seen("input", key, self.inner.input(x, key))

    def output(self, y, key="output"):
        return self._seen("output", key, self.inner.output(y, key))

    def stream(self, x, key="stream"):
        return self._seen("stream", key, self.inner.stream(x, key))

    def grad(self, g, key="grad"):
        return self._seen("grad", key, self.inner.grad(g, key))

    def splits(self, key="weight"):
        return self.inner.splits(key)

    def operand(self, name, x, key, rounded):
        return self.inner.operand(name, x, key, rounded)


@contextlib.contextmanager
def observe(model: GPT, *names: str) -> Iterator[dict]:
    """Record model-only probes (``residual_stats``, ``logit_drift``) over the forwards inside
    the block: ``with observe(model, "residual_stats") as seen: model.forward(idx, y)``, then
    ``seen["residual_rms"]``. The model's hooks are restored afterwards."""
    known = ("residual_stats", "logit_drift")
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ValueError(f"observe: names must be among {known}; got {names}")
    probes = [ResidualStats(model) if n == "residual_stats" else LogitDrift(model) for n in names]
    policy = model.numerics_root
    watch = Watch(policy, {k: f for p in probes for k, f in p.hooks().items()})
    seen: dict = {}
    with numerics_scope(model, watch), watch.armed_for():
        yield seen
    for p in probes:
        p.forward(seen, np.zeros((0,), np.int64))
