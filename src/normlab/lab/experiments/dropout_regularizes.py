"""``dropout-regularizes``: the chapter's claim that inverted dropout is a regularizer, still
important for small data (chapter 16, section 16.2; Srivastava et al. 2014).

The text recipe (four Pre-LN blocks of width 32, RoPE, AdamW with warmup) without weight decay,
trained for many passes over a small slice of the pydoc characters (the first ``chars``
characters: the first 90% train, the rest validates), with and without inverted dropout on the
output of every residual branch (``GPTConfig.dropout`` = ``p_drop``), seeds paired. Each run
reports its validation NLL and its training NLL read the same way (evaluation mode, no dropout,
on fixed windows spread over the training split), so the generalization gap is val - train for
every arm alike. Premise first: without dropout the gap is open by more than the margin (the
model overfits the slice); the dropout arm runs only when it is.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TextSource, TrainConfig, Trainer
from .. import stats as S
from ..contract import CLAIM, PREMISE, SHOWN, SUPERIORITY, THRESHOLD, Card, Check, Record
from ..formatting import fmt
from . import _recipes as R
from ._training import not_run, run_tasks

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="dropout-regularizes",
    title="The chapter's claim: inverted dropout regularizes a model on small data",
    citation="Chapter 16 (Normalization, Residuals & Precision), section 16.2; Srivastava et "
             "al. 2014, 'Dropout: A Simple Way to Prevent Neural Networks from Overfitting', "
             "JMLR 15, abstract",
    claim="Inverted dropout is a regularizer: on data small enough to overfit it narrows the "
          "gap between the training and the validation loss and lowers the validation loss.",
    published="Srivastava et al. 2014: dropout 'significantly reduces overfitting'; the "
              "chapter gives no number",
    method="normlab GPT on the first `chars` characters of pydoc (90% train, 10% validation), "
           "the text recipe without weight decay (`base`), many passes over the slice; arms "
           "without dropout and with `p_drop` on every residual branch's output, `seeds` "
           "seed(s) paired. Train and validation NLL both in evaluation mode. Premise first.",
    explanation="A model that can memorize its training set drives the training loss far below "
                "the validation loss. Dropout zeroes each branch output with probability p and "
                "scales the rest by 1/(1 - p), so no unit can rely on a particular other unit "
                "being present; the network it trains is an average of thinned networks, which "
                "fits the training set less exactly and generalizes better.",
    short="dropout narrows the train/validation gap and lowers the validation loss on small "
          "data",
)

# The margins, fixed before measuring, with where they come from:
TOL = 0.1  # nats: papers.md's clear gap (section 1, reproduction B), the lab's placement margin
LOWER = 0.0  # "lowers the validation loss": the chapter states a direction and no size

BASE = R.derive(R.TEXT, "no weight decay (dropout is the only regularizer), 300 steps: about 34 "
                "passes over the quick slice's 4500 training characters at 16 x 32 per step; "
                "the data is set by `chars` at measure time", {
                    "weight_decay": 0.0, "steps": 300, "eval_interval": 300})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model and optimizer (data: the slice, see chars)
    chars: int = 5000  # the slice: the first chars characters of pydoc (90% train, 10% val)
    p_drop: float = 0.2  # the dropout arm's GPTConfig.dropout (fixed from the pilot: the notes)
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), "chars": 3000, "base.steps": 30,
             "base.warmup": 5, "base.eval_interval": 30, "base.batch_size": 4,
             "base.model.seq_len": 16, "base.model.n_layers": 2, "seeds": 2},
    "quick": {},
    "full": {"chars": 10000, "base.steps": 600, "base.eval_interval": 600, "seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50002 (2026-12-07, the notes): at the quick size the "
               "paired gap(0) - gap(0.2) 0.545 (sd 0.037) and val(0) - val(0.2) 0.219 (sd "
               "0.038), expected half-width at 3 seeds 0.095; at the full size (2 seeds) "
               "0.61 and 0.32 (sd 0.074): 3 seeds quick, 5 full")
_WHERE = "chapter 16, section 16.2"
_CHAPTER = ("\"It is a regularizer, not a normalization layer: it changes the noise in the "
            "training computation but does not estimate feature statistics. ... In many "
            "large-data LLM pretraining runs dropout rates are small or zero, but the mechanism "
            "remains important for smaller data, fine-tuning, and models outside language "
            "modeling.\"")
_SRIVASTAVA = ("Srivastava et al. 2014, abstract: \"Dropout is a technique for addressing this "
               "problem [overfitting]. ... This significantly reduces overfitting and gives "
               "major improvements over other regularization methods.\"")
REGISTER = (
    Record(id="no-dropout-overfits", kind=PREMISE,
           claim="Without dropout the model overfits the slice: validation NLL - training NLL "
                 "above the margin",
           source="\"... the mechanism remains important for smaller data ...\" (the "
                  "phenomenon a regularizer is judged against: overfitting)",
           where=_WHERE, form=THRESHOLD, margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats",
           grid=("chars", "base.steps"), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           registered="2026-12-07"),
    Record(id="train-loss-context", kind=SHOWN,
           claim="Both arms' training and validation NLL (evaluation mode), means over seeds",
           grid=("chars", "p_drop", "base.steps"), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="dropout-narrows-gap", kind=CLAIM,
           claim="Dropout narrows the train/validation gap by more than the margin",
           source=_CHAPTER + " " + _SRIVASTAVA, where=_WHERE + "; Srivastava et al. 2014, "
                                                       "abstract",
           form=SUPERIORITY, margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats (the premise's margin)",
           grid=("chars", "p_drop", "base.steps"), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("no-dropout-overfits",), registered="2026-12-07"),
    Record(id="dropout-lowers-val-loss", kind=CLAIM,
           claim="Dropout lowers the validation loss",
           source=_CHAPTER + " " + _SRIVASTAVA, where=_WHERE + "; Srivastava et al. 2014, "
                                                       "abstract",
           form=SUPERIORITY, margin=(LOWER,), side="above",
           margin_source="the chapter states a direction and no size: superiority at 0",
           grid=("chars", "p_drop", "base.steps"), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("no-dropout-overfits",), registered="2026-12-07"),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()


def _arm(p: float) -> str:
    """The data's key of an arm."""
    return "no dropout" if p == 0 else f"dropout {p:g}"


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if not 0.0 < cfg.p_drop < 1.0:
        raise ValueError(f"p_drop must be in (0, 1) (the dropout arm's rate); got {cfg.p_drop!r}")
    if cfg.seeds < 2:
        raise ValueError(f"seeds must be >= 2 (the rows are intervals over seeds); got "
                         f"{cfg.seeds}")
    if cfg.base.model.dropout != 0.0 or cfg.base.model.attn_dropout != 0.0:
        raise ValueError("base: the arms set model.dropout themselves; base.model.dropout and "
                         "base.model.attn_dropout must be 0")
    T = cfg.base.model.seq_len
    if not isinstance(cfg.chars, int) or cfg.chars // 10 < T + 1 + cfg.base.batch_size:
        raise ValueError(f"chars must be an integer whose validation tenth holds more than "
                         f"seq_len + 1 + batch_size = {T + 1 + cfg.base.batch_size} "
                         f"characters; got {cfg.chars!r}")
    if cfg.base.data != "pydoc":
        raise ValueError(f"base.data must be 'pydoc' (the slice is cut from it); got "
                         f"{cfg.base.data!r}")


def _windows(ids: np.ndarray, n: int, B: int, T: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` batches (B, T) of windows spread evenly over ``ids`` (as ``TextSource``'s
    validation batches are), targets shifted by one."""
    starts = np.linspace(0, len(ids) - T - 1, n * B).round().astype(np.int64)  # (n B,)
    seq = ids[starts[:, None] + np.arange(T + 1)]  # (n B, T + 1)
    return [(seq[i * B:(i + 1) * B, :-1], seq[i * B:(i + 1) * B, 1:]) for i in range(n)]


def train_one(job: tuple[TrainConfig, int]) -> dict:
    """One run on the slice: ``job`` = (config with data 'pydoc', chars). Writes the slice to a
    temporary UTF-8 file, trains on it (data 'file'), then reads the training NLL on fixed
    windows of the training split and the validation NLL, both in evaluation mode. A run that
    stopped (diverged) reads both as its loss at init."""
    from pydoc_data.topics import topics

    base, chars = job
    text = "\n\n".join(topics[k] for k in sorted(topics))[:chars]
    with tempfile.TemporaryDirectory(prefix="normlab-slice-") as tmp:
        path = os.path.join(tmp, "pydoc-slice.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        trainer = Trainer(base.with_overrides({"data": "file", "data_path": path}))
    res = trainer.run()
    init = float(res.history[0]["nll"])
    if res.stopped is not None:
        return {"train": init, "val": init, "loss_at_init": init, "stopped": res.stopped}
    cfg = trainer.config
    model = trainer.model
    model.eval()
    source = trainer.source
    assert isinstance(source, TextSource)  # data 'file'
    batches = _windows(source.train, cfg.eval_batches, cfg.batch_size, cfg.model.seq_len)
    train = float(np.mean([model.forward(x, y).nll for x, y in batches]))
    model.release()
    return {"train": train, "val": float(trainer.evaluate()), "loss_at_init": init,
            "stopped": None}


def _run_arm(cfg: Config, p: float, seeds: list[int], ctx) -> dict:
    jobs = [(cfg.base.with_overrides({"model.dropout": p, "seed": s}), cfg.chars) for s in seeds]
    out = run_tasks(train_one, jobs, ctx)
    return {k: [o[k] for o in out] for k in ("train", "val", "loss_at_init", "stopped")}


def measure(config: Config, ctx) -> dict:
    """Premise first: the arm without dropout trains first; the dropout arm only when it
    overfits by more than the margin."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"chars": cfg.chars, "p_drop": cfg.p_drop, "seeds": seeds,
                            "arms": {_arm(0.0): _run_arm(cfg, 0.0, seeds, ctx)}}
    if _premise(data).passed is not True:
        return {**data, "tested": False}
    data["arms"][_arm(cfg.p_drop)] = _run_arm(cfg, cfg.p_drop, seeds, ctx)
    return data


# ---- the rows ----------------------------------------------------------------------------------
def _gap(arm: dict) -> np.ndarray:
    """Per seed, validation NLL - training NLL (nats/token)."""
    return np.asarray(arm["val"], dtype=float) - np.asarray(arm["train"], dtype=float)


def _premise(data: dict) -> Check:
    rec = RECORDS["no-dropout-overfits"]
    iv = S.mean_interval(_gap(data["arms"][_arm(0.0)]))
    return Check.decided(
        id=rec.id, claim=rec.claim, published="-", interval=iv, threshold=rec.margin[0],
        side=rec.side, kind=PREMISE,
        measured=f"val - train NLL without dropout: {iv.text()} (chars={data['chars']})",
        rule=f"interval > {rec.margin[0]:g} nats: the overfitting a regularizer is judged "
             f"against", source="normlab [D]", margin_source=rec.margin_source)


_TEXTS = {  # record id -> (published, rule, source) of the counted rows
    "dropout-narrows-gap": (
        "dropout 'significantly reduces overfitting' (Srivastava et al. 2014, abstract)",
        "superiority: the paired interval over seeds of gap(no dropout) - gap(dropout) > "
        "0.1 nats", "chapter 16, section 16.2; Srivastava et al. 2014 [V]"),
    "dropout-lowers-val-loss": (
        "'the mechanism remains important for smaller data' (16.2)",
        "superiority: the paired interval over seeds of val(no dropout) - val(dropout) > 0",
        "chapter 16, section 16.2; Srivastava et al. 2014 [V]"),
}


def _counted(rec_id: str, iv: S.Interval, measured: str) -> Check:
    published, rule, source = _TEXTS[rec_id]
    return Check.by_record(RECORDS[rec_id], iv, published=published, rule=rule, source=source,
                           measured=measured)


def _not_run(rec_id: str, premise: Check) -> Check:
    why = (f"the premise did not hold ({premise.measured}), so the dropout arm was not "
           f"trained")
    return dataclasses.replace(not_run(RECORDS[rec_id].claim, *_TEXTS[rec_id], why), id=rec_id)


def _context(data: dict) -> Check:
    parts = [f"{a}: train {fmt(float(np.mean(v['train'])))}, val {fmt(float(np.mean(v['val'])))}"
             for a, v in data["arms"].items()]
    return Check(id="train-loss-context", claim=RECORDS["train-loss-context"].claim,
                 published="-", measured="; ".join(parts),
                 rule="shown: training and validation NLL, evaluation mode, means over seeds",
                 passed=None, kind=SHOWN, source="normlab [D]")


def judge(data: dict, config: Config) -> list[Check]:
    premise = _premise(data)
    ids = ("dropout-narrows-gap", "dropout-lowers-val-loss")
    if not data.get("tested", True):
        return [premise, _context(data)] + [_not_run(i, premise) for i in ids]
    no, yes = data["arms"][_arm(0.0)], data["arms"][_arm(data["p_drop"])]
    gap = S.mean_interval(_gap(no) - _gap(yes))
    val = S.mean_interval(np.asarray(no["val"], dtype=float) - np.asarray(yes["val"],
                                                                           dtype=float))
    p = f"p={data['p_drop']:g}"
    return [premise, _context(data),
            _counted(ids[0], gap, f"gap(no dropout) - gap({p}) {gap.text()}"),
            _counted(ids[1], val, f"val(no dropout) - val({p}) {val.text()}")]


def headline(data: dict, config: Config) -> str:
    out = [f"{a}: train {fmt(float(np.mean(v['train'])))}, val {fmt(float(np.mean(v['val'])))}"
           for a, v in data["arms"].items()]
    return (f"pydoc[:{data['chars']}], " + "; ".join(out) + " (nats/token, evaluation mode, "
            "means over seeds)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    colors = ("#d62728", "#1f77b4")
    for i, (arm, v) in enumerate(d["arms"].items()):
        a.scatter(v["train"], v["val"], color=colors[i % 2], s=18, label=arm)
        b.scatter([i] * len(v["val"]), _gap(v), color=colors[i % 2], s=18)
    lo = min(min(v["train"]) for v in d["arms"].values())
    hi = max(max(v["val"]) for v in d["arms"].values())
    a.plot([lo, hi], [lo, hi], color="k", ls=":", lw=0.8, label="no gap")
    a.legend(fontsize=6)
    style(a, "per seed: train and validation NLL", "train NLL (eval mode)", "validation NLL")
    b.axhline(TOL, color="k", ls=":", lw=0.8)
    b.set_xticks(range(len(d["arms"])))
    b.set_xticklabels(list(d["arms"]), fontsize=7)
    style(b, "generalization gap per seed", "arm", "val - train NLL (nats/token)")
    return [save(fig, out_dir, "dropout_regularizes.png")]
