"""``deepnet-update``: Wang et al. 2022 (DeepNet)'s diagnosis of Post-LN at depth: the model update
||F(x, W_t) - F(x, W_0)|| explodes in the first optimizer steps, and DeepNorm bounds it.

A grid of training runs of normlab's GPT on the Markov source through the sweep API: Post-LN,
DeepNorm (alpha = (2M)^(1/4) on the skip path, Xavier gain beta = (8M)^(-1/4) on v, the output and
the MLP), Pre-LN and Admin, the papers' Xavier init with unit-variance embeddings, Adam without
warmup (``base``). The Trainer's ``update_probe`` measures the update on a fixed probe batch after
each of the first steps with the real AdamW updates: F is the stack's output (the input of the LM
head, ``GPT.hidden``), the L2 norm of its change per token averaged over the batch. The change of
the logits (which also moves with the head's own learning) is recorded beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig
from .. import stats
from ..contract import (
    CLAIM,
    DERIVATION,
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
from ._training import require_finished, run_grid, seed_losses, select

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="deepnet-update",
    title="The exploding model update of deep Post-LN, and DeepNorm's bound (Wang et al. 2022)",
    citation="Wang et al. 2022, 'DeepNet: Scaling Transformers to 1,000 Layers', Sec. 3 "
             "(instability of deep Transformers) and Sec. 4; Liu et al. 2020 (Admin)",
    claim="At depth, Post-LN's output moves a lot in the first optimizer steps (the model update "
          "||F(x, W_t) - F(x, W_0)|| spikes), its LayerNorm inputs grow and its gradients vanish, "
          "and training stalls; DeepNorm's scaled residual keeps the update O(eta) and trains.",
    published="Post-LN's model update explodes at the start of training, DeepNet's stays small "
              "(Fig. 3); DeepNet 18L/50L/100L BLEU 28.8 / 29.0 / 28.9 where Post-LN diverges "
              "(Table 1); the update bound is independent of depth",
    method="normlab GPT on the Markov source, Post-LN / DeepNorm / Pre-LN / Admin without warmup "
           "(`base`: Xavier init, unit-variance embeddings, Adam (0.9, 0.98), cosine, no weight "
           "decay or clipping); the update of the stack's output on a fixed probe batch after "
           "each of the first `base.update_probe` steps (the Trainer's update_probe; the largest "
           "is the counted one, the first step's a derivation), `seeds` seeds, run as one sweep.",
    explanation="Wang et al. trace Post-LN's failure at depth to the first updates: with N "
                "sublayers each leaning on its branch, one Adam step moves the output by O(N "
                "eta), the inputs of the LayerNorms grow, their Jacobians (sqrt(d)/||x||, see "
                "layernorm-jacobian) shrink the gradients, and the model settles in a bad "
                "region. DeepNorm multiplies the skip path by alpha > 1 and the branches' "
                "initial weights by beta < 1, chosen so that the update is bounded by O(eta) "
                "whatever the depth; warmup or a smaller init mitigate the same thing. Pre-LN's "
                "identity skip path and Admin's profiled omega also keep the early update small.",
    short="deep Post-LN's first-steps model update explodes, DeepNorm's is bounded and it trains",
    notebooks=("2.4.4-warmup.ipynb",),
)

PLACEMENTS = ("post", "deepnorm", "pre", "admin")
# The margins, fixed before measuring, with where they come from:
SPIKE = 3.0  # Post-LN's update > 3 x DeepNorm's (papers.md section 6: "DeepNorm early update <
#              Post-LN / 3"), counted on the largest update over the probed steps (the rule as
#              registered); on the first step (Theorem 4.1's one-step update, fixed by alpha and
#              beta) a derivation
GAP = 0.1  # nats: DeepNorm's final loss below Post-LN's by > 0.1 (papers.md section 6)
HALF = 0.5  # Post-LN "stalls": closes less than half the way from ln V to the entropy floor
#             (the warmup and admin experiments' rule): the premise of the loss claim

BASE = R.derive(  # the rule's depth M = 36 and 500 steps are the full size
    R.XIONG_MARKOV, "DeepNet's Fig. 3 depth (18 blocks), a small lr, the update probe", {
        "model.n_layers": 18, "steps": 150, "lr": 1e-3, "update_probe": 20})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data, optimizer and probe (the placement and
    #                           the seed vary); base.update_probe = the t <= 20 of the rule
    seeds: int = 4  # training seeds per placement (seed, seed + 1, ...), fixed from a pilot at
    #                 seeds 50000-50002 (the first-step log ratio's per-seed SD 0.29: at 4 seeds
    #                 its interval clears ln 3 at any block; the notes)
    seed: int = 0  # first training seed (the Markov source's "language" is fixed)


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True),  # the lab's tiny model
             "base.steps": 30, "base.eval_interval": 15, "base.batch_size": 8,
             "base.update_probe": 10, "base.model.n_layers": 6, "base.model.seq_len": 8,
             "seeds": 2},
    "quick": {},
    "full": {"base.model.n_layers": 36, "base.steps": 500, "base.eval_interval": 100,
             "base.update_probe": 20, "seeds": 5},  # the rule's t <= 20 (papers.md section 6)
}


# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS_FROM = ("4 at the quick size from a pilot at seeds 50000-50002 (the first-step log "
               "ratio's per-seed SD 0.29; 94b2ac3, 5c05c92); 5 at the full size, set before any "
               "full result, from no pilot")
_DIAGNOSIS = ("\"Post-LN instability comes from an exploding model update in the first steps: "
              "||F(x,theta_t) - F(x,theta_0)|| spikes, LN inputs grow, LN gradients vanish "
              "(||x|| >> sqrt(d)), and training stalls in a bad local optimum.\" (papers.md "
              "section 6's diagnosis [S])")
_BOUND = ("\"In-depth theoretical analysis shows that model updates can be bounded in a stable "
          "way.\"")
_SPIKE_SOURCE = "papers.md section 6: DeepNorm's early update < Post-LN's / 3"
REGISTER = (
    Record(id="post-ln-stalls-at-depth", kind=PREMISE,
           claim="Post-LN stalls at this depth without warmup", source=_DIAGNOSIS,
           where="Wang et al. 2022 (DeepNet), Sec. 3 and Table 1 [S]", form=THRESHOLD,
           margin=(HALF,), side="below",
           margin_source="the warmup experiment's half-way rule, from ln V", seeds="seeds",
           seeds_from=_SEEDS_FROM, registered="2026-12-03"),
    Record(id="post-ln-early-update-exceeds-deepnorm", kind=CLAIM,
           claim="Post-LN's largest model update over the first steps far exceeds DeepNorm's",
           source=_DIAGNOSIS + "; " + _BOUND,
           where="Wang et al. 2022 (DeepNet), Sec. 3 and Fig. 3 (the model update in the first "
                 "steps) [S]; abstract [V]",
           form=SUPERIORITY, margin=(float(np.log(SPIKE)),), side="above",
           margin_source=_SPIKE_SOURCE, grid=("base.update_probe",), seeds="seeds",
           seeds_from=_SEEDS_FROM, premise=("post-ln-stalls-at-depth",),
           registered="2026-12-02"),
    Record(id="post-ln-first-step-update-exceeds-deepnorm", kind=DERIVATION,
           claim="Post-LN's model update in the first optimizer step far exceeds DeepNorm's",
           source=_BOUND, where="Wang et al. 2022 (DeepNet), Theorem 4.1 [S]; abstract [V]",
           form=SUPERIORITY, margin=(float(np.log(SPIKE)),), side="above",
           margin_source=_SPIKE_SOURCE, seeds="seeds", seeds_from=_SEEDS_FROM,
           registered="2026-12-02"),
    Record(id="deepnorm-below-post-ln", kind=CLAIM,
           claim="DeepNorm ends clearly below Post-LN at this depth",
           source="\"The proposed method combines the best of two worlds, i.e., good performance "
                  "of Post-LN and stable training of Pre-LN, making DeepNorm a preferred "
                  "alternative.\"",
           where="Wang et al. 2022 (DeepNet), abstract; Table 1 (18L / 50L / 100L: 28.8 / 29.0 / "
                 "28.9 BLEU where Post-LN diverges) [S]",
           form=SUPERIORITY, margin=(GAP,), side="above",
           margin_source="papers.md section 6: > 0.1 nats (at step 500)", seeds="seeds",
           seeds_from=_SEEDS_FROM, premise=("post-ln-stalls-at-depth",),
           registered="2026-12-02"),
    Record(id="pre-ln-and-admin-first-update", kind=SHOWN,
           claim="Pre-LN's and Admin's first update beside DeepNorm's", seeds="seeds",
           registered="2026-12-02"),
    Record(id="logit-update-ratio", kind=SHOWN,
           claim="The same ratio on the logits (the head's own learning included)",
           grid=("base.update_probe",), seeds="seeds", registered="2026-12-02"),
)


def measure(config: Config, ctx) -> dict:
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    series: dict[str, Callable[..., Any]] = {
        k: (lambda rec, k=k: rec[k]) for k in ("model_update", "logit_update")}
    series["nll"] = lambda rec: rec["nll"]
    runs = run_grid(cfg.base, {p: {"model.placement": p} for p in PLACEMENTS}, ctx,
                    lrs=[cfg.base.lr], seeds=seeds, series=series, name="deepnet-update")
    require_finished(runs)
    by = {p: sorted(select(runs, placement=p), key=lambda r: r.seed) for p in PLACEMENTS}
    return {
        "seeds": seeds, "lr": cfg.base.lr, "depth": cfg.base.model.n_layers,
        "steps": cfg.base.steps, "probe": cfg.base.update_probe,
        "floor": next(r.entropy_floor for r in runs if r.entropy_floor is not None),
        "ln_v": float(np.log(cfg.base.model.vocab_size)),
        "loss": {p: seed_losses(runs, p)[cfg.base.lr] for p in PLACEMENTS},
        "peak": {p: {k: [r.peaks.get(k) for r in by[p]] for k in ("model_update", "logit_update")}
                 for p in PLACEMENTS},
        "first": {p: [r.curves["model_update"][0] if r.curves.get("model_update") else None
                      for r in by[p]] for p in PLACEMENTS},  # the update after one step
        "diverged": {p: sum(r.status == "diverged" for r in by[p]) for p in PLACEMENTS},
        "curves": {p: {"steps": by[p][0].steps, "update": by[p][0].curves["model_update"],
                       "nll": by[p][0].curves["nll"]} for p in PLACEMENTS}}


def _log_peaks(data: dict, p: str, key: str = "model_update") -> list[float]:
    """ln of each seed's largest update over the probed steps; a run that stopped before its
    first probe counts as no update measured (inf: the spike was a blow-up)."""
    return [np.log(v) if v is not None and v > 0 else np.inf for v in data["peak"][p][key]]


def _ratio_interval(data: dict, a: str, b: str, key: str = "model_update",
                    which: str = "peak") -> stats.Interval:
    """The paired interval over seeds of ln(update of a / update of b): the largest over the
    probed steps (``which="peak"``) or the first step's (``"first"``, stack output only)."""
    if which == "first":
        la, lb = (np.asarray([np.log(v) if v else np.inf for v in data["first"][p]])
                  for p in (a, b))
    else:
        la, lb = np.asarray(_log_peaks(data, a, key)), np.asarray(_log_peaks(data, b, key))
    big = 50.0  # a blow-up before the first probe: read as an update e^50 times larger
    return stats.paired_interval(np.where(np.isfinite(la), la, big),
                                 np.where(np.isfinite(lb), lb, big))


def _share(data: dict, p: str) -> list[float]:
    """Per seed, the share of the way from ln V (uniform predictions) to the floor closed."""
    ln_v = data.get("ln_v", float(np.log(16)))
    return [(ln_v - v) / (ln_v - data["floor"]) for v in data["loss"][p]]


def _shown(data: dict) -> list[Check]:
    """The measurements shown beside the verdict: the other placements' first update and the
    ratio on the logits."""
    loss = data["loss"]
    logits = _ratio_interval(data, "post", "deepnorm", "logit_update")
    others = {p: _ratio_interval(data, p, "deepnorm", which="first") for p in ("pre", "admin")}
    return [
        Check(id="pre-ln-and-admin-first-update",
              claim="Pre-LN's and Admin's first update beside DeepNorm's",
              published="- (Pre-LN trains; Admin degrades at depth in Table 1)",
              measured="; ".join(f"ln({p} / deepnorm) after step 1 = {iv.text()}"
                                 for p, iv in others.items())
              + f"; final loss pre {fmt(np.mean(loss['pre']))}, admin "
              f"{fmt(np.mean(loss['admin']))} (floor {fmt(data['floor'])})", rule="shown",
              passed=None, kind=SHOWN, source="Wang et al. 2022 [S]"),
        Check(id="logit-update-ratio",
              claim="The same ratio on the logits (the head's own learning included)",
              published="-",
              measured=f"ln(max post / max deepnorm) of the logits' change = {logits.text()}",
              rule="shown: F is the stack's output, as in DeepNet's bound and output-change",
              passed=None, kind=SHOWN,
              source="normlab [D]", note="the logits also move as the head learns the unigram "
                                  "distribution, in every arm alike"),
    ]


def _updates(data: dict, at: str) -> list[Check]:
    """The early update, counted: the largest over the probed steps (papers.md section 6's
    registered rule); and the first step's, a derivation (DeepNorm's alpha and beta fix it)."""
    n = data["probe"]
    spike = _ratio_interval(data, "post", "deepnorm")
    first = _ratio_interval(data, "post", "deepnorm", which="first")
    peak = {p: float(np.exp(np.mean(_log_peaks(data, p)))) for p in ("post", "deepnorm")}
    return [
        Check.superiority(id="post-ln-early-update-exceeds-deepnorm",
                          claim=f"The largest update over the first {n} steps, Post-LN's far "
                                f"above DeepNorm's ({at})",
                          published="Post-LN's model update explodes at the start, DeepNet's "
                                    "stays small (Fig. 3); papers.md section 6: max over t <= 20 "
                                    "> 3x", interval=spike, side="above",
                          margin=float(np.log(SPIKE)),
                          measured=f"ln(max_t post / max_t deepnorm) = {spike.text()} (ratio "
                                   f"{np.exp(spike.mean):.2f}; geometric-mean peaks: post "
                                   f"{fmt(peak['post'])}, deepnorm {fmt(peak['deepnorm'])})",
                          source="Wang et al. 2022, Sec. 3, Fig. 3 [S]",
                          margin_source="papers.md section 6: DeepNorm's early update < Post-LN's"
                                        " / 3",
                          note="the stack's output is a LayerNorm output (norm sqrt(d) per "
                               "token): its change saturates near sqrt(2d) within one to three "
                               "of Post-LN's steps while DeepNorm keeps learning"),
        Check.superiority(id="post-ln-first-step-update-exceeds-deepnorm", kind=DERIVATION,
                          claim=f"Post-LN's model update in the first optimizer step far exceeds "
                          f"DeepNorm's ({at})",
                          published="Thm. 4.1: DeepNorm bounds the one-step update by O(eta)",
                          interval=first, side="above", margin=float(np.log(SPIKE)),
                          measured=f"ln(post / deepnorm) after step 1 = {first.text()} (ratio "
                                   f"{np.exp(first.mean):.2f})",
                          source="Wang et al. 2022, Sec. 3, Thm. 4.1 [S]",
                          margin_source="papers.md section 6: DeepNorm's early update < Post-LN's"
                                        " / 3",
                          note="DeepNorm's alpha and beta scale the first step's update by "
                               "construction: a derivation, counted apart"),
    ]


def judge(data: dict, config: Config) -> list[Check]:
    loss, M = data["loss"], data["depth"]
    gap = stats.paired_interval(loss["post"], loss["deepnorm"])
    stalls = stats.mean_interval(_share(data, "post"))
    at = f"M={M}, lr={data['lr']:g}, no warmup"
    return [
        Check.decided(id="post-ln-stalls-at-depth",
                      claim=f"Post-LN stalls at this depth ({at}, {data['steps']} steps)",
                      published="Post-LN diverges or stalls at depth (Table 1; Sec. 3: 'trapped "
                                "in a bad local optimum')", interval=stalls, threshold=HALF,
                      side="below", kind=PREMISE,
                      measured=f"share of the way from ln V to the floor closed: "
                               f"{stalls.text()} ({data['diverged']['post']} diverged)",
                      rule=f"interval < {HALF}: the failure DeepNorm's loss is judged against",
                      source="Wang et al. 2022, Sec. 3 and Table 1 [S]",
                      margin_source="the warmup experiment's half-way rule, from ln V"),
        *_updates(data, at),
        Check.superiority(id="deepnorm-below-post-ln",
                          claim=f"DeepNorm ends clearly below Post-LN ({at}, {data['steps']} "
                          "steps)",
                          published="Post-LN diverges at depth; DeepNet 28.8-29.0 BLEU (Table 1)",
                          interval=gap, side="above", margin=GAP,
                          measured=f"post - deepnorm = {gap.text()} nats (post "
                                   f"{fmt(np.mean(loss['post']))}, deepnorm "
                                   f"{fmt(np.mean(loss['deepnorm']))}; {data['diverged']['post']} "
                                   f"Post-LN run(s) diverged)",
                          source="Wang et al. 2022, Table 1 [S]",
                          margin_source="papers.md section 6: > 0.1 nats (at step 500)"),
        *_shown(data),
    ]


def headline(data: dict, config: Config) -> str:
    peak = {p: fmt(float(np.exp(np.mean(_log_peaks(data, p))))) for p in PLACEMENTS}
    loss = {p: fmt(np.mean(data["loss"][p])) for p in PLACEMENTS}
    return (f"M={data['depth']}: max update over the first {data['probe']} steps post "
            f"{peak['post']}, deepnorm {peak['deepnorm']}, pre {peak['pre']}, admin "
            f"{peak['admin']}; final loss post {loss['post']}, deepnorm {loss['deepnorm']}, pre "
            f"{loss['pre']}, admin {loss['admin']} (floor {fmt(data['floor'])})")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, moving_average, save, style

    d = result.data
    fig, (a, b) = figure(2)
    for p in PLACEMENTS:
        cv = d["curves"][p]
        probed = [(t + 1, v) for t, v in zip(cv["steps"], cv["update"]) if v is not None]
        if probed:  # the update after step t is the (t + 1)-th
            a.plot(*zip(*probed), "o-", ms=3, color=COLORS[p], label=p)
        b.plot(cv["steps"], moving_average(cv["nll"]), color=COLORS[p], lw=1.2, label=p)
    a.set_yscale("log")
    style(a, f"model update, M={d['depth']} (seed {d['seeds'][0]})", "optimizer steps t",
          "||F(x, W_t) - F(x, W_0)|| per token")
    b.axhline(d["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    style(b, "training loss", "step", "training NLL (smoothed)")
    return [save(fig, out_dir, "deepnet_update.png")]


# ---- the register's amendments: each change after a committed result, with the result before -

_FIRST_STEP: dict[str, Any] = dict(
    date="2026-12-03", commit="778a154", remeasure=True,
    changed="the quick depth from 12 to DeepNet's Fig. 3 depth, 18 blocks, 4 seeds (was 3) from "
            "a pilot, Post-LN's stall added as the premise, and the counted quantity moved from "
            "the largest update over the first 20 steps to the first step's (94b2ac3); the full "
            "size was not measured before",
    why="the stack's output is a LayerNorm output, so its change saturates within one to three "
        "of Post-LN's steps while DeepNorm keeps learning: the largest over 20 steps compared a "
        "saturated arm with a learning one (1.74x at 778a154, FAIL); the first step's is "
        "Theorem 4.1's one-step update (the notes, 'Knobs tried')")
_EARLY_SHOWN = {"kind": SHOWN, "form": "", "margin": [], "side": ""}
_AUDIT = "lab-audit.md, deepnet-update (row 21; section 3, problems 1, 4 and 5): "

_PROBE_20: dict[str, Any] = dict(
    date="2026-12-07", commit="45a053f", remeasure=True,
    changed="the full size probes the first 20 steps, as the registered rule reads them (max "
            "over t <= 20), not the first 100",
    why="papers.md section 6's rule (DeepNorm's early update < Post-LN's / 3 over t <= 20 at M "
        "= 36) is the record's; the full size's 100 probed steps read a longer window than the "
        "rule registered (the register's notes left it to the set-ups' round)")

AMENDMENTS = (
    Amendment(id="post-ln-stalls-at-depth", before={"kind": None}, **{
        **_FIRST_STEP, "changed": "added as the premise (Post-LN stalls: less than half the way "
                                  "from ln V to the floor), 94b2ac3"}),
    Amendment(id="post-ln-early-update-exceeds-deepnorm", before={
        "claim": "Post-LN's model update in the first 20 steps far exceeds DeepNorm's",
        "form": THRESHOLD}, **{
        **_FIRST_STEP, "changed": _FIRST_STEP["changed"] + "; this row shown from then on"},
        results_before={"quick": _row(
            "FAIL", [0.45367458660212023, 0.6523291291770056],
            "ln(max_t post / max_t deepnorm) = 0.553 [0.454, 0.652] (n=3) (ratio 1.74; "
            "geometric-mean peaks: post 7.77, deepnorm 4.47)")}),
    Amendment(id="post-ln-first-step-update-exceeds-deepnorm", before=_EARLY_SHOWN, **{
        **_FIRST_STEP, "changed": _FIRST_STEP["changed"] + "; this row counted from then on (it "
                                                           "was shown)"},
        results_before={"quick": _row(
            "shown", None, "post / deepnorm = 9.34 (ln 2.23 [2.16, 2.31] (n=3)); pre / deepnorm = "
                           "5.12 (ln 1.63 [1.43, 1.83] (n=3)); admin / deepnorm = 5.16 (ln 1.64 "
                           "[1.41, 1.88] (n=3))", SHOWN)}),
    Amendment(id="deepnorm-below-post-ln", before={"form": THRESHOLD}, **_FIRST_STEP,
              results_before={"quick": _row(
                  "pass", [0.48639900776535283, 1.181892668480898],
                  "post - deepnorm = 0.834 [0.486, 1.18] (n=3) nats (post 2.1, deepnorm 1.27; 0 "
                  "Post-LN run(s) diverged)")}),
    # each effect counted once, and the registered rule counted again (issue 52, item 3)
    Amendment(
        id="post-ln-first-step-update-exceeds-deepnorm", date="2026-12-07", commit="8ed4d62",
        before={"kind": CLAIM},
        changed="kind claim -> derivation: counted apart",
        why=_AUDIT + "'The first-step ratio follows from DeepNorm's alpha and beta' (a post-hoc "
                     "switch and near-tautology: Pre-LN's and Admin's first steps are 4.8x and "
                     "5.0x DeepNorm's, ~1.7x below Post-LN's, and they train)",
        results_before={
            "quick": _row("pass", [1.6212478101740113, 2.602819125539811],
                          "ln(post / deepnorm) after step 1 = 2.11 [1.62, 2.6] (n=4) (ratio "
                          "8.27)"),
            "full": _row("pass", [2.0431443164945366, 2.3281667188131636],
                         "ln(post / deepnorm) after step 1 = 2.19 [2.04, 2.33] (n=5) (ratio "
                         "8.90)")}),
    Amendment(
        id="post-ln-early-update-exceeds-deepnorm", date="2026-12-07", commit="8ed4d62",
        before=_EARLY_SHOWN,
        changed="shown -> counted again, as first registered (superiority of ln(max_t post / "
                "max_t deepnorm) over the probed steps > ln 3; the full size probes 100 steps)",
        why=_AUDIT + "'The pre-registered \"max over <= 20 steps > 3x\" (papers.md section 6) "
                     "failed (1.45x quick, 1.14x full, now shown) ... Keep the pre-registered "
                     "rule counted'; issue 52: a claim that failed is counted, never demoted to "
                     "shown",
        results_before={
            "quick": _row("shown", None, "ln(max_t post / max_t deepnorm) = 0.373 [0.192, "
                                         "0.555] (n=4) (ratio 1.45; geometric-mean peaks: post "
                                         "7.03, deepnorm 4.84)", SHOWN),
            "full": _row("shown", None, "ln(max_t post / max_t deepnorm) = 0.131 [-0.0524, "
                                        "0.314] (n=5) (ratio 1.14; geometric-mean peaks: post "
                                        "7.99, deepnorm 7.01)", SHOWN)}),
    # the full size's window, the rule's (issue 58: the set-up a verdict rests on)
    Amendment(id="post-ln-early-update-exceeds-deepnorm", **_PROBE_20, results_before={
        "full": _row("shown", None, "ln(max_t post / max_t deepnorm) = 0.131 [-0.0524, 0.314] "
                                    "(n=5) (ratio 1.14; geometric-mean peaks: post 7.99, "
                                    "deepnorm 7.01)")}),
    Amendment(id="logit-update-ratio", **_PROBE_20, results_before={
        "full": _row("shown", None, "ln(max post / max deepnorm) of the logits' change = -0.247 "
                                    "[-0.378, -0.116] (n=5)", SHOWN)}),
)
