"""``mxfp8-scale-rule``: MXFP8's shared scale rounded down (the OCP rule) against rounded up
(Mishra et al. 2025, arXiv:2506.08027).

The arms train the lab's text recipe (pydoc characters, a task whose arms end apart) under the
library's own policies: ``bf16`` (``amp_bf16``, the reference), ``ceil`` (the ``mxfp8`` preset:
E4M3 both ways in blocks of 32, the scale rounded up as TransformerEngine and cuBLAS round it)
and ``floor`` (``mxfp8_recipe(scale_rule="floor")``: the same with the OCP MX v1.0 rule,
X = 2^(floor(log2 amax) - 8)), seeds paired.

Mechanism first, on the floor arm's own tensors: every ``every``-th training step, each MX
operand (a matrix multiply's weight and activation in the forward, the output's gradient in the
backward) is cut into its blocks of 32 along the last axis, as the policy quantizes it, and a
block counts as saturated when its largest magnitude over the floor scale exceeds E4M3's 448 (the
element saturates there: amax / X lies in [256, 512)). The ceil rule's scale on the same blocks
never saturates (a derivation, shown). The loss rows read the final validation loss of each arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...nn.numerics import Numerics
from ...precision import mx_scale, mxfp8_recipe
from ...train import TrainConfig
from .. import stats as S
from ..contract import CLAIM, DERIVATION, NON_INFERIORITY, SHOWN, THRESHOLD, Card, Check, Record
from ..formatting import fmt
from . import _recipes as R
from ._training import run_tasks

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="mxfp8-scale-rule",
    title="MXFP8's shared scale: rounded down (OCP) against rounded up",
    citation="Mishra, Stosic & Layton 2025, 'Recipes for Pre-training LLMs with MXFP8' "
             "(arXiv:2506.08027); OCP Microscaling Formats v1.0, section 6.3",
    claim="The OCP rule rounds each block's shared E8M0 scale down, so a block's largest "
          "values can exceed E4M3's range and saturate; it can make pre-training diverge. "
          "Rounding the scale up, with E4M3 for every tensor, trains as bf16 does.",
    published="OCP rounding 'can lead to divergence when pre-training an LLM'; round-to-"
              "infinity scales train an 8B model on 15T tokens; MXFP8-E4M3 runs 'match those "
              "carried out in BF16' (abstract, v1 and v2)",
    method="normlab GPT on pydoc characters (the text recipe), arms bf16 (`amp_bf16`), "
           "`mxfp8` (scale rounded up) and `mxfp8_recipe(scale_rule='floor')`, `seeds` seeds "
           "paired; every `every`-th step the floor arm's MX operands (weights, activations, "
           "output gradients) are read in blocks of 32 and a block whose amax over the floor "
           "scale exceeds 448 counts as saturated. With `loss_arms`, the bf16 and mxfp8 arms "
           "train too and the final validation losses are compared.",
    explanation="E4M3's largest binade spans [256, 448]. The OCP rule puts a block's amax in "
                "[256, 512) after scaling, so where amax's mantissa exceeds 1.75 (about 19% "
                "of blocks for mantissas spread evenly in log) the largest element saturates "
                "at 448, losing up to 12.5%. Rounding the scale up keeps every block's amax at "
                "most 448 at the cost of one binade of resolution for the blocks it moves.",
    short="the OCP floor scale saturates block maxima; round-up MXFP8 matches bf16",
)

# The margins, fixed before measuring, with where they come from:
SHARE_MIN = 0.01  # a mechanism present: more than 1 block in 100 saturated (the lab's)
MATCH = 0.02  # nats: papers.md section 11 G, "|L - L_fp32| < 0.02 nats" (precision-recipes)
E4M3_MAX = 448.0
BLOCK = 32
KINDS = ("weight", "input", "grad")  # the MX operands observed (nn.numerics' hooks)
ARMS = ("floor", "ceil", "bf16")  # the floor arm first: the mechanism's runs

BASE = R.derive(R.TEXT, "the text recipe as it is: four Pre-LN blocks of width 32 on pydoc "
                "characters; the arms differ only in precision", {})


def precision_of(arm: str) -> str:
    """The training run's ``precision`` of an arm: the library's policies, as a user gives
    them (a preset's name, or ``mxfp8_recipe``'s policy as JSON)."""
    if arm == "floor":
        return mxfp8_recipe("floor").to_json(indent=None)
    return {"ceil": "mxfp8", "bf16": "amp_bf16"}[arm]


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the runs (its steps: the quick size's mechanism runs are short)
    every: int = 10  # read the floor arm's operands every this many training steps
    loss_arms: bool = False  # whether the ceil and bf16 arms train (the loss rows)
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(prefix="base.model."), "base.steps": 12, "base.warmup": 2,
             "base.eval_interval": 6, "base.batch_size": 4, "base.model.seq_len": 16,
             "every": 3, "loss_arms": True, "seeds": 2},
    "quick": {"base.steps": 30, "every": 3},
    "full": {"loss_arms": True, "seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50002 (2026-12-07, the notes): the floor arm saturated "
               "0.191 [0.176, 0.207] of its blocks in 40 steps; 3 seeds clear the 1% margin by "
               "far at both sizes (5 at the full size, for the loss rows)")
_LOSS_SEEDS_FROM = ("a pilot at seeds 50000-50001 (2026-12-07, the notes): mxfp8 - bf16 = "
                    "+0.0165 and -0.0018 nats (sd 0.013), so at 5 seeds the interval's "
                    "half-width is about 0.016, inside the 0.02 margin; more than the full "
                    "size's budget pays for (an MX run costs about 110 s of CPU)")
_ABSTRACT_V1 = ("\"In this paper, we show that the rounding mode suggested in OCP specification "
                "can lead to divergence when pre-training an LLM. We show an improved rounding "
                "mode, which uses round-to-infinity to compute scaling factors, enables "
                "successful pre-training in MXFP8 for an 8B model on 15T tokens.\"")
_ABSTRACT_V2 = ("\"we review these choices and show how MXFP8-E4M3 datatype and a specific "
                "number conversion algorithm result in training sessions that match those "
                "carried out in BF16.\"")
_QUICK_COST = ("the quick report's budget (about 60 s of CPU for this experiment) pays for the "
               "floor arm's mechanism runs only (30 steps): each MX run of the text recipe "
               "costs about 110 s of CPU (the pilot, the notes); the full size decides")
_NOT_AT_THIS_SIZE = (
    "the divergence the source reports comes in an 8B run over 15T tokens; at this size the "
    "whole of MXFP8's rounding costs +0.0165 and -0.0018 nats against bf16 (the pilot, 300 "
    "steps), and floor's saturation moves the largest element of 19% of the blocks (0.6% of "
    "the elements) by 6.8% on average, against E4M3's rounding of every element by up to "
    "6.25%: floor - ceil was -0.0065 nats (floor lower) at the pilot's seed, so no size this "
    "machine affords can resolve it against the lab's 0.1 nats clear gap; shown, not counted")
REGISTER = (
    Record(id="floor-saturates-block-maxima", kind=CLAIM,
           claim="The OCP (floor) scale saturates the largest element of a share of the MX "
                 "blocks during training",
           source=_ABSTRACT_V1 + " The OCP rule: X = 2^(floor(log2 amax) - emax), emax = 8 for "
                  "E4M3, so amax / X lies in [256, 512) and above 448 saturates",
           where="arXiv:2506.08027, abstract (v1); OCP MX v1.0 section 6.3 (the rule)",
           form=THRESHOLD, margin=(SHARE_MIN,), side="above",
           margin_source="the lab's: a mechanism present in more than 1 block in 100",
           grid=("every",), seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="ceil-saturates-none", kind=DERIVATION,
           claim="The round-up scale saturates no block of the same tensors",
           source="round-up: X = 2^ceil(log2(amax / 448)), so amax / X <= 448",
           where="normlab.precision.mx_scale ('ceil'); TransformerEngine's MXFP8 cast",
           registered="2026-12-07"),
    Record(id="saturation-size", kind=SHOWN,
           claim="How much a saturated block maximum loses, and where the saturated blocks are",
           grid=("every",), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="mxfp8-ceil-matches-bf16", kind=CLAIM,
           claim="MXFP8 with the round-up scale and E4M3 everywhere ends no worse than bf16",
           source=_ABSTRACT_V2, where="arXiv:2506.08027v2, abstract",
           form=NON_INFERIORITY, margin=(MATCH,), side="below",
           margin_source="papers.md section 11 G: |L - L_fp32| < 0.02 nats (the lab's "
                         "'tracks' margin, precision-recipes)",
           seeds=_SEEDS, seeds_from=_LOSS_SEEDS_FROM, registered="2026-12-07",
           untested=_QUICK_COST, untested_at=("quick",)),
    Record(id="floor-loses-quality", kind=CLAIM,
           claim="The OCP (floor) scale ends clearly worse than the round-up scale, or diverges",
           source=_ABSTRACT_V1, where="arXiv:2506.08027v1, abstract",
           registered="2026-12-07", untested=_NOT_AT_THIS_SIZE),
    Record(id="floor-minus-ceil-loss", kind=SHOWN,
           claim="loss(floor) - loss(ceil), paired by seed (context: the claim is not tested "
                 "at this size)",
           seeds=_SEEDS, registered="2026-12-07", untested=_QUICK_COST,
           untested_at=("quick",)),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if cfg.base.precision != "fp32":
        raise ValueError("base: precision is set by each arm (bf16, ceil, floor); leave "
                         "base.precision at 'fp32'")
    if not 1 <= cfg.every <= cfg.base.steps:
        raise ValueError(f"every must be in [1, base.steps = {cfg.base.steps}]; got "
                         f"{cfg.every}")
    if cfg.seeds < 2:
        raise ValueError(f"seeds must be >= 2 (an interval over seeds); got {cfg.seeds}")


# ---- the mechanism: saturated blocks on the run's own tensors ---------------------------------
def floor_saturation(x: np.ndarray, block: int = BLOCK) -> dict[str, float]:
    """x's blocks of ``block`` along its last axis (zero-padded at the end), as MX cuts them:
    ``blocks`` (those with a non-zero amax), ``floor`` (how many the OCP rule saturates: amax /
    X_floor > 448), ``ceil`` (how many the round-up rule saturates), ``lost`` (the sum over the
    floor-saturated blocks of 1 - 448 / (amax / X_floor), the relative loss of their maximum)."""
    a = np.abs(np.asarray(x, np.float32).reshape(-1, x.shape[-1]))
    pad = (-a.shape[1]) % block
    if pad:
        a = np.pad(a, ((0, 0), (0, pad)))
    amax = a.reshape(a.shape[0], -1, block).max(axis=-1).ravel().astype(np.float64)
    amax = amax[np.isfinite(amax) & (amax > 0)]
    r_floor = amax / mx_scale(amax, "float8_e4m3fn", "floor")
    r_ceil = amax / mx_scale(amax, "float8_e4m3fn", "ceil")
    sat = r_floor > E4M3_MAX
    return {"blocks": float(amax.size), "floor": float(sat.sum()),
            "ceil": float((r_ceil > E4M3_MAX).sum()),
            "lost": float(np.sum(1.0 - E4M3_MAX / r_floor[sat]))}


class SaturationCounter(Numerics):
    """``inner``'s hooks, unchanged, that also count (while ``active`` and the model trains)
    :func:`floor_saturation` of every MX operand, by hook (``KINDS``), before it is rounded."""

    def __init__(self, inner: Numerics, model: Any):
        self.inner, self.model, self.active = inner, model, False
        self.counts = {k: {"blocks": 0.0, "floor": 0.0, "ceil": 0.0, "lost": 0.0}
                       for k in KINDS}

    def see(self, kind: str, x: np.ndarray) -> None:
        if self.active and self.model.training:
            for key, v in floor_saturation(x).items():
                self.counts[kind][key] += v

    def bind(self, site: str) -> Numerics:
        return _CounterSite(self, self.inner.bind(site))

    def end_step(self) -> None:
        self.inner.end_step()

    def state(self) -> dict:
        return self.inner.state()

    def load_state(self, state: dict) -> None:
        self.inner.load_state(state)


class _CounterSite(Numerics):
    def __init__(self, owner: SaturationCounter, inner: Numerics):
        self.owner, self.inner = owner, inner

    def bind(self, site: str) -> Numerics:
        return self.owner.bind(site)

    def param(self, w, key="param"):
        return self.inner.param(w, key)

    def weight(self, w, key="weight"):
        self.owner.see("weight", w)
        return self.inner.weight(w, key)

    def input(self, x, key="input"):
        self.owner.see("input", x)
        return self.inner.input(x, key)

    def output(self, y, key="output"):
        return self.inner.output(y, key)

    def stream(self, x, key="stream"):
        return self.inner.stream(x, key)

    def grad(self, g, key="grad"):
        self.owner.see("grad", g)
        return self.inner.grad(g, key)


def train_arm(job: tuple[TrainConfig, str, int, int]) -> dict:
    """One arm's run (``(base, arm, seed, every)``): the final validation loss (a run that
    stopped: its loss at init), the loss at init, and for the floor arm the saturation counts
    of every ``every``-th training step's MX operands."""
    from ...train.trainer import Trainer

    base, arm, seed, every = job
    trainer = Trainer(base.with_overrides({"precision": precision_of(arm), "seed": seed}))
    counter = None
    if arm == "floor":
        counter = SaturationCounter(trainer.model.numerics_root, trainer.model)
        trainer.model.set_numerics(counter)
    while trainer.step < base.steps and trainer.stopped is None:
        if counter is not None:
            counter.active = trainer.step % every == 0
        trainer.run(until=trainer.step + 1)
    res = trainer.result()
    init = float(res.history[0]["nll"])
    final = res.final_val_loss
    loss = init  # a run that stopped, or ended without a finite loss: its loss at init
    if res.stopped is None and final is not None and np.isfinite(final):
        loss = min(float(final), init)
    return {"arm": arm, "seed": seed, "loss": loss,
            "loss_at_init": init, "stopped": res.stopped,
            "counts": counter.counts if counter is not None else None}


def measure(config: Config, ctx) -> dict:
    """The floor arm's runs (the mechanism), then with ``loss_arms`` the ceil and bf16 arms."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    arms = ARMS if cfg.loss_arms else ARMS[:1]
    jobs = [(cfg.base, arm, s, cfg.every) for arm in arms for s in seeds]
    runs = run_tasks(train_arm, jobs, ctx,
                     progress=lambda n: ctx.progress(n, len(jobs), f"run {n}/{len(jobs)}"))
    return {"seeds": seeds, "runs": runs}


# ---- the rows ----------------------------------------------------------------------------------
def _runs(data: dict, arm: str) -> list[dict]:
    """The arm's runs in seed order."""
    return sorted((r for r in data["runs"] if r["arm"] == arm), key=lambda r: r["seed"])


def _share(run: dict, key: str = "floor") -> float:
    """The share of the run's observed blocks that the rule ``key`` saturates (all hooks)."""
    c = run["counts"]
    blocks = sum(c[k]["blocks"] for k in KINDS)
    return sum(c[k][key] for k in KINDS) / blocks if blocks else 0.0


def _mechanism_rows(data: dict) -> list[Check]:
    floor = _runs(data, "floor")
    rec = RECORDS["floor-saturates-block-maxima"]
    iv = S.mean_interval([_share(r) for r in floor])
    claim = Check.decided(
        id=rec.id, claim=rec.claim, published="OCP rounding 'can lead to divergence' "
        "(abstract); the rule leaves amax / X in [256, 512)", interval=iv,
        threshold=rec.margin[0], side=rec.side,
        measured=f"share of the floor arm's MX blocks saturated: {iv.text()}",
        rule=f"interval > {rec.margin[0]:g} (more than 1 block in 100)",
        source="Mishra et al. 2025, abstract; OCP MX v1.0 6.3 [V]",
        margin_source=rec.margin_source)
    ceil_n = sum(r["counts"][k]["ceil"] for r in floor for k in KINDS)
    blocks = sum(r["counts"][k]["blocks"] for r in floor for k in KINDS)
    derivation = Check(
        id="ceil-saturates-none", claim=RECORDS["ceil-saturates-none"].claim, published="0",
        measured=f"{ceil_n:.0f} of {blocks:.0f} blocks", rule="exactly 0 (by construction)",
        passed=ceil_n == 0, kind=DERIVATION, source="normlab.precision.mx_scale [D]")
    return [claim, derivation, _size_row(floor)]


def _kind_share(floor: list[dict], kind: str) -> float:
    """The mean over seeds of the share of ``kind``'s blocks the floor rule saturated."""
    return float(np.mean([r["counts"][kind]["floor"] / max(r["counts"][kind]["blocks"], 1)
                          for r in floor]))


def _size_row(floor: list[dict]) -> Check:
    lost = sum(r["counts"][k]["lost"] for r in floor for k in KINDS)
    sat = sum(r["counts"][k]["floor"] for r in floor for k in KINDS)
    by_kind = ", ".join(f"{k} {fmt(_kind_share(floor, k))}" for k in KINDS)
    return Check(id="saturation-size", claim=RECORDS["saturation-size"].claim,
                 published="up to 12.5% (448 against 512)",
                 measured=f"a saturated maximum loses {fmt(lost / max(sat, 1))} on average "
                          f"(mean over blocks); share saturated by operand: {by_kind}",
                 rule="shown: context for the loss rows", passed=None, kind=SHOWN,
                 source="normlab [D]")


def _paired(data: dict, a: str, b: str) -> S.Interval:
    """The paired interval over seeds of loss(a) - loss(b)."""
    return S.paired_interval([r["loss"] for r in _runs(data, a)],
                             [r["loss"] for r in _runs(data, b)])


def _loss_rows(data: dict) -> list[Check]:
    rec = RECORDS["mxfp8-ceil-matches-bf16"]
    iv = _paired(data, "ceil", "bf16")
    match = Check.non_inferiority(
        id=rec.id, claim=rec.claim, published="MXFP8-E4M3 runs 'match those carried out in "
        "BF16' (8B, 15T tokens)", interval=iv, side=rec.side, margin=rec.margin[0],
        measured=f"loss(mxfp8) - loss(bf16) {iv.text()} nats",
        rule=f"non-inferiority: the paired interval < {rec.margin[0]:g} nats",
        source="Mishra et al. 2025, abstract (v2) [V]", margin_source=rec.margin_source)
    fc = _paired(data, "floor", "ceil")
    context = Check(id="floor-minus-ceil-loss", claim=RECORDS["floor-minus-ceil-loss"].claim,
                    published="divergence (8B, 15T tokens)",
                    measured=f"loss(floor) - loss(ceil) {fc.text()} nats",
                    rule="shown: the claim is not tested at this size (the register)",
                    passed=None, kind=SHOWN, source="normlab [D]")
    return [match, context]


def judge(data: dict, config: Config) -> list[Check]:
    rows = _mechanism_rows(data)
    if any(r["arm"] == "bf16" for r in data["runs"]):
        rows += _loss_rows(data)
    return rows


def headline(data: dict, config: Config) -> str:
    share = float(np.mean([_share(r) for r in _runs(data, "floor")]))
    out = f"the floor scale saturates {100 * share:.3g}% of the MX blocks during training"
    means = {a: float(np.mean([r["loss"] for r in _runs(data, a)])) for a in ARMS
             if _runs(data, a)}
    if "bf16" in means:
        out += "; final loss " + ", ".join(f"{a} {fmt(means[a])}" for a in ("bf16", "ceil",
                                                                             "floor"))
    return out + " (means over seeds)"


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    floor = _runs(d, "floor")
    for i, k in enumerate(KINDS):
        vals = [r["counts"][k]["floor"] / max(r["counts"][k]["blocks"], 1) for r in floor]
        a.scatter([i] * len(vals), vals, s=18, color="#d62728")
    a.axhline(SHARE_MIN, color="k", ls=":", lw=0.9, label=f"margin {SHARE_MIN:g}")
    a.set_xticks(range(len(KINDS)))
    a.set_xticklabels(list(KINDS), fontsize=7)
    style(a, "floor scale: share of blocks saturated", "MX operand", "share per seed")
    arms = [arm for arm in ARMS if _runs(d, arm)]
    if len(arms) > 1:
        for i, arm in enumerate(arms):
            losses = [r["loss"] for r in _runs(d, arm)]
            b.scatter([i] * len(losses), losses, s=18)
        b.set_xticks(range(len(arms)))
        b.set_xticklabels(arms, fontsize=7)
    else:
        b.text(0.5, 0.5, "not run at this size", ha="center", va="center",
               transform=b.transAxes, fontsize=9, color="#555555")
    style(b, "pydoc text: final loss per seed", "arm", "final validation loss (nats/token)",
          legend=False)
    return [save(fig, out_dir, "mxfp8_scale_rule.png")]
