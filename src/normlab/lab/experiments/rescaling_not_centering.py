"""``rescaling-not-centering``: the chapter's claim that LayerNorm's stabilizing effect comes from
its rescaling, not its centering (chapter 2.4, section 5; Zhang & Sennrich 2019).

Four arms of one Pre-LN model on the Markov source, each LayerNorm with one operation more or
less: neither (``norm='none'``), centering only (``'centernorm'``: x - mean(x), with LayerNorm's
gain and bias), rescaling only (``'rmsnorm'``) and both (``'layernorm'``), each trained at
every learning rate of the lab's one grid (Wortsman et al.'s {3e-4, ..., 0.3}) at the same
seeds. The stability measure is norm-and-learning-rate's: a seed's highest stable learning rate
on the grid (the highest lr at which the run closes half the way from ln V to the floor), as an
index in grid steps (half a decade each), compared between arms seed by seed.

Premise first: the task shows LayerNorm's stabilizing effect at all (both beats neither by more
than half a grid step); the centering-only and rescaling-only arms run only when it does.
"""

from __future__ import annotations

import dataclasses
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
    Card,
    Check,
    Record,
)
from . import _recipes as R
from ._training import not_run
from .attention_logit_growth import PAPER_LRS
from .norm_and_learning_rate import STEP, indices, lr_text, run_arms

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="rescaling-not-centering",
    title="The chapter's claim: rescaling, not centering, is what stabilizes",
    citation="Chapter 2.4 (Normalization and Stabilization), section 5; Zhang & Sennrich 2019 "
             "(RMSNorm, arXiv:1910.07467)",
    claim="The rescaling is the component responsible for LayerNorm's stabilizing effect: "
          "rescaling alone (RMSNorm) stabilizes training as well as LayerNorm, and centering "
          "alone does not.",
    published="Zhang & Sennrich 2019: re-centering invariance is dispensable; RMSNorm matches "
              "LayerNorm; the chapter gives no number",
    method="normlab GPT, Pre-LN of the Xiong/Markov recipe's six blocks, with no norm, "
           "centering only (`centernorm`), rescaling only (`rmsnorm`) and both (`layernorm`), "
           "trained at every lr of the lab's grid (`lrs`), `seeds` seed(s) paired. The "
           "stability measure: a seed's highest stable lr on the grid, in grid steps. "
           "Premise first.",
    explanation="Centering leaves the scale of the residual stream and of the logits to grow "
                "with the updates, as no norm does; rescaling bounds what every sublayer and "
                "the head read whatever the stream's size, and makes the output invariant to "
                "the scale of the weights before it (Zhang & Sennrich's table 1: RMSNorm keeps "
                "LayerNorm's re-scaling invariances and drops the re-centering ones).",
    short="rescaling alone stabilizes as LayerNorm does; centering alone does not",
)

ARMS = {"layernorm": "both", "none": "neither", "rmsnorm": "rescaling only",
        "centernorm": "centering only"}  # model.norm -> its arm, the premise's two first
DROP = 1.0  # grid steps: "little to no loss" is at most one grid step (half a decade) lower

BASE = R.derive(R.XIONG_MARKOV, "Pre-LN (the arms differ only in model.norm); the lr is the "
                "grid's", {"model.placement": "pre"})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the Markov recipe, Pre-LN; model.norm is the arm's
    lrs: tuple[float, ...] = PAPER_LRS  # the lab's one grid (Wortsman et al.'s), every point
    judge_dropping: bool = False  # whether the non-inferiority row is judged (False where the
    #                               register lists it as not tested at the size)
    seeds: int = 3  # training seeds per arm and lr (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), "lrs": (1e-3, 1e-2, 1e-1), "base.steps": 40,
             "base.eval_interval": 20, "base.batch_size": 8, "base.model.seq_len": 8,
             "seeds": 2, "judge_dropping": True},
    "quick": {},
    "full": {"seeds": 8, "judge_dropping": True},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_PILOT = ("a pilot at seeds 50000-50003 (2026-12-07, the notes): highest stable lr (index on "
          "the grid) with LayerNorm 6, 6, 6, 6, rescaling only 6, 6, 5, 6, centering only 2, 2, "
          "2, 2 and neither 2, 2, 2, 2")
_SEEDS_FROM = (_PILOT + ": rescaling minus centering 3.75 (sd 0.5) clears the half-step "
               "margin at 3 seeds (quick) and 8 (full)")
_DROP_SEEDS_FROM = (_PILOT + ": both minus rescaling 0.25 (sd 0.5), 0.75 from the one-step "
                    "margin; the expected half-width is 1.24 at 3 seeds and 0.42 at 8 (5 needed), "
                    "so the full size's 8 seeds decide it")
_WHERE = "chapter 2.4, section 5; Zhang & Sennrich 2019, abstract"
_SOURCE = ("\"Their answer, backed by both argument and experiment, is that the rescaling - "
           "controlling the overall magnitude, or root-mean-square, of the activation vector - "
           "is the component actually responsible for LayerNorm's stabilizing effect, and the "
           "mean-centering step can be dropped with little to no loss in model quality, while "
           "saving real computation.\"")
_QUICK_SEEDS = ("the pilot (the notes): at the quick size's 3 seeds the expected interval of "
                "both minus rescaling (half-width 1.24 steps) does not clear the one-step "
                "margin, 0.75 away; the full size's 8 seeds do (0.42)")
REGISTER = (
    Record(id="layernorm-stabilizes-here", kind=PREMISE,
           claim="The task shows LayerNorm's stabilizing effect: with LayerNorm the highest "
                 "stable lr is higher than with no norm",
           source=_SOURCE, where=_WHERE, form=SUPERIORITY, margin=(STEP,), side="above",
           margin_source="norm-and-learning-rate's margin: half a grid step (the gaps are "
                         "whole steps)",
           grid=("lrs",), seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="centering-alone-context", kind=SHOWN,
           claim="Centering only minus neither: whether centering alone stabilizes at all "
                 "(context)", grid=("lrs",), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="rescaling-stabilizes-centering-does-not", kind=CLAIM,
           claim="Rescaling alone keeps a clearly higher stable lr than centering alone",
           source=_SOURCE, where=_WHERE, form=SUPERIORITY, margin=(STEP,), side="above",
           margin_source="norm-and-learning-rate's margin: half a grid step (an interval above "
                         "it is a gap of at least one whole step)",
           grid=("lrs",), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("layernorm-stabilizes-here",), registered="2026-12-07"),
    Record(id="centering-can-be-dropped", kind=CLAIM,
           claim="Rescaling alone is not less stable than LayerNorm by more than one grid step",
           source=_SOURCE, where=_WHERE, form=NON_INFERIORITY, margin=(DROP,), side="below",
           margin_source="'little to no loss': at most one grid step (half a decade) lower, "
                         "the grid's resolution",
           grid=("lrs",), seeds=_SEEDS, seeds_from=_DROP_SEEDS_FROM,
           premise=("layernorm-stabilizes-here",), registered="2026-12-07",
           untested=_QUICK_SEEDS, untested_at=("quick",)),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    lrs = list(cfg.lrs)
    if len(lrs) < 3 or lrs != sorted(set(lrs)) or not set(lrs) <= set(PAPER_LRS):
        raise ValueError(f"lrs: at least three increasing learning rates of the lab's grid "
                         f"{list(PAPER_LRS)} (issue 58, section 3); got {lrs}")
    if cfg.base.data != "markov":
        raise ValueError("base: the Markov source (data 'markov'): its floor decides 'trains'")


def measure(config: Config, ctx) -> dict:
    """Premise first: both and neither over the grid; the two single operations only when both
    is stabler than neither."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"lrs": list(cfg.lrs), "seeds": seeds, "norm": "layernorm",
                            "V": cfg.base.model.vocab_size}
    arms = list(ARMS)
    got = run_arms(cfg.base, {a: {"model.norm": a} for a in arms[:2]}, cfg.lrs, seeds, ctx,
                   "premise")
    data.update(floor=got["floor"], loss=got["loss"])
    if _premise(data).passed is not True:
        return {**data, "tested": False}
    more = run_arms(cfg.base, {a: {"model.norm": a} for a in arms[2:]}, cfg.lrs, seeds, ctx,
                    "single")
    data["loss"] = {**data["loss"], **more["loss"]}
    return data


# ---- the rows ----------------------------------------------------------------------------------
def _gap(data: dict, a: str, b: str) -> tuple[S.Interval, str]:
    """The paired interval of the highest stable lr's index, a minus b, and its text."""
    ia, ib = indices(data, a), indices(data, b)
    iv = S.mean_interval((ia - ib).astype(float))
    return iv, (f"{ARMS[a]} minus {ARMS[b]}: {iv.text()} grid steps (highest stable lr "
                f"{ARMS[a]} {lr_text(data, ia)}; {ARMS[b]} {lr_text(data, ib)})")


def _premise(data: dict) -> Check:
    rec = RECORDS["layernorm-stabilizes-here"]
    iv, text = _gap(data, "layernorm", "none")
    return Check.superiority(
        id=rec.id, claim=rec.claim, published="-", interval=iv, side=rec.side,
        margin=rec.margin[0], kind=PREMISE, measured=text,
        rule="superiority: the paired interval of the index, both minus neither, > 0.5 grid "
             "steps (the effect whose source the claim names)", source="normlab [D]",
        margin_source=rec.margin_source)


_TEXTS = {  # record id -> (published, rule, source) of the counted rows
    "rescaling-stabilizes-centering-does-not": (
        "the rescaling is responsible for the stabilizing effect (2.4 section 5)",
        "superiority: the paired interval of the index, rescaling minus centering, > 0.5 grid "
        "steps", "chapter 2.4, section 5 [V]"),
    "centering-can-be-dropped": (
        "RMSNorm matches LayerNorm (Zhang & Sennrich 2019)",
        "non-inferiority: the paired interval of the index, both minus rescaling, < 1 grid "
        "step", "chapter 2.4, section 5 [V]"),
}


def _counted(rec_id: str, data: dict, a: str, b: str) -> Check:
    rec = RECORDS[rec_id]
    published, rule, source = _TEXTS[rec_id]
    iv, text = _gap(data, a, b)
    return Check.by_record(rec, iv, published=published, rule=rule, source=source,
                           measured=text)


def judge(data: dict, config: Config) -> list[Check]:
    premise = _premise(data)
    ids = ["rescaling-stabilizes-centering-does-not"]
    if config.judge_dropping:
        ids.append("centering-can-be-dropped")
    if not data.get("tested", True):
        why = (f"the premise did not hold ({premise.measured}), so the arms of one operation "
               f"were not trained")
        return [premise] + [dataclasses.replace(not_run(RECORDS[i].claim, *_TEXTS[i], why),
                                                id=i) for i in ids]
    _, text = _gap(data, "centernorm", "none")
    context = Check(id="centering-alone-context", claim=RECORDS["centering-alone-context"].claim,
                    published="-", measured=text, passed=None, kind=SHOWN,
                    rule="shown: the paired interval of the index, centering minus neither",
                    source="normlab [D]")
    rows = [premise, context, _counted(ids[0], data, "rmsnorm", "centernorm")]
    if config.judge_dropping:
        rows.append(_counted(ids[1], data, "layernorm", "rmsnorm"))
    return rows


def headline(data: dict, config: Config) -> str:
    parts = [f"{ARMS[a]} {lr_text(data, indices(data, a)) if a in data['loss'] else 'not run'}"
             for a in ARMS]
    return "Highest stable lr per seed on the grid: " + "; ".join(parts)


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, (a,) = figure(1)
    colors = {"layernorm": "#1f77b4", "rmsnorm": "#2ca02c", "centernorm": "#d62728",
              "none": "#999999"}
    for k, arm in enumerate(ARMS):
        if arm not in d["loss"]:
            continue
        idx = indices(d, arm)
        jitter = (np.arange(len(idx)) - (len(idx) - 1) / 2) * 0.04
        a.scatter(k + jitter, [d["lrs"][i] if i >= 0 else np.nan for i in idx],
                  color=colors[arm], s=18)
    a.set_xticks(range(len(ARMS)))
    a.set_xticklabels([ARMS[x] for x in ARMS], fontsize=7)
    a.set_yscale("log")
    style(a, "highest stable lr per seed", "arm", "learning rate")
    return [save(fig, out_dir, "rescaling_not_centering.png")]
