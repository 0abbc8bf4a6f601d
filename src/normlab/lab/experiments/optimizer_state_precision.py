"""``optimizer-state-precision``: the chapter's rule that master weights and optimizer state stay
in float32 (chapter 16, section 16.3; Micikevicius et al. 2017).

bf16 mixed precision (``amp_bf16``: bf16 weights for the forward, bf16 compute, activations and
gradients, float32 accumulation) with its state in float32, the control, against the same policy
with bf16 moments alone (``optimizer`` role), bf16 master weights alone (``master`` role: the
optimizer updates weights stored in bf16), and both, on pydoc characters (the text recipe: a
task whose arms end apart, issue 58 section 1). Every arm's policy is ``amp_bf16`` with one or
two roles changed (``PrecisionPolicy.replace``), passed to the trainer as JSON; the arms share
their seeds (paired: the same init, data and batches).

The effects are the paired differences over seeds of the final validation loss, arm minus the
control (nats/token; a diverged run at its loss at init). Premise first: with both roles in
bf16 the model falls behind the control (the phenomenon the rule guards against occurs on this
task); the arms of one role run only when it does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...precision import get_policy
from ...train import TrainConfig
from .. import stats as S
from ..contract import CLAIM, PREMISE, SUPERIORITY, Card, Check, Record
from ..formatting import fmt
from . import _recipes as R
from ._training import not_run, require_finished, run_points, seed_losses
from .precision_recipes import BEHIND

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="optimizer-state-precision",
    title="The chapter's rule: master weights and optimizer state in float32",
    citation="Chapter 16 (Normalization, Residuals & Precision), section 16.3; Micikevicius et "
             "al. 2017 (arXiv:1710.03740), section 3.1",
    claim="Keep master weights and optimizer accumulators in float32: a low-precision copy "
          "serves the matrix multiplies, but small updates must accumulate into a float32 "
          "master, or rounding erases them.",
    published="Micikevicius et al. 2017: a Mandarin speech model with fp16-only weight "
              "updates loses 80% relative accuracy (section 3.1); the chapter gives no number",
    method="normlab GPT of the text recipe at lr 1e-3 on pydoc characters (`base`) under "
           "`amp_bf16` with "
           "float32 state (the control), bf16 moments alone, bf16 master weights alone, and "
           "both, `seeds` seed(s) paired. Each effect: final validation loss minus the "
           "control's. Premise first.",
    explanation="A weight stored in bf16 changes only when its update exceeds half a bf16 ulp "
                "(about 2^-8 of the weight, papers.md G.1): late in a decaying schedule most of "
                "Adam's updates are smaller and are rounded away, so the weights stop moving "
                "(16.3: 'small updates "
                "disappear because they do not change the stored low-precision number'). Adam's "
                "moments in bf16 are rounded to 8 bits of mantissa; the update m / sqrt(v) is a "
                "ratio of two such numbers, so its relative error stays about 2^-8 and the step "
                "itself survives.",
    short="master weights and optimizer moments each need float32",
)

# The text recipe at lr 1e-3 (a point of the lab's grid, a usual LLM rate): Adam's updates are
# then about lr against weights of about d^-1/2 = 0.18, near half a bf16 ulp of the weight, the
# regime of "small updates" the chapter names. At the recipe's 1e-2 the updates survive bf16's
# rounding until the schedule's tail, and the pilot's effect sat on the margin (the notes).
BASE = R.derive(R.TEXT, "lr 1e-3: the small updates the claim is about (the pilot, the notes); "
                "the arms differ only in the precision policy (TrainConfig.precision)",
                {"lr": 1e-3})
ARMS = ("fp32 state", "bf16 both", "bf16 master", "bf16 moments")  # premise arms first


def policies() -> dict[str, str]:
    """Arm -> TrainConfig.precision: ``amp_bf16`` with its optimizer and master roles set."""
    amp = get_policy("amp_bf16")
    roles = {"fp32 state": {}, "bf16 both": {"optimizer": "bfloat16", "master": "bfloat16"},
             "bf16 master": {"master": "bfloat16"}, "bf16 moments": {"optimizer": "bfloat16"}}
    return {arm: "amp_bf16" if not r else amp.replace(
        name="amp_bf16_" + "_".join(f"{k}_bf16" for k in r), **r).to_json(indent=None)
        for arm, r in roles.items()}


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the text recipe (pydoc characters); its precision is the arm's
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(), "base.steps": 30, "base.warmup": 6, "base.eval_interval": 15,
             "base.batch_size": 4, "base.model.seq_len": 16, "seeds": 2},
    "quick": {},
    "full": {"seeds": 6},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50001 (2026-12-07, the notes) at lr 1e-3: bf16 master "
               "minus float32 state 0.121 / 0.117 nats, both 0.121 / 0.118, bf16 moments "
               "0.00015 / 0.0002; 3 seeds (quick) and 6 (full) put every interval far from "
               "the 0.02 margin")
_WHERE = "chapter 16, section 16.3; Micikevicius et al. 2017, section 3.1"
_SOURCE = ("\"The other rule is to keep master weights and optimizer accumulators in float32. A "
           "low-precision copy can be used for matrix multiplies, but small updates should "
           "accumulate into the float32 master; otherwise rounding can erase them.\"")
_MARGIN = ("precision-recipes' band: a gap inside +-0.02 nats 'tracks fp32' (papers.md "
           "section 11 G), so 'falls behind' needs the whole interval beyond it")
REGISTER = (
    Record(id="bf16-state-falls-behind-here", kind=PREMISE,
           claim="With master weights and moments in bf16 the model falls behind float32 state "
                 "on this task",
           source=_SOURCE + " (and: \"keep losses, reductions, master weights, and optimizer "
                            "state in float32 unless a test proves the lower precision is "
                            "safe\")",
           where=_WHERE, form=SUPERIORITY, margin=(BEHIND,), side="above", margin_source=_MARGIN,
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="bf16-master-falls-behind", kind=CLAIM,
           claim="With master weights alone in bf16 the model falls behind float32 state",
           source=_SOURCE, where=_WHERE, form=SUPERIORITY, margin=(BEHIND,), side="above",
           margin_source=_MARGIN, seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("bf16-state-falls-behind-here",), registered="2026-12-07"),
    Record(id="bf16-moments-fall-behind", kind=CLAIM,
           claim="With the optimizer's moments alone in bf16 the model falls behind float32 "
                 "state",
           source=_SOURCE, where=_WHERE, form=SUPERIORITY, margin=(BEHIND,), side="above",
           margin_source=_MARGIN, seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("bf16-state-falls-behind-here",), registered="2026-12-07"),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if cfg.base.precision != "fp32":
        raise ValueError("base: precision must be left at 'fp32' (each arm sets its own policy)")
    if cfg.seeds < 2:
        raise ValueError(f"seeds: at least 2 (the effects are intervals over seeds); got "
                         f"{cfg.seeds}")


def _points(arms, seeds: list[int]) -> list:
    pol = policies()
    return [(a, {"precision": pol[a], "seed": s}, {"arm": a}) for a in arms for s in seeds]


def _losses(runs: list, arms) -> dict:
    return {a: next(iter(seed_losses(runs, a).values())) for a in arms}


def measure(config: Config, ctx) -> dict:
    """Premise first: the control and both roles in bf16; the arms of one role only when both
    fall behind."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"seeds": seeds}
    runs = run_points(cfg.base, _points(ARMS[:2], seeds), ctx, name="premise")
    require_finished(runs)
    data["loss"] = _losses(runs, ARMS[:2])
    if _row(data, "bf16-state-falls-behind-here", "bf16 both").passed is not True:
        return {**data, "tested": False}
    rest = run_points(cfg.base, _points(ARMS[2:], seeds), ctx, name="roles")
    require_finished(rest)
    data["loss"] = {**data["loss"], **_losses(rest, ARMS[2:])}
    return data


# ---- the rows ----------------------------------------------------------------------------------
_PUBLISHED = {
    "bf16-state-falls-behind-here": "-",
    "bf16-master-falls-behind": "fp16-only weight updates: 80% relative accuracy lost "
                                "(Micikevicius et al., Mandarin speech)",
    "bf16-moments-fall-behind": "keep optimizer accumulators in float32 (16.3); no number",
}


def _row(data: dict, rec_id: str, arm: str) -> Check:
    rec = RECORDS[rec_id]
    iv = S.mean_interval(np.asarray(data["loss"][arm]) - np.asarray(data["loss"]["fp32 state"]))
    return Check.superiority(
        id=rec.id, claim=rec.claim, published=_PUBLISHED[rec_id], interval=iv, side=rec.side,
        margin=rec.margin[0], kind=rec.kind, measured=f"{arm} - fp32 state = {iv.text()} nats",
        rule=f"superiority: the paired interval over seeds of loss({arm}) - loss(fp32 state) > "
             f"{rec.margin[0]:g} nats",
        source="normlab [D]" if rec.kind == PREMISE else "chapter 16, section 16.3 [V]",
        margin_source=rec.margin_source)


_COUNTED = (("bf16-master-falls-behind", "bf16 master"),
            ("bf16-moments-fall-behind", "bf16 moments"))


def judge(data: dict, config: Config) -> list[Check]:
    premise = _row(data, "bf16-state-falls-behind-here", "bf16 both")
    if not data.get("tested", True):
        why = (f"the premise did not hold ({premise.measured}), so the arms of one role were not "
               f"trained")
        rule = "superiority: the paired interval of loss(arm) - loss(fp32 state) > 0.02 nats"
        return [premise] + [dataclasses.replace(
            not_run(RECORDS[i].claim, _PUBLISHED[i], rule, "chapter 16, section 16.3 [V]", why),
            id=i) for i, _ in _COUNTED]
    return [premise] + [_row(data, i, arm) for i, arm in _COUNTED]


def headline(data: dict, config: Config) -> str:
    parts = [f"{a} {fmt(float(np.mean(data['loss'][a])))}" if a in data["loss"]
             else f"{a} not run" for a in ARMS]
    return "Final validation loss (mean over seeds): " + ", ".join(parts)


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, (a,) = figure(1)
    base = np.asarray(d["loss"]["fp32 state"])
    for k, arm in enumerate(ARMS):
        if arm in d["loss"]:
            a.scatter([k] * len(base), np.asarray(d["loss"][arm]) - base, s=18,
                      color="#999999" if k == 0 else "#d62728")
    a.axhline(BEHIND, color="k", ls=":", lw=0.9, label=f"margin {BEHIND:g} nats")
    a.set_xticks(range(len(ARMS)))
    a.set_xticklabels(list(ARMS), fontsize=7)
    style(a, "final loss minus float32 state's, per seed", "arm", "nats/token")
    a.legend(fontsize=6)
    return [save(fig, out_dir, "optimizer_state_precision.png")]
