"""``mix-ln``: Post-LN in the first blocks, Pre-LN in the rest (Li, Yin & Liu 2025, arXiv
2412.13795).

Pre-LN's deep blocks get small gradients, Post-LN's early blocks vanishing ones; Mix-LN
(``placement="mixln"``, the first floor(alpha L) blocks Post-LN, alpha = ``mixln_fraction``)
should give gradient norms more uniform across depth than either and a lower loss than either.
On pydoc characters (a task whose arms end apart), with ``base.model.n_layers`` blocks:

* premises first, on Post-LN and Pre-LN (seeds paired): each shows the non-uniformity the paper
  names (Post-LN's first block's gradient norm below its last block's, Pre-LN's last below its
  first), and the task separates the two (Post-LN ends above Pre-LN);
* then Mix-LN, the same seeds: the spread of its blocks' gradient norms (the standard deviation
  over blocks of log10 of each block's gradient norm, its mean over the steps) against
  each other arm's, and its final loss against each other arm's, paired by seed.

The runs are trained and read as ``layernorm_scaling``'s (:func:`read_run`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig
from .. import stats as S
from ..contract import CLAIM, PREMISE, SHOWN, SUPERIORITY, THRESHOLD, Card, Check, Record
from ..formatting import fmt
from . import _recipes as R
from .layernorm_scaling import check_base, deep_share, losses, paired, run_arms

LANE = "pool"  # its runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="mix-ln",
    title="Mix-LN: Post-LN in the first blocks and Pre-LN in the rest",
    citation="Li, Yin & Liu 2025, \"Mix-LN: Unleashing the Power of Deeper Layers by Combining "
             "Pre-LN and Post-LN\" (arXiv 2412.13795, ICLR 2025); official code pixeli99/MixLN",
    claim="Pre-LN's deep blocks get small gradients and Post-LN's early blocks vanishing ones; "
          "Post-LN in the first quarter of the blocks and Pre-LN in the rest gives gradient "
          "norms more uniform across depth and a lower loss than either.",
    published="LLaMA 70M to 7B on C4: Mix-LN below both Pre-LN's and Post-LN's perplexity; "
              "its per-layer gradient norms the most uniform (the paper's gradient-norm "
              "figure); alpha = 0.25 (POST_NUM = 3 of 12 layers)",
    method="normlab GPT on pydoc characters (the text recipe, `base`), Post-LN and Pre-LN "
           "first (premises), then Mix-LN (`placement='mixln'`, `fraction`), `seeds` seed(s) "
           "paired. Per run: each block's gradient norm (its mean over the steps), "
           "their spread over blocks (sd of log10), and the final validation loss.",
    explanation="Post-LN's stream leaves every block through a norm, so the gradient reaching "
                "block l is a product of the norms' Jacobians above it and shrinks towards the "
                "bottom; Pre-LN's identity path carries the gradient down unchanged while the "
                "stream grows, so its deep blocks' gradients shrink instead. Mix-LN's Post-LN "
                "blocks sit where Pre-LN's gradients are largest and its Pre-LN blocks where "
                "Post-LN's products are short.",
    short="Mix-LN: more uniform gradient norms and a lower loss than Pre-LN and Post-LN",
)

SIGN = 0.0  # the claims state a direction with no size (the abstract); the rows test the sign

BASE = R.derive(R.TEXT, "eight blocks, so that two of them are Post-LN at alpha = 0.25; no "
                "1/sqrt(2L) on the residual-writing projections (init 'fan_in': the official "
                "code's LLaMA init has none); batches of 8 and 150 steps at the quick size (the "
                "pilot's cost); per-block gradient norms recorded (grad_stats)", {
                    "model.n_layers": 8, "model.init": "fan_in", "batch_size": 8,
                    "steps": 150, "probes": ("grad_stats",)})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every arm's runs; the arms set model.placement
    fraction: float = 0.25  # Mix-LN's alpha: the official code's POST_NUM = 3 of 12 layers
    seeds: int = 5  # training seeds per arm (seed, seed + 1, ...): paired by seed (the pilot)
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(), "base.model.n_layers": 4, "base.steps": 30, "base.warmup": 5,
             "base.eval_interval": 15, "base.batch_size": 4, "base.model.seq_len": 16,
             "base.eval_batches": 2, "seeds": 2},
    "quick": {},
    "full": {"base.batch_size": 16, "base.steps": 300, "seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("pilots at seeds 50000-50004 (quick, `normlab run mix-ln --quick --seed "
               "50000`) and 50000-50001 (full, a /tmp script), 2026-12-07, the notes: "
               "_pilots.needed gives at most 5 seeds at the quick size (spread(Post-LN) - "
               "spread(Mix-LN): mean 0.081, sd 0.052) and at most 4 at the full size "
               "(spread(Pre-LN) - spread(Mix-LN): mean -0.026, sd 0.011), so 5 at both")
_WHERE = "arXiv 2412.13795, abstract; section 3 (the gradient norm per layer)"
_UNIFORM = ("\"Mix-LN applies Post-LN to the earlier layers and Pre-LN to the deeper layers, "
            "ensuring more uniform gradients across layers.\"")
_OUTPERFORMS = ("\"Extensive experiments with various model sizes from 70M to 7B demonstrate "
                "that Mix-LN consistently outperforms both Pre-LN and Post-LN, promoting more "
                "balanced, healthier gradient norms throughout the network, and enhancing the "
                "overall quality of LLM pre-training.\"")
_CLAIM_PREMISES = ("post-ln-early-gradients-smaller", "pre-ln-deep-gradients-smaller",
                   "text-separates-post-and-pre")
_SIGN_SOURCE = "the abstract states a direction with no size: the rows test its sign"


def _claim_record(id: str, claim: str, source: str, where: str) -> Record:
    return Record(id=id, kind=CLAIM, claim=claim, source=source, where=where, form=SUPERIORITY,
                  margin=(SIGN,), side="above", margin_source=_SIGN_SOURCE, grid=("fraction",),
                  seeds=_SEEDS, seeds_from=_SEEDS_FROM, premise=_CLAIM_PREMISES,
                  registered="2026-12-07")


REGISTER = (
    Record(id="post-ln-early-gradients-smaller", kind=PREMISE,
           claim="Post-LN's first block gets a smaller gradient norm than its last (log10 "
                 "ratio below 0)",
           source="\"In contrast, Post-Layer Normalization (Post-LN) preserves larger gradient "
                  "norms in deeper layers but suffers from vanishing gradients in earlier "
                  "layers.\"", where=_WHERE, form=THRESHOLD, margin=(SIGN,), side="below",
           margin_source=_SIGN_SOURCE, seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           registered="2026-12-07"),
    Record(id="pre-ln-deep-gradients-smaller", kind=PREMISE,
           claim="Pre-LN's last block gets a smaller gradient norm than its first (log10 ratio "
                 "below 0)",
           source="\"We demonstrate that Pre-LN, commonly employed in models like GPT and "
                  "LLaMA, leads to diminished gradient norms in its deeper layers, reducing "
                  "their effectiveness.\"", where=_WHERE, form=THRESHOLD, margin=(SIGN,),
           side="below", margin_source=_SIGN_SOURCE, seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           registered="2026-12-07"),
    Record(id="text-separates-post-and-pre", kind=PREMISE,
           claim="The text task separates Post-LN from Pre-LN (Post-LN ends higher)",
           source="\"... we identify it as a training shortfall rooted in the widespread use of "
                  "Pre-Layer Normalization (Pre-LN).\" (Post-LN and Pre-LN the two baselines "
                  "Mix-LN is judged against)", where="arXiv 2412.13795, abstract; section 4",
           form=SUPERIORITY, margin=(SIGN,), side="above",
           margin_source="the claims' margin (their sign): the task must resolve a difference "
                         "of that size between two arms", seeds=_SEEDS,
           seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    _claim_record("mixln-gradients-more-uniform-than-pre-ln",
                  "Mix-LN's gradient norms spread less over the blocks than Pre-LN's", _UNIFORM,
                  _WHERE),
    _claim_record("mixln-gradients-more-uniform-than-post-ln",
                  "Mix-LN's gradient norms spread less over the blocks than Post-LN's",
                  _UNIFORM, _WHERE),
    _claim_record("mixln-beats-pre-ln", "Mix-LN ends at a lower validation loss than Pre-LN",
                  _OUTPERFORMS, "arXiv 2412.13795, abstract; section 4 (perplexity table)"),
    _claim_record("mixln-beats-post-ln", "Mix-LN ends at a lower validation loss than Post-LN",
                  _OUTPERFORMS, "arXiv 2412.13795, abstract; section 4 (perplexity table)"),
    Record(id="deep-share-context", kind=SHOWN,
           claim="The deep half's share of the blocks' removal losses, per arm (context: the "
                 "paper's 'deeper layers contribute')", seeds=_SEEDS, registered="2026-12-07"),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()

PREMISE_ARMS = ("post", "pre")  # run first
ARMS = PREMISE_ARMS + ("mixln",)


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    check_base(cfg.base)
    if not 0.0 < cfg.fraction < 1.0:
        raise ValueError(f"fraction: Mix-LN's alpha must be in (0, 1); got {cfg.fraction!r}")
    post = math.floor(cfg.fraction * cfg.base.model.n_layers + 1e-9)
    if not 1 <= post < cfg.base.model.n_layers:
        raise ValueError(f"fraction: floor(alpha L) = {post} Post-LN blocks of "
                         f"{cfg.base.model.n_layers}; Mix-LN needs at least one of each kind")


# ---- per-seed quantities -------------------------------------------------------------------------
FLOOR = 1e-30  # a block whose gradient vanished at every step reads as this norm (float32's
#               smallest normal is 1.2e-38): its log stays finite and counts as the smallest


def log_grads(run: dict) -> np.ndarray:
    """log10 of each block's gradient norm (its mean over the steps), floored at ``FLOOR``."""
    return np.log10(np.maximum(np.asarray(run["grad"], dtype=float), FLOOR))


def spread(run: dict) -> float:
    """The spread of the blocks' gradient norms: the sd over blocks of log10 (ddof 0)."""
    return float(np.std(log_grads(run)))


def end_ratio(run: dict, last_over_first: bool) -> float:
    """log10 of the last block's gradient norm over the first's (or its inverse)."""
    g = log_grads(run)
    return float(g[-1] - g[0]) if last_over_first else float(g[0] - g[-1])


# ---- measure ---------------------------------------------------------------------------------
def measure(config: Config, ctx) -> dict:
    """Premises first: Post-LN and Pre-LN; Mix-LN only where every premise holds."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"n_layers": cfg.base.model.n_layers, "seeds": seeds,
                            "steps": cfg.base.steps, "fraction": cfg.fraction}
    data["arms"] = run_arms(cfg.base, PREMISE_ARMS, seeds, ctx)
    if not all(p.passed is True for p in _premises(data)):
        return {**data, "tested": False}
    data["arms"].update(run_arms(cfg.base, ("mixln",), seeds, ctx,
                                 extra={"mixln": {"model.mixln_fraction": cfg.fraction}}))
    return {**data, "tested": True}


# ---- the rows ----------------------------------------------------------------------------------
def _end_premise(rec_id: str, runs: list[dict], last_over_first: bool, what: str) -> Check:
    rec = RECORDS[rec_id]
    iv = S.mean_interval([end_ratio(r, last_over_first) for r in runs])
    return Check.decided(
        id=rec.id, claim=rec.claim, published="the paper's gradient-norm figure", interval=iv,
        threshold=rec.margin[0], side=rec.side, kind=PREMISE,
        measured=f"{what} {iv.text()}",
        rule="interval < 0: the non-uniformity Mix-LN is judged against",
        source="arXiv 2412.13795 [V]", margin_source=rec.margin_source)


def _premises(data: dict) -> list[Check]:
    arms = data["arms"]
    rows = [_end_premise("post-ln-early-gradients-smaller", arms["post"], False,
                         "Post-LN: log10(|g| first block / |g| last block)"),
            _end_premise("pre-ln-deep-gradients-smaller", arms["pre"], True,
                         "Pre-LN: log10(|g| last block / |g| first block)")]
    rec = RECORDS["text-separates-post-and-pre"]
    iv = paired(losses(arms["post"]), losses(arms["pre"]))
    rows.append(Check.superiority(
        id=rec.id, claim=rec.claim, published="-", interval=iv, side=rec.side,
        margin=rec.margin[0], kind=PREMISE,
        measured=f"loss(Post-LN) - loss(Pre-LN) {iv.text()}",
        rule="superiority: the paired interval > 0 (the task resolves the claims' margin "
             "between two arms)", source="normlab [D]", margin_source=rec.margin_source))
    return rows


_TEXTS = {  # record id -> (published, rule, the other arm, what)
    "mixln-gradients-more-uniform-than-pre-ln": (
        "more uniform gradients across layers", "spread(Pre-LN) - spread(Mix-LN) > 0", "pre",
        "spread"),
    "mixln-gradients-more-uniform-than-post-ln": (
        "more uniform gradients across layers", "spread(Post-LN) - spread(Mix-LN) > 0", "post",
        "spread"),
    "mixln-beats-pre-ln": (
        "Mix-LN below Pre-LN's perplexity, 70M-7B", "loss(Pre-LN) - loss(Mix-LN) > 0", "pre",
        "loss"),
    "mixln-beats-post-ln": (
        "Mix-LN below Post-LN's perplexity, 70M-7B", "loss(Post-LN) - loss(Mix-LN) > 0", "post",
        "loss"),
}


def _claim(rec_id: str, arms: dict) -> Check:
    rec = RECORDS[rec_id]
    published, rule, other, what = _TEXTS[rec_id]
    if what == "loss":
        iv = paired(losses(arms[other]), losses(arms["mixln"]))
    else:
        iv = paired(np.asarray([spread(r) for r in arms[other]]),
                    np.asarray([spread(r) for r in arms["mixln"]]))
    return Check.superiority(id=rec.id, claim=rec.claim, published=published, interval=iv,
                             side=rec.side, margin=rec.margin[0],
                             measured=f"{rule.split(' >')[0]} {iv.text()}",
                             rule=f"superiority: the paired interval of {rule}",
                             source="arXiv 2412.13795 [V]", margin_source=rec.margin_source)


def _not_run(rec_id: str) -> Check:
    rec = RECORDS[rec_id]
    published, rule, _, _ = _TEXTS[rec_id]
    return Check(id=rec.id, claim=rec.claim, published=published,
                 rule=f"superiority: the paired interval of {rule}",
                 measured="not run: a premise did not hold, so Mix-LN was not trained",
                 passed=None, source="arXiv 2412.13795 [V]", kind=CLAIM)


def judge(data: dict, config: Config) -> list[Check]:
    rows = _premises(data)
    if not data.get("tested", False):
        return rows + [_not_run(i) for i in _TEXTS]
    arms = data["arms"]
    rows += [_claim(i, arms) for i in _TEXTS]
    share = {a: fmt(float(np.nanmean([deep_share(r) for r in arms[a]]))) for a in ARMS}
    rows.append(Check(id="deep-share-context", claim=RECORDS["deep-share-context"].claim,
                      published="-", measured=", ".join(f"{a} {v}" for a, v in share.items()),
                      rule="shown: the deep half's share of the blocks' removal losses",
                      passed=None, kind=SHOWN, source="normlab [D]"))
    return rows


def headline(data: dict, config: Config) -> str:
    arms = data["arms"]
    parts = [f"{a} loss {fmt(float(np.mean(losses(arms[a]))))}, spread "
             f"{fmt(float(np.mean([spread(r) for r in arms[a]])))}" for a in ARMS if a in arms]
    return (f"L={data['n_layers']}, alpha {data['fraction']:g}, {data['steps']} steps: "
            + "; ".join(parts) + " (means over seeds; spread: sd over blocks of log10 |g|)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    colors = {"post": "#1f77b4", "pre": "#d62728", "mixln": "#9467bd"}
    for i, (arm, runs) in enumerate(d["arms"].items()):
        L = len(runs[0]["grad"])
        a.plot(range(1, L + 1), np.mean([log_grads(r) for r in runs], axis=0), marker="o",
               color=colors.get(arm), label=arm)
        b.scatter([i] * len(runs), losses(runs), color=colors.get(arm), s=18)
    b.set_xticks(range(len(d["arms"])))
    b.set_xticklabels(list(d["arms"]), fontsize=7)
    style(a, "gradient norm per block", "block l", "log10 |g| (mean over steps)")
    style(b, "final validation loss per seed", "arm", "nats/token", legend=False)
    return [save(fig, out_dir, "mix_ln.png")]
