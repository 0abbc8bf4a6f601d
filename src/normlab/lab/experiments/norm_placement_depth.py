"""``norm-placement-depth``: where the norm sits, against depth. Post-LN, Pre-LN, sandwich
(Peri-LN), DeepNorm, Admin, ReZero and no norm, trained with one recipe at depths from 2 up, on the
Markov source whose entropy floor is the best loss any model can reach.

A grid of training runs of normlab's GPT through the sweep API: placement x depth x seed, every
run with the same optimizer, learning rate, warmup and init (the papers' Xavier block matrices
with unit-variance embeddings, ``GPTConfig(init="xavier", embed_scale=sqrt(d))``). The measure
is the final validation loss against depth, drawn with the entropy floor; a placement "trains"
at a depth when its loss there is within ``TOL`` of Pre-LN's best loss.
"""

from __future__ import annotations

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
from ._training import final_losses, require_finished, run_grid, seed_losses, select

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="norm-placement-depth",
    title="Norm placement vs depth: post, pre, sandwich, DeepNorm, Admin, ReZero, none",
    citation="Liu et al. 2020 (Admin), Table 1; Xiong et al. 2020; Wang et al. 2022 (DeepNet); "
             "Bachlechner et al. 2020 (ReZero); Kim et al. 2025 (Peri-LN)",
    claim="With one training recipe, Pre-LN, DeepNorm, sandwich, Admin and ReZero train at every "
          "depth, "
          "while Post-LN, fine when shallow, fails or ends clearly worse when deep, and a "
          "residual stack without any norm does worse than ReZero at depth.",
    published="Liu et al. (WMT14 En-De BLEU, 6L / 12L / 18L): Post-LN 27.80 / failed / failed; "
              "Pre-LN 27.27 / 28.26 / 28.38; Admin 27.90 / 28.58 / 29.03. DeepNet trains 1000 "
              "layers; ReZero 120-layer Transformers without LayerNorm",
    method="normlab GPT on the Markov source (exact entropy floor), one recipe for every run "
           "(`base`: Adam (0.9, 0.98), warmup then cosine, no weight decay, no clipping, the "
           "papers' Xavier init with unit-variance embeddings); placements x `depths` x `seeds` "
           "run as one sweep.",
    explanation="Post-LN renormalizes the sum after every sublayer, so each layer depends "
                "heavily on its own branch and an update is amplified through every layer above "
                "it (Liu et al.; see output-change); deep Post-LN stacks then stall even with "
                "warmup. Pre-LN and sandwich keep an identity skip path; DeepNorm weights the "
                "skip path by alpha > 1 and scales the initial branches down; ReZero starts "
                "every branch at zero. Without any norm the residual stream of a "
                "Xavier-initialized stack doubles its variance at every sublayer.",
    short="post, pre, sandwich, DeepNorm, Admin, ReZero, none at depths 2-18 under one recipe",
    notebooks=("2.4.4-pre-ln-vs-post-ln.ipynb", "2.4.6-interview-angle.ipynb"),
)

PLACEMENTS = ("post", "pre", "sandwich", "deepnorm", "admin", "rezero", "none")
TOL = 0.1  # nats: "within 0.1 of Pre-LN" / "worse by more than 0.1" (papers.md's clear gap)
MARGINS = "papers.md sections 1 and 6: a clear gap is 0.1 nats"

BASE = R.derive(  # each run overrides placement, depth and seed
    R.XIONG_MARKOV, "one lr, warmup and init for every placement and depth: a 40-step warmup, "
    "depth set per run", {"model.n_layers": 2, "warmup": 40})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (lr: the one shared lr)
    depths: tuple[int, ...] = (2, 6, 18)  # L: blocks
    seeds: int = 3  # training seeds per point (seed, seed + 1, ...): differences paired by seed
    seed: int = 0  # first training seed (the Markov source's "language" is fixed)


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True),  # the lab's tiny model
             "depths": (1, 3), "base.steps": 40, "base.warmup": 8, "base.eval_interval": 10,
             "base.batch_size": 8, "base.model.seq_len": 8, "seeds": 2},
    "quick": {},
    # full: Liu et al.'s learning rate (WMT14 En-De, 1e-3; the quick size keeps the recipe's 1e-2)
    "full": {"depths": (2, 4, 6, 8, 12, 16, 24), "seeds": 5, "base.steps": 1000, "base.lr": 1e-3,
             "base.warmup": 200, "base.eval_interval": 250, "base.model.d_model": 64,
             "base.model.seq_len": 32, "base.model.init_std": 64**-0.5,
             "base.model.embed_scale": 8.0},
}


# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_GRID, _SEEDS = ("depths",), "seeds"
_SEEDS_FROM = ("3 at the quick size and 5 at the full size, set before the first committed "
               "result (624d7fc, fcc0cd1), from no pilot; never raised after a verdict")
_LIU_TABLE = ("Liu et al. 2020, Table 1 (WMT14 En-De BLEU, 6L-6L / 12L-12L / 18L-18L) [S: "
              "RealFormer's Table 7, papers.md section 5]")


def _trains(p: str, claim: str, source: str, where: str,
            registered: str = "2026-11-29") -> Record:
    """The record of "p trains at every depth": p's worst loss over the depths within TOL of
    Pre-LN's best (non-inferiority)."""
    return Record(id=f"{p}-trains-at-every-depth", kind=CLAIM, claim=claim, source=source,
                  where=where, form=NON_INFERIORITY, margin=(TOL,), side="below",
                  margin_source=MARGINS, grid=_GRID, seeds=_SEEDS, seeds_from=_SEEDS_FROM,
                  premise=("post-ln-trains-shallow",), registered=registered)


REGISTER = (
    Record(id="post-ln-trains-shallow", kind=PREMISE,
           claim="Post-LN trains when shallow: within 0.1 nats of Pre-LN at the smallest depth",
           source="\"Post-LN | 27.80 | failed | failed\" (the BLEU table's Post-LN row at 6L-6L, "
                  "12L-12L, 18L-18L; Pre-LN 27.27 at 6L-6L)", where=_LIU_TABLE,
           form=NON_INFERIORITY, margin=(TOL,), side="below", margin_source=MARGINS,
           grid=_GRID, seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-03"),
    Record(id="post-ln-fails-deep", kind=CLAIM,
           claim="Post-LN fails or ends clearly worse than Pre-LN at the largest depth",
           source="\"for each layer in a multi-layer Transformer model, heavy dependency on its "
                  "residual branch makes training unstable\"",
           where="Liu et al. 2020, abstract; " + _LIU_TABLE + ": Post-LN failed at 12L and 18L",
           form=SUPERIORITY, margin=(TOL,), side="above", margin_source=MARGINS, grid=_GRID,
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, premise=("post-ln-trains-shallow",),
           registered="2026-11-29"),
    _trains("pre", "Pre-LN trains at every depth",
            "\"Pre-LN | 27.27 | 28.26 | 28.38\" (the BLEU table's Pre-LN row)", _LIU_TABLE),
    _trains("deepnorm", "DeepNorm trains at every depth",
            "\"We successfully scale Transformers up to 1,000 layers (i.e., 2,500 attention and "
            "feed-forward network sublayers) without difficulty\"",
            "Wang et al. 2022 (DeepNet), abstract; Table 1 (18L / 50L / 100L: 28.8 / 29.0 / "
            "28.9 BLEU) [S]"),
    _trains("sandwich", "Sandwich (Peri-LN) trains at every depth",
            "\"Peri-LN consistently achieves more balanced variance growth, steadier gradient "
            "flow, and convergence stability\"", "Kim et al. 2025 (Peri-LN), abstract"),
    _trains("admin", "Admin trains at every depth, where Post-LN fails",
            "\"Extensive experiments show that Admin is more stable, converges faster, and "
            "leads to better performance.\"",
            "Liu et al. 2020, abstract; " + _LIU_TABLE + ": Admin 27.90 / 28.58 / 29.03",
            registered="2026-12-02"),  # its arm joined the grid in b0f1974
    _trains("rezero", "ReZero trains at every depth without any norm in the blocks",
            "\"we are the first to train Transformers over 100 layers without learning rate "
            "warm-up or LayerNorm\"", "Bachlechner et al. 2020 (ReZero), Sec. 1"),
    Record(id="no-norm-worse-than-rezero", kind=CLAIM,
           claim="A plain residual stack without norm does worse than ReZero at the largest "
                 "depth",
           source="\"Signals effectively propagate through deep networks, which allows for "
                  "learning in otherwise untrainable networks.\"",
           where="Bachlechner et al. 2020 (ReZero), Sec. 1",
           form=SUPERIORITY, margin=(TOL,), side="above", margin_source=MARGINS, grid=_GRID,
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, premise=("post-ln-trains-shallow",),
           registered="2026-11-29"),
    Record(id="gap-to-floor-at-largest-depth", kind=SHOWN,
           claim="Gap to the entropy floor at the largest depth", grid=_GRID, seeds=_SEEDS,
           registered="2026-11-29"),
)


def _variant(p: str, L: int) -> str:
    return f"{p} L={L}"


def measure(config: Config, ctx) -> dict:
    cfg, lr = config, config.base.lr
    depths = sorted(cfg.depths)
    variants = {_variant(p, L): {"model.placement": p, "model.n_layers": L}
                for L in reversed(depths) for p in PLACEMENTS}
    runs = run_grid(cfg.base, variants, ctx, lrs=[lr],
                    seeds=[cfg.seed + i for i in range(cfg.seeds)],
                    series={"nll": lambda rec: rec["nll"]}, name="placement-depth")
    require_finished(runs)
    return {"depths": depths, "lr": lr,
            "floor": next(r.entropy_floor for r in runs if r.entropy_floor is not None),
            "ln_v": float(np.log(cfg.base.model.vocab_size)),
            "loss": {p: [final_losses(runs, _variant(p, L))[lr] for L in depths]
                     for p in PLACEMENTS},
            "seed_loss": {p: [seed_losses(runs, _variant(p, L))[lr] for L in depths]
                          for p in PLACEMENTS},  # (depths, seeds): a diverged run at its init
            "loss_at_init": {p: [float(np.mean([r.loss_at_init for r in
                                                select(runs, placement=p, n_layers=L)]))
                                 for L in depths] for p in PLACEMENTS},
            "diverged": {p: [sum(r.status == "diverged" for r in
                                 select(runs, placement=p, n_layers=L)) for L in depths]
                         for p in PLACEMENTS},
            "curves": {p: {"steps": r.steps, "nll": r.curves["nll"]} for p in PLACEMENTS
                       for r in select(runs, placement=p, n_layers=depths[-1], seed=cfg.seed)}}


def _seeds(data: dict, p: str) -> np.ndarray:
    """(seeds, depths): placement p's final loss per seed and depth."""
    return np.asarray(data["seed_loss"][p]).T


def _trains_everywhere(data: dict, p: str, claim: str, published: str, source: str) -> Check:
    """Placement p's worst loss over the depths minus Pre-LN's best, per seed: non-inferior to
    Pre-LN within TOL (the row of record ``{p}-trains-at-every-depth``)."""
    gap = _seeds(data, p).max(axis=1) - _seeds(data, "pre").min(axis=1)
    iv = S.mean_interval(gap)
    return Check.non_inferiority(id=f"{p}-trains-at-every-depth", claim=claim,
                                 published=published, interval=iv, side=S.BELOW,
                                 margin=TOL, measured=f"{p}'s worst loss over L - Pre-LN's best, "
                                 f"per seed: {iv.text()}", source=source, margin_source=MARGINS)


def judge(data: dict, config: Config) -> list[Check]:
    depths, floor = data["depths"], data["floor"]
    at = {p: dict(zip(depths, data["loss"][p])) for p in PLACEMENTS}
    Lmin, Lmax = depths[0], depths[-1]
    post, pre, none, rz = (_seeds(data, p) for p in ("post", "pre", "none", "rezero"))
    shallow, deep = S.paired_interval(post[:, 0], pre[:, 0]), S.paired_interval(post[:, -1],
                                                                                pre[:, -1])
    none_rz = S.paired_interval(none[:, -1], rz[:, -1])
    return [
        Check.non_inferiority(id="post-ln-trains-shallow",
                              claim=f"Post-LN trains when shallow (L={Lmin}): within {TOL} nats "
                              f"of Pre-LN", published="Post-LN 27.80 at 6L-6L (Pre-LN 27.27)",
                              interval=shallow, side=S.BELOW, margin=TOL, kind=PREMISE,
                              measured=f"post - pre, paired over seeds: {shallow.text()} at "
                                       f"L={Lmin}",
                              source="Liu et al. 2020, Table 1 [S]", margin_source=MARGINS,
                              note="the premise of the depth claim: a Post-LN that fails when "
                                   "shallow says nothing about depth"),
        Check.superiority(id="post-ln-fails-deep",
                          claim=f"Post-LN fails or ends clearly worse than Pre-LN when deep "
                          f"(L={Lmax})",
                          published="Post-LN 'failed' at 12L-12L and 18L-18L (Pre-LN 28.26, "
                                    "28.38)", interval=deep, side=S.ABOVE, margin=TOL,
                          measured=f"post - pre, paired over seeds: {deep.text()} at L={Lmax} "
                                   f"({data['diverged']['post'][-1]} diverged)",
                          source="Liu et al. 2020, Table 1 [S]", margin_source=MARGINS),
        _trains_everywhere(data, "pre", "Pre-LN trains at every depth",
                           "Pre-LN BLEU 27.27 / 28.26 / 28.38 at 6 / 12 / 18 layers (En-De)",
                           "Liu et al. 2020, Table 1 [S]"),
        _trains_everywhere(data, "deepnorm", "DeepNorm trains at every depth",
                           "DeepNet 28.8 / 29.0 / 28.9 BLEU at 18 / 50 / 100 layers; Post-LN "
                           "diverges at depth (Table 1)", "Wang et al. 2022, Table 1 [S]"),
        _trains_everywhere(data, "sandwich", "Sandwich (Peri-LN) trains at every depth",
                           "stable, balanced variance growth up to 3.2B parameters (Peri-LN)",
                           "Kim et al. 2025 [S]"),
        _trains_everywhere(data, "admin", "Admin trains at every depth, where Post-LN fails",
                           "Admin 27.90 / 28.58 / 29.03 BLEU at 6 / 12 / 18 layers; Post-LN "
                           "failed at 12 and 18", "Liu et al. 2020, Table 1 [S]"),
        _trains_everywhere(data, "rezero", "ReZero trains at every depth without any norm in "
                           "the blocks", "120-layer Transformers train without LayerNorm or "
                           "warmup", "Bachlechner et al. 2020 [S]"),
        Check.superiority(id="no-norm-worse-than-rezero",
                          claim="A plain residual stack without norm does worse than ReZero at "
                          "depth", published="ReZero trains where the plain residual network "
                                             "without norm does not",
                          interval=none_rz, side=S.ABOVE, margin=TOL,
                          measured=f"none - rezero = {none_rz.text()} nats at L={Lmax} (none "
                          f"{fmt(at['none'][Lmax])}, {data['diverged']['none'][-1]} of "
                          f"{config.seeds} diverged)",
                          source="Bachlechner et al. 2020 [S]", margin_source=MARGINS),
        Check(id="gap-to-floor-at-largest-depth",
              claim="Gap to the entropy floor at the largest depth",
              published="- (the Markov source's exact floor)",
              measured=", ".join(f"{p} {at[p][Lmax] - floor:+.3f}" for p in PLACEMENTS)
              + f" (floor {fmt(floor)} nats)", rule="shown", passed=None, kind=SHOWN,
              source="normlab Markov source [D]"),
    ]


def headline(data: dict, config: Config) -> str:
    loss, Lmax = data["loss"], data["depths"][-1]
    deep = S.paired_interval(_seeds(data, "post")[:, -1], _seeds(data, "pre")[:, -1])
    return ("worst final loss over depths (mean over seeds): " + ", ".join(
        f"{p} {fmt(max(loss[p]))}" for p in PLACEMENTS) + f" (floor {fmt(data['floor'])}, ln V "
        f"{fmt(data['ln_v'])}); post - pre {deep.text(2)} at L={Lmax}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, moving_average, save, style

    d = result.data
    depths = d["depths"]
    fig, (a, b) = figure(2)
    for p in PLACEMENTS:
        per = np.asarray(d["seed_loss"][p])  # (depths, seeds)
        err = 2 * S.standard_error(per, axis=1) if per.shape[1] > 1 else None
        a.errorbar(depths, d["loss"][p], yerr=err, marker="o", ms=4, capsize=2, color=COLORS[p],
                   label=p)
        bad = [(L, v) for L, v, n in zip(depths, d["loss"][p], d["diverged"][p]) if n]
        if bad:
            a.scatter(*zip(*bad), marker="x", s=60, color=COLORS[p], zorder=3)
    a.axhline(d["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    a.axhline(d["ln_v"], color="#777777", ls="--", lw=0.9, label="ln V (uniform)")
    a.set_xscale("log")
    a.set_xticks(depths)
    a.set_xticklabels([str(L) for L in depths])
    a.minorticks_off()
    style(a, f"final loss vs depth (lr {d['lr']:g}; x: diverged; bars 2 s.e.)", "blocks L",
          "final validation loss (nats/token)")
    a.legend(fontsize=7)
    for p, cv in d["curves"].items():
        b.plot(cv["steps"], moving_average(cv["nll"]), color=COLORS[p], lw=1.2, label=p)
    b.axhline(d["floor"], color="k", ls=":", lw=0.9)
    style(b, f"training loss at L={depths[-1]}", "step", "training NLL (smoothed)")
    b.legend(fontsize=7)
    return [save(fig, out_dir, "norm_placement_depth.png")]



# ---- the register's amendments: each change after a committed result, with the result before -

_SPLIT: dict[str, Any] = dict(
    date="2026-12-03", commit="778a154", remeasure=False,
    changed="the first registration's one row 'Post-LN matches Pre-LN when shallow but fails or "
            "ends clearly worse when deep' (both conditions decided together, no interval of its "
            "own) split into the premise at the smallest depth and the claim at the largest "
            "(superiority, > 0.1 nats), on the same data (5c05c92)",
    why="premises first (the kinds of row, 3a2fb9d): a Post-LN that fails when shallow says "
        "nothing about depth, so the shallow half is what the claim needs, counted apart; the "
        "full size was not measured before the change")
_LR: dict[str, Any] = dict(
    date="2026-12-05", commit="8c42986", remeasure=True,
    changed="the full size's learning rate from the quick recipe's 1e-2 to Liu et al.'s 1e-3 "
            "(3390434); margins, depths, steps and seeds unchanged",
    why="at 1e-2 Admin stalled with Post-LN from eight blocks on and DeepNorm in 2 of 5 seeds "
        "at L=24 (partly reproduced); a pilot at 24 blocks (seed 0, a verdict seed) gave Admin "
        "2.406 / 1.136 / 1.137 nats at lr 1e-2 / 3e-3 / 1e-3 and Post-LN 2.406 at all three: "
        "1e-3 is the source's own learning rate (WMT14 En-De, papers.md section 5), the notes")
_FULL_AT_1E_2 = {  # the full size at lr 1e-2, 8c42986
    "post-ln-trains-shallow": _row(
        "pass", [-0.000147583259091673, 0.0005045810880222894],
        "post - pre, paired over seeds: 0.000178 [-0.000148, 0.000505] (n=5) at L=2", PREMISE),
    "post-ln-fails-deep": _row(
        "pass", [1.2312456872095972, 1.2833935314774827],
        "post - pre, paired over seeds: 1.26 [1.23, 1.28] (n=5) at L=24 (0 diverged)"),
    "pre-trains-at-every-depth": _row(
        "pass", [0.0004886894858066173, 0.0017805164774324566],
        "pre's worst loss over L - Pre-LN's best, per seed: 0.00113 [0.000489, 0.00178] (n=5)"),
    "deepnorm-trains-at-every-depth": _row(
        "inconclusive", [-0.3546970099750347, 1.374545346207861],
        "deepnorm's worst loss over L - Pre-LN's best, per seed: 0.51 [-0.355, 1.37] (n=5)"),
    "sandwich-trains-at-every-depth": _row(
        "pass", [0.000938692629760169, 0.0018768022894356021],
        "sandwich's worst loss over L - Pre-LN's best, per seed: 0.00141 [0.000939, 0.00188] "
        "(n=5)"),
    "admin-trains-at-every-depth": _row(
        "FAIL", [1.272628603430432, 1.2733551274314854],
        "admin's worst loss over L - Pre-LN's best, per seed: 1.27 [1.27, 1.27] (n=5)"),
    "rezero-trains-at-every-depth": _row(
        "pass", [-0.00035444369480458276, 0.0015656776440933088],
        "rezero's worst loss over L - Pre-LN's best, per seed: 0.000606 [-0.000354, 0.00157] "
        "(n=5)"),
    "no-norm-worse-than-rezero": _row(
        "pass", [1.763814246447747, 2.619532471589754],
        "none - rezero = 2.19 [1.76, 2.62] (n=5) nats at L=24 (none 3.33, 5 of 5 diverged)"),
}

_TRAINS_ONLY: dict[str, Any] = dict(
    date="2026-12-07", commit="45a053f", remeasure=False,
    changed="the claim's words: 'trains at every depth (depth never hurts it)' to 'trains at "
            "every depth'; the rule (Pre-LN's worst loss over the depths within 0.1 nats of its "
            "best) and the data are unchanged",
    why="issue 58, section 1: on the Markov source every arm that trains ends within about "
        "0.06 nats of the floor, so the row tells an arm that trains from one that stalls "
        "(what Liu et al.'s 'failed' entries say) and cannot tell whether depth helps or hurts "
        "a trained arm's quality (the BLEU table's 27.27 / 28.26 / 28.38); the row keeps the "
        "Markov source, whose floor is what a trains-or-stalls claim needs")

AMENDMENTS = (
    Amendment(id="post-ln-trains-shallow", before={"kind": None}, **{
        **_SPLIT, "changed": "added as the premise: the shallow half of the first "
                             "registration's combined Post-LN row (5c05c92)"}),
    Amendment(id="post-ln-fails-deep", before={
        "claim": "Post-LN matches Pre-LN when shallow but fails or ends clearly worse when deep",
        "form": "", "margin": [], "side": "", "premise": []}, **_SPLIT, results_before={
        "quick": _row("pass", None, "post - pre, paired over seeds: -0.000389 [-0.00269, "
                                    "0.00191] (n=3) at L=2, 1.17 [1.15, 1.19] (n=3) at L=18")}),
    *(Amendment(id=i, **_LR, results_before={"full": row}) for i, row in _FULL_AT_1E_2.items()),
    Amendment(id="pre-trains-at-every-depth",
              before={"claim": "Pre-LN trains at every depth (depth never hurts it)"},
              **_TRAINS_ONLY, results_before={
                  "quick": _row("pass", [0.0031170397942749564, 0.009477377176112144],
                                "pre's worst loss over L - Pre-LN's best, per seed: 0.0063 "
                                "[0.00312, 0.00948] (n=3)"),
                  "full": _row("pass", [0.0005753178353095467, 0.0027797295508300846],
                               "pre's worst loss over L - Pre-LN's best, per seed: 0.00168 "
                               "[0.000575, 0.00278] (n=5)")}),
)
