"""``final-norm``: the chapter's claim about the norm before the output head (chapter 16, section
16.2): "The trade-off is that the residual stream's scale is less directly controlled, so
implementations often add final normalization before the output head."

An ablation of normlab's GPT (``GPTConfig.head_norm`` puts a norm before the head or takes it
away, whatever the placement's own choice) on pydoc characters (the text recipe: a task whose
arms end apart), at ``depth`` blocks. Each placement of ``placements`` (Pre-LN, Post-LN and, at
the full size, sandwich / peri-LN) with and without the final norm, the same learning rate and
seeds (paired). The effects are loss(without) - loss(with) per placement (nats/token, final
validation loss, a diverged run at its loss at init).

Premise first: the phenomenon the final norm is said to remedy occurs. On the trained Pre-LN in
its standard form (with the final norm), the residual stream's RMS at the head (after the last
block) over its RMS after the first block exceeds Xiong et al.'s Lemma 2 growth; the other arms
run only when it does. The same ratio of Pre-LN without its final norm is shown (the stream the
head reads there).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig
from .. import stats as S
from ..contract import (
    CLAIM,
    NON_INFERIORITY,
    PREMISE,
    SHOWN,
    SUPERIORITY,
    THRESHOLD,
    Card,
    Check,
    Record,
)
from ..formatting import fmt
from . import _recipes as R
from ._training import not_run, require_finished, run_points, seed_losses

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="final-norm",
    title="The chapter's claim: a final norm before the head, per placement",
    citation="Chapter 16 (Normalization, Residuals & Precision), section 16.2",
    claim="Pre-norm leaves the residual stream's scale uncontrolled, so a norm before the output "
          "head helps it; a post-norm stream leaves every block through a norm and needs none.",
    published="the chapter gives no number: 'implementations often add final normalization "
              "before the output head' (16.2)",
    method="normlab GPT (`GPTConfig.head_norm`) on pydoc characters (the text recipe, `base`) "
           "at `depth` blocks: each placement of `placements` with and without the norm before "
           "the head, `seeds` seed(s) paired. Premise first: the trained Pre-LN's residual "
           "stream at the head over its stream after the first block (RMS), against Xiong et "
           "al.'s Lemma 2 growth.",
    explanation="In Pre-LN (and sandwich) the residual stream is a sum of the branches' outputs "
                "that no norm rescales, so its scale grows with depth and the head reads an "
                "unnormalized vector unless a final norm sits before it; Post-LN's stream "
                "leaves every block through a norm already. The ablation keeps everything else "
                "and moves only the norm before the head.",
    short="the final norm helps Pre-LN (and sandwich), Post-LN needs none",
)

# The margins, fixed before measuring, with where they come from:
TOL = 0.1  # nats: papers.md's clear gap (section 1, reproduction B), the lab's placement margin
GROWTH = math.sqrt(2.0)  # the premise: RMS at the head / RMS after block 1 (see _GROWTH_SOURCE)

BASE = R.derive(R.TEXT, "the text recipe at `depth` blocks (the arms set the placement and the "
                "head's norm; the learning rate is the recipe's 1e-2, at which Post-LN trains "
                "at eight blocks and stalls at sixteen: the pilot, the notes)", {})
PLACEMENTS = ("pre", "post", "sandwich")  # the placements the claim concerns, Pre-LN first


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the text recipe; its n_layers is `depth`
    depth: int = 8  # L: blocks (the pilot: Pre-LN's stream grows, Post-LN trains; the notes)
    placements: tuple[str, ...] = ("pre", "post")  # of PLACEMENTS, "pre" first (the premise's)
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), "depth": 3, "base.steps": 40, "base.warmup": 8,
             "base.eval_interval": 20, "base.batch_size": 8, "base.model.seq_len": 16,
             "placements": PLACEMENTS, "seeds": 2},
    "quick": {},
    "full": {"placements": PLACEMENTS, "seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50002 (2026-12-07, the notes), eight blocks: the quick size "
               "gave the premise 2.28 [2.07, 2.49], Pre-LN -0.106 [-0.158, -0.0546], Post-LN "
               "0.00187 [-0.0232, 0.027] (n=3); sandwich -0.059 (one seed): 3 seeds (quick) and "
               "5 (full) decide every row at the 0.1 nats margin")
_QUICK_COST = ("the quick report's budget (about 60 s of CPU for this experiment) pays for two "
               "placements of four arms at three seeds (twelve text runs of eight blocks, about "
               "5 s of CPU each: the pilot, the notes); the full size adds sandwich")
_SOURCE = ("\"The trade-off is that the residual stream's scale is less directly controlled, so "
           "implementations often add final normalization before the output head.\"")
_WHERE = "chapter 16, section 16.2"
_GROWTH_SOURCE = ("Xiong et al. 2020, Lemma 2 (papers.md section 1): in Pre-LN (1 + l/2) d <= "
                  "E||x_l||^2 <= (1 + 3l/2) d, so from the first block to the eighth the "
                  "squared norm at least doubles ((1 + 8/2) / (1 + 3/2) = 2): an RMS ratio of "
                  "sqrt 2 at the lab's eight blocks")
REGISTER = (
    Record(id="pre-ln-stream-grows-to-the-head", kind=PREMISE,
           claim="Trained Pre-LN (with its final norm): the residual stream's RMS at the head "
                 "over its RMS after the first block exceeds Lemma 2's growth",
           source=_SOURCE + " (and 2.4, section 2: \"the scale of the running sum can grow "
                            "roughly with the number of blocks\")",
           where=_WHERE, form=THRESHOLD, margin=(GROWTH,), side="above",
           margin_source=_GROWTH_SOURCE, grid=("depth",), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           registered="2026-12-07"),
    Record(id="pre-ln-stream-without-final-norm", kind=SHOWN,
           claim="Pre-LN without its final norm: the same ratio of the stream the head reads "
                 "(context)",
           grid=("depth",), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="final-norm-helps-pre-ln", kind=CLAIM,
           claim="Pre-LN without the final norm ends clearly worse than with it",
           source=_SOURCE, where=_WHERE, form=SUPERIORITY, margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats", grid=("depth",),
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, premise=("pre-ln-stream-grows-to-the-head",),
           registered="2026-12-07"),
    Record(id="post-ln-needs-no-final-norm", kind=CLAIM,
           claim="Post-LN needs no final norm: without it Post-LN does not end clearly worse",
           source=_SOURCE + " (the scale the final norm controls is Pre-LN's: \"Post-norm "
                            "writes Norm(x + F(x))\")",
           where=_WHERE, form=NON_INFERIORITY, margin=(TOL,), side="below",
           margin_source="papers.md section 1: a clear gap is 0.1 nats (the band of the Pre-LN "
                         "row)", grid=("depth",), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("pre-ln-stream-grows-to-the-head",), registered="2026-12-07"),
    Record(id="final-norm-helps-sandwich", kind=CLAIM,
           claim="Sandwich (peri-LN) without the final norm ends clearly worse than with it",
           source=_SOURCE + " (sandwich's stream is, as Pre-LN's, a sum that no norm rescales)",
           where=_WHERE, form=SUPERIORITY, margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats", grid=("depth",),
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, premise=("pre-ln-stream-grows-to-the-head",),
           registered="2026-12-07", untested=_QUICK_COST, untested_at=("quick",)),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()

_ROW_OF = {"pre": "final-norm-helps-pre-ln", "post": "post-ln-needs-no-final-norm",
           "sandwich": "final-norm-helps-sandwich"}


def _variant(placement: str, final_norm: bool) -> str:
    """The data's key of an arm."""
    return f"{placement} {'final norm' if final_norm else 'no final norm'}"


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if not cfg.placements or cfg.placements[0] != "pre" or any(
            p not in PLACEMENTS for p in cfg.placements) or len(set(cfg.placements)) != len(
            cfg.placements):
        raise ValueError(f"placements: distinct names of {PLACEMENTS}, 'pre' first (the "
                         f"premise's arm); got {cfg.placements!r}")
    if cfg.base.model.norm == "none":
        raise ValueError("base: the arms need a norm to place before the head (model.norm not "
                         "'none')")
    if cfg.depth < 2:
        raise ValueError(f"depth: at least 2 blocks (the stream at the head against the first "
                         f"block's); got {cfg.depth!r}")


# ---- measuring -------------------------------------------------------------------------------
def _series(L: int) -> dict:
    """Per block, the residual stream's RMS after it (the training batch's, at each step)."""
    return {f"rms_{i}": (lambda rec, i=i: rec["residual_rms"][i]) for i in range(L)}


def _points(cfg: Config, arms, seeds: list[int]) -> list:
    return [(_variant(p, fn), {"model.n_layers": cfg.depth, "model.placement": p,
                               "model.head_norm": fn, "seed": s})
            for p, fn in arms for s in seeds]


def measure(config: Config, ctx) -> dict:
    """Premise first: Pre-LN with its final norm; the other arms only where its stream grows."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    series = _series(cfg.depth)
    first = [("pre", True)]
    runs = run_points(cfg.base, _points(cfg, first, seeds), ctx, series=series, name="premise")
    require_finished(runs)
    data: dict[str, Any] = {"depth": cfg.depth, "seeds": seeds, **_arm_data(runs, first)}
    if _premise(data).passed is not True:
        return {**data, "tested": False}
    rest = [("pre", False)] + [(p, fn) for p in cfg.placements[1:] for fn in (True, False)]
    more = run_points(cfg.base, _points(cfg, rest, seeds), ctx, series=series, name="arms")
    require_finished(more)
    return {"depth": cfg.depth, "seeds": seeds, **_arm_data(runs + more, first + rest)}


def _arm_data(runs: list, arms) -> dict:
    """Per arm: the final validation losses per seed (a diverged run at its loss at init) and,
    per seed, the stream's RMS after each block at the last step (None where not finite)."""
    out: dict[str, Any] = {"loss": {}, "rms": {}}
    for p, fn in arms:
        v = _variant(p, fn)
        out["loss"][v] = next(iter(seed_losses(runs, v).values()))
        out["rms"][v] = [[_last(r.curves.get(f"rms_{i}")) for i in range(len(r.curves))]
                         for r in sorted((r for r in runs if r.variant == v),
                                         key=lambda r: r.seed)]
    return out


def _last(curve) -> float | None:
    """The curve's last finite value (None where it has none)."""
    vals = [x for x in (curve or []) if x is not None and math.isfinite(x)]
    return float(vals[-1]) if vals else None


# ---- the rows ----------------------------------------------------------------------------------
def _ratios(data: dict, v: str) -> np.ndarray:
    """Per seed: the stream's RMS at the head over its RMS after the first block (a run with no
    finite RMS at the end: inf, a stream that is not controlled)."""
    out = []
    for rms in data["rms"][v]:
        first, head = (rms[0], rms[-1]) if rms else (None, None)
        out.append(head / first if first and head is not None else math.inf)
    return np.asarray(out, dtype=float)


def _premise(data: dict) -> Check:
    rec = RECORDS["pre-ln-stream-grows-to-the-head"]
    iv = S.mean_interval(_ratios(data, _variant("pre", True)))
    return Check.decided(
        id=rec.id, claim=rec.claim, published="Lemma 2: E||x_l||^2 grows linearly in l",
        interval=iv, threshold=rec.margin[0], side=rec.side, kind=PREMISE,
        measured=f"RMS at the head / after block 1, at L={data['depth']}: {iv.text()}",
        rule=f"interval > {rec.margin[0]:.3g}: the stream the final norm is said to control "
             f"is not controlled", source="normlab [D]", margin_source=rec.margin_source)


_TEXTS = {  # record id -> (published, rule, source) of the counted rows
    "final-norm-helps-pre-ln": (
        "implementations often add a final norm before the head (16.2)",
        "superiority: the paired interval of loss(Pre-LN without) - loss(with) > 0.1 nats",
        "chapter 16, section 16.2 [V]"),
    "post-ln-needs-no-final-norm": (
        "Post-norm writes Norm(x + F(x)) (16.2)",
        "non-inferiority: the paired interval of loss(Post-LN without) - loss(with) < 0.1 nats",
        "chapter 16, section 16.2 [V]"),
    "final-norm-helps-sandwich": (
        "implementations often add a final norm before the head (16.2)",
        "superiority: the paired interval of loss(sandwich without) - loss(with) > 0.1 nats",
        "chapter 16, section 16.2 [V]"),
}


def _counted(rec: Record, iv: S.Interval, measured: str) -> Check:
    """A counted row decided by its record's rule (form, margin, side, margin's source)."""
    published, rule, source = _TEXTS[rec.id]
    return Check.by_record(rec, iv, published=published, rule=rule, source=source,
                           measured=measured)


def judge(data: dict, config: Config) -> list[Check]:
    premise = _premise(data)
    ids = [_ROW_OF[p] for p in config.placements]
    if not data.get("tested", True):
        why = (f"the premise did not hold ({premise.measured}), so the arms that test the "
               f"claim were not trained")
        return [premise] + [dataclasses.replace(not_run(RECORDS[i].claim, *_TEXTS[i], why),
                                                id=i) for i in ids]
    ratio = S.mean_interval(_ratios(data, _variant("pre", False)))
    rows = [premise, Check(
        id="pre-ln-stream-without-final-norm", claim=RECORDS[
            "pre-ln-stream-without-final-norm"].claim, published="-", passed=None, kind=SHOWN,
        measured=f"RMS at the head / after block 1: {ratio.text()}", source="normlab [D]",
        rule="shown: the ratio of the arm without the final norm (the stream its head reads)")]
    for p, rec_id in zip(config.placements, ids):
        a, b = data["loss"][_variant(p, False)], data["loss"][_variant(p, True)]
        iv = S.mean_interval(np.asarray(a) - np.asarray(b))
        rows.append(_counted(RECORDS[rec_id], iv, f"loss({p} without) - loss({p} with) "
                                                  f"{iv.text()} at L={data['depth']}"))
    return rows


def headline(data: dict, config: Config) -> str:
    parts = []
    for p in config.placements:
        with_, without = (data["loss"].get(_variant(p, fn)) for fn in (True, False))
        parts.append(f"{p} {fmt(float(np.mean(with_))) if with_ else 'not run'} / "
                     f"{fmt(float(np.mean(without))) if without else 'not run'}")
    ratio = fmt(float(np.mean(_ratios(data, _variant("pre", True)))))
    return (f"pydoc, L={data['depth']}, final loss with / without the final norm: "
            + ", ".join(parts) + f"; Pre-LN's stream at the head / block 1: {ratio} "
            "(means over seeds)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    for i, (v, losses) in enumerate(d["loss"].items()):
        p = v.split()[0]
        a.scatter([i] * len(losses), losses, s=18, color=COLORS[p],
                  marker="o" if "no final" not in v else "x")
    a.set_xticks(range(len(d["loss"])))
    a.set_xticklabels(list(d["loss"]), fontsize=6, rotation=20)
    style(a, "pydoc text: final loss per seed", "arm", "final validation loss (nats/token)")
    for v, per_seed in d["rms"].items():
        prof = np.array([[np.nan if x is None else x for x in s] for s in per_seed], dtype=float)
        b.plot(np.arange(1, prof.shape[1] + 1), np.nanmean(prof, axis=0), color=COLORS[
            v.split()[0]], ls="-" if "no final" not in v else "--", label=v, lw=1.2)
    b.legend(fontsize=6)
    style(b, "residual stream at the end of training", "block", "RMS after the block (mean)")
    return [save(fig, out_dir, "final_norm.png")]
