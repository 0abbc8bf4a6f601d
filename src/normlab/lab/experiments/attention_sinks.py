"""``attention-sinks``: Qiu et al. 2025 (gated attention) and Gu et al. 2025 (sigmoid attention
without normalization): an output gate after the attention op, or attention whose weights are
not normalized over the keys, leaves no attention sink on the first token and no massive
activations, where softmax attention grows both.

Three arms of normlab's GPT, trained the same steps, learning rate and seeds on the characters of
``pydoc_data.topics`` (the massive-activations experiment's set-up, where Pre-LN's residual
stream grows massive activations): softmax attention (the baseline), gated attention
(``GPTConfig.attn_gate``: y * sigmoid(x W_g) after the op, Qiu et al.'s G1) and sigmoid attention
(``GPTConfig.attn_fn="sigmoid"`` with b = ``sigmoid_bias``: 0, Gu et al.'s sigmoid(q.k / sqrt(D))
with no bias and no normalization). Each arm's runs train in-process as one ensemble (a member is
its single run, bit for bit) and are read from each member's model, at initialization and at the
end, on the first validation batch (the same tokens for every run):

    sink:     Gu et al.'s Sink_1^0.3 (``normlab.train.probes.attention_sink``): the share of
              sequence x layer x head triples whose mean attention on the first token exceeds
              0.3 (each row read as shares, as the official code reads sigmoid attention)
    massive:  log10 max|x| of the residual stream after the last block (the massive-activations
              experiment's measure, ``residual_headroom``)
    loss:     the final validation loss

Premises first (the phenomenon the fixes are judged against, in the baseline): softmax's Sink
rate grows over training (end - init > 0) and so does its max|x| (log10 end / init > 0). The
counted rows, paired by seed against softmax: each fix's Sink rate lower, its max|x| lower, and
the gate's loss not worse by more than 0.1 nats (Qiu et al. claim the gate improves quality; Gu
et al. make no claim about sigmoid attention's loss, shown). A diverged run reads as at
initialization (its values at step 0, its loss at init), never as NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import Ensemble, TrainConfig, Trainer
from ...train.probes import SINK_EPS, attention_sink, residual_headroom
from ..contract import CLAIM, NON_INFERIORITY, PREMISE, SHOWN, SUPERIORITY, Card, Check, Record
from ..formatting import fmt
from ..stats import paired_interval
from . import _recipes as R

CARD = Card(
    name="attention-sinks",
    title="Attention sinks and massive activations: gated attention and sigmoid attention",
    citation="Qiu et al. 2025, 'Gated Attention for Large Language Models: Non-linearity, "
             "Sparsity, and Attention-Sink-Free' (arXiv 2505.06708); Gu et al. 2025, 'When "
             "Attention Sink Emerges in Language Models: An Empirical View' (ICLR 2025, arXiv "
             "2410.10781)",
    claim="An elementwise sigmoid gate after the attention op (Qiu et al.), or sigmoid attention "
          "without normalization (Gu et al.), removes the attention sink on the first token and "
          "the massive activations that softmax attention grows; the gate costs no quality.",
    published="Qiu et al.: the gate after SDPA takes the first token's attention from 46.7% to "
              "4.8% and the largest activation from 1053 to 94 (1.7B dense, Table 4 as the "
              "notes read it); Gu et al.: with sigmoid attention without normalization 'attention "
              "sinks do not emerge in LMs up to 1B parameters' (Sink_1^0.3, epsilon = 0.3)",
    method="normlab GPT on the characters of pydoc_data.topics (the massive-activations set-up: "
           "`base`), three arms trained alike at `seeds` seeds shared by all: softmax, the "
           "gate (attn_gate) and sigmoid attention with b = `sigmoid_bias`; each run read at "
           "initialization and at the end on the first validation batch: Gu et al.'s Sink_1^0.3 "
           "(normlab.train.probes.attention_sink), log10 max|x| after the last block, the final "
           "validation loss. Premises first (softmax grows a sink and massive activations); "
           "each fix paired by seed against softmax.",
    explanation="Softmax makes every query spend a unit of attention: a head with nothing to "
                "read parks it on a token every query sees, the first (Gu et al.: it acts as a "
                "key bias), and the values it reads there are kept small while the residual "
                "stream carries a few very large features that make the parking possible (the "
                "massive activations). A sigmoid gate after the op can switch the head's output "
                "off instead (Qiu et al.: query-dependent sparse gates), and sigmoid attention "
                "needs no unit to spend at all (each key's weight is its own).",
    short="a gate after the attention op or sigmoid attention removes the first-token sink and "
          "the massive activations",
)

ARMS = ("softmax", "gated", "sigmoid")
FIXES = ARMS[1:]
TOL = 0.1  # nats: papers.md's clear gap (section 1), the lab's placement margin
MARGIN = 0.0  # the sink and max|x| rows: the direction (the papers' factors are at 1B-15B)

BASE = R.derive(  # the massive-activations experiment's set-up (there Pre-LN grows massive
    # activations at lr 0.1), read on the three attention ops
    R.TEXT, "the massive-activations set-up: eight blocks, Xavier block matrices, no embedding "
    "scale or RoPE (learned positions), 150 steps, at lr 0.1, where Pre-LN's stream grows "
    "massive activations and a sink forms (the pilot, the notes)", {
        **R.TEXT_WITHOUT_ROPE_OR_EMBED_SCALE, "model.n_layers": 8, "model.init": "xavier",
        "steps": 150, "warmup": 15, "eval_interval": 150, "lr": 0.1})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (the arm and seed vary)
    sigmoid_bias: float = 0.0  # sigmoid attention's b: Gu et al.'s sigmoid(q.k / sqrt(D)) has
    #                            none (the official lit_gpt/model_attn_sim.py)
    seeds: int = 6  # training seeds shared by the three arms (seed, seed + 1, ...): paired
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(), "seeds": 2, "base.steps": 20, "base.warmup": 2,
             "base.eval_interval": 20, "base.batch_size": 4, "base.model.n_layers": 2,
             "base.model.seq_len": 16},
    "quick": {},
    "full": {"seeds": 8, "base.steps": 600, "base.warmup": 60, "base.eval_interval": 600},
}


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    m = cfg.base.model
    if m.attn_gate or m.attn_fn != "softmax":
        raise ValueError("base: the arms set the attention op; base.model must be softmax "
                         "attention without the gate (attn_gate False, attn_fn 'softmax')")
    if not math.isfinite(cfg.sigmoid_bias):
        raise ValueError(f"sigmoid_bias: a finite b for sigmoid attention; got "
                         f"{cfg.sigmoid_bias}")
    if cfg.seeds < 2:
        raise ValueError(f"seeds: the rows are intervals over seeds, so at least 2; got "
                         f"{cfg.seeds}")


def arm_overrides(arm: str, cfg: Config) -> dict[str, Any]:
    """The model fields that make ``arm`` from the base."""
    if arm == "gated":
        return {"model.attn_gate": True}
    if arm == "sigmoid":
        return {"model.attn_fn": "sigmoid", "model.attn_sigmoid_bias": float(cfg.sigmoid_bias)}
    if arm == "softmax":
        return {}
    raise ValueError(f"arm must be one of {ARMS}; got {arm!r}")


def _state(trainer: Trainer) -> dict:
    """One model read on the first validation batch: the sink (rate, per-head shares, mean
    share) and max|x| after every block."""
    idx = trainer.val[0][0]  # (B, T): the same tokens in every run
    sink = attention_sink(trainer.model, idx)
    with np.errstate(over="ignore", invalid="ignore"):
        head = residual_headroom(trainer.model, idx)
    return {"rate": sink["rate"], "share": sink["share"], "mean_share": sink["mean_share"],
            "max": [h["amax"] for h in head]}


def _train(configs: list[TrainConfig], progress) -> list[dict]:
    """The runs of one arm, trained in-process as one ensemble and read at init and at the
    end; a run that stopped reads as at init."""
    ens = Ensemble(configs)
    init = [_state(t) for t in ens.members]
    ens.run(progress=lambda step, total, _record: progress(step))
    out = []
    for t, at_init in zip(ens.members, init):
        diverged = t.stopped is not None
        end = at_init if diverged else _state(t)
        loss = t.first_loss if diverged else t.evals[-1]["val_loss"]
        loss = float("nan") if loss is None else float(loss)
        out.append({"init": at_init, "end": end, "loss": loss, "diverged": diverged})
    return out


def measure(config: Config, ctx) -> dict:
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    steps, arms = cfg.base.steps, {}
    total = len(ARMS) * steps
    for k, arm in enumerate(ARMS):
        configs = [cfg.base.with_overrides({**arm_overrides(arm, cfg), "seed": s})
                   for s in seeds]
        ctx.progress(k * steps, total, f"{arm}: {len(configs)} runs in one ensemble")
        arms[arm] = {"runs": _train(configs, lambda step, k=k, a=arm: ctx.progress(
            k * steps + step, total, f"{a}, step {step}"))}
    ctx.progress(total, total, "done")
    return {"seeds": seeds, "n_layers": cfg.base.model.n_layers, "eps": SINK_EPS,
            "sigmoid_bias": float(cfg.sigmoid_bias), "arms": arms}


# ---- the per-seed quantities ---------------------------------------------------------------
def values(data: dict, arm: str, what: str, when: str = "end") -> list[float]:
    """Per seed of ``arm``: ``rate`` (Sink_1^0.3, in percent), ``log_max`` (log10 max|x| after
    the last block), ``mean_share`` (the first token's share, averaged over sequences, layers
    and heads) at ``when`` ("init" or "end"), or ``loss`` (the final validation loss)."""
    rows = data["arms"][arm]["runs"]
    if what == "loss":
        return [float(r["loss"]) for r in rows]
    if what == "rate":
        return [100.0 * r[when]["rate"] for r in rows]
    if what == "log_max":
        return [math.log10(r[when]["max"][-1]) for r in rows]
    if what == "mean_share":
        return [float(r[when]["mean_share"]) for r in rows]
    raise ValueError(f"unknown quantity {what!r}")


def _mean(data: dict, arm: str, what: str) -> float:
    return float(np.mean(values(data, arm, what)))


def _premises(data: dict) -> list[Check]:
    """Softmax's sink and max|x| grow over training (paired: end against init)."""
    L = data["n_layers"]
    out = []
    for what, rec_id, measured in (
            ("rate", "softmax-grows-a-sink",
             "softmax's Sink_1^0.3 at the end - at init: {iv} points; {a:.3g}% from {b:.3g}%"),
            ("log_max", "softmax-grows-massive-activations",
             "softmax's log10 max|x| after block {L}, end - init: {iv}; {ma} from {mb}")):
        rec = RECORDS[rec_id]
        end, init = values(data, "softmax", what), values(data, "softmax", what, "init")
        iv = paired_interval(end, init)
        out.append(Check.superiority(
            id=rec.id, claim=rec.claim, published=_PUBLISHED[rec.id], interval=iv,
            side=rec.side, margin=rec.margin[0], kind=PREMISE,
            measured=measured.format(iv=iv.text(), a=np.mean(end), b=np.mean(init), L=L,
                                     ma=fmt(10 ** np.mean(end)), mb=fmt(10 ** np.mean(init))),
            rule=f"superiority: the paired interval of end - init > {rec.margin[0]:g} (the "
                 f"phenomenon the fixes are judged against)", source="normlab [D]",
            margin_source=rec.margin_source))
    return out


def _fix_rows(data: dict, arm: str) -> list[Check]:
    """The fix's counted rows against softmax, paired by seed."""
    L = data["n_layers"]
    rows = []
    for what, unit in (("rate", "points"), ("log_max", "")):
        rec = RECORDS[f"{arm}-removes-the-{'sink' if what == 'rate' else 'massive-activations'}"]
        iv = paired_interval(values(data, "softmax", what), values(data, arm, what))
        means = (f"{_mean(data, 'softmax', 'rate'):.3g}% vs {_mean(data, arm, 'rate'):.3g}%"
                 if what == "rate" else
                 f"max|x| {fmt(10 ** _mean(data, 'softmax', what))} vs "
                 f"{fmt(10 ** _mean(data, arm, what))}")
        label = "Sink_1^0.3" if what == "rate" else f"log10 max|x| after block {L}"
        rows.append(Check.superiority(
            id=rec.id, claim=rec.claim, published=_PUBLISHED[rec.id], interval=iv,
            side=rec.side, margin=rec.margin[0],
            measured=f"{label}, softmax - {arm}: {iv.text()} {unit}; {means}".replace("  ", " "),
            rule=f"superiority: the paired interval of softmax - {arm} > {rec.margin[0]:g}",
            source=_SOURCE[arm], margin_source=rec.margin_source))
    return rows


def judge(data: dict, config: Config) -> list[Check]:
    rows = _premises(data) + _fix_rows(data, "gated")
    rec = RECORDS["gated-costs-no-quality"]
    iv = paired_interval(values(data, "gated", "loss"), values(data, "softmax", "loss"))
    rows.append(Check.non_inferiority(
        id=rec.id, claim=rec.claim, published=_PUBLISHED[rec.id], interval=iv, side=rec.side,
        margin=rec.margin[0],
        measured=f"loss(gated) - loss(softmax) {iv.text()}; {_loss_means(data)}",
        source=_SOURCE["gated"], margin_source=rec.margin_source))
    rows += _fix_rows(data, "sigmoid")
    sig = paired_interval(values(data, "sigmoid", "loss"), values(data, "softmax", "loss"))
    rows.append(Check(
        id="sigmoid-loss-context", claim=RECORDS["sigmoid-loss-context"].claim, published="-",
        measured=f"loss(sigmoid) - loss(softmax) {sig.text()}; {_loss_means(data)}",
        rule="shown: Gu et al. state no claim on the loss", passed=None, kind=SHOWN,
        source=_SOURCE["sigmoid"]))
    rows.append(Check(
        id="first-token-share-context", claim=RECORDS["first-token-share-context"].claim,
        published="Qiu et al.: 46.7% (softmax) and 4.8% (gate) of the attention on the first "
                  "token", measured="; ".join(
                      f"{a} {_mean(data, a, 'mean_share'):.1%} (init "
                      f"{np.mean(values(data, a, 'mean_share', 'init')):.1%})" for a in ARMS),
        rule="shown: the first token's mean share over sequences, layers and heads",
        passed=None, kind=SHOWN, source="normlab [D]"))
    return rows


def _loss_means(data: dict) -> str:
    out = []
    for a in ARMS:
        n = sum(r["diverged"] for r in data["arms"][a]["runs"])
        out.append(f"{a} {fmt(_mean(data, a, 'loss'))}" + (f" ({n} diverged)" if n else ""))
    return ", ".join(out)


def headline(data: dict, config: Config) -> str:
    L = data["n_layers"]
    return ("Sink_1^0.3 " + ", ".join(f"{a} {_mean(data, a, 'rate'):.3g}%" for a in ARMS)
            + f"; max|x| after block {L} " + ", ".join(
                f"{a} {fmt(10 ** _mean(data, a, 'log_max'))}" for a in ARMS)
            + "; loss " + _loss_means(data) + " (means over seeds)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    colors = {"softmax": "#1f77b4", "gated": "#2ca02c", "sigmoid": "#d62728"}
    fig, (a, b, c) = figure(3)
    for i, arm in enumerate(ARMS):
        for when, marker in (("init", "o"), ("end", "s")):
            a.scatter([i + (0.15 if when == "end" else -0.15)] * len(d["seeds"]),
                      values(d, arm, "rate", when), color=colors[arm], marker=marker, s=16,
                      alpha=0.5 if when == "init" else 1.0)
            b.scatter([i + (0.15 if when == "end" else -0.15)] * len(d["seeds"]),
                      [10 ** v for v in values(d, arm, "log_max", when)], color=colors[arm],
                      marker=marker, s=16, alpha=0.5 if when == "init" else 1.0)
        share = np.mean([r["end"]["share"] for r in d["arms"][arm]["runs"]], axis=0)  # (L, H)
        c.plot(np.arange(1, share.shape[0] + 1), share.max(axis=1), marker="o", ms=3,
               color=colors[arm], label=f"{arm}: the largest head's share")
    c.axhline(d["eps"], color="k", ls=":", lw=0.9, label=f"Gu et al.'s epsilon {d['eps']:g}")
    for ax in (a, b):
        ax.set_xticks(range(len(ARMS)))
        ax.set_xticklabels(list(ARMS), fontsize=7)
    b.set_yscale("log")
    style(a, "Sink_1^0.3 per seed (circles: init, squares: end)", "arm", "percent of heads")
    style(b, "max |x| after the last block per seed", "arm", "max |x|")
    style(c, "first-token share by block (end, mean over seeds)", "block", "share")
    c.legend(fontsize=6)
    return [save(fig, out_dir, "attention_sinks.png")]


# ---- the claim register (normlab.lab.register) ---------------------------------------------
_QIU = "Qiu et al. 2025 (arXiv 2505.06708)"
_GU = "Gu et al. 2025 (arXiv 2410.10781)"
_QIU_SOURCE = ("\"Notably, we find this sparse gating mechanism mitigates 'massive activation', "
               "'attention sink' and enhances long-context extrapolation performance\" (the "
               "abstract); Table 4: first-token attention 46.7% -> 4.8%, max activation 1053 -> "
               "94 (the notes)")
_GU_SOURCE = ("\"After relaxing such dependence by replacing softmax attention with other "
              "attention operations, such as sigmoid attention without normalization, attention "
              "sinks do not emerge in LMs up to 1B parameters.\" (the abstract; Sink_1^epsilon "
              "with epsilon = 0.3, section 3.1 and the official eval_sink_open_source.py)")
_GU_MASSIVE = ("\"Finally, we scale up the model size to 1B parameters and find still no "
               "attention sink and massive activations.\" (the official README, "
               "sail-sg/Attention-Sink, of the sigmoid attention without normalization run)")
_SEEDS_FROM = ("a pilot at seeds 50000-50002 (2026-12-07, the notes): at the quick set-up "
               "softmax - gated is 1.5 points of Sink_1^0.3 (sd 1.6) and 0.09 in log10 max|x| "
               "(sd 0.21), softmax - sigmoid 9.8 points and -0.81; 6 seeds, the most the quick "
               "budget (about 60 s of CPU) pays for; at the full set-up (600 steps) the same "
               "differences are -4.5 and 0.24 (gated), 0.46 and -0.69 (sigmoid): 8 seeds")
_COMMON: dict[str, Any] = {"grid": ("base.steps", "base.lr", "base.model.n_layers"),
                           "seeds": "seeds", "seeds_from": _SEEDS_FROM,
                           "registered": "2026-12-07"}
_DIRECTION = "the direction: the papers' factors are of 1.7B-15B models (not transferred)"
_PREMISES = ("softmax-grows-a-sink", "softmax-grows-massive-activations")
REGISTER = (
    Record(id="softmax-grows-a-sink", kind=PREMISE,
           claim="premise: the softmax baseline's Sink_1^0.3 grows over training",
           source="\"We highlight that attention sink emerges after effective optimization on "
                  "sufficient training data.\"", where=f"{_GU}, abstract",
           form=SUPERIORITY, margin=(MARGIN,), side="above",
           margin_source="the phenomenon has to occur at all (end against init, paired)",
           **_COMMON),
    Record(id="softmax-grows-massive-activations", kind=PREMISE,
           claim="premise: the softmax baseline's max|x| after the last block grows over "
                 "training (the massive-activations measure)",
           source=_QIU_SOURCE, where=f"{_QIU}, abstract; Table 4 (the notes)",
           form=SUPERIORITY, margin=(MARGIN,), side="above",
           margin_source="the massive-activations experiment's premise: the growth has to "
                         "occur at all", **_COMMON),
    Record(id="gated-removes-the-sink", kind=CLAIM,
           claim="The gate after the attention op leaves a lower Sink_1^0.3 than softmax",
           source=_QIU_SOURCE, where=f"{_QIU}, abstract; Table 4 (the notes)",
           form=SUPERIORITY, margin=(MARGIN,), side="above", margin_source=_DIRECTION,
           premise=_PREMISES, **_COMMON),
    Record(id="gated-removes-the-massive-activations", kind=CLAIM,
           claim="The gate after the attention op leaves a lower max|x| than softmax",
           source=_QIU_SOURCE, where=f"{_QIU}, abstract; Table 4 (the notes)",
           form=SUPERIORITY, margin=(MARGIN,), side="above", margin_source=_DIRECTION,
           premise=_PREMISES, **_COMMON),
    Record(id="gated-costs-no-quality", kind=CLAIM,
           claim="The gate does not end worse than softmax by more than the margin",
           source="\"Our central finding is that a simple modification-applying a "
                  "head-specific sigmoid gate after the Scaled Dot-Product Attention "
                  "(SDPA)-consistently improves performance.\"", where=f"{_QIU}, abstract",
           form=NON_INFERIORITY, margin=(TOL,), side="below",
           margin_source="papers.md section 1: a clear gap is 0.1 nats",
           premise=_PREMISES, **_COMMON),
    Record(id="sigmoid-removes-the-sink", kind=CLAIM,
           claim="Sigmoid attention without normalization leaves a lower Sink_1^0.3 than "
                 "softmax",
           source=_GU_SOURCE,
           where=f"{_GU}, abstract; the official scripts/model_achitecture.md (sigmoid_no_norm)",
           form=SUPERIORITY, margin=(MARGIN,), side="above", margin_source=_DIRECTION,
           premise=_PREMISES, **_COMMON),
    Record(id="sigmoid-removes-the-massive-activations", kind=CLAIM,
           claim="Sigmoid attention without normalization leaves a lower max|x| than softmax",
           source=_GU_MASSIVE, where=f"{_GU}, the official code's README (1B models)",
           form=SUPERIORITY, margin=(MARGIN,), side="above", margin_source=_DIRECTION,
           premise=_PREMISES, **_COMMON),
    Record(id="sigmoid-loss-context", kind=SHOWN,
           claim="sigmoid attention's final loss against softmax's (context)", **_COMMON),
    Record(id="first-token-share-context", kind=SHOWN,
           claim="the first token's mean attention share per arm (Qiu et al.'s figure's "
                 "quantity, context)", **_COMMON),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()

_SOURCE = {"gated": f"{_QIU} [S]", "sigmoid": f"{_GU} [S]"}
_PUBLISHED = {
    "softmax-grows-a-sink": "sinks emerge after effective optimization (Gu et al.)",
    "softmax-grows-massive-activations": "max activation 1053 in the baseline (Qiu et al.)",
    "gated-removes-the-sink": "first-token attention 46.7% -> 4.8% (Qiu et al., Table 4)",
    "gated-removes-the-massive-activations": "max activation 1053 -> 94 (Qiu et al., Table 4)",
    "gated-costs-no-quality": "the gate 'consistently improves performance' (Qiu et al.)",
    "sigmoid-removes-the-sink": "'attention sinks do not emerge' up to 1B (Gu et al.)",
    "sigmoid-removes-the-massive-activations": "'still no attention sink and massive "
                                               "activations' at 1B (Gu et al.'s README)",
}
