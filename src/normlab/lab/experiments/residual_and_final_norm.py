"""``residual-and-final-norm``: the chapters' own claim about the skip path (chapter 16, section
16.2; chapter 2.4, section 1).

An ablation of normlab's GPT (``GPTConfig.residual`` drops each sublayer's skip path) on the
Markov source (its exact entropy floor tells a run that trains from one that stalls): Pre-LN at
depth ``depth`` with and without the skip path, the same learning rate, seeds paired. The effect
is loss(no skip) - loss(skip) (nats/token, a diverged run at its loss at init). Premise first:
Pre-LN with the skip path trains (closes half the way from its loss at init to the floor); the
arm without it runs only when it does.

The final norm before the head (the same section's other claim) was measured here first, on
pydoc characters behind a premise that did not measure what the claim is about (Post-LN against
Pre-LN); it moved to the experiment ``final-norm`` (``normlab.lab.experiments.final_norm``), and
its three records here are retired by amendments that keep the result before.
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
    THRESHOLD,
    Amendment,
    Card,
    Check,
    Record,
)
from ..contract import (
    committed_row as _row,
)
from ..formatting import fmt
from . import _recipes as R
from ._training import not_run, require_finished, run_points, seed_losses

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="residual-and-final-norm",
    title="The chapters' claim: residual connections make a deep stack trainable",
    citation="Chapter 16 (Normalization, Residuals & Precision), section 16.2; chapter 2.4 "
             "(Normalization and Stabilization), section 1",
    claim="Residual connections make a deep stack trainable: the same stack without its skip "
          "paths trains clearly worse.",
    published="He et al. 2016 (cited by chapter 16): deep plain networks train worse than the "
              "same networks with skips; the chapters give no number",
    method="normlab GPT (`GPTConfig.residual`): Pre-LN of `depth` blocks on the Markov source "
           "(`base`, exact entropy floor) with and without the skip path at `lr`, `seeds` "
           "seed(s) paired. Premise first. (The final norm before the head: the experiment "
           "final-norm.)",
    explanation="With a skip path the gradient reaching block l is the gradient at the top "
                "plus the branches' terms (16.2: 'the gradient contains an identity path'), so "
                "a deep stack passes signal back even where the branches are badly "
                "conditioned; without it the gradient is a product of every block's Jacobian.",
    short="without skips a deep stack trains worse",
)

# The margins, fixed before measuring, with where they come from:
TOL = 0.1  # nats: papers.md's clear gap (section 1, reproduction B), the margin the lab's other
#            placement experiments use (warmup, norm-placement-depth)
HALF = 0.5  # "trains": closes at least half the distance from the loss at init to the floor

BASE = R.derive(R.XIONG_MARKOV, "Pre-LN (the skip path's arms differ only in residual); the "
                "learning rate is the config's, fixed from the pilot", {
                    "model.placement": "pre"})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the skip path's runs (Markov source); its n_layers is `depth`
    depth: int = 6  # L: blocks of the skip path's arms (Xiong et al.'s six; the pilot: the notes)
    lr: float = 1e-3  # the skip path's learning rate, fixed from the pilot (the notes)
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), "depth": 3, "lr": 1e-2, "base.steps": 40,
             "base.eval_interval": 20, "base.batch_size": 8, "base.model.seq_len": 8,
             "seeds": 2},
    "quick": {},
    "full": {"seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50001 (2026-12-07, the notes): without skips 2.25 / 2.24 "
               "nats against 1.26 / 1.26 with them at lr 1e-3 (gap 0.99 and 0.99), so 3 seeds "
               "at the quick size and 5 at the full size clear the 0.1 margin by far")
_FN_SEEDS_FROM = ("a pilot at seeds 50000-50001 (2026-12-07, the notes) on the text recipe: "
                  "Post-LN 1.896 / 1.886, Pre-LN 1.891 / 1.888, Pre-LN without its final norm "
                  "1.852 / 1.808; 5 seeds at the full size, the most its budget pays for")
_QUICK_COST = ("the quick report's budget (about 60 s of CPU for this experiment) pays for the "
               "skip path's two arms only: each text run costs about 10 s of CPU and the final "
               "norm needs four arms at three seeds or more (the pilot, the notes); the full "
               "size decides")
_SKIP_WHERE = "chapter 16, section 16.2 (eq. 16.4); chapter 2.4, section 1"
_FN_SOURCE = ("\"The trade-off is that the residual stream's scale is less directly controlled, "
              "so implementations often add final normalization before the output head.\"")
REGISTER = (
    Record(id="pre-ln-with-skips-trains", kind=PREMISE,
           claim="Pre-LN with its skip paths trains at the depth on the Markov source",
           source="\"Residual connections made very deep vision networks trainable "
                  "[he2015deep] and are now standard in Transformer blocks.\"",
           where=_SKIP_WHERE, form=THRESHOLD, margin=(HALF,), side="above",
           margin_source="the lab's half-way rule (warmup)", grid=("depth", "lr"), seeds=_SEEDS,
           seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="no-skip-share-context", kind=SHOWN,
           claim="Without skips: the share of the way to the floor closed (context)",
           grid=("depth", "lr"), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="skips-make-a-deep-stack-trainable", kind=CLAIM,
           claim="Without its skip paths the same deep stack ends clearly worse",
           source="\"The gradient contains an identity path, ..., so a deep stack can pass "
                  "signal backward even when F_l is poorly conditioned. Residual connections "
                  "made very deep vision networks trainable [he2015deep] and are now standard "
                  "in Transformer blocks.\"",
           where=_SKIP_WHERE + " ('the residual stacking that makes deep Transformers possible "
                               "at all')",
           form=SUPERIORITY, margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats", grid=("depth", "lr"),
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, premise=("pre-ln-with-skips-trains",),
           registered="2026-12-07"),
    Record(id="text-separates-post-and-pre", kind=PREMISE,
           claim="The text task separates Post-LN from Pre-LN (standard forms) by more than the "
                 "margin",
           source="\"Pre-norm writes x + F(Norm(x)), leaving the residual stream itself as the "
                  "direct path; this usually improves gradient flow in deep Transformers "
                  "[xiong2020layer].\"",
           where="chapter 16, section 16.2", form=SUPERIORITY, margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats (the claims' margin)",
           seeds=_SEEDS, seeds_from=_FN_SEEDS_FROM, registered="2026-12-07",
           untested=_QUICK_COST, untested_at=("quick",)),
    Record(id="final-norm-helps-pre-ln", kind=CLAIM,
           claim="Pre-LN without the final norm ends clearly worse than with it",
           source=_FN_SOURCE, where="chapter 16, section 16.2", form=SUPERIORITY,
           margin=(TOL,), side="above",
           margin_source="papers.md section 1: a clear gap is 0.1 nats", seeds=_SEEDS,
           seeds_from=_FN_SEEDS_FROM, premise=("text-separates-post-and-pre",),
           registered="2026-12-07", untested=_QUICK_COST, untested_at=("quick",)),
    Record(id="post-ln-needs-no-final-norm", kind=CLAIM,
           claim="Post-LN needs no final norm: without it Post-LN does not end clearly worse",
           source=_FN_SOURCE + " (the scale the final norm controls is Pre-LN's: \"Post-norm "
                               "writes Norm(x + F(x))\")",
           where="chapter 16, section 16.2", form=NON_INFERIORITY, margin=(TOL,), side="below",
           margin_source="papers.md section 1: a clear gap is 0.1 nats (the band of the Pre-LN "
                         "row)", seeds=_SEEDS, seeds_from=_FN_SEEDS_FROM,
           premise=("text-separates-post-and-pre",), registered="2026-12-07",
           untested=_QUICK_COST, untested_at=("quick",)),
)
RECORDS = {r.id: r for r in REGISTER}



_FN_PREMISE_FULL = ("loss(Post-LN) - loss(Pre-LN with its final norm) 0.0063 [-0.0225, 0.0351] "
                    "(n=5)")
_FN_NOT_RUN = (f"not run: the premise did not hold ({_FN_PREMISE_FULL}), so the arms that test "
               f"the claim were not trained")
_MOVED: dict[str, Any] = dict(
    date="2026-12-07", commit="ae739cc", retires=True,
    changed="retired with the final norm's arms (the text recipe's runs), which this experiment "
            "no longer measures: it measures the skip path only",
    why="moved to the experiment final-norm, whose premise measures what the claim is about "
        "(Pre-LN's residual stream at the head is not controlled: it grows with depth) on a "
        "text model deep enough to show it; here the premise compared Post-LN with Pre-LN, "
        "which the claim does not concern, and as a premise that failed it made the whole "
        "experiment 'not tested at this size', hiding the skip path's result (1.05 [1.02, "
        "1.07] nats at the full size)")
AMENDMENTS: tuple[Amendment, ...] = (
    Amendment(id="text-separates-post-and-pre", **_MOVED, results_before={"full": _row(
        "FAIL", [-0.022501747450487188, 0.035110432375849654], _FN_PREMISE_FULL, PREMISE)}),
    Amendment(id="final-norm-helps-pre-ln", **_MOVED,
              results_before={"full": _row("shown", None, _FN_NOT_RUN)}),
    Amendment(id="post-ln-needs-no-final-norm", **_MOVED,
              results_before={"full": _row("shown", None, _FN_NOT_RUN)}),
)

SKIP_ARMS = ("skip", "no skip")


def _skip_variant(skip: bool, L: int) -> str:
    """The data's key of a skip-path arm."""
    return f"pre L={L} {'skip' if skip else 'no skip'}"


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if cfg.base.model.placement != "pre" or not cfg.base.model.residual:
        raise ValueError("base: the skip path's arms are Pre-LN with the skip path "
                         "(model.placement 'pre', model.residual True); the arms set the rest")


def measure(config: Config, ctx) -> dict:
    """Premise first: Pre-LN with skips (Markov), then the arm without them where it trains."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"depth": cfg.depth, "lr": cfg.lr, "seeds": seeds}
    data["skip"] = _measure_skip(cfg, ctx, seeds)
    return data


def _skip_points(cfg: Config, skip: bool, seeds: list[int]) -> list:
    return [(_skip_variant(skip, cfg.depth), {"model.n_layers": cfg.depth,
                                              "model.residual": skip, "lr": cfg.lr, "seed": s})
            for s in seeds]


def _measure_skip(cfg: Config, ctx, seeds: list[int]) -> dict:
    """The skip path's arms: the premise's (with skips) first, the other when it trains."""
    runs = run_points(cfg.base, _skip_points(cfg, True, seeds), ctx, name="skip-premise")
    require_finished(runs)
    out = _skip_data(runs, cfg.depth, (True,))
    if _skip_premise(out).passed is not True:
        return {**out, "tested": False}
    rest = run_points(cfg.base, _skip_points(cfg, False, seeds), ctx, name="skip")
    require_finished(rest)
    return _skip_data(runs + rest, cfg.depth, (True, False))


def _skip_data(runs: list, L: int, arms: tuple[bool, ...]) -> dict:
    """Per arm: the final losses per seed (a diverged run at its loss at init) and the loss at
    init; the floor."""
    floor = next(r.entropy_floor for r in runs if r.entropy_floor is not None)
    out: dict[str, Any] = {"floor": floor, "loss": {}, "loss_at_init": {}}
    for skip in arms:
        v = _skip_variant(skip, L)
        out["loss"][v] = next(iter(seed_losses(runs, v).values()))
        out["loss_at_init"][v] = [r.loss_at_init for r in runs if r.variant == v]
    return out


# ---- the rows ----------------------------------------------------------------------------------
def _share(skip: dict, v: str) -> np.ndarray:
    """Per seed, the share of the way from the run's loss at init to the floor closed."""
    init = np.asarray(skip["loss_at_init"][v], dtype=float)
    return (init - np.asarray(skip["loss"][v])) / (init - skip["floor"])


def _skip_premise(skip: dict) -> Check:
    rec = RECORDS["pre-ln-with-skips-trains"]
    v = next(iter(skip["loss"]))  # the arm with skips: always the first
    iv = S.mean_interval(_share(skip, v))
    return Check.decided(
        id=rec.id, claim=f"{rec.claim} ({v})", published="-", interval=iv,
        threshold=rec.margin[0], side=rec.side, kind=PREMISE,
        measured=f"share of the way from its loss at init to the floor closed: {iv.text()}",
        rule=f"interval > {rec.margin[0]:g}: the baseline the skip path's effect is read "
             f"against", source="normlab [D]", margin_source=rec.margin_source)


_TEXTS = {  # record id -> (published, rule, source) of the counted rows
    "skips-make-a-deep-stack-trainable": (
        "deep plain networks train worse than residual ones (He et al. 2016, cited)",
        "superiority: the paired interval over seeds of loss(no skip) - loss(skip) > 0.1 nats",
        "chapter 16, section 16.2 [V]"),
}


def _counted(rec: Record, iv: S.Interval, measured: str) -> Check:
    """A counted row decided by its record's rule (form, margin, side, margin's source)."""
    published, rule, source = _TEXTS[rec.id]
    return Check.by_record(rec, iv, published=published, rule=rule, source=source,
                           measured=measured.format(iv.text()))


def _not_run(rec_id: str, premise: Check) -> Check:
    why = (f"the premise did not hold ({premise.measured}), so the arms that test the claim "
           f"were not trained")
    return dataclasses.replace(not_run(RECORDS[rec_id].claim, *_TEXTS[rec_id], why), id=rec_id)


def _skip_rows(data: dict) -> list[Check]:
    skip, L = data["skip"], data["depth"]
    premise = _skip_premise(skip)
    if not skip.get("tested", True):
        return [premise, _not_run("skips-make-a-deep-stack-trainable", premise)]
    a, b = _skip_variant(False, L), _skip_variant(True, L)
    share = S.mean_interval(_share(skip, a))
    context = Check(id="no-skip-share-context", claim=RECORDS["no-skip-share-context"].claim,
                    published="-", measured=f"{a}: {share.text()} of the way to the floor",
                    rule="shown: the share of the way from the loss at init to the floor",
                    passed=None, kind=SHOWN, source="normlab [D]")
    iv = S.mean_interval(np.asarray(skip["loss"][a]) - np.asarray(skip["loss"][b]))
    rec = RECORDS["skips-make-a-deep-stack-trainable"]
    return [premise, context,
            _counted(rec, iv, f"loss(no skip) - loss(skip) {{}} at L={L}, lr={data['lr']:g}")]


def judge(data: dict, config: Config) -> list[Check]:
    return _skip_rows(data)


def headline(data: dict, config: Config) -> str:
    skip, L = data["skip"], data["depth"]
    means = {v: fmt(float(np.mean(x))) for v, x in skip["loss"].items()}
    out = (f"Markov, Pre-LN L={L}, lr {data['lr']:g}: with skips "
           f"{means[_skip_variant(True, L)]}, without "
           f"{means.get(_skip_variant(False, L), 'not run')} (floor {fmt(skip['floor'])})")
    return out + " (means over seeds)"


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, axes = figure(1)
    a = axes[0]
    for i, (v, losses) in enumerate(d["skip"]["loss"].items()):
        a.scatter([i] * len(losses), losses, color=COLORS["pre"] if "no" not in v else "#999999",
                  s=18)
    a.axhline(d["skip"]["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    a.set_xticks(range(len(d["skip"]["loss"])))
    a.set_xticklabels(list(d["skip"]["loss"]), fontsize=7)
    style(a, "Markov: final loss per seed", "arm", "final validation loss (nats/token)")
    a.legend(fontsize=6)
    return [save(fig, out_dir, "residual_and_final_norm.png")]
