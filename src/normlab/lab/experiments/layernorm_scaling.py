"""``layernorm-scaling``: the curse of depth and LayerNorm Scaling (Sun et al. 2025, arXiv
2502.05795).

Pre-LN's residual stream grows with depth, so its deep blocks add little to it: removing one of
them costs little loss. LayerNorm Scaling (``placement="lns"``) multiplies each block's norm
output by 1/sqrt(l) and, the paper says, makes the deep blocks contribute again and lowers the
loss. On pydoc characters (a task whose arms end apart), with ``base.model.n_layers`` blocks:

* premises first, on Post-LN and Pre-LN (seeds paired): Pre-LN shows the phenomenon by the
  paper's own measure (the loss change when one block is removed from the trained model: the
  deep half's share of the blocks' total is below one half), and the task separates two arms
  the source says differ (Post-LN ends above Pre-LN);
* then LayerNorm Scaling, the same seeds: its deep half's share against Pre-LN's (the
  mechanism) and its final loss against Pre-LN's (the claim), paired by seed.

Each run is trained in a worker (``_training.run_tasks``) and its trained model read there
(:func:`read_run`): the final validation loss, per block the loss change when the block is
removed, the angular distance between the block's input and output (Gromov et al.'s measure,
the official code's ``utils/angular_analysis.py``), and the block's gradient norm over
training (its mean over the steps, ``grad_stats``; Mix-LN reads it, ``mix_ln`` imports these
helpers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig, Trainer
from .. import stats as S
from ..contract import CLAIM, PREMISE, SHOWN, SUPERIORITY, THRESHOLD, Card, Check, Record
from ..formatting import fmt
from . import _recipes as R
from ._training import run_tasks

LANE = "pool"  # its runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="layernorm-scaling",
    title="The curse of depth: LayerNorm Scaling makes Pre-LN's deep blocks contribute",
    citation="Sun, Song, Li, Yin, Zheng & Liu 2025, \"The Curse of Depth in Large Language "
             "Models\" (arXiv 2502.05795); official code lmsdss/LayerNorm-Scaling",
    claim="Pre-LN's deep blocks contribute little (removing one costs little loss); scaling "
          "each block's norm output by 1/sqrt(l) makes them contribute more and lowers the "
          "pre-training loss.",
    published="LLaMA 130M to 7B on C4: LNS below Pre-LN's perplexity at every size (the "
              "field scan: 5-8% lower perplexity); the deep layers' performance drop on removal "
              "larger with LNS",
    method="normlab GPT on pydoc characters (the text recipe, `base`), Post-LN and Pre-LN "
           "first (premises), then LayerNorm Scaling (`placement='lns'`), `seeds` seed(s) "
           "paired. Each trained model is read: per block, the validation loss change when the "
           "block is removed and the angular distance between its input and output; the deep "
           "half's share of the removal losses; the final validation loss.",
    explanation="In Pre-LN the stream x_l = x_0 + sum of the branches grows with l, while each "
                "branch reads a normalized input and writes an output of fixed scale, so a deep "
                "block's write is a small fraction of the stream: its Jacobian is close to the "
                "identity and removing it changes little. Scaling the norm's output by "
                "1/sqrt(l) keeps the stream's variance growth polynomial (the paper's "
                "Theorem), so deep blocks write a larger share of it.",
    short="LNS makes Pre-LN's deep blocks contribute and lowers the loss",
)

# The margins, fixed before measuring, with where they come from:
HALF = 0.5  # the deep half's share of the removal losses: "less" than the early half below 1/2
SIGN = 0.0  # the claims state a direction with no size (the abstract); the rows test the sign

BASE = R.derive(R.TEXT, "eight blocks, so that Pre-LN has deep blocks to lose; no 1/sqrt(2L) "
                "on the residual-writing projections (init 'fan_in': the paper recommends "
                "removing scaled initialization with LNS, and its code's LLaMA init has none); "
                "batches of 8 and 150 steps at the quick size (the pilot's cost); per-block "
                "gradient norms recorded (grad_stats)", {
                    "model.n_layers": 8, "model.init": "fan_in", "batch_size": 8,
                    "steps": 150, "probes": ("grad_stats",)})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every arm's runs; the arms set model.placement
    loss_row: bool = True  # whether the loss claim is judged (False where the register lists it
    #                        as not tested at the size: the quick size, the pilot's seed count)
    seeds: int = 5  # training seeds per arm (seed, seed + 1, ...): paired by seed (the pilot)
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(), "base.model.n_layers": 4, "base.steps": 30, "base.warmup": 5,
             "base.eval_interval": 15, "base.batch_size": 4, "base.model.seq_len": 16,
             "base.eval_batches": 2, "seeds": 2},
    "quick": {"loss_row": False},
    "full": {"base.batch_size": 16, "base.steps": 300, "seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("pilots at seeds 50000-50004 (quick, `normlab run layernorm-scaling --quick "
               "--seed 50000`) and 50000-50001 (full, a /tmp script), 2026-12-07, the notes: "
               "_pilots.needed gives at most 3 seeds for every row judged at a size (the "
               "loss row at the full size: mean -0.083, sd 0.025, 3 seeds), so 5 at both")
_QUICK_LOSS = ("the quick pilot (seeds 50000-50004) puts loss(Pre-LN) - loss(LNS) at -0.0149, "
               "sd 0.0337: 23 seeds per arm would resolve its sign, three arms' worth of the "
               "quick report's budget several times over; the full size (300 steps, batch 16) "
               "decides it")
_WHERE = "arXiv 2502.05795, abstract; section 2 (the performance drop on removing a layer)"
_ABSTRACT_LOSS = ("\"Across a wide range of model sizes (130M to 7B), our experiments show that "
                  "LNS consistently outperforms previous normalization and scaling techniques "
                  "in enhancing LLM pre-training performance.\"")
REGISTER = (
    Record(id="pre-ln-deep-blocks-contribute-less", kind=PREMISE,
           claim="Pre-LN's deep half of blocks contributes less than its early half (share of "
                 "the removal losses below one half)",
           source="\"... the recent observation in modern Large Language Models (LLMs) where "
                  "nearly half of the layers are less effective than expected.\"",
           where=_WHERE, form=THRESHOLD, margin=(HALF,), side="below",
           margin_source="the claim's 'half of the layers': the deep half's share below 1/2",
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="text-separates-post-and-pre", kind=PREMISE,
           claim="The text task separates Post-LN from Pre-LN (Post-LN ends higher)",
           source="\"While Pre-LN stabilizes the training of Transformer LLMs, its output "
                  "variance exponentially grows with the model depth ...\"",
           where="arXiv 2502.05795, abstract; section 5 (Post-LN among the baselines)",
           form=SUPERIORITY, margin=(SIGN,), side="above",
           margin_source="the claims' margin (their sign): the task must resolve a difference "
                         "of that size between two arms", seeds=_SEEDS,
           seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="lns-deep-blocks-contribute-more", kind=CLAIM,
           claim="With LayerNorm Scaling the deep half's share of the removal losses is larger "
                 "than Pre-LN's",
           source="\"All these gains can be attributed to the fact that LayerNorm Scaling "
                  "enables deeper layers to contribute more effectively during training.\"",
           where=_WHERE, form=SUPERIORITY, margin=(SIGN,), side="above",
           margin_source="the abstract states a direction with no size: share(LNS) - "
                         "share(Pre-LN) > 0", seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("pre-ln-deep-blocks-contribute-less", "text-separates-post-and-pre"),
           registered="2026-12-07"),
    Record(id="lns-lowers-the-loss", kind=CLAIM,
           claim="LayerNorm Scaling ends at a lower validation loss than Pre-LN",
           source=_ABSTRACT_LOSS, where="arXiv 2502.05795, abstract; section 5 (perplexity "
                                       "against Pre-LN at every size)",
           form=SUPERIORITY, margin=(SIGN,), side="above",
           margin_source="the abstract states a direction with no size: loss(Pre-LN) - "
                         "loss(LNS) > 0 (the field scan's 5-8% lower perplexity, 0.05-0.08 "
                         "nats, is shown beside it)", seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("pre-ln-deep-blocks-contribute-less", "text-separates-post-and-pre"),
           registered="2026-12-07", untested=_QUICK_LOSS, untested_at=("quick",)),
    Record(id="angular-distance-context", kind=SHOWN,
           claim="The deep half's mean angular distance between a block's input and output, per "
                 "arm (context)", seeds=_SEEDS, registered="2026-12-07"),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()

PREMISE_ARMS = ("post", "pre")  # run first
ARMS = PREMISE_ARMS + ("lns",)


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    check_base(cfg.base)
    if cfg.base.model.init == "normal":
        raise ValueError("base.model.init: 'normal' scales the residual-writing projections by "
                         "1/sqrt(2L), which the paper says diminishes LNS; use 'fan_in' or "
                         "'xavier'")


def check_base(base: TrainConfig) -> None:
    """The arms' base: a norm, at least four blocks (two halves), grad_stats recorded."""
    if base.model.n_layers < 4:
        raise ValueError(f"base.model.n_layers: the deep half needs at least 4 blocks; got "
                         f"{base.model.n_layers}")
    if base.model.norm == "none":
        raise ValueError("base.model.norm: the arms place a norm; 'none' is not accepted")
    if "grad_stats" not in base.probes:
        raise ValueError("base.probes: the per-block gradient norms need 'grad_stats'")


# ---- one run, trained and read in a worker ------------------------------------------------------
def angular_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Gromov et al.'s angular distance arccos(cos(a_t, b_t)) / pi, averaged over the tokens of
    two streams (B, T, C)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, a.shape[-1])  # (B*T, C)
    b = np.asarray(b, dtype=np.float64).reshape(-1, b.shape[-1])
    cos = np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return float(np.mean(np.arccos(np.clip(cos, -1.0, 1.0)) / np.pi))


def _removal_losses(trainer: Trainer, full: float) -> list[float]:
    """Per block: the validation loss with that block removed minus the full model's."""
    model = trainer.model
    blocks = model.blocks
    out = []
    try:
        for skip in range(len(blocks)):
            model.blocks = blocks[:skip] + blocks[skip + 1:]
            out.append(float(trainer.evaluate() - full))
    finally:
        model.blocks = blocks
    return out


def read_run(cfg: TrainConfig) -> dict:
    """Train ``cfg`` and read the trained model (see the module docstring). A diverged run reads
    as its loss at init (the lab's rule), with no per-block measures; its gradient norms (per
    block, the mean over the steps of its norm) are those of the steps before it stopped."""
    trainer = Trainer(cfg)
    trainer.run()
    L = len(trainer.model.blocks)
    rows = [h["layer_grad_norm"] for h in trainer.history if "layer_grad_norm" in h]
    g = np.asarray([r for r in rows if all(math.isfinite(v) for v in r)])  # (steps, L)
    out: dict[str, Any] = {
        "status": "done" if trainer.stopped is None else "diverged",
        "loss_at_init": trainer.first_loss,
        "grad": np.mean(g, axis=0).tolist() if len(g) else [0.0] * L}
    if trainer.stopped is not None:
        return {**out, "loss": trainer.first_loss, "removal": None, "angular": None}
    full = float(trainer.evals[-1]["val_loss"])
    model = trainer.model
    model.eval()
    idx = trainer.val[0][0]  # (B, T): the first validation batch
    xs = [model._embed(idx)] + model.residual_stream(idx)  # L + 1 arrays (B, T, C)
    model.train()
    return {**out, "loss": full, "removal": _removal_losses(trainer, full),
            "angular": [angular_distance(xs[i], xs[i + 1]) for i in range(L)]}


def run_arms(base: TrainConfig, arms: tuple[str, ...], seeds: list[int], ctx,
             extra: dict[str, dict] | None = None) -> dict[str, list[dict]]:
    """Each arm (a placement) at each seed, trained and read in the executor's workers:
    arm -> one :func:`read_run` dict per seed. ``extra``: arm -> more overrides."""
    extra = extra or {}
    configs = [base.with_overrides({"model.placement": a, "seed": s, **extra.get(a, {})})
               for a in arms for s in seeds]
    done = run_tasks(read_run, configs, ctx, progress=lambda k: ctx.progress(
        k, len(configs), f"{len(configs)} runs"))
    return {a: done[i * len(seeds):(i + 1) * len(seeds)] for i, a in enumerate(arms)}


# ---- per-seed quantities -------------------------------------------------------------------------
def losses(runs: list[dict]) -> np.ndarray:
    """Per seed: the final validation loss (a diverged run at its loss at init)."""
    return np.asarray([r["loss"] for r in runs], dtype=float)


def deep_share(run: dict) -> float:
    """The deep half's share of the blocks' removal losses (NaN for a diverged run)."""
    if run["removal"] is None:
        return math.nan
    r = np.asarray(run["removal"], dtype=float)
    return float(np.sum(r[len(r) // 2:]) / np.sum(r))


def deep_angular(run: dict) -> float:
    """The deep half's mean angular distance (NaN for a diverged run)."""
    if run["angular"] is None:
        return math.nan
    a = np.asarray(run["angular"], dtype=float)
    return float(np.mean(a[len(a) // 2:]))


def paired(values_a: np.ndarray, values_b: np.ndarray) -> S.Interval:
    """The paired interval over the seeds where both are finite of a - b."""
    d = np.asarray(values_a, dtype=float) - np.asarray(values_b, dtype=float)
    return S.mean_interval(d[np.isfinite(d)])


# ---- measure ---------------------------------------------------------------------------------
def measure(config: Config, ctx) -> dict:
    """Premises first: Post-LN and Pre-LN; LayerNorm Scaling only where both premises hold."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"n_layers": cfg.base.model.n_layers, "seeds": seeds,
                            "steps": cfg.base.steps}
    data["arms"] = run_arms(cfg.base, PREMISE_ARMS, seeds, ctx)
    if not all(p.passed is True for p in _premises(data)):
        return {**data, "tested": False}
    data["arms"].update(run_arms(cfg.base, ("lns",), seeds, ctx))
    return {**data, "tested": True}


# ---- the rows ----------------------------------------------------------------------------------
def _premises(data: dict) -> list[Check]:
    arms = data["arms"]
    rec = RECORDS["pre-ln-deep-blocks-contribute-less"]
    share = np.asarray([deep_share(r) for r in arms["pre"]])
    iv = S.mean_interval(share[np.isfinite(share)])
    phen = Check.decided(
        id=rec.id, claim=rec.claim, published="nearly half of the layers less effective",
        interval=iv, threshold=rec.margin[0], side=rec.side, kind=PREMISE,
        measured=f"Pre-LN's deep half's share of the removal losses {iv.text()}",
        rule=f"interval < {rec.margin[0]:g}: the phenomenon the fix is judged against",
        source="arXiv 2502.05795 [V]", margin_source=rec.margin_source)
    rec = RECORDS["text-separates-post-and-pre"]
    iv = paired(losses(arms["post"]), losses(arms["pre"]))
    sep = Check.superiority(
        id=rec.id, claim=rec.claim, published="-", interval=iv, side=rec.side,
        margin=rec.margin[0], kind=PREMISE,
        measured=f"loss(Post-LN) - loss(Pre-LN) {iv.text()}",
        rule="superiority: the paired interval > 0 (the task resolves the claims' margin "
             "between two arms)", source="normlab [D]", margin_source=rec.margin_source)
    return [phen, sep]


_TEXTS = {  # record id -> (published, rule)
    "lns-deep-blocks-contribute-more": (
        "the deep layers' performance drop larger with LNS (section 5)",
        "superiority: the paired interval of share(LNS) - share(Pre-LN) > 0"),
    "lns-lowers-the-loss": (
        "LNS below Pre-LN's perplexity at 130M-7B (the field scan: 5-8%)",
        "superiority: the paired interval of loss(Pre-LN) - loss(LNS) > 0"),
}


def _claim(rec_id: str, iv: S.Interval, measured: str) -> Check:
    rec = RECORDS[rec_id]
    published, rule = _TEXTS[rec_id]
    return Check.superiority(id=rec.id, claim=rec.claim, published=published, interval=iv,
                             side=rec.side, margin=rec.margin[0], measured=measured,
                             rule=rule, source="arXiv 2502.05795 [V]",
                             margin_source=rec.margin_source)


def _not_run(rec_id: str) -> Check:
    rec = RECORDS[rec_id]
    published, rule = _TEXTS[rec_id]
    return Check(id=rec.id, claim=rec.claim, published=published, rule=rule,
                 measured="not run: a premise did not hold, so LayerNorm Scaling was not "
                          "trained", passed=None, source="arXiv 2502.05795 [V]", kind=CLAIM)


def judge(data: dict, config: Config) -> list[Check]:
    rows = _premises(data)
    ids = [i for i in _TEXTS if config.loss_row or i != "lns-lowers-the-loss"]
    if not data.get("tested", False):
        return rows + [_not_run(i) for i in ids]
    arms = data["arms"]
    pre_share = np.asarray([deep_share(r) for r in arms["pre"]])
    lns_share = np.asarray([deep_share(r) for r in arms["lns"]])
    iv = paired(lns_share, pre_share)
    rows.append(_claim("lns-deep-blocks-contribute-more", iv,
                       f"share(LNS) - share(Pre-LN) {iv.text()}"))
    if config.loss_row:
        iv = paired(losses(arms["pre"]), losses(arms["lns"]))
        rows.append(_claim("lns-lowers-the-loss", iv,
                           f"loss(Pre-LN) - loss(LNS) {iv.text()} nats (Pre-LN's perplexity "
                           f"over LNS's {100 * (math.exp(iv.mean) - 1.0):+.1f}%)"))
    ang = {a: fmt(float(np.nanmean([deep_angular(r) for r in arms[a]]))) for a in ARMS}
    rows.append(Check(id="angular-distance-context",
                      claim=RECORDS["angular-distance-context"].claim, published="-",
                      measured=", ".join(f"{a} {v}" for a, v in ang.items()),
                      rule="shown: arccos(cos(x_l, x_l+1)) / pi over the deep half's blocks",
                      passed=None, kind=SHOWN, source="normlab [D]"))
    return rows


def headline(data: dict, config: Config) -> str:
    arms = data["arms"]
    parts = [f"{a} loss {fmt(float(np.mean(losses(arms[a]))))}, deep share "
             f"{fmt(float(np.nanmean([deep_share(r) for r in arms[a]])))}"
             for a in ARMS if a in arms]
    return f"L={data['n_layers']}, {data['steps']} steps: " + "; ".join(parts) + \
        " (means over seeds)"


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    colors = {"post": "#1f77b4", "pre": "#d62728", "lns": "#2ca02c", "mixln": "#9467bd"}
    for arm, runs in d["arms"].items():
        done = [r for r in runs if r["removal"] is not None]
        if done:
            L = len(done[0]["removal"])
            a.plot(range(1, L + 1), np.mean([r["removal"] for r in done], axis=0),
                   marker="o", color=colors.get(arm), label=arm)
            b.plot(range(1, L + 1), np.mean([r["angular"] for r in done], axis=0),
                   marker="o", color=colors.get(arm), label=arm)
    style(a, "loss change when block l is removed", "block l", "nats/token (mean over seeds)")
    style(b, "angular distance of block l", "block l", "arccos(cos) / pi (mean over seeds)")
    return [save(fig, out_dir, f"{result.name.replace('-', '_')}.png")]
