"""``warmup``: Xiong et al. 2020, Fig. 2 and Sec. 4: Post-LN needs learning-rate warmup, Pre-LN
does not; DeepNorm (Wang et al. 2022) as a third arm.

A grid of training runs of normlab's GPT on the Markov source (exact entropy floor), through the
sweep API: placement (post, pre, deepnorm) x depth x peak learning rate x {no warmup, linear
warmup over ``warmup_frac`` of the steps}, the same cosine decay after the warmup in both arms,
Adam (0.9, 0.98) without gradient clipping. The effect is the warmup gap

    gap_p(L, lr) = final loss without warmup - final loss with warmup      (nats/token)

per placement p (a diverged run counts as its loss at init). It is read at the highest learning
rate at which Post-LN *with* warmup trains (closes at least half the distance from its loss at
init to the entropy floor) at the largest depth. That baseline is the premise, and it runs
first: when it does not train, the other arms are not run and nothing is judged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...train import TrainConfig
from .. import stats as S
from ..contract import PREMISE, SHOWN, Card, Check
from ..formatting import fmt
from . import _recipes as R
from ._training import final_losses, not_run, require_finished, run_grid, seed_losses, select

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="warmup",
    title="Warmup: Post-LN needs it, Pre-LN does not (Xiong et al. 2020)",
    citation="Xiong et al. 2020, 'On Layer Normalization in the Transformer Architecture', Fig. 2 "
             "and Sec. 4; Wang et al. 2022 (DeepNet)",
    claim="At a learning rate where Pre-LN trains without warmup, Post-LN without warmup fails or "
          "ends clearly worse than Post-LN with warmup; the gap grows with the learning rate and "
          "the depth. DeepNorm trains without warmup.",
    published="IWSLT14 De-En, 6-6 layers, Adam: Post-LN without warmup BLEU 8.45, with 4000 "
              "warmup steps ~34; warmup 500: BLEU 31.16 at lr 5e-4 but 2.77 at lr 1e-3; Pre-LN "
              "without warmup ~34",
    method="normlab GPT on the Markov source (exact entropy floor): placement (post, pre, "
           "deepnorm) x `depths` x `lrs` x {no warmup, linear warmup over `warmup_frac` of the "
           "steps}, cosine decay after it in both arms, Adam without weight decay or clipping "
           "(`base`), `seeds` seed(s). Premises first: Post-LN with warmup at the largest "
           "depth trains first, and the other arms only when it trains.",
    explanation="Xiong et al. show that at initialization Post-LN's gradients near the output "
                "are large (Theorem 1; see gradients-at-init): a large learning rate in the "
                "first steps then pushes the model into a bad region it does not leave, and "
                "warmup is what prevents it. Pre-LN's gradients are well-scaled, so it trains at "
                "the same learning rate without warmup. DeepNorm up-weights the skip path "
                "(alpha x) and down-scales the initial branches (beta), which bounds the first "
                "updates (Wang et al. 2022).",
    short="Post-LN without warmup fails where it trains with warmup; Pre-LN and DeepNorm need "
          "none; the gap grows with lr and depth",
    notebooks=("2.4.4-warmup.ipynb",),
)

PLACEMENTS = ("post", "pre", "deepnorm")
# The margins, fixed before measuring, with where they come from:
MIN_GAP = 0.1  # nats: a clear gap (papers.md section 1, reproduction B: gap_post > 0.1); also
#                the non-inferiority margin of "Pre-LN needs no warmup" and of "Pre-LN without
#                warmup ends where Post-LN with it does" (the same unit of a clear gap)
GROWS = 0.0  # "the gap grows with lr / depth": a sign (papers.md gives no size)
DEEPNORM_MARGIN = 0.1  # nats: DeepNorm's loss below Post-LN's without warmup (papers.md section 6)
HALF = 0.5  # "trains": closes at least half the distance from the loss at init to the floor

BASE = R.derive(  # the run's lr and warmup vary: the base keeps TrainConfig's defaults
    R.XIONG_MARKOV, "the papers' Xavier block matrices with unit-variance embeddings, as the other "
    "placement experiments; lr and warmup are set per run", {
        "lr": TrainConfig().lr, "warmup": TrainConfig().warmup})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (placement, depth, lr,
    #                           warmup and seed vary)
    depths: tuple[int, ...] = (3, 6)  # L: blocks; the largest is Xiong et al.'s six layers
    #                                   (IWSLT14 6-6; papers.md reproduction B), the other half
    #                                   of it for "the gap grows with depth"
    lrs: tuple[float, ...] = (1e-3, 1e-2)  # peak learning rates; the gap should grow with lr
    #                                        (the rows read lr* and the lowest; full: four)
    warmup_frac: float = 0.2  # the warmup arm: linear warmup over this fraction of the steps
    seeds: int = 3  # training seeds per point (seed, seed + 1, ...): the gaps are paired by seed
    seed: int = 0  # first training seed (the Markov source's "language" is fixed)


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True),  # the lab's tiny model
             "depths": (2, 4), "lrs": (1e-3, 3e-2), "base.steps": 40, "base.eval_interval": 10,
             "base.batch_size": 8, "base.model.seq_len": 8, "seeds": 2},
    "quick": {},
    "full": {"depths": (3, 6), "lrs": (1e-3, 3e-3, 1e-2, 3e-2), "seeds": 5,
             "base.steps": 1000, "base.eval_interval": 250, "base.model.d_model": 64,
             "base.model.seq_len": 32, "base.model.init_std": 64**-0.5,
             "base.model.embed_scale": 8.0},
}


def _variant(p: str, L: int, warm: bool) -> str:
    """The data's key (and the plots' label) of a point: placement, depth, warmup or not."""
    return f"{p} L={L} {'warmup' if warm else 'no warmup'}"


def _trains(loss: float, loss0: float, floor: float) -> bool:
    """Closes at least half the distance from the loss at init to the entropy floor."""
    return loss <= floor + 0.5 * (loss0 - floor)


def measure(config: Config, ctx) -> dict:
    """Premises first: Post-LN with warmup at the largest depth (the baseline every gap is read
    against) trains first, at every learning rate and seed; only when it trains (the premise
    holds) do the other arms run. Each run is the run it would be in one sweep (a member of an
    ensemble is its single run), so the order changes no number."""
    cfg = config
    W = max(round(cfg.warmup_frac * cfg.base.steps), 1)
    variants = {_variant(p, L, warm): {"model.placement": p, "model.n_layers": L,
                                       "warmup": W if warm else 0}
                for L in sorted(cfg.depths, reverse=True) for p in PLACEMENTS
                for warm in (False, True)}
    post_w = _variant("post", max(cfg.depths), True)
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    series = {"nll": lambda rec: rec["nll"]}
    first = run_grid(cfg.base, {post_w: variants[post_w]}, ctx, lrs=cfg.lrs, seeds=seeds,
                     series=series, name="premise")
    require_finished(first)
    data = _data(cfg, first, [post_w], W)
    if _premise(data).passed is not True:
        return {**data, "tested": False}
    rest = run_grid(cfg.base, {v: o for v, o in variants.items() if v != post_w}, ctx,
                    lrs=cfg.lrs, seeds=seeds, series=series, name="warmup")
    require_finished(rest)
    return _data(cfg, first + rest, list(variants), W)


def _data(cfg: Config, runs: list, variants: list[str], W: int) -> dict:
    """The measurement's data from the runs of ``variants`` (the premise's one, or all)."""
    floor = next(r.entropy_floor for r in runs if r.entropy_floor is not None)
    lrs, depths = sorted(cfg.lrs), sorted(cfg.depths)
    loss = {v: final_losses(runs, v) for v in variants}  # variant -> {lr: mean final loss}
    init = {v: float(np.mean([r.loss_at_init for r in runs if r.variant == v])) for v in variants}
    post_w = _variant("post", depths[-1], True)
    trained = [lr for lr in lrs if _trains(loss[post_w][lr], init[post_w], floor)]
    lr_star = max(trained) if trained else None
    every = len(variants) > 1
    curves = {} if lr_star is None or not every else {
        _variant(p, depths[-1], w): {"steps": r.steps, "nll": r.curves["nll"]}
        for p in PLACEMENTS for w in (False, True)
        for r in select(runs, placement=p, n_layers=depths[-1], warmup=W if w else 0,
                        lr=lr_star, seed=cfg.seed)}
    return {"lrs": lrs, "depths": depths, "warmup_steps": W, "floor": floor,
            "loss": {v: [loss[v][lr] for lr in lrs] for v in variants},
            "seed_loss": {v: [seed_losses(runs, v)[lr] for lr in lrs] for v in variants},
            "loss_at_init": init,
            "diverged": {v: sum(r.status == "diverged" for r in runs if r.variant == v)
                         for v in variants},
            "gaps": {p: {str(L): [loss[_variant(p, L, False)][lr] - loss[_variant(p, L, True)][lr]
                                  for lr in lrs] for L in depths} for p in PLACEMENTS}
            if every else {},
            "lr_star": lr_star, "curves": curves}


def _loss(data: dict, p: str, L: int, warm: bool, lr: float) -> float:
    return data["loss"][_variant(p, L, warm)][data["lrs"].index(lr)]


def _seeds(data: dict, p: str, L: int, warm: bool, lr: float) -> np.ndarray:
    """The final losses per seed (a diverged run: its loss at init)."""
    return np.asarray(data["seed_loss"][_variant(p, L, warm)][data["lrs"].index(lr)])


def _gaps(data: dict, p: str, L: int, lr: float) -> np.ndarray:
    """The warmup gap per seed: loss without warmup - loss with it (paired: same seed)."""
    return _seeds(data, p, L, False, lr) - _seeds(data, p, L, True, lr)


def _gap(data: dict, p: str, L: int, lr: float) -> float:
    return data["gaps"][p][str(L)][data["lrs"].index(lr)]


def _share(data: dict, v: str, lr: float) -> np.ndarray:
    """Per seed, the share of the way from the variant's loss at init to the floor closed."""
    init, floor = data["loss_at_init"][v], data["floor"]
    return (init - np.asarray(data["seed_loss"][v][data["lrs"].index(lr)])) / (init - floor)


def _premise(data: dict) -> Check:
    """The premise: Post-LN with warmup trains at the largest depth (at lr*, or at the lowest
    lr when it trains at none); ``measure`` decides with it whether the other arms run."""
    lrs, Lmax, lr_star = data["lrs"], data["depths"][-1], data["lr_star"]
    at_lr = lr_star if lr_star is not None else lrs[0]
    share = S.mean_interval(_share(data, _variant("post", Lmax, True), at_lr))
    return Check.decided(
        claim=f"Post-LN with warmup trains at L={Lmax} (lr {at_lr:g})",
        published="Post-LN with 4000 warmup steps: BLEU ~34 (Fig. 2)", interval=share,
        threshold=HALF, side=S.ABOVE, kind=PREMISE,
        measured=f"share of the way from its loss at init to the floor closed: {share.text()}",
        rule=f"interval > {HALF}: the baseline the warmup gap is read against (lr* = the highest "
             f"lr where the mean over seeds closes half the way)",
        source="Xiong et al. 2020, Fig. 2 [V]", margin_source="the lab's half-way rule")


def judge(data: dict, config: Config) -> list[Check]:
    lrs, depths, lr_star = data["lrs"], data["depths"], data["lr_star"]
    Lmin, Lmax = depths[0], depths[-1]
    premise = _premise(data)
    if not data.get("tested", True):  # the premise did not hold: the other arms were not run
        why = (f"the premise did not hold ({premise.measured}), so the arms that test the "
               f"claim were not trained")
        return [premise] + [not_run(c, p, r, s, why) for c, p, r, s, _ in _CLAIMS]
    if lr_star is None:
        none = f"Post-LN with warmup trains at no learning rate of {lrs} at L={Lmax}"
        return [premise] + [Check(claim=c, published=p, measured=none, rule=r, passed=None,
                                  kind=SHOWN, source=s) for c, p, r, s, *_ in _CLAIMS]
    at = f"L={Lmax}, lr={lr_star:g}"
    g_post = _gaps(data, "post", Lmax, lr_star)
    post0 = _seeds(data, "post", Lmax, False, lr_star)
    rows: list = [  # (interval over seeds, form, side, margin) or None: not measurable
        (S.mean_interval(g_post), "sup", S.ABOVE, MIN_GAP),
        (S.mean_interval(_gaps(data, "pre", Lmax, lr_star)), "ni", S.BELOW, MIN_GAP),
        (S.mean_interval(g_post - _gaps(data, "post", Lmax, lrs[0])), "sup", S.ABOVE, GROWS)
        if lr_star != lrs[0] else None,
        (S.mean_interval(g_post - _gaps(data, "post", Lmin, lr_star)), "sup", S.ABOVE, GROWS)
        if Lmax != Lmin else None,
        (S.paired_interval(post0, _seeds(data, "deepnorm", Lmax, False, lr_star)), "sup",
         S.ABOVE, DEEPNORM_MARGIN),
        (S.paired_interval(_seeds(data, "pre", Lmax, False, lr_star),
                           _seeds(data, "post", Lmax, True, lr_star)), "ni", S.BELOW, MIN_GAP),
    ]
    texts = [f"gap_post {{}} at {at}", f"gap_pre {{}} at {at}",
             f"gap_post(lr={lr_star:g}) - gap_post(lr={lrs[0]:g}) {{}}",
             f"gap_post(L={Lmax}) - gap_post(L={Lmin}) {{}}",
             f"no warmup at {at}: Post-LN - DeepNorm {{}}",
             f"Pre-LN without warmup - Post-LN with warmup {{}} at {at} (Pre-LN "
             f"{fmt(_loss(data, 'pre', Lmax, False, lr_star))}, Post-LN "
             f"{fmt(_loss(data, 'post', Lmax, True, lr_star))})"]
    checks = [premise, Check(
        claim="The warmup gap at every depth and learning rate (context)", published="-",
        measured="; ".join(f"{p} L={L}: " + ", ".join(
            f"{fmt(g, spec='+.3f')} at {lr:g}" for g, lr in zip(data["gaps"][p][str(L)], lrs))
            for p in PLACEMENTS for L in depths),
        rule="shown: loss(no warmup) - loss(warmup), means over seeds", passed=None, kind=SHOWN,
        source="normlab [D]")]
    for i, ((c, p, r, s, ms), row, t) in enumerate(zip(_CLAIMS, rows, texts)):
        if row is None:
            checks.append(_unmeasurable(c, p, r, s, _why_not(data, i)))
            continue
        iv, form, side, margin = row
        make = Check.superiority if form == "sup" else Check.non_inferiority
        checks.append(make(claim=c, published=p, interval=iv, side=side, margin=margin,
                           measured=t.format(iv.text()), rule=r, source=s, margin_source=ms))
    return checks


def _why_not(data: dict, row: int) -> str:
    """Why the configuration cannot measure the lr row (2) or the depth row (3)."""
    lrs, depths = data["lrs"], data["depths"]
    if row == 3:
        return f"the configuration has one depth (L={depths[-1]}): no growth with depth to read"
    if len(lrs) == 1:
        return f"the configuration has one learning rate ({lrs[0]:g}): no growth with lr to read"
    return (f"Post-LN with warmup trains only at the lowest learning rate ({lrs[0]:g}): no "
            f"higher one to compare it with")


def _unmeasurable(claim: str, published: str, rule: str, source: str, why: str) -> Check:
    """A row the configuration cannot measure: inconclusive with the reason, never a FAIL."""
    return Check(claim=claim, published=published, measured=f"not measured: {why}", rule=rule,
                 passed=None, inconclusive=True, source=source,
                 note="inconclusive by construction: measure more learning rates or depths")


def headline(data: dict, config: Config) -> str:
    lr, Lmax = data["lr_star"], data["depths"][-1]
    if not data.get("tested", True):
        return (f"not tested: Post-LN with warmup at L={Lmax} closes "
                f"{_premise(data).measured.rpartition(': ')[2]} of the way to the floor (the "
                f"premise needs more than {HALF}); the other arms were not run")
    if lr is None:
        return f"Post-LN with warmup trains at no learning rate of {data['lrs']} at L={Lmax}"
    pair = {p: " / ".join(fmt(_loss(data, p, Lmax, w, lr)) for w in (False, True))
            for p in PLACEMENTS}
    gap = S.mean_interval(_gaps(data, "post", Lmax, lr)).text(2)
    return (f"at L={Lmax}, lr={lr:g}: without / with warmup Post-LN {pair['post']} (gap {gap}), "
            f"Pre-LN {pair['pre']}, DeepNorm {pair['deepnorm']} (floor {fmt(data['floor'])}; "
            f"means over seeds)")


_CLAIMS = [  # (claim, published, rule, source, margin source) of the counted rows, in order
    ("Post-LN without warmup ends clearly worse than with warmup",
     "BLEU 8.45 without warmup vs ~34 with 4000 warmup steps (Fig. 2)",
     ("superiority: the interval over seeds of gap_post > 0.1 nats at the largest depth and the "
      "highest lr where Post-LN with warmup trains"), "Xiong et al. 2020, Fig. 2 [V]",
     "papers.md section 1, reproduction B: gap_post > 0.1 nats"),
    ("Pre-LN needs no warmup: dropping it does not cost Pre-LN loss",
     "Pre-LN without warmup BLEU ~34 (Sec. 4)",
     "non-inferiority: the interval of gap_pre = loss(no warmup) - loss(warmup) < 0.1 nats",
     "Xiong et al. 2020, Sec. 4 [V]", "papers.md section 1: a clear gap is 0.1 nats"),
    ("The gap grows with the learning rate",
     "warmup 500: BLEU 31.16 at lr 5e-4, 2.77 at lr 1e-3 (Fig. 2)",
     "superiority: gap_post(highest trained lr) - gap_post(lowest lr) > 0, paired over seeds",
     "Xiong et al. 2020, Fig. 2 [V]", "0: a direction (papers.md gives no size)"),
    ("The gap grows with depth", "- (papers.md: try 12 layers)",
     "superiority: gap_post(largest L) - gap_post(smallest L) > 0 at that lr, paired over seeds",
     "papers.md section 1, reproduction B [D]", "0: a direction (papers.md gives no size)"),
    ("DeepNorm trains without warmup where Post-LN does not",
     "Post-LN stability problem solved; model update bounded by O(eta) (Wang et al. 2022)",
     ("superiority: without warmup, Post-LN's final loss - DeepNorm's > 0.1 nats at that point, "
      "paired over seeds"), "Wang et al. 2022 [S]", "papers.md section 6: 0.1 nats"),
    ("Pre-LN without warmup ends about where Post-LN with warmup does",
     "Pre-LN without warmup: BLEU ~34 on IWSLT14, as Post-LN with warmup (Sec. 4)",
     ("non-inferiority: the paired interval of Pre-LN (no warmup) - Post-LN (warmup) < 0.1 "
      "nats"), "Xiong et al. 2020, Sec. 4 [V]", "papers.md section 1: a clear gap is 0.1 nats"),
]


def _two_se(per_lr: list[list[float]]) -> list[float]:
    """2 standard errors over seeds at each learning rate (0 with one seed)."""
    return [float(2 * S.standard_error(v)) if len(v) > 1 else 0.0 for v in per_lr]


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, moving_average, save, style

    d = result.data
    lrs, depths = d["lrs"], d["depths"]
    Lmax = depths[-1]
    fig, axes = figure(3)
    a, b, c = axes
    for p in PLACEMENTS:
        for warm, ls in ((True, "-"), (False, "--")):
            v = _variant(p, Lmax, warm)
            if v not in d["loss"]:  # not run: the premise did not hold
                continue
            a.errorbar(lrs, d["loss"][v], yerr=_two_se(d["seed_loss"][v]), ls=ls, marker="o",
                       ms=4, capsize=2, color=COLORS[p], label=v)
    a.axhline(d["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    style(a, f"final loss vs lr, L={Lmax} (dashed: no warmup; bars 2 s.e.)", "peak learning rate",
          "final validation loss (nats/token)")
    a.legend(fontsize=6)
    markers = dict(zip(depths, "os^D"))
    if not d["gaps"]:
        b.text(0.5, 0.5, "not run: the premise did not hold", ha="center", va="center",
               transform=b.transAxes, fontsize=9, color="#555555")
    for p in PLACEMENTS if d["gaps"] else ():
        for L in depths:
            b.plot(lrs, d["gaps"][p][str(L)], marker=markers.get(L, "o"), ms=4, color=COLORS[p],
                   alpha=0.4 + 0.6 * L / Lmax, label=f"{p} L={L}")
    b.axhline(0, color="#999999", lw=0.8)
    for ax in (a, b):
        ax.set_xscale("log")
        ax.set_xticks(lrs)
        ax.set_xticklabels([f"{x:g}" for x in lrs])
        ax.minorticks_off()
    style(b, "warmup gap = loss(no warmup) - loss(warmup)", "peak learning rate", "gap (nats)")
    if d["gaps"]:
        b.legend(fontsize=6)
    for p in PLACEMENTS:
        for warm in (False, True):
            cv = d["curves"].get(_variant(p, Lmax, warm))
            if cv is not None:
                c.plot(cv["steps"], moving_average(cv["nll"]), "-" if warm else "--",
                       color=COLORS[p], lw=1.2, label=_variant(p, Lmax, warm))
    c.axhline(d["floor"], color="k", ls=":", lw=0.9)
    style(c, f"training loss at lr={d['lr_star']} (L={Lmax})" if d["lr_star"] else
          "training loss", "step", "training NLL (smoothed)")
    if d["curves"]:
        c.legend(fontsize=6)
    return [save(fig, out_dir, "warmup.png")]

