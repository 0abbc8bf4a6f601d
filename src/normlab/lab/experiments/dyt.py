"""``dyt``: Zhu et al. 2025, "Transformers without Normalization": Dynamic Tanh,
DyT(x) = gamma * tanh(alpha x) + beta, in place of every norm of a Pre-LN model.

Training runs of normlab's GPT on the characters of ``pydoc_data.topics`` (English prose,
offline), every run with the same hyperparameters and seeds:

1. parity, the paper's LLM recipe (its LLaMA code, ``other_tasks/LLaMA``): every norm of a Pre-LN
   model DyT without beta, ``weight * tanh(alpha x)``, alpha0 per position (attention 0.8, FFN
   0.2, final 0.2: the LLaMA 7B row, the smallest model the paper trained), and a learnable
   scalar on the token embeddings initialized to sqrt(d); against LayerNorm and RMSNorm with the
   embeddings times the fixed sqrt(d) (RoPE positions in every arm). The DyT arm
   (:class:`LlamaDyTTrainer`) and the LayerNorm arm (its trained model read for part 3) are
   trained outside the sweep, as tasks on its workers (``_training.run_tasks``), RMSNorm
   through the sweep;
2. context: DyT with the paper's non-LLM default (one alpha0 for every norm, with beta) at
   alpha0 in a grid, through the sweep;
3. the S-curve that motivates DyT: in each trained LayerNorm model, every LayerNorm's input x
   against its pre-affine output (x - mean) / std, over all tokens of a validation batch, fitted
   by y = a tanh(b x) and by y = c x.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig, Trainer
from .. import stats as S
from ..contract import (
    CLAIM,
    NON_INFERIORITY,
    SHOWN,
    SUPERIORITY,
    Amendment,
    Card,
    Check,
    Record,
)
from ..contract import (
    committed_row as _row,
)
from ..formatting import fmt
from . import _pilots as P
from . import _recipes as R
from ._training import require_finished, run_grid, run_tasks, select

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="dyt",
    title="DyT vs LayerNorm and RMSNorm: parity, alpha0, the S-curve (Zhu et al. 2025)",
    citation="Zhu, Chen, He, LeCun & Liu 2025, 'Transformers without Normalization' (DyT), "
             "CVPR 2025",
    claim="DyT(x) = gamma tanh(alpha x) + beta replaces every LayerNorm or RMSNorm with no loss "
          "of quality at the same hyperparameters (alpha0 = 0.5; LLMs: no beta, alpha0 tuned "
          "per position, a learnable scalar on the embeddings), because trained LayerNorms act "
          "as S-shaped squashing maps.",
    published="ImageNet top-1 LN vs DyT: ViT-B 82.3 vs 82.5, ViT-L 83.1 vs 83.6; LLaMA 7B-70B "
              "loss parity with RMSNorm (tuned alpha0); S-shaped LN maps in ViT, wav2vec 2.0, DiT",
    method="normlab GPT, Pre-LN, on the characters of pydoc_data.topics, every run with the "
           "`base` recipe (AdamW, warmup then cosine), `seeds` seeds shared by every arm: "
           "LayerNorm, RMSNorm, and DyT with the paper's LLaMA recipe (no beta, alpha0 "
           "`llama_alpha` for attention / FFN / final norms, a learnable embedding scalar from "
           "sqrt(d)); DyT with one alpha0 and beta at `alphas` (shown); the S-curve fitted on "
           "`fit_tokens` validation tokens of each trained LayerNorm model.",
    explanation="A LayerNorm is linear per token, but tokens with large activations get a small "
                "slope 1/std, so over all tokens the input-output cloud bends like tanh: the big "
                "values are squashed. DyT keeps only that squashing, with one learned scale "
                "alpha, and no statistics over the channels. What DyT loses is LayerNorm's "
                "invariance to the input's scale: its inputs must stay in a range where "
                "tanh(alpha x) neither saturates nor stays tiny, which is why alpha0 and the "
                "scale of the activations matter.",
    short="DyT = gamma tanh(alpha x) + beta matches LayerNorm and RMSNorm at the same "
          "hyperparameters; trained LayerNorms are S-shaped",
)

NORMS = ("layernorm", "rmsnorm", "dyt")  # "dyt": the paper's LLaMA recipe
# "No loss of quality" is a non-inferiority claim (the paper: DyT "matches or exceeds"): the
# paired interval of L_DyT - L_norm wholly below this margin, in nats. papers.md section 10,
# reproduction 1: parity is |dL| <= 0.03 nats.
PARITY_TOL = 0.03
# papers.md section 10, reproduction 2: R^2_tanh - R^2_linear > 0.01 in the deepest LN (a
# superiority over the linear fit by that margin) and below it in the first.
S_CURVE_GAIN = 0.01
TAIL = 0.01  # the S-curve is read on this fraction of the points, those of largest |x| (about
#               |x| > 2.6 std for normal inputs; lab-audit.md row 13: the tail, |x| > 3 sigma)
# The paper's LLaMA alpha0 (other_tasks/LLaMA/README.md, LLaMA2 7B): attention, FFN, final.
LLAMA_ALPHA = (0.8, 0.2, 0.2)
# alpha0 per position tuned at a width and learning rate, the paper's procedure for LLMs (its
# table lowers alpha0 as models grow: tuned per size), by a grid in a pilot at seeds no verdict
# run uses (the notes): (d_model, lr) -> (attention, FFN, final). At the quick size (d = 32, lr
# 1e-2): attention {0.4, 0.8, 1.6, 3.2} x FFN = final {0.1, 0.2, 0.4, 0.8} at seed 50000, the
# best three again at seeds 50000-50004; best by the mean, (0.8, 0.8, 0.8): 1.968 against the
# 7B row's (0.8, 0.2, 0.2) 2.025 at seed 50000. No grid was run at the full size's width (64).
TUNED_ALPHA: dict[tuple[int, float], tuple[float, float, float]] = {(32, 1e-2): (0.8, 0.8, 0.8)}

BASE = R.TEXT  # the lab's text recipe is dyt's

# The pilots of the counted rows by the size's step count (the quick size's 300 steps): seeds
# 50000-50004, which no verdict run uses, with the tuned alpha0. The S-curve row's pilot is its
# binding half, the first LayerNorm's tail gain against < 0.01 (the deepest's, 0.140 sd 0.069,
# is resolved from 4 seeds); it is judged at s_curve_seeds.
PILOTS: dict[int, dict[str, P.Pilot]] = {300: {
    "dyt-matches-rmsnorm": P.Pilot(0.0928, 0.0239, 5, "50000-50004"),
    "dyt-matches-layernorm": P.Pilot(0.0920, 0.0108, 5, "50000-50004"),
    "layernorm-is-s-shaped": P.Pilot(0.00447, 0.00567, 5, "50000-50004")}}


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (the norm and seed vary)
    # training seeds of the parity's arms (seed, seed + 1, ...): 3 at the quick size, from its
    # pilot (PILOTS; seeds 50000-50004, with the tuned alpha0): DyT - LN 0.092 (sd 0.011) and
    # DyT - RMSNorm 0.093 (sd 0.024) are resolved against the 0.03 margin at 3 seeds
    seeds: int = 3
    # the LayerNorm models whose maps the S-curve reads (seed, seed + 1, ...; the first `seeds`
    # are the parity's): 7 from the quick size's pilot (the first LN's tail gain, 0.0045 sd
    # 0.0057 against < 0.01, is resolved from 7; the deepest's, 0.14 sd 0.069, from 4)
    s_curve_seeds: int = 7
    llama_alpha: tuple[float, ...] = TUNED_ALPHA[(32, 1e-2)]  # the DyT arm's alpha0: attention,
    #   FFN, final; tuned at the quick size's width and lr (TUNED_ALPHA; the parity rows are
    #   judged only where llama_alpha is the tuned value at the run's width and lr)
    alphas: tuple[float, ...] = (0.5,)  # one alpha0 for every norm, with beta (shown; the
    #   non-LLM default)
    fit_tokens: int = 512  # validation tokens whose LayerNorm inputs the S-curve fits use
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True),  # the lab's tiny model
             "seeds": 3, "s_curve_seeds": 3, "alphas": (0.5,), "fit_tokens": 128,
             "base.steps": 40,
             "base.warmup": 4, "base.eval_interval": 10, "base.batch_size": 8,
             "base.model.n_layers": 2, "base.model.seq_len": 16},
    "quick": {},
    "full": {"seeds": 6, "s_curve_seeds": 6, "alphas": (0.5,), "fit_tokens": 2048,
             "base.steps": 2000, "base.warmup": 200, "base.eval_interval": 500,
             "base.model.n_layers": 6, "base.model.d_model": 64,
             "base.model.init_std": 64**-0.5, "base.model.embed_scale": 8.0},
}


# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS_FROM = ("3 at the quick size, from its pilot at seeds 50000-50004 with the tuned alpha0 "
               "(2026-12-07; PILOTS): DyT - LN 0.092 (sd 0.011) and DyT - RMSNorm 0.093 (sd "
               "0.024) resolved at 3; 6 at the full size, set before any full result "
               "(e5ebe8a), from no pilot")
_OLD_SEEDS_FROM = ("3 at the quick size from a pilot at seed 50000 (n = 3; the Config's comment "
                   "and the notes: the S-curve gain would need about 8, beyond the quick "
                   "budget, so it is accepted as inconclusive there); 6 at the full size, set "
                   "before any full result (e5ebe8a), from no pilot")
_FIT_SEEDS_FROM = ("s_curve_seeds: 7 at the quick size, from its pilot at seeds 50000-50004 "
                   "(2026-12-07; PILOTS): the first LayerNorm's tail gain, 0.0045 (sd 0.0057) "
                   "against < 0.01, is resolved from 7, the deepest's, 0.14 (sd 0.069) against "
                   "> 0.01, from 4; 6 at the full size, no pilot")
_ABSTRACT = ("\"By incorporating DyT, Transformers without normalization can match or exceed "
             "the performance of their normalized counterparts, mostly without hyperparameter "
             "tuning.\"")
_PARITY = "papers.md section 10, reproduction 1: parity is |dL| <= 0.03 nats"
REGISTER = (
    Record(id="dyt-matches-rmsnorm", kind=CLAIM,
           claim="DyT with the paper's LLM recipe reaches RMSNorm's loss at the same "
                 "hyperparameters", source=_ABSTRACT,
           where="Zhu et al. 2025, abstract; other_tasks/LLaMA README (LLaMA 7B-70B: loss "
                 "parity with RMSNorm, alpha0 tuned per size and position) [V]",
           form=NON_INFERIORITY, margin=(PARITY_TOL,), side="below", margin_source=_PARITY,
           seeds="seeds", seeds_from=_SEEDS_FROM,
           registered="2026-11-29"),
    Record(id="dyt-matches-layernorm", kind=CLAIM,
           claim="DyT with the paper's LLM recipe reaches LayerNorm's loss at the same "
                 "hyperparameters", source=_ABSTRACT,
           where="Zhu et al. 2025, abstract; Tables 1-7 (ViT-B 82.3 LN vs 82.5 DyT) [V]",
           form=NON_INFERIORITY, margin=(PARITY_TOL,), side="below", margin_source=_PARITY,
           seeds="seeds", seeds_from=_SEEDS_FROM,
           registered="2026-11-29"),
    Record(id="layernorm-is-s-shaped", kind=CLAIM,
           claim="A trained LayerNorm maps input to output in an S-shape, tanh-like in deep "
                 "layers and linear in the first",
           source="\"DyT is inspired by the observation that layer normalization in "
                  "Transformers often produces tanh-like, S-shaped input-output mappings.\"",
           where="Zhu et al. 2025, abstract; Figs. 2-4 (ViT, wav2vec 2.0, DiT) [S]",
           form=SUPERIORITY, margin=(S_CURVE_GAIN,),
           margin_source="papers.md section 10, reproduction 2 (R^2 gain > 0.01)",
           seeds="s_curve_seeds", seeds_from=_FIT_SEEDS_FROM,
           registered="2026-11-29"),
    Record(id="dyt-default-alpha-against-layernorm", kind=SHOWN,
           claim="DyT with the non-LLM default (alpha0 = 0.5 everywhere, with beta) against "
                 "LayerNorm", grid=("alphas",), seeds="seeds", registered="2026-12-03"),
    Record(id="dyt-alpha-sweep", kind=SHOWN,
           claim="DyT with one alpha0 for every norm (with beta): final loss against alpha0",
           grid=("alphas",), seeds="seeds", registered="2026-11-29"),
    Record(id="learned-embedding-scale", kind=SHOWN,
           claim="the learned embedding scalar at the end of training", seeds="seeds",
           registered="2026-12-03"),
    Record(id="dyt-tuned-alpha-matches-layernorm", kind=CLAIM,
           claim="With alpha0 tuned over the grid, DyT matches LayerNorm (as for the LLaMA "
                 "models)",
           source="\"LLMs need tuned α0\" (papers.md section 10, from other_tasks/LLaMA/README.md "
                  "[V])", where="Zhu et al. 2025, other_tasks/LLaMA README [V]",
           form="band", margin=(-PARITY_TOL, PARITY_TOL),
           margin_source="papers.md section 10: parity inside +-0.03 nats", grid=("alphas",),
           seeds="seeds", registered="2026-11-29"),
    Record(id="dyt-default-alpha-matches-layernorm", kind=CLAIM,
           claim="DyT with the default alpha0 = 0.5 matches LayerNorm in the paper's non-LLM "
                 "models", source=_ABSTRACT,
           where="Zhu et al. 2025, abstract; dynamic_tanh.py alpha_init_value=0.5; ImageNet "
                 "ViT-B 82.3 LN vs 82.5 DyT, ConvNeXt, DiT, wav2vec 2.0 [V]",
           registered="2026-12-07",
           untested="the lab trains language models only; for LLMs the paper tunes alpha0 per "
                    "size and position, and its LLM recipe is the counted rows "
                    "(dyt-matches-rmsnorm, dyt-matches-layernorm); the default alpha0 = 0.5 on "
                    "this character model is shown beside them "
                    "(dyt-default-alpha-against-layernorm)"),
)


def _alpha_name(a: float) -> str:
    return f"dyt a0={a:g}"


# ---- the paper's LLaMA recipe -------------------------------------------------------------------
class LlamaDyTTrainer(Trainer):
    """normlab's Trainer with the DyT LLaMA recipe of Zhu et al.'s code (``other_tasks/LLaMA``):

    * ``alphas = (attention, FFN, final)``: every block's attention norm, MLP norm and the final
      norm start at their own alpha0 (the DyT norms; ``None`` leaves the model as configured);
    * no beta: the DyT biases are set to 0 and their gradients zeroed before the update, so
      each norm is ``weight * tanh(alpha x)`` for the whole run (AdamW moves a parameter of zero
      gradient and zero value by nothing);
    * ``learn_scale``: the token embeddings' factor (``GPTConfig.embed_scale``, sqrt(d) at
      init) is a learned scalar s. With x_0 = s E[idx] the embedding table's gradient is
      s dL/dx_0 scattered, so dL/ds = <E, dL/dE> / s, read after the backward; s takes the
      run's Adam step (its betas and eps, the step's learning rate, the step's clip factor, no
      weight decay), and the model reads the new s from its own copy of the config.
    """

    def __init__(self, config: TrainConfig, *, alphas: tuple[float, ...] | None = None,
                 learn_scale: bool = False):
        super().__init__(config)
        p = self.params
        self.frozen: list[str] = []
        if alphas is not None:
            a_attn, a_ffn, a_final = alphas
            for i in range(len(self.model.blocks)):
                p[f"blocks.{i}.attn.norm.alpha"][...] = a_attn
                p[f"blocks.{i}.mlp.norm.alpha"][...] = a_ffn
            p["norm_f.alpha"][...] = a_final
            self.frozen = [k for k in p if k.endswith("norm.bias") or k == "norm_f.bias"]
            for k in self.frozen:
                p[k][...] = 0.0
        self.learn_scale = bool(learn_scale)
        if self.learn_scale and config.model.tie_embeddings:
            raise ValueError("learn_scale reads the embedding table's gradient: untied only")
        self.model.config = dataclasses.replace(self.model.config)  # its own, for s
        self.scale = float(self.model.config.embed_scale)
        self._m = self._v = 0.0

    def train_step(self) -> dict:
        model = self.model
        x, y = self.next_batch()
        with np.errstate(over="ignore", invalid="ignore"), self._watching():
            parts = model.forward(x, y)
        record = self.forward_record(parts, y)
        if self.stopped is not None:
            return record
        self._zero_grads()
        scale = self.loss_scale()
        mult = scale * self.config.loss_multiplier
        with np.errstate(over="ignore", invalid="ignore"):
            model.backward(mult)
        for k in self.frozen:
            self.grads[k][...] = 0.0
        g_s = 0.0
        if self.learn_scale:
            W, G = self.params["wte.weight"], self.grads["wte.weight"]
            g_s = float(np.vdot(W.astype(np.float64), G.astype(np.float64))) / self.scale / mult
        record = self.finish_step(record, scale)
        if self.learn_scale and self.stopped is None and not record.get("skipped"):
            self._scale_step(g_s * record.get("clip_factor", 1.0), record["lr"])
        return record

    def _scale_step(self, g: float, lr: float) -> None:
        cfg = self.config
        t = self.step + 1
        self._m = cfg.beta1 * self._m + (1 - cfg.beta1) * g
        self._v = cfg.beta2 * self._v + (1 - cfg.beta2) * g * g
        m_hat, v_hat = self._m / (1 - cfg.beta1**t), self._v / (1 - cfg.beta2**t)
        self.scale -= lr * m_hat / (math.sqrt(v_hat) + cfg.adam_eps)
        object.__setattr__(self.model.config, "embed_scale", self.scale)


def _final_of(trainer: Trainer) -> float:
    """A run's final validation loss; its first training loss when it stopped (diverged)."""
    if trainer.stopped is not None or not trainer.evals:
        return float(trainer.first_loss if trainer.first_loss is not None else math.nan)
    return float(trainer.evals[-1]["val_loss"])


# ---- the S-curve -----------------------------------------------------------------------------
def fit_tanh_vs_linear(x: np.ndarray, y: np.ndarray, tail: float = 0.01) -> dict[str, float]:
    """Least-squares fits of y = c x and y = a tanh(b x) (b on a log grid, a in closed form)
    to the points (x, y); their R^2 (about the mean of y), b, and the fraction of points in the
    near-linear range |b x| < 1 of the tanh fit; and the same two fits scored on the tail
    alone, the fraction ``tail`` of the points with the largest |x| (at least 10; where a
    squashing map departs from a line): the tail's R^2 gain, its sums of squares about the
    whole cloud's mean of y (the tail's own spread can be tiny where a map saturates), and the
    tail's edge in units of std(x). x, y: (N,)."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    sst = float(np.sum((y - y.mean()) ** 2))
    c = float(np.dot(x, y) / np.dot(x, x))
    r2_lin = 1.0 - float(np.sum((y - c * x) ** 2)) / sst
    best = (-math.inf, 0.0, 0.0)
    for b in np.geomspace(1e-3, 1e2, 161) / x.std():  # b -> 0 is the linear fit
        t = np.tanh(b * x)
        a = float(np.dot(t, y) / np.dot(t, t))
        r2 = 1.0 - float(np.sum((y - a * t) ** 2)) / sst
        if r2 > best[0]:
            best = (r2, a, float(b))
    r2_tanh, a, b = best
    out = {"r2_linear": r2_lin, "r2_tanh": r2_tanh, "gain": r2_tanh - r2_lin, "a": a, "b": b,
           "c": c, "linear_fraction": float(np.mean(np.abs(b * x) < 1.0))}
    k = min(max(round(tail * x.size), 10), x.size)
    far = np.argsort(np.abs(x))[-k:]  # the k points of largest |x|
    yt, xt = y[far], x[far]
    sst_t = max(float(np.sum((yt - y.mean()) ** 2)), 1e-300)  # about the whole cloud's mean
    out["tail_gain"] = (float(np.sum((yt - c * xt) ** 2))
                        - float(np.sum((yt - a * np.tanh(b * xt)) ** 2))) / sst_t
    out["tail_edge"] = float(np.abs(xt).min() / x.std())
    return out


def layernorm_inputs(model, idx: np.ndarray) -> list[np.ndarray]:
    """The input of every norm of a Pre-LN model on the tokens ``idx`` (B, T), in forward order
    (block 1 attention, block 1 MLP, ..., the final norm): each (B, T, C)."""
    x = model._embed(idx)  # (B, T, C): scaled embeddings (+ a position table)
    out = []
    for blk in model.blocks:
        out.append(x)
        x = blk.attn(x)
        out.append(x)
        x = blk.mlp(x)
    out.append(x)
    model.release()
    return out


def _s_curve(trainer: Trainer, cfg: Config) -> tuple[list[dict], dict]:
    """Every LayerNorm's input-output map in a trained LayerNorm model."""
    config, model = trainer.config, trainer.model
    model.eval()
    xs, n = [], 0
    for x, _ in trainer.val:
        xs.append(x)
        n += x.size
        if n >= cfg.fit_tokens:
            break
    idx = np.concatenate(xs)[: max(cfg.fit_tokens // config.model.seq_len, 1)]  # (B, T)
    fits, scatter = [], {}
    ins = layernorm_inputs(model, idx)
    rng = np.random.default_rng(cfg.seed)
    for i, h in enumerate(ins):
        h = h.reshape(-1, h.shape[-1]).astype(np.float64)  # (tokens, C)
        mu = h.mean(axis=-1, keepdims=True)
        y = (h - mu) / np.sqrt(h.var(axis=-1, keepdims=True) + config.model.norm_eps)
        f = fit_tanh_vs_linear(h, y, TAIL)
        f["std_min"], f["std_max"] = float(h.std(axis=-1).min()), float(h.std(axis=-1).max())
        fits.append(f)
        if i in (0, len(ins) - 1):  # points for the figure: the first and the deepest
            pick = rng.choice(h.size, size=min(h.size, 1500), replace=False)
            scatter["first" if i == 0 else "deepest"] = {"x": h.ravel()[pick], "y": y.ravel()[pick]}
    model.train()
    return fits, scatter


# ---- the experiment --------------------------------------------------------------------------
def _own_run(job: tuple[Config, str, int]) -> dict:
    """One of the runs trained outside the sweep (``run_tasks``, on the pool's workers): the
    LayerNorm model, read for the S-curve (part 3) once trained, or the DyT model of the LLaMA
    recipe (:class:`LlamaDyTTrainer`)."""
    cfg, arm, seed = job
    over = {"lr": cfg.base.lr, "seed": seed}
    if arm == "layernorm":
        ln = Trainer(cfg.base.with_overrides({"model.norm": "layernorm", **over}))
        ln.run()
        fit, scatter = _s_curve(ln, cfg)
        return {"loss": _final_of(ln), "fit": fit, "scatter": scatter, "evals": ln.evals}
    dy = LlamaDyTTrainer(cfg.base.with_overrides({"model.norm": "dyt", **over}),
                         alphas=tuple(cfg.llama_alpha), learn_scale=True)
    dy.run()
    return {"loss": _final_of(dy), "scale": dy.scale, "evals": dy.evals}


def measure(config: Config, ctx) -> dict:
    cfg, lr = config, config.base.lr
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    total = (2 + len(cfg.alphas)) * len(seeds) + max(cfg.seeds, cfg.s_curve_seeds)

    def at(offset):  # the context with this part's progress shifted into the whole
        return dataclasses.replace(ctx, progress=lambda done, _t, note="": ctx.progress(
            offset + done, total, note))

    runs = run_grid(cfg.base, {"rmsnorm": {"model.norm": "rmsnorm"}, **{
        _alpha_name(a): {"model.norm": "dyt", "model.dyt_alpha": float(a)} for a in cfg.alphas}},
        at(0), lrs=[lr], seeds=seeds, name="dyt")
    require_finished(runs)
    rms, sweep = select(runs, norm="rmsnorm"), select(runs, norm="dyt")
    losses: dict[str, list[float]] = {"layernorm": [], "dyt": [],
                                      "rmsnorm": [_final(r) for r in _by_seed(rms)]}
    alpha_loss = {a: [_final(r) for r in _by_seed(sweep, dyt_alpha=float(a))] for a in cfg.alphas}
    done = (1 + len(cfg.alphas)) * len(seeds)
    fit_seeds = [cfg.seed + i for i in range(max(cfg.seeds, cfg.s_curve_seeds))]
    jobs = [*((cfg, "layernorm", s) for s in fit_seeds), *((cfg, "dyt", s) for s in seeds)]
    own = run_tasks(_own_run, jobs, ctx, progress=lambda k: ctx.progress(
        done + k, total, f"LayerNorm and DyT (LLaMA recipe): {k} of {len(jobs)} runs"))
    lns, dys = own[:len(fit_seeds)], own[len(fit_seeds):]
    losses["layernorm"] = [ln["loss"] for ln in lns[:len(seeds)]]  # paired with DyT by seed
    losses["dyt"] = [dy["loss"] for dy in dys]
    fits = [ln["fit"] for ln in lns][:cfg.s_curve_seeds]
    scatter: dict[Any, Any] = lns[0]["scatter"]
    scales = [dy["scale"] for dy in dys]
    curves = {"layernorm": lns[0]["evals"], "dyt": dys[0]["evals"]}
    ctx.progress(total, total, "done")
    curves["rmsnorm"] = next(r.evals for r in rms if r.seed == seeds[0])
    alphas = sorted(alpha_loss)
    return {"norms": list(NORMS), "losses": losses,
            "mean": {n: float(np.mean(losses[n])) for n in NORMS},
            "alphas": alphas, "alpha_loss": [alpha_loss[a] for a in alphas],
            "fits": fits[0], "fits_per_seed": fits, "scatter": scatter,
            "embed_scale": {"init": float(cfg.base.model.embed_scale), "final": scales},
            "curves": {n: [{"step": e["step"], "val_loss": e["val_loss"]} for e in ev]
                       for n, ev in curves.items()}}


def _by_seed(runs, **fields) -> list:
    """The runs with these fields, in seed order."""
    return sorted(select(runs, **fields), key=lambda r: r.seed)


def _final(r) -> float:
    """A run's final validation loss; its loss at init when it diverged or did not finish."""
    v = r.final_val_loss if r.status == "done" and r.final_val_loss is not None else None
    return r.loss_at_init if v is None else v


def _parity(data: dict, a: list[float], name: str, claim: str, published: str, source: str,
            note: str = "", kind: str = "claim", row_id: str = "") -> Check:
    """DyT's arm ``a`` (final losses per seed) against LayerNorm (``name`` "LN") or RMSNorm:
    the counted non-inferiority row, or (``kind`` shown) the same interval as context."""
    iv = S.paired_interval(a, data["losses"]["layernorm" if name == "LN" else "rmsnorm"])
    measured = f"DyT - {name}, paired over seeds: {iv.text()} nats"
    if kind == SHOWN:
        return Check(id=row_id, claim=claim, published=published, measured=measured,
                     rule=f"shown (the paper's default is for its non-LLM models; margin "
                          f"{PARITY_TOL} nats for reference)", passed=None, kind=SHOWN,
                     source=source, note=note, interval=[iv.lo, iv.hi], estimate=iv.mean)
    return Check.non_inferiority(
        id=row_id, claim=claim, published=published, interval=iv, side="below", margin=PARITY_TOL,
        measured=measured, source=source, note=note,
        rule=f"non-inferiority: the paired Student-t interval of L_DyT - L_{name} wholly < "
             f"+{PARITY_TOL} nats (no loss of quality beyond the margin)",
        margin_source="papers.md section 10, reproduction 1: parity is |dL| <= 0.03 nats")


def _s_curve_check(data: dict) -> Check:
    """The S-curve read on the tail of each LayerNorm's input, the 1% of points of largest |x|,
    where a squashing map departs from a line (the bulk of a small model's points lies in
    tanh's linear range)."""
    per = data["fits_per_seed"]
    deep = S.mean_interval([f[-1]["tail_gain"] for f in per])
    first = S.mean_interval([f[0]["tail_gain"] for f in per])
    whole = S.mean_interval([f[-1]["gain"] for f in per])
    passed = S.all_of([S.decide(deep, S_CURVE_GAIN, S.ABOVE),
                       S.decide(first, S_CURVE_GAIN, S.BELOW)])
    return Check(
        id="layernorm-is-s-shaped",
        claim="A trained LayerNorm maps input to output in an S-shape, tanh-like in deep layers "
              "and linear in the first",
        published="S-shaped curves in deeper LN layers, linear in early ones; ~99% "
                  "of points in the near-linear range, the extreme ones squashed (ViT, wav2vec "
                  "2.0, DiT)",
        measured=f"on the tail (the {TAIL:.0%} of points of largest |x|), R^2_tanh - R^2_linear "
                 f"over seeds: {deep.text()} in the deepest LN, {first.text()} in the first; "
                 f"the deepest LN's tail starts at |x| = "
                 f"{fmt(float(np.mean([f[-1]['tail_edge'] for f in per])))} std(x); over all "
                 f"points {whole.text()} "
                 f"in the deepest ({100 * np.mean([f[-1]['linear_fraction'] for f in per]):.1f}% "
                 "in |bx| < 1)",
        rule=f"superiority of the tanh fit on the tail: the Student-t interval over seeds of the "
             f"tail's R^2 gain > {S_CURVE_GAIN} in the deepest LN, and < {S_CURVE_GAIN} in the "
             "first (both fits on all points)",
        passed=passed, inconclusive=passed is None, interval=[deep.lo, deep.hi],
        estimate=deep.mean, threshold=[S_CURVE_GAIN], form="superiority",
        margin_source="papers.md section 10, reproduction 2 (R^2 gain > 0.01)",
        source="Zhu et al. 2025, Fig. 2-4 [S]")


def _tuned(row: Check, config: Config) -> Check:
    """A parity row judged only where the DyT arm's alpha0 is the one tuned at the run's width
    and learning rate (the paper's procedure for LLMs); else not judged, with why."""
    key = (config.base.model.d_model, float(config.base.lr))
    if TUNED_ALPHA.get(key) == tuple(config.llama_alpha):
        return row
    return dataclasses.replace(
        row, passed=None, inconclusive=False,
        rule=row.rule + "; not judged: alpha0 was not tuned at this width and learning rate",
        note=f"alpha0 {tuple(config.llama_alpha)} is not a grid's choice at d = {key[0]}, lr "
             f"{key[1]:g} (tuned: {sorted(TUNED_ALPHA)}): the paper tunes alpha0 per model")


def _pilot_gate(row: Check, config: Config, margin: float, what: str) -> Check:
    pilot = PILOTS.get(config.base.steps, {}).get(row.id)
    n = config.s_curve_seeds if row.id == "layernorm-is-s-shaped" else config.seeds
    return P.gate(row, pilot, n, margin, what)


def judge(data: dict, config: Config) -> list[Check]:
    losses = data["losses"]
    alpha_loss = dict(zip(data["alphas"], data["alpha_loss"]))
    a_attn, a_ffn, a_final = config.llama_alpha
    recipe = (f"no beta, alpha0 {a_attn:g} / {a_ffn:g} / {a_final:g} (attention / FFN / final, "
              "tuned at this width and lr), learnable embedding scalar")
    es = data["embed_scale"]
    rows = [
        _tuned(_pilot_gate(_parity(data, losses["dyt"], "RMSNorm", f"DyT with the paper's "
                                   f"LLM recipe ({recipe}) reaches RMSNorm's loss at the same "
                                   "hyperparameters", "LLaMA 7B-70B on 200B tokens: DyT "
                                   "matches RMSNorm's loss curves (alpha0 tuned per size and "
                                   "position)", "Zhu et al. 2025, LLaMA README and llama.py [V]",
                                   row_id="dyt-matches-rmsnorm"),
                           config, PARITY_TOL, "L_DyT - L_RMSNorm (nats)"), config),
        _tuned(_pilot_gate(_parity(data, losses["dyt"], "LN", f"DyT with the paper's LLM "
                                   f"recipe ({recipe}) reaches LayerNorm's loss at the same "
                                   "hyperparameters", "ViT-B 82.3 (LN) vs 82.5 (DyT); LLaMA "
                                   "loss parity", "Zhu et al. 2025 [V]",
                                   row_id="dyt-matches-layernorm"),
                           config, PARITY_TOL, "L_DyT - L_LN (nats)"), config),
        _pilot_gate(_s_curve_check(data), config, S_CURVE_GAIN,
                    "the first LayerNorm's tail R^2 gain"),
    ]
    if 0.5 in alpha_loss:
        rows.append(_parity(data, alpha_loss[0.5], "LN", "DyT with the non-LLM default (alpha0 "
                            "= 0.5 everywhere, with beta) against LayerNorm",
                            "the default for ViT, ConvNeXt, DiT, wav2vec; LLMs need the tuned "
                            "recipe", "Zhu et al. 2025 [V]", kind=SHOWN,
                            row_id="dyt-default-alpha-against-layernorm"))
    rows += [
        Check(id="dyt-alpha-sweep",
              claim="DyT with one alpha0 for every norm (with beta): final loss against alpha0",
              published="LLaMA 7B: alpha0 0.8 / 0.2 / 0.2 (attention / FFN / final); 70B: "
                        "0.2 / 0.05; too large an alpha0 hurts, more so in larger models",
              measured=", ".join(f"{a:g}: {S.mean_interval(alpha_loss[a]).text()}"
                                 for a in data["alphas"])
                       + f"; LayerNorm {S.mean_interval(losses['layernorm']).text()}",
              rule="shown (papers.md: a qualitative match; no alpha0 is chosen from these runs)",
              passed=None, kind=SHOWN, source="Zhu et al. 2025 [V]"),
        Check(id="learned-embedding-scale",
              claim="the learned embedding scalar at the end of training",
              published="initialized to sqrt(d) (llama.py shared_scale_init_value)",
              measured=f"{es['init']:.3g} at init -> "
                       + ", ".join(f"{v:.3g}" for v in es["final"]) + " (per seed)",
              rule="shown", passed=None, kind=SHOWN, source="Zhu et al. 2025, llama.py [V]"),
    ]
    return rows


def headline(data: dict, config: Config) -> str:
    mean, per = data["mean"], data["fits_per_seed"]
    d_ln = S.paired_interval(data["losses"]["dyt"], data["losses"]["layernorm"])
    d_rms = S.paired_interval(data["losses"]["dyt"], data["losses"]["rmsnorm"])
    gain = S.mean_interval([f[-1]["gain"] for f in per])
    return (f"final loss LN {fmt(mean['layernorm'])}, RMSNorm {fmt(mean['rmsnorm'])}, DyT "
            f"(LLaMA recipe) {fmt(mean['dyt'])} (DyT - LN {d_ln.text(2)}, DyT - RMSNorm "
            f"{d_rms.text(2)}); S-curve gain in the deepest LN {gain.text(2)}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, (a, b, c) = figure(3)
    for n in d["norms"]:
        ev = d["curves"][n]
        if not ev:
            continue
        a.plot([e["step"] for e in ev], [e["val_loss"] for e in ev], marker="o", ms=4,
               color=COLORS[n], label=f"{n} ({d['mean'][n]:.3f})")
    style(a, "validation loss (first seed; legend: mean over seeds)", "step",
          "validation NLL (nats/char)")
    al = [np.asarray(v) for v in d["alpha_loss"]]
    b.errorbar(d["alphas"], [v.mean() for v in al], marker="o", color=COLORS["dyt"], capsize=2,
               yerr=[S.t_factor(v.size) * S.standard_error(v) if v.size > 1 else 0 for v in al],
               label="DyT, one alpha0, with beta (bars: t 95%)")
    b.axhline(d["mean"]["dyt"], color=COLORS["dyt"], ls=":", lw=0.9,
              label="DyT, LLaMA recipe (mean)")
    b.axhline(d["mean"]["layernorm"], color=COLORS["layernorm"], ls="--", lw=0.9,
              label="LayerNorm (mean)")
    b.set_xscale("log")
    b.set_xticks(d["alphas"])
    b.set_xticklabels([f"{x:g}" for x in d["alphas"]])
    b.minorticks_off()
    style(b, "DyT: final loss vs alpha0", "alpha0", "final validation loss")
    for key, col in (("first", "#aaaaaa"), ("deepest", COLORS["layernorm"])):
        s = d["scatter"].get(key)
        if s:
            c.scatter(s["x"], s["y"], s=2, alpha=0.4, color=col, label=f"{key} LayerNorm")
    deep = d["fits"][-1]
    xs = np.linspace(min(d["scatter"]["deepest"]["x"]), max(d["scatter"]["deepest"]["x"]), 200)
    c.plot(xs, deep["a"] * np.tanh(deep["b"] * xs), color="k", lw=1,
           label=f"a tanh(bx), R^2 {deep['r2_tanh']:.3f}")
    c.plot(xs, deep["c"] * xs, color="k", ls=":", lw=1, label=f"cx, R^2 {deep['r2_linear']:.3f}")
    c.set_ylim(-6, 6)
    style(c, "trained LayerNorm: input vs normalized output", "LN input x",
          "(x - mean) / std")
    return [save(fig, out_dir, "dyt.png")]


# ---- the register's amendments: each change after a committed result, with the result before -

_RECIPE: dict[str, Any] = dict(
    date="2026-12-03", commit="778a154", remeasure=True,
    changed="the DyT arm from one alpha0 = 0.5 with beta (the paper's non-LLM default) to the "
            "paper's LLM recipe (no beta, alpha0 0.8 / 0.2 / 0.2 per position, a learnable "
            "embedding scalar from sqrt(d)), and parity from an equivalence band (+-0.03 nats) "
            "to non-inferiority (< +0.03), 1f22642; the full size was not measured before",
    why="the paper's DyT for language models is its LLaMA recipe (other_tasks/LLaMA README and "
        "llama.py: LLMs need alpha0 tuned per position); 'no loss of quality' is one-sided "
        "('matches or exceeds')")
_AT_HALF_LN = _row("FAIL", [0.09122858894636998, 0.14791488484831383],
                   "DyT - LN, paired over seeds: 0.12 [0.0912, 0.148] (n=3) nats")

AMENDMENTS: tuple[Amendment, ...] = (
    Amendment(id="dyt-matches-rmsnorm", before={
        "claim": "DyT (alpha0 = 0.5) matches RMSNorm", "form": "band",
        "margin": [-PARITY_TOL, PARITY_TOL], "side": ""}, **_RECIPE, results_before={
        "quick": _row("FAIL", [0.09686063586454678, 0.151560796973918],
                      "DyT - RMSNorm, paired over seeds: 0.124 [0.0969, 0.152] (n=3) nats")}),
    Amendment(id="dyt-matches-layernorm", before={
        "claim": "DyT (alpha0 = 0.5) matches LayerNorm with the same hyperparameters",
        "form": "band", "margin": [-PARITY_TOL, PARITY_TOL], "side": ""}, **_RECIPE,
        results_before={"quick": _AT_HALF_LN}),
    Amendment(
        id="dyt-tuned-alpha-matches-layernorm", date="2026-12-03", commit="778a154",
        retires=True,
        changed="retired with the LLM recipe (1f22642): no alpha0 is chosen from the verdict's "
                "own runs; the one-alpha0 grid is shown (dyt-alpha-sweep)",
        why="the row took the best alpha0 of the grid by its mean over the same seeds it then "
            "judged (a selection on the data), and with the best at 0.5 it read the interval of "
            "the alpha0 = 0.5 row (one effect counted twice: 0.12 [0.0912, 0.148] both)",
        results_before={"quick": _AT_HALF_LN}),
    Amendment(
        id="layernorm-is-s-shaped", date="2026-12-03", commit="778a154", remeasure=True,
        before={"form": "", "margin": []},
        changed="what is measured: the first norm's input now includes the embedding scale (the "
                "fit read the unscaled table), and the LayerNorm models are the parity arm's "
                "own, trained outside the sweep (1f22642); the rule (gain > 0.01 in the deepest "
                "LayerNorm, < 0.01 in the first) unchanged, its interval now over seeds "
                "(Student-t, 3a2fb9d)",
        why="the S-curve is read on the inputs the model feeds each LayerNorm (the notes); the "
            "full size was not measured before",
        results_before={"quick": _row(
            "pass", None, "R^2_tanh - R^2_linear over seeds: 0.0183 [0.0166, 0.0199] (n=3) in the "
                          "deepest LN, 0.00142 [0.000381, 0.00246] (n=3) in the first; 96.1% of "
                          "the deepest LN's points in |bx| < 1")}),
)

_TUNE = ("alpha0 per position tuned at this width and learning rate by a grid in a pilot (the "
         "paper's procedure for LLMs): at the quick size (0.8, 0.8, 0.8) for attention / FFN / "
         "final, from a 4 x 4 grid at seed 50000 and the best three at seeds 50000-50004 "
         "(TUNED_ALPHA), instead of the 7B row's (0.8, 0.2, 0.2) transplanted; the row is "
         "judged only where the arm's alpha0 is the one tuned at the run's width and lr (none "
         "is at the full size's d = 64: not judged there), and where the size's pilot says its "
         "seeds resolve the margin; measured again")
_TUNE_WHY = ("issue 58 section 2 and lab-audit.md row 13: the LLM recipe's alpha0 was the 7B "
             "model's (width 4096, lr 3e-4), while the paper tunes it per model (its README "
             "lowers it as models grow); at width 32 and lr 1e-2 the 7B row's alpha0 was no "
             "test of 'matches at tuned alpha0'. The pilot's grid is at seeds no verdict run "
             "uses (the retired best-alpha0 row chose on its own verdict seeds)")
AMENDMENTS = (*AMENDMENTS,
    Amendment(
        id="dyt-matches-rmsnorm", date="2026-12-07", commit="45a053f", remeasure=True,
        changed=_TUNE, why=_TUNE_WHY, before={"seeds_from": _OLD_SEEDS_FROM},
        results_before={
            "quick": _row("FAIL", [0.038744391217154936, 0.18294316557054952],
                          "DyT - RMSNorm, paired over seeds: 0.111 [0.0387, 0.183] (n=3) nats"),
            "full": _row("FAIL", [0.047551553213168986, 0.09037729928784588],
                         "DyT - RMSNorm, paired over seeds: 0.069 [0.0476, 0.0904] (n=6) "
                         "nats")}),
    Amendment(
        id="dyt-matches-layernorm", date="2026-12-07", commit="45a053f", remeasure=True,
        changed=_TUNE, why=_TUNE_WHY, before={"seeds_from": _OLD_SEEDS_FROM},
        results_before={
            "quick": _row("FAIL", [0.037009471063623095, 0.17540012668030036],
                          "DyT - LN, paired over seeds: 0.106 [0.037, 0.175] (n=3) nats"),
            "full": _row("FAIL", [0.04652889763971853, 0.08417807749980379],
                         "DyT - LN, paired over seeds: 0.0654 [0.0465, 0.0842] (n=6) nats")}),
    Amendment(
        id="layernorm-is-s-shaped", date="2026-12-07", commit="45a053f", remeasure=True,
        changed="the R^2 gain scored on the tail of each LayerNorm's input, the 1% of points of "
                "largest |x| (both fits still on all points), instead of on all points; the "
                "rule (> 0.01 in the deepest, < 0.01 in the first) unchanged; its own seed "
                "count, s_curve_seeds (LayerNorm models trained for the fit alone beyond the "
                "parity's seeds): 7 at the quick size, from the pilot; judged only where the "
                "size's pilot says its seeds resolve it",
        why="issue 58 section 2 and lab-audit.md row 13: the paper reads the S-shape off the "
            "extreme activations it squashes; in these small models 96-99.8% of the points lie "
            "in tanh's linear range, so a gain over all points is insensitive to the shape; "
            "issue 58 section 4: its seed count (s_curve_seeds, 7 at the quick size) from the "
            "pilot",
        before={"seeds": "seeds", "seeds_from": _OLD_SEEDS_FROM},
        results_before={
            "quick": _row("inconclusive", [-0.003017659670891331, 0.04871011161536036],
                          "R^2_tanh - R^2_linear over seeds: 0.0228 [-0.00302, 0.0487] (n=3) in "
                          "the deepest LN, 0.00142 [-0.000817, 0.00366] (n=3) in the first"),
            "full": _row("inconclusive", [0.005884823603291388, 0.012342840490348167],
                         "R^2_tanh - R^2_linear over seeds: 0.00911 [0.00588, 0.0123] (n=6) in "
                         "the deepest LN, 0.000184 [-3.09e-06, 0.00037] (n=6) in the first")}),
    Amendment(
        id="dyt-alpha-sweep", date="2026-12-07", commit="45a053f", remeasure=True,
        changed="the quick size's one-alpha0 grid from (0.2, 0.5, 2) to (0.5), the full size's",
        why="the per-position grid of the pilot (the notes) replaces it as the search over "
            "alpha0; the quick report's seconds go to the tuned arm",
        results_before={
            "quick": _row("shown", None, "0.2: 2.02 [1.99, 2.05] (n=3), 0.5: 2.01 [1.93, 2.09] "
                                         "(n=3), 2: 2.16 [2.04, 2.29] (n=3); LayerNorm 1.89 "
                                         "[1.86, 1.92] (n=3)", kind=SHOWN)}),
)
