"""``rmsnorm-quality``: Zhang & Sennrich 2019: RMSNorm, and pRMSNorm (the RMS from the first
p = 6.25% of the features), reach LayerNorm's quality at the same hyperparameters, in less time.

Training runs of normlab's Pre-LN GPT on the characters of ``pydoc_data.topics``, LayerNorm,
RMSNorm and pRMSNorm (``GPTConfig.norm_partial``) in every norm of the model, the same recipe and
the same seeds for the three. "Reach" is fixed in advance from the paper's own numbers: the
relative loss excess of seed i,

    e_i = (loss_i(RMSNorm) - loss_i(LayerNorm)) / loss_i(LayerNorm),

has its paired interval below ``REACH_TOL``, the largest quality deficit the paper reports while
calling the norms comparable. The time per training step of each norm is measured in the same
run, in-process, the arms interleaved; it is shown, not judged (wall time varies on a shared
machine), as the median of the per-round ratios.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...functional.rmsnorm import partial_width
from ...train import TrainConfig, Trainer
from ..contract import (
    CLAIM,
    NON_INFERIORITY,
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
from ..stats import BELOW, T_METHOD, mean_interval, paired_interval
from . import _recipes as R
from ._training import require_finished, run_grid, seed_losses

LANE = "alone"  # it times training steps: run with nothing beside it (normlab.lab.reporting.lanes)

CARD = Card(
    name="rmsnorm-quality",
    title="RMSNorm and pRMSNorm reach LayerNorm's loss, and the time per step (Zhang & Sennrich)",
    citation="Zhang & Sennrich 2019, 'Root Mean Square Layer Normalization' (NeurIPS 2019); "
             "the chapter (2.4, section 5)",
    claim="Re-centering is dispensable: RMSNorm, and pRMSNorm with the RMS estimated from 6.25% "
          "of the features, reach LayerNorm's quality at the same hyperparameters while taking "
          "less time per step.",
    published="Transformer-base WMT14 En-De BLEU (Test14 / Test17): LN 26.6 / 27.7, RMSNorm "
              "26.8 / 27.7, pRMSNorm 26.5 / 27.8; RNNSearch: LN 22.6 / 23.6, RMSNorm 22.4 / "
              "23.7, pRMSNorm 22.6 / 23.1; time: 7%-64% less than LN (Transformer: -6.9%)",
    method="normlab GPT, Pre-LN, on the characters of pydoc_data.topics, every norm of the "
           "model LayerNorm, RMSNorm or pRMSNorm (p = `partial`), one recipe (`base`), `seeds` "
           "seeds shared by the three; time per training step of each, in-process after the "
           "sweep, `timing_rounds` interleaved rounds of `timing_steps` steps.",
    explanation="LayerNorm subtracts the mean and divides by the standard deviation; RMSNorm only "
                "divides by the root mean square, keeping the invariance to re-scaling (what "
                "stabilizes training) and dropping the invariance to re-centering, which the "
                "paper argues is dispensable. pRMSNorm estimates the RMS from the first "
                "ceil(p C) features only: with C = 512 and p = 6.25%, 32 features. A time saving "
                "per step is a fraction of the norm's share of the step: in a small model on a "
                "CPU the matrix multiplies dominate.",
    short="RMSNorm and pRMSNorm (RMS from 6.25% of the features) reach LayerNorm's loss at the "
          "same hyperparameters, in less time per step",
    notebooks=("2.4.5-rmsnorm.ipynb", "16.1-batchnorm-layernorm-rmsnorm.ipynb"),
)

NORMS = ("layernorm", "rmsnorm", "prmsnorm")
# "Reach": the paired relative excess e = (L_norm - L_LN) / L_LN has its interval below this.
# From the paper's quality table (papers.md section 2): the largest deficit of RMSNorm or
# pRMSNorm against LayerNorm the paper reports as comparable is pRMSNorm on RNNSearch Test17,
# BLEU 23.1 vs 23.6 = 2.1% (RMSNorm's largest: 22.4 vs 22.6 = 0.9%; the Transformer's <= 0.4%).
REACH_TOL = (23.6 - 23.1) / 23.6  # = 0.0212
PAPER_TIME = {"rmsnorm": -0.069, "prmsnorm": -0.093}  # Transformer-base, time vs LN [S]

BASE = R.derive(
    R.TEXT, "two blocks of width 64, 250 steps; no embedding scale or RoPE, as measured", {
        **R.TEXT_WITHOUT_ROPE_OR_EMBED_SCALE, "model.n_layers": 2, "model.d_model": 64,
        "model.init_std": 64**-0.5, "steps": 250, "warmup": 25, "eval_interval": 125})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (the norm and seed vary)
    # pRMSNorm's p: the RMS from the first ceil(p * C) features. The paper's models estimate it
    # from 32 features (p = 6.25% of C = 512); what decides the estimate's error is k, not p
    # (relative std 1/sqrt(2k) = 12.5%), so at C = 64 the paper's estimator is p = 0.5, k = 32
    partial: float = 0.5
    seeds: int = 5  # training seeds shared by the three norms (pilot at --seed 50000, n = 3: sd
    #                of the pRMSNorm excess 1.35%; n = 5 puts the bound about 1.7% from the mean)
    timing_rounds: int = 9  # interleaved timing rounds (the median of the per-round ratios)
    timing_steps: int = 2  # training steps timed per norm and round
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {"seeds": 3, "timing_rounds": 3, "timing_steps": 1, "base.steps": 30,
             "base.warmup": 6, "base.eval_interval": 15, "base.batch_size": 8,
             "base.model.d_model": 32, "base.model.n_heads": 2, "base.model.seq_len": 16,
             "base.model.init_std": 32**-0.5},
    "quick": {},
    # full seeds: 10. The first full measurement had 6 seeds (not from a pilot) and left
    # RMSNorm's row inconclusive, +0.47% [-1.81%, +2.76%], its excess spread 2.2% over seeds; a
    # pilot at the full size at seeds 60000-60002, which no verdict run uses, gave -0.13% (spread
    # 0.80%) and pRMSNorm -3.09% (0.54%). From the pooled spread (1.9%) and mean (+0.27%), 10
    # seeds put the bound about 1.4% above the mean, inside the 2.1% margin; raised for the
    # whole experiment, all three norms. At 10 seeds the RMSNorm row was inconclusive at seed 0
    # (+0.77% [-0.81%, +2.36%]) and passed at seed 10000 (+0.46% [-0.55%, +1.46%]): a verdict
    # that depends on the block. From the two blocks' pooled spread (1.86%) and mean (+0.62%),
    # 24 seeds clear the margin at a block with probability 0.97 (simulated Student-t bounds;
    # 0.93 at 20, 0.99 at 30); raised once more for the whole experiment, all three norms
    "full": {"seeds": 24, "timing_rounds": 21, "base.steps": 2000, "base.warmup": 200,
             "base.eval_interval": 500, "base.model.n_layers": 4, "base.model.d_model": 128,
             "base.model.init_std": 128**-0.5, "partial": 0.25},  # k = 32 of 128
}


# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS_FROM = ("5 at the quick size from a pilot at seed 50000 (n = 3, 1f22642: sd of "
               "pRMSNorm's excess 1.35%); 24 at the full size, raised after verdicts: 6 (no "
               "pilot) -> 10 (68d1704, a pilot at seeds 60000-60002 pooled with the first "
               "measurement) -> 24 (87a3cf6, from the spread of the 20 verdict seeds of both "
               "blocks, no pilot)")
_ABSTRACT = ("\"Extensive experiments on several tasks using diverse network architectures show "
             "that RMSNorm achieves comparable performance against LayerNorm but reduces the "
             "running time by 7%~64% on different models.\"")
_QUALITY = ("Zhang & Sennrich 2019, abstract; the quality tables (Transformer-base and "
            "RNNSearch WMT14 En-De BLEU) [S: papers.md section 2]")
_MARGIN = ("Zhang & Sennrich 2019's largest deficit it calls comparable (pRMSNorm, RNNSearch "
           "Test17, BLEU 23.1 vs 23.6 = 2.1%; papers.md section 2)")
REGISTER = (
    Record(id="rmsnorm-reaches-layernorm", kind=CLAIM,
           claim="RMSNorm reaches LayerNorm's final loss at the same hyperparameters",
           source=_ABSTRACT, where=_QUALITY, form=NON_INFERIORITY, margin=(REACH_TOL,),
           side="below", margin_source=_MARGIN, seeds="seeds", seeds_from=_SEEDS_FROM,
           registered="2026-12-02"),
    Record(id="prmsnorm-reaches-layernorm", kind=CLAIM,
           claim="pRMSNorm (the RMS from 32 features) reaches LayerNorm's final loss at the "
                 "same hyperparameters",
           source="\"We also present partial RMSNorm, or pRMSNorm where the RMS is estimated "
                  "from p% of the summed inputs without breaking the above properties.\"",
           where=_QUALITY + "; pRMSNorm at p = 6.25% of 512 features", form=NON_INFERIORITY,
           margin=(REACH_TOL,), side="below", margin_source=_MARGIN, seeds="seeds",
           seeds_from=_SEEDS_FROM, registered="2026-12-02"),
    Record(id="step-time-beside-loss", kind=SHOWN,
           claim="the time per training step, beside the loss", registered="2026-12-02"),
    Record(id="prmsnorm-rms-estimate", kind=SHOWN,
           claim="pRMSNorm's RMS estimate at this width", registered="2026-12-02"),
    Record(id="rmsnorm-takes-less-time-per-step", kind=CLAIM,
           claim="RMSNorm takes less time per training step than LayerNorm (7%-64%)",
           source=_ABSTRACT,
           where="Zhang & Sennrich 2019, abstract; the timing tables (Transformer-base: -6.9% "
                 "per step, TensorFlow on a GPU) [S: papers.md section 2]",
           form=SUPERIORITY, margin=(0.0,), side="below",
           margin_source="0: less time (the paper's smallest saving is 7%)",
           registered="2026-12-07",
           untested="the paper times whole models in TensorFlow and Theano on GPUs, where the "
                    "norm is a large share of a step; in this small NumPy model on a CPU the "
                    "matrix multiplies dominate and the saving of the norm op (31-39%, "
                    "invariances-and-cost's shown row) is a few percent of a step at most, "
                    "inside the timing's noise on a shared machine: the time per step is shown "
                    "beside the loss (step-time-beside-loss), as lab-audit.md (rows 5 and 17) "
                    "finds the claim not transferable to this hardware"),
)


def _variants(p: float) -> dict[str, dict]:
    return {"layernorm": {"model.norm": "layernorm"}, "rmsnorm": {"model.norm": "rmsnorm"},
            "prmsnorm": {"model.norm": "rmsnorm", "model.norm_partial": float(p)}}


def step_times(base: TrainConfig, variants: dict[str, dict], rounds: int, steps: int,
               seed: int) -> dict[str, list[float]]:
    """Seconds per training step of each variant, ``rounds`` values each: one Trainer per
    variant, warmed by one step, then rounds of ``steps`` steps per variant in a rotating order
    (every variant runs under the same conditions in each round)."""
    trainers = {n: Trainer(base.with_overrides({**v, "seed": seed})) for n, v in variants.items()}
    for t in trainers.values():
        t.train_step()  # compiled kernels and first-touch memory out of the timing
    names = list(trainers)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.perf_counter()
            for _ in range(steps):
                trainers[n].train_step()
            times[n].append((time.perf_counter() - t0) / steps)
    return times


def measure(config: Config, ctx) -> dict:
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    variants = _variants(cfg.partial)
    lr = cfg.base.lr
    runs = run_grid(cfg.base, variants, ctx, lrs=[lr], seeds=seeds,
                    series={"nll": lambda rec: rec["nll"]}, name="rmsnorm-quality")
    require_finished(runs)
    ctx.progress(len(runs), len(runs) + 1, "timing the training steps in-process")
    times = step_times(cfg.base, variants, cfg.timing_rounds, cfg.timing_steps, cfg.seed)
    ctx.progress(len(runs) + 1, len(runs) + 1, "done")
    C = cfg.base.model.d_model
    return {"norms": list(NORMS), "seeds": seeds, "C": C, "k": partial_width(C, cfg.partial),
            "partial": cfg.partial,
            "loss": {n: seed_losses(runs, n, clip=False)[lr] for n in NORMS},
            "diverged": {n: sum(r.status == "diverged" for r in runs if r.variant == n)
                         for n in NORMS},
            "curves": {r.variant: {"steps": r.steps, "nll": r.curves["nll"]}
                       for r in runs if r.seed == seeds[0]},
            "step_s": times}


def excess(data: dict, norm: str) -> list[float]:
    """(loss(norm) - loss(LayerNorm)) / loss(LayerNorm), seed by seed."""
    return [(a - b) / b for a, b in zip(data["loss"][norm], data["loss"]["layernorm"])]


def time_ratio(data: dict, norm: str) -> float:
    """Median over the timing rounds of (time per step of ``norm``) / (LayerNorm's)."""
    t, ln = data["step_s"][norm], data["step_s"]["layernorm"]
    return float(np.median([a / b for a, b in zip(t, ln)]))


def judge(data: dict, config: Config) -> list[Check]:
    checks = []
    label = {"rmsnorm": "RMSNorm", "prmsnorm": f"pRMSNorm (p = {100 * data['partial']:g}%, "
                                               f"k = {data['k']} of {data['C']} features)"}
    published = {"rmsnorm": "BLEU vs LN: Transformer +0.2 / 0.0, RNNSearch -0.2 / +0.1",
                 "prmsnorm": "BLEU vs LN: Transformer -0.1 / +0.1, RNNSearch 0.0 / -0.5"}
    for n in ("rmsnorm", "prmsnorm"):
        iv = mean_interval(excess(data, n))._replace(method="paired " + T_METHOD)
        d = paired_interval(data["loss"][n], data["loss"]["layernorm"])
        checks.append(Check.non_inferiority(
            id=f"{n}-reaches-layernorm",
            claim=f"{label[n]} reaches LayerNorm's final loss at the same hyperparameters",
            published=published[n], interval=iv, margin=REACH_TOL, side=BELOW,
            measured=f"relative excess {_pct_text(iv)}; in nats {d.text(3)} (LN "
                     f"{fmt(np.mean(data['loss']['layernorm']))}, {n} "
                     f"{fmt(np.mean(data['loss'][n]))})",
            rule=f"non-inferiority: the paired Student-t interval of (L_{n} - L_LN) / L_LN "
                 f"wholly < +{100 * REACH_TOL:.1f}% pass (no worse than the margin), wholly "
                 f">= it FAIL, straddling inconclusive",
            margin_source="Zhang & Sennrich 2019's largest deficit it calls comparable "
                          "(pRMSNorm, RNNSearch Test17, BLEU 23.1 vs 23.6 = 2.1%; papers.md "
                          "section 2)",
            source="Zhang & Sennrich 2019, quality tables [S]"))
    ratios = {n: time_ratio(data, n) for n in ("rmsnorm", "prmsnorm")}
    checks.append(Check(
        id="step-time-beside-loss", claim="the time per training step, beside the loss",
        published="RMSNorm -6.9%, pRMSNorm -9.3% per step (Transformer-base, TensorFlow on a GPU); "
        "7%-64% over the paper's models",
        measured="; ".join(f"{n} / LayerNorm = {r:.3f} ({100 * (r - 1):+.1f}%)"
                           for n, r in ratios.items())
        + f"; LayerNorm {1e3 * float(np.median(data['step_s']['layernorm'])):.1f} ms per step",
        rule="shown: median of the interleaved rounds' ratios (the paper's speed claim is a "
        "record this experiment does not test: rmsnorm-takes-less-time-per-step)", passed=None,
        kind=SHOWN,
        source="Zhang & Sennrich 2019, timing tables [S]",
        note="a whole training step, where the norms are a small share of the work"))
    checks.append(Check(
        id="prmsnorm-rms-estimate", claim="pRMSNorm's RMS estimate at this width",
        published="k = 32 of 512 features (p = 6.25%)",
        measured=f"k = {data['k']} of {data['C']}: relative std of the RMS estimate about "
        f"{100 / math.sqrt(2 * data['k']):.0f}% for Gaussian rows (paper: "
        f"{100 / math.sqrt(64):.1f}%)", rule="shown (the same k as the paper's; the width is "
        "a departure)", passed=None, kind=SHOWN, source="papers.md section 2, reproduction 3 [D]"))
    return checks


def _pct_text(iv) -> str:
    mean, lo, hi = (fmt(100 * v, spec="+.2f") for v in (iv.mean, iv.lo, iv.hi))
    return f"{mean}% [{lo}%, {hi}%] (n={iv.n})"


def headline(data: dict, config: Config) -> str:
    parts = []
    for n in ("rmsnorm", "prmsnorm"):
        iv = mean_interval(excess(data, n))
        parts.append(f"{n} {_pct_text(iv)} vs LayerNorm, step time x{time_ratio(data, n):.3f}")
    return "; ".join(parts) + f" (reach: below +{100 * REACH_TOL:.1f}%)"


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, moving_average, save, style

    d = result.data
    fig, (a, b, c) = figure(3)
    for j, n in enumerate(("rmsnorm", "prmsnorm")):
        e = 100 * np.array(excess(d, n))
        iv = mean_interval(e)
        a.scatter([j] * len(e), e, s=12, color="#999999", zorder=1)
        a.errorbar([j], [iv.mean], yerr=[[iv.mean - iv.lo], [iv.hi - iv.mean]], fmt="o",
                   color=COLORS[n], capsize=4, label=f"{n}, Student-t 95%")
    a.axhline(100 * REACH_TOL, color="k", ls="--", lw=1, label="margin (paper: 2.1%)")
    a.axhline(0, color="#999999", lw=0.8)
    a.set_xticks([0, 1])
    a.set_xticklabels(["RMSNorm", "pRMSNorm"])
    style(a, "final loss vs LayerNorm, paired by seed", "", "relative excess (%)")
    for n in d["norms"]:
        b.boxplot([1e3 * np.array(d["step_s"][n])], positions=[d["norms"].index(n)],
                  widths=0.5)
    b.set_xticks(range(len(d["norms"])))
    b.set_xticklabels(d["norms"])
    style(b, "time per training step (interleaved rounds)", "", "ms per step", legend=False)
    for n, cv in d["curves"].items():
        c.plot(cv["steps"], moving_average(cv["nll"]), color=COLORS[n], lw=1.1, label=n)
    style(c, f"training loss, seed {d['seeds'][0]}", "step", "training NLL (smoothed)")
    return [save(fig, out_dir, "rmsnorm_quality.png")]


# ---- the register's amendments: each change after a committed result, with the result before -

_K32: dict[str, Any] = dict(
    date="2026-12-03", commit="778a154", remeasure=True,
    changed="pRMSNorm's estimate from p = 6.25% of the width (k = 4 of 64 features at the quick "
            "size) to the paper's 32 features (p = 0.5 quick, 0.25 full), 5 seeds (was 3) from a "
            "pilot at seed 50000, the rule in its form (non-inferiority; the same margin and "
            "side), 1f22642; the full size was not measured before",
    why="what decides the estimate's error is k, not p (relative std 1/sqrt(2k): 35% at k = 4, "
        "12.5% at the paper's k = 32); pRMSNorm was 3.4% above LayerNorm at k = 4, "
        "inconclusive (the notes)")
_SEEDS_10: dict[str, Any] = dict(
    date="2026-12-05", commit="d42018c", remeasure=True,
    changed="the full size's seed count from 6 to 10, for all three norms (68d1704)",
    why="RMSNorm's row was inconclusive at 6 seeds (+0.47% [-1.81%, +2.76%], its excess "
        "spread 2.2%); a pilot at seeds 60000-60002 pooled with that first measurement gave 10")
_SEEDS_24: dict[str, Any] = dict(
    date="2026-12-06", commit="8e22293", remeasure=True,
    changed="the full size's seed count from 10 to 24, for all three norms (87a3cf6)",
    why="at 10 seeds RMSNorm's row was inconclusive at seed 0 (+0.77% [-0.81%, +2.36%]) and "
        "passed at seed 10000: the count came from the spread of those 20 verdict seeds, not "
        "from a pilot's (the notes)")

AMENDMENTS = (
    Amendment(id="rmsnorm-reaches-layernorm", before={"form": THRESHOLD}, **_K32,
              results_before={"quick": _row(
                  "pass", [-0.03680390416292921, -0.0032983565444236924],
                  "relative excess -2.01% [-3.68%, -0.33%] (n=3); in nats -0.0447 [-0.0831, "
                  "-0.00622] (n=3) (LN 2.2, rmsnorm 2.16)")}),
    Amendment(id="prmsnorm-reaches-layernorm", before={
        "claim": "pRMSNorm (p = 6.25% of the features) reaches LayerNorm's final loss at the "
                 "same hyperparameters", "form": THRESHOLD}, **_K32, results_before={
        "quick": _row("inconclusive", [0.011251547165483121, 0.056825927953672146],
                      "relative excess +3.40% [+1.13%, +5.68%] (n=3); in nats 0.0749 [0.0258, "
                      "0.124] (n=3) (LN 2.2, prmsnorm 2.28)")}),
    Amendment(id="rmsnorm-reaches-layernorm", **_SEEDS_10, results_before={"full": _row(
        "inconclusive", [-0.01814352984503801, 0.02756611296036514],
        "relative excess +0.47% [-1.81%, +2.76%] (n=6); in nats 0.00621 [-0.0259, 0.0383] (n=6) "
        "(LN 1.42, rmsnorm 1.42)")}),
    Amendment(id="prmsnorm-reaches-layernorm", **_SEEDS_10, results_before={"full": _row(
        "pass", [-0.044521509293956346, 5.329747583001157e-05],
        "relative excess -2.22% [-4.45%, +0.01%] (n=6); in nats -0.0319 [-0.0638, 3.02e-05] "
        "(n=6) (LN 1.42, prmsnorm 1.38)")}),
    Amendment(id="rmsnorm-reaches-layernorm", **_SEEDS_24, results_before={"full": _row(
        "inconclusive", [-0.008139173436835885, 0.0236278550682349],
        "relative excess +0.77% [-0.81%, +2.36%] (n=10); in nats 0.0104 [-0.0118, 0.0327] "
        "(n=10) (LN 1.42, rmsnorm 1.43)")}),
    Amendment(id="prmsnorm-reaches-layernorm", **_SEEDS_24, results_before={"full": _row(
        "pass", [-0.041725175894036196, -0.0076609215367584235],
        "relative excess -2.47% [-4.17%, -0.77%] (n=10); in nats -0.0355 [-0.0602, -0.0109] "
        "(n=10) (LN 1.42, prmsnorm 1.38)")}),
)
