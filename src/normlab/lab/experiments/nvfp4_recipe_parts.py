"""``nvfp4-recipe-parts``: the NVFP4 training recipe part by part (NVIDIA 2025, "Pretraining
Large Language Models with NVFP4", arXiv 2509.25149).

The recipe (``normlab.precision.nvfp4_recipe``, TransformerEngine's ``NVFP4BlockScaling``; the
same policies a user passes to ``normlab.torch.emulate`` or a training run's ``precision``):
E2M1 elements with an E4M3 scale per 16 values and an FP32 tensor scale in every linear layer's
three GEMMs, with four parts on top:

* the 16-point random Hadamard transform on the weight gradient's two operands (``rht``);
* 16x16 tiles for the weight, the same rounding in the forward and the backward (``two_d``);
* stochastic rounding of the gradients (``sr``);
* the last block(s) kept in bf16 (``keep_last``; the head is kept in every NVFP4 arm, as the
  paper keeps the output layer in its original precision).

Arms on pydoc characters (the text recipe, a task whose arms end apart), seeds paired: bf16
(``amp_bf16``), the whole recipe, the recipe with none of the four parts, and the recipe minus
each part. Premise first: the task separates the whole recipe from the recipe without its parts
by more than the margin (NVFP4's numerics matter here at the claims' scale); the four ablation
arms run only when it does. Each part's effect is loss(recipe minus the part) - loss(whole).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...precision import nvfp4_recipe
from ...train import TrainConfig
from .. import stats as S
from ..contract import CLAIM, PREMISE, SHOWN, SUPERIORITY, Card, Check, Record
from ..formatting import fmt
from . import _recipes as R
from ._training import not_run, require_finished, run_points, seed_losses

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="nvfp4-recipe-parts",
    title="The NVFP4 training recipe part by part: Hadamard transform, 2D weight tiles, "
          "stochastic rounding, last layers in bf16",
    citation="NVIDIA 2025, \"Pretraining Large Language Models with NVFP4\", arXiv 2509.25149 "
             "(abstract; section 4, the training methodology, and its ablations)",
    claim="Each part of the NVFP4 recipe matters: removing the random Hadamard transform on "
          "the weight-gradient operands, the 2D weight scaling, stochastic rounding of the "
          "gradients, or the last layers kept in bf16, one at a time, costs loss against the "
          "whole recipe.",
    published="12B hybrid Mamba-Transformer on 10T tokens: the whole recipe ends comparable to "
              "FP8 (MMLU-pro 62.58 vs 62.62); the ablation removes one part at a time and each "
              "removal raises the loss (the paper's ablation figure)",
    method="normlab GPT on pydoc characters (the text recipe: four Pre-LN blocks of width 32, "
           "RoPE, AdamW), `seeds` seeds paired over seven arms: bf16 (amp_bf16), the whole "
           "NVFP4 recipe (`nvfp4_recipe`, the last `keep_last` block(s) and the head in bf16), "
           "the recipe without its four parts, and the recipe minus each part. Every linear "
           "layer's three GEMMs quantize their own operands (the NumPy model's GEMM operands, "
           "bit for bit torch's emulation). Premise first.",
    explanation="NVFP4 keeps 16 values per E4M3 scale: a block's outlier squeezes its other "
                "values onto few E2M1 points. The Hadamard transform spreads the weight "
                "gradient's outliers over 16 tokens before the rounding; 16x16 weight tiles make "
                "the forward's and the backward's weight one rounding (the chain rule sees one "
                "function); stochastic rounding makes the gradient's rounding unbiased, so its "
                "error averages out over steps; the last layers, whose weight gradients the "
                "paper finds the most sensitive, stay in bf16.",
    short="removing any one NVFP4 recipe part costs loss",
)

# The margin, fixed before measuring, with where it comes from:
TOL = 0.02  # nats: about 1% of this task's loss (about 2 nats at the end, the pilot): the scale
#             of gap the source treats as material between its NVFP4 and FP8 runs, which it
#             calls comparable when they end about 1% apart in loss (section 3's loss curves)

BASE = R.derive(R.TEXT, "the text recipe as it is (four Pre-LN blocks of width 32, RoPE, AdamW "
                "with warmup and clipping, pydoc characters) at 200 steps: NVFP4's emulation "
                "costs three to six times a bf16 step (the pilot), 200 steps at seven arms and "
                "five seeds is what the full size's budget pays for",
                {"steps": 200, "eval_interval": 200})

ARMS = ("whole", "no parts", "bf16", "no rht", "no 2d", "no sr", "no kept layers")
PREMISE_ARMS = ARMS[:3]
PART_ARMS = ARMS[3:]
#: the part each ablation arm removes, its record
PARTS = {"no rht": "rht-matters", "no 2d": "two-d-matters", "no sr": "sr-matters",
         "no kept layers": "kept-layers-matter"}


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the runs (pydoc characters); each arm sets its precision
    keep_last: int = 1  # the last blocks kept in bf16 in the whole recipe (one of four: the
    #                     paper keeps about 15% of the linear layers, most at the end)
    part_arms: bool = True  # whether the four ablation arms run (False where the register
    #                         lists their rows as not tested at the size)
    seeds: int = 5  # training seeds per arm (seed, seed + 1, ...): paired by seed (the pilot)
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), "base.model.n_layers": 2, "base.steps": 16,
             "base.warmup": 4, "base.eval_interval": 16, "base.batch_size": 4,
             "base.model.seq_len": 16, "base.eval_batches": 1, "seeds": 2},
    "quick": {"base.steps": 60, "base.warmup": 12, "base.eval_interval": 60,
              "base.batch_size": 8, "seeds": 2},
    "full": {},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50001 (2026-12-07, the notes), 200 steps: loss(arm) - "
               "loss(whole) per seed: no parts -0.0053 / +0.0120, bf16 -0.0307 / -0.0077, no "
               "kept layers +0.0112 / -0.0016, no sr -0.0028 / -0.0016, no rht +0.0058 / "
               "-0.0009, no 2d -0.0098 / +0.0095 (paired sd up to 0.014 nats); 5 seeds at the "
               "full size (a 95% half-width of about 0.015 nats at that sd), the most its "
               "budget pays for at seven arms; 2 at the quick size, which cannot resolve the "
               "margin (its premise is expected to be inconclusive: not tested there)")
_WHERE = ("arXiv 2509.25149, abstract; section 4 (training methodology) and its ablation of "
          "the 12B model (one part removed at a time)")
_ABSTRACT = ("\"Our method integrates Random Hadamard transforms (RHT) to bound block-level "
             "outliers, employs a two-dimensional quantization scheme for consistent "
             "representations across both the forward and backward passes, utilizes stochastic "
             "rounding for unbiased gradient estimation, and incorporates selective "
             "high-precision layers.\"")
_MARGIN_FROM = ("1% of this task's loss (about 2 nats): the gap the source calls comparable "
                "between its NVFP4 and FP8 runs (abstract, section 3)")


def _part(rec_id: str, part: str, what: str) -> Record:
    return Record(id=rec_id, kind=CLAIM, claim=f"Removing {part} costs loss against the whole "
                  f"recipe", source=f"{_ABSTRACT} ({what})", where=_WHERE, form=SUPERIORITY,
                  margin=(TOL,), side="above", margin_source=_MARGIN_FROM,
                  grid=("keep_last",), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
                  premise=("task-separates-whole-from-no-parts",), registered="2026-12-07")


REGISTER = (
    Record(id="task-separates-whole-from-no-parts", kind=PREMISE,
           claim="The task separates the whole recipe from NVFP4 without its four parts by "
                 "more than the margin",
           source=_ABSTRACT + " (the parts are what makes NVFP4 train \"stable and accurate\")",
           where=_WHERE, form=SUPERIORITY, margin=(TOL,), side="above",
           margin_source=_MARGIN_FROM + ": the claims' margin", grid=("keep_last",),
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="whole-recipe-vs-bf16", kind=SHOWN,
           claim="The whole recipe against bf16 (context: the gap the recipe leaves)",
           grid=("keep_last",), seeds=_SEEDS, registered="2026-12-07"),
    _part("rht-matters", "the Hadamard transform on the weight-gradient operands",
          "Random Hadamard transforms"),
    _part("two-d-matters", "the 2D (16x16) weight scaling", "two-dimensional quantization"),
    _part("sr-matters", "stochastic rounding of the gradients", "stochastic rounding"),
    _part("kept-layers-matter", "the last layers in bf16", "selective high-precision layers"),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()


def arm_precision(arm: str, n_layers: int, keep_last: int) -> str:
    """The training run's ``precision`` of an arm: a preset name or the policy's JSON."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {', '.join(ARMS)}; got {arm!r}")
    if arm == "bf16":
        return "amp_bf16"
    keep = [f"blocks.{n_layers - k}" for k in range(keep_last, 0, -1)] + ["head"]
    parts: dict[str, Any] = {"rht": True, "two_d": True, "sr": True, "keep_layers": keep}
    if arm == "no parts":
        parts = {"rht": False, "two_d": False, "sr": False, "keep_layers": ["head"]}
    elif arm == "no kept layers":
        parts["keep_layers"] = ["head"]
    elif arm != "whole":
        parts[{"no rht": "rht", "no 2d": "two_d", "no sr": "sr"}[arm]] = False
    return nvfp4_recipe(**parts).to_json(indent=None)


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    L = cfg.base.model.n_layers
    if not 0 < cfg.keep_last < L:
        raise ValueError(f"keep_last must be in [1, n_layers - 1] = [1, {L - 1}] (some blocks "
                         f"kept in bf16, some in NVFP4); got {cfg.keep_last}")
    for name in ("d_model",):
        if getattr(cfg.base.model, name) % 16:
            raise ValueError(f"base.model.{name} must be a multiple of 16 (NVFP4's blocks and "
                             f"16x16 weight tiles); got {getattr(cfg.base.model, name)}")
    if cfg.base.precision != "fp32":
        raise ValueError("base.precision: every arm sets its own precision; leave the base's "
                         f"at 'fp32' (got {cfg.base.precision!r})")


def _points(cfg: Config, arms, seeds: list[int]) -> list:
    L = cfg.base.model.n_layers
    return [(arm, {"precision": arm_precision(arm, L, cfg.keep_last), "seed": s})
            for arm in arms for s in seeds]


def measure(config: Config, ctx) -> dict:
    """The premise's arms first (whole, no parts, bf16); with ``part_arms`` the four ablations
    only where the premise holds."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    runs = run_points(cfg.base, _points(cfg, PREMISE_ARMS, seeds), ctx, name="premise")
    require_finished(runs)
    data: dict[str, Any] = {"seeds": seeds, "keep_last": cfg.keep_last,
                            "steps": cfg.base.steps, "loss": _losses(runs, PREMISE_ARMS)}
    if not cfg.part_arms:
        return data
    if _premise(data).passed is not True:
        return {**data, "tested": False}
    rest = run_points(cfg.base, _points(cfg, PART_ARMS, seeds), ctx, name="parts")
    require_finished(rest)
    data["loss"].update(_losses(rest, PART_ARMS))
    return data


def _losses(runs: list, arms) -> dict[str, list[float]]:
    """Per arm: the final validation losses per seed (a diverged run at its loss at init)."""
    return {a: list(next(iter(seed_losses(runs, a).values()))) for a in arms}


# ---- the rows ----------------------------------------------------------------------------------
def _effect(data: dict, a: str, b: str) -> S.Interval:
    """The paired interval over seeds of loss(a) - loss(b)."""
    return S.mean_interval(np.asarray(data["loss"][a]) - np.asarray(data["loss"][b]))


def _premise(data: dict) -> Check:
    rec = RECORDS["task-separates-whole-from-no-parts"]
    iv = _effect(data, "no parts", "whole")
    return Check.superiority(
        id=rec.id, claim=rec.claim, published="-", interval=iv, side=rec.side,
        margin=rec.margin[0], kind=PREMISE,
        measured=f"loss(no parts) - loss(whole) {iv.text()}",
        rule=f"superiority: the paired interval > {rec.margin[0]:g} nats (NVFP4's numerics "
             f"matter on this task at the claims' scale)", source="normlab [D]",
        margin_source=rec.margin_source)


def _shown(data: dict) -> Check:
    rec = RECORDS["whole-recipe-vs-bf16"]
    iv = _effect(data, "whole", "bf16")
    return Check(id=rec.id, claim=rec.claim, published="-",
                 measured=f"loss(whole) - loss(bf16) {iv.text()}",
                 rule="shown: the gap the whole recipe leaves to bf16", passed=None, kind=SHOWN,
                 source="normlab [D]")


_PUBLISHED = "each removal raises the loss (arXiv 2509.25149, the ablation figure)"


def _rule(rec: Record) -> str:
    return (f"superiority: the paired interval over seeds of loss(recipe minus the part) - "
            f"loss(whole) > {rec.margin[0]:g} nats")


def _part_row(data: dict, arm: str) -> Check:
    rec = RECORDS[PARTS[arm]]
    iv = _effect(data, arm, "whole")
    return Check.superiority(
        id=rec.id, claim=rec.claim, published=_PUBLISHED, interval=iv, side=rec.side,
        margin=rec.margin[0], measured=f"loss({arm}) - loss(whole) {iv.text()}",
        rule=_rule(rec), source="arXiv 2509.25149 [V]", margin_source=rec.margin_source)


def _not_run(arm: str, premise: Check) -> Check:
    rec = RECORDS[PARTS[arm]]
    why = (f"the premise did not hold ({premise.measured}), so the arms that test the claim "
           f"were not trained")
    return dataclasses.replace(not_run(rec.claim, _PUBLISHED, _rule(rec),
                                       "arXiv 2509.25149 [V]", why), id=rec.id)


def judge(data: dict, config: Config) -> list[Check]:
    premise = _premise(data)
    rows = [premise, _shown(data)]
    if "no rht" in data["loss"]:
        return rows + [_part_row(data, arm) for arm in PART_ARMS]
    if data.get("tested", True) is False:
        return rows + [_not_run(arm, premise) for arm in PART_ARMS]
    return rows


def headline(data: dict, config: Config) -> str:
    means = {a: fmt(float(np.mean(v))) for a, v in data["loss"].items()}
    return (f"pydoc characters, {data['steps']} steps, final validation loss (mean over "
            f"{len(data['seeds'])} seeds): " + ", ".join(f"{a} {means.get(a, 'not run')}"
                                                        for a in ARMS))


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, (a,) = figure(1)
    arms = [x for x in ARMS if x in d["loss"]]
    whole = np.asarray(d["loss"]["whole"])
    for i, arm in enumerate(arms):
        diff = np.asarray(d["loss"][arm]) - whole
        a.scatter([i] * len(diff), diff, s=18,
                  color="#999999" if arm in ("bf16", "no parts") else "#1f77b4")
    a.axhline(TOL, color="k", ls=":", lw=0.9, label=f"margin {TOL:g} nats")
    a.axhline(0.0, color="k", lw=0.6)
    a.set_xticks(range(len(arms)))
    a.set_xticklabels(arms, fontsize=6, rotation=20)
    style(a, "pydoc text: each arm against the whole NVFP4 recipe", "arm",
          "loss(arm) - loss(whole), per seed (nats/token)")
    a.legend(fontsize=6)
    return [save(fig, out_dir, "nvfp4_recipe_parts.png")]
