"""``residual-and-final-norm``: the chapters' own claims about the skip path and the final norm
(chapter 16, section 16.2; chapter 2.4, section 1).

Two ablations of normlab's GPT (``GPTConfig.residual`` drops each sublayer's skip path,
``GPTConfig.head_norm`` puts a norm before the head or takes it away):

* **the skip path** on the Markov source (its exact entropy floor tells a run that trains from
  one that stalls): Pre-LN at depth ``depth`` with and without the skip path, the same learning
  rate, seeds paired. The effect is loss(no skip) - loss(skip) (nats/token, a diverged run at
  its loss at init). Premise first: Pre-LN with the skip path trains (closes half the way from
  its loss at init to the floor); the arm without it runs only when it does.
* **the final norm** on pydoc characters (a task whose arms end apart): Post-LN and Pre-LN,
  each with and without a norm before the head. The effects are loss(without) - loss(with) per
  placement. Premise first: the task separates two arms the source says differ (Post-LN and
  Pre-LN in their standard forms end more than the margin apart); the two other arms run only
  when it does.
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
    Card,
    Check,
    Record,
)
from ..formatting import fmt
from . import _recipes as R
from ._training import not_run, require_finished, run_points, seed_losses

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="residual-and-final-norm",
    title="The chapters' claims: residual connections and the final norm before the head",
    citation="Chapter 16 (Normalization, Residuals & Precision), section 16.2; chapter 2.4 "
             "(Normalization and Stabilization), section 1",
    claim="Residual connections make a deep stack trainable: the same stack without its skip "
          "paths trains clearly worse. Pre-norm leaves the residual stream's scale "
          "uncontrolled, so a norm before the output head helps it; a post-norm stream ends "
          "normalized and needs none.",
    published="He et al. 2016 (cited by chapter 16): deep plain networks train worse than the "
              "same networks with skips; the chapters give no number",
    method="normlab GPT (`GPTConfig.residual`, `GPTConfig.head_norm`). The skip path: Pre-LN "
           "of `depth` blocks on the Markov source (`base`, exact entropy floor) with and "
           "without the skip path at `lr`, `seeds` seed(s) paired. The final norm: Post-LN and "
           "Pre-LN of the text recipe's four blocks on pydoc characters (`text`), each with and "
           "without the head's norm, `seeds` seed(s) paired. Premises first.",
    explanation="With a skip path the gradient reaching block l is the gradient at the top "
                "plus the branches' terms (16.2: 'the gradient contains an identity path'), so "
                "a deep stack passes signal back even where the branches are badly "
                "conditioned; without it the gradient is a product of every block's Jacobian. "
                "In Pre-LN the residual stream is a sum of the branches' outputs whose scale no "
                "norm controls, so the head reads an unnormalized vector unless a final norm "
                "sits before it; Post-LN's stream leaves every block through a norm.",
    short="without skips a deep stack trains worse; the final norm helps Pre-LN, not Post-LN",
)

# The margins, fixed before measuring, with where they come from:
TOL = 0.1  # nats: papers.md's clear gap (section 1, reproduction B), the margin the lab's other
#            placement experiments use (warmup, norm-placement-depth)
HALF = 0.5  # "trains": closes at least half the distance from the loss at init to the floor

BASE = R.derive(R.XIONG_MARKOV, "Pre-LN (the skip path's arms differ only in residual); the "
                "learning rate is the config's, fixed from the pilot", {
                    "model.placement": "pre"})
TEXT = R.derive(R.TEXT, "the text recipe as it is: four Pre-LN blocks of width 32, RoPE, "
                "AdamW with warmup and clipping on pydoc characters", {})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # the skip path's runs (Markov source); its n_layers is `depth`
    depth: int = 6  # L: blocks of the skip path's arms (Xiong et al.'s six; the pilot: the notes)
    lr: float = 1e-3  # the skip path's learning rate, fixed from the pilot (the notes)
    text: TrainConfig = TEXT  # the final norm's runs (pydoc characters, its own lr)
    final_norm_arms: bool = True  # whether the final norm's arms run (False where the register
    #                               lists its rows as not tested at the size)
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), **R.tiny_model(prefix="text.model."),
             "depth": 3, "lr": 1e-2, "base.steps": 40, "base.eval_interval": 20,
             "base.batch_size": 8, "base.model.seq_len": 8, "text.steps": 40,
             "text.warmup": 8, "text.eval_interval": 20, "text.batch_size": 8,
             "text.model.seq_len": 16, "seeds": 2},
    "quick": {"final_norm_arms": False},
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
AMENDMENTS: tuple = ()

SKIP_ARMS = ("skip", "no skip")
FN_ARMS = (("post", False), ("pre", True), ("post", True), ("pre", False))  # premise arms first


def _skip_variant(skip: bool, L: int) -> str:
    """The data's key of a skip-path arm."""
    return f"pre L={L} {'skip' if skip else 'no skip'}"


def _fn_variant(placement: str, final_norm: bool) -> str:
    """The data's key of a final-norm arm."""
    return f"{placement} {'final norm' if final_norm else 'no final norm'}"


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if cfg.base.model.placement != "pre" or not cfg.base.model.residual:
        raise ValueError("base: the skip path's arms are Pre-LN with the skip path "
                         "(model.placement 'pre', model.residual True); the arms set the rest")
    if cfg.text.model.norm == "none":
        raise ValueError("text: the final norm's arms need a norm (model.norm not 'none')")


def measure(config: Config, ctx) -> dict:
    """Premises first: Pre-LN with skips (Markov) and, with ``final_norm_arms``, the text's
    two standard forms run first; each ablation's other arm(s) only where its premise holds."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    data: dict[str, Any] = {"depth": cfg.depth, "lr": cfg.lr, "seeds": seeds}
    data["skip"] = _measure_skip(cfg, ctx, seeds)
    data["final_norm"] = _measure_final_norm(cfg, ctx, seeds) if cfg.final_norm_arms else None
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


def _fn_points(cfg: Config, arms, seeds: list[int]) -> list:
    return [(_fn_variant(p, fn), {"model.placement": p, "model.head_norm": fn, "seed": s})
            for p, fn in arms for s in seeds]


def _measure_final_norm(cfg: Config, ctx, seeds: list[int]) -> dict:
    """The final norm's arms on text: the premise's two standard forms first, the two others
    when the task separates them."""
    runs = run_points(cfg.text, _fn_points(cfg, FN_ARMS[:2], seeds), ctx, name="fn-premise")
    require_finished(runs)
    out = _fn_data(runs, FN_ARMS[:2])
    if _fn_premise(out).passed is not True:
        return {**out, "tested": False}
    rest = run_points(cfg.text, _fn_points(cfg, FN_ARMS[2:], seeds), ctx, name="final-norm")
    require_finished(rest)
    return _fn_data(runs + rest, FN_ARMS)


def _fn_data(runs: list, arms) -> dict:
    """Per arm: the final validation losses per seed (a diverged run at its loss at init)."""
    return {"loss": {_fn_variant(p, fn): next(iter(seed_losses(runs, _fn_variant(p, fn))
                                                   .values())) for p, fn in arms}}


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


def _fn_effect(fn: dict, a: str, b: str) -> S.Interval:
    """The paired interval over seeds of loss(a) - loss(b)."""
    return S.mean_interval(np.asarray(fn["loss"][a]) - np.asarray(fn["loss"][b]))


def _fn_premise(fn: dict) -> Check:
    rec = RECORDS["text-separates-post-and-pre"]
    iv = _fn_effect(fn, _fn_variant("post", False), _fn_variant("pre", True))
    return Check.superiority(
        id=rec.id, claim=rec.claim, published="-", interval=iv, side=rec.side,
        margin=rec.margin[0], kind=PREMISE,
        measured=f"loss(Post-LN) - loss(Pre-LN with its final norm) {iv.text()}",
        rule=f"superiority: the paired interval > {rec.margin[0]:g} nats (the task can tell "
             f"two arms apart by the claims' margin)", source="normlab [D]",
        margin_source=rec.margin_source)


_TEXTS = {  # record id -> (published, rule, source) of the counted rows
    "skips-make-a-deep-stack-trainable": (
        "deep plain networks train worse than residual ones (He et al. 2016, cited)",
        "superiority: the paired interval over seeds of loss(no skip) - loss(skip) > 0.1 nats",
        "chapter 16, section 16.2 [V]"),
    "final-norm-helps-pre-ln": (
        "implementations often add a final norm before the head (16.2)",
        "superiority: the paired interval of loss(Pre-LN without) - loss(with) > 0.1 nats",
        "chapter 16, section 16.2 [V]"),
    "post-ln-needs-no-final-norm": (
        "Post-norm writes Norm(x + F(x)) (16.2)",
        "non-inferiority: the paired interval of loss(Post-LN without) - loss(with) < 0.1 nats",
        "chapter 16, section 16.2 [V]"),
}


def _counted(rec: Record, iv: S.Interval, measured: str) -> Check:
    """A counted row decided by its record's rule (form, margin, side, margin's source)."""
    published, rule, source = _TEXTS[rec.id]
    make = Check.superiority if rec.form == SUPERIORITY else Check.non_inferiority
    return make(id=rec.id, claim=rec.claim, published=published, interval=iv, side=rec.side,
                margin=rec.margin[0], measured=measured.format(iv.text()), rule=rule,
                source=source, margin_source=rec.margin_source)


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


def _fn_rows(fn: dict) -> list[Check]:
    premise = _fn_premise(fn)
    ids = ("final-norm-helps-pre-ln", "post-ln-needs-no-final-norm")
    if not fn.get("tested", True):
        return [premise] + [_not_run(i, premise) for i in ids]
    rows = [premise]
    for rec_id, p in zip(ids, ("pre", "post")):
        iv = _fn_effect(fn, _fn_variant(p, False), _fn_variant(p, True))
        rows.append(_counted(RECORDS[rec_id], iv, f"loss({p} without) - loss({p} with) {{}}"))
    return rows


def judge(data: dict, config: Config) -> list[Check]:
    rows = _skip_rows(data)
    if data.get("final_norm") is not None:
        rows += _fn_rows(data["final_norm"])
    return rows


def headline(data: dict, config: Config) -> str:
    skip, L = data["skip"], data["depth"]
    means = {v: fmt(float(np.mean(x))) for v, x in skip["loss"].items()}
    out = (f"Markov, Pre-LN L={L}, lr {data['lr']:g}: with skips "
           f"{means[_skip_variant(True, L)]}, without "
           f"{means.get(_skip_variant(False, L), 'not run')} (floor {fmt(skip['floor'])})")
    fn = data.get("final_norm")
    if fn is not None:
        out += "; text, with / without the final norm: " + ", ".join(
            f"{p} " + " / ".join(fmt(float(np.mean(fn["loss"][_fn_variant(p, f)])))
                                  if _fn_variant(p, f) in fn["loss"] else "not run"
                                  for f in (True, False)) for p in ("post", "pre"))
    return out + " (means over seeds)"


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    for i, (v, losses) in enumerate(d["skip"]["loss"].items()):
        a.scatter([i] * len(losses), losses, color=COLORS["pre"] if "no" not in v else "#999999",
                  s=18)
    a.axhline(d["skip"]["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    a.set_xticks(range(len(d["skip"]["loss"])))
    a.set_xticklabels(list(d["skip"]["loss"]), fontsize=7)
    style(a, "Markov: final loss per seed", "arm", "final validation loss (nats/token)")
    a.legend(fontsize=6)
    fn = d.get("final_norm")
    if fn is None:
        b.text(0.5, 0.5, "not run at this size", ha="center", va="center",
               transform=b.transAxes, fontsize=9, color="#555555")
    else:
        for i, (v, losses) in enumerate(fn["loss"].items()):
            b.scatter([i] * len(losses), losses, color=COLORS[v.split()[0]], s=18)
        b.set_xticks(range(len(fn["loss"])))
        b.set_xticklabels(list(fn["loss"]), fontsize=6, rotation=20)
    style(b, "pydoc text: final loss per seed", "arm", "final validation loss (nats/token)")
    return [save(fig, out_dir, "residual_and_final_norm.png")]
