"""``massive-activations``: Kim et al. 2025 (Peri-LN): under a high learning rate Pre-LN's
residual stream develops very large activations, layer by layer and over training, while the
Peri-LN (sandwich) placement, x + N_out(F(N_in(x))), keeps them bounded; and what that does to
the headroom of bf16, fp16 and fp8 (the fraction of the residual stream outside each format).

Training runs of normlab's GPT on the characters of ``pydoc_data.topics``, Pre-LN and sandwich,
the same recipe and seeds, at a moderate and a high learning rate. Every step records the
residual stream's RMS and max |x| after every block (``residual_rms``, ``residual_max``); every
evaluation records, on the first validation batch (the same tokens for every run), per block
the RMS, max |x| and the fractions outside each format's range without scaling
(``TrainConfig.eval_headroom``: ``precision.headroom.tensor_stats``). The checks are read at the
highest learning rate, paired by seed (Pre-LN against sandwich):

    premise:        Pre-LN's log10 [max|x_L| over the last 10% of steps / at step 0] > 0
    massive:        log10 max|x_L|        at the end                     (last block)
    layer by layer: log10 RMS(x_L) / RMS(x_1) at the end, x_1 block 1's output
    (shown)         log10 RMS(x_L) / RMS(x_0), x_0 the embedding output
    (shown)         log10 [max|x_L| over the last 10% of steps / at step 0]
    (derivation)    the fraction of the residual stream that overflows float8_e4m3fn

Two counted claims (the register, ``REGISTER``): max|x| and the growth layer by layer, block L
against block 1 as first registered. The ratio against the unscaled embedding and the growth
over training restate max|x| (one effect), and fp8's overflow follows from max|x| beyond 448.
Pre-LN's stream can blow up inside the first block already; the ratio against x_0 shows that,
beside the claim. The runs are trained
in-process, each placement's runs as one ensemble (``normlab.train.Ensemble``: each member is its
single run, bit for bit), and read from each member's trained model (the embedding's output, the
headroom). A diverged run reads as at initialization (its step-0 values: no growth, nothing out
of range), never as NaN.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...precision import get_format
from ...precision.headroom import HEADROOM_FORMATS as FORMATS
from ...train import Ensemble, TrainConfig, Trainer
from ..contract import CLAIM, DERIVATION, PREMISE, SHOWN, Amendment, Card, Check, Record
from ..formatting import fmt
from ..stats import ABOVE, mean_interval, paired_interval
from . import _recipes as R

CARD = Card(
    name="massive-activations",
    title="Massive activations: Pre-LN vs Peri-LN (sandwich) under a high learning rate",
    citation="Kim et al. 2025, 'Peri-LN: Revisiting Layer Normalization in the Transformer "
             "Architecture'; Gemma Team 2024 (Gemma 2: norms on both sides of every sublayer)",
    claim="Under a high learning rate, Pre-LN's residual stream develops very large activations "
          "(the hidden-state RMS and max |x| growing layer by layer and over training), while "
          "Peri-LN's stay bounded; values that large leave the range of fp8.",
    published="Pre-LN: massive activations and fast variance growth; Peri-LN: balanced variance "
              "growth and steadier gradients, 400M to 3.2B parameters (Kim et al. 2025 [S]); "
              "Peri-LN RMS ~ sqrt(l) (papers.md section 9 [D])",
    method="normlab GPT on the characters of pydoc_data.topics, Pre-LN and sandwich (Peri-LN), "
           "one recipe (`base`), at each of `lrs`, `seeds` seeds shared by both; per-step RMS "
           "and max |x| of the residual stream after every block, and at every evaluation its "
           "fractions outside bf16 / fp16 / fp8 without scaling (first validation batch).",
    explanation="In Pre-LN a branch reads a normalized copy of the stream but writes back "
                "unnormalized: with a large learning rate the weights, and with them a few "
                "features of the branch outputs, grow, and the skip path carries every "
                "increment on to the top. A sandwich block normalizes the branch's output too, so "
                "each block adds a vector of RMS about its output gain and the stream grows like "
                "sqrt(l) at most. For a number format the stream's max |x| against the format's "
                "largest value is the headroom: float8_e4m3fn stops at 448, float16 at 65504, "
                "bfloat16 at 3.4e38.",
    short="at a high learning rate Pre-LN's residual stream grows huge activations, Peri-LN's "
          "stays bounded; the large values leave fp8's range",
    notebooks=("2.4.4-pre-ln-vs-post-ln.ipynb", "16.2-residuals-and-where-to-normalize.ipynb"),
)

PLACEMENTS = ("pre", "sandwich")
# Every claim is a superiority of Pre-LN over Peri-LN at margin 0 (log10 ratios and fractions):
# the sources give curves and no factor (Kim et al. 2025 [S]; papers.md section 9's pass rule is
# "the ratio is lower for Peri-LN"). The premise, the phenomenon the fix is judged against:
# Pre-LN's max |x| of the last block grows over training (log10 growth > 0), fixed before
# measuring for the same reason.
THRESHOLD = 0.0
FP8 = "float8_e4m3fn"
TAIL = 0.1  # "the end of training": the last 10% of the steps (per-step values are noisy)

BASE = R.derive(  # eight blocks for a depth profile
    R.TEXT, "eight blocks, Xavier block matrices as the placement experiments (Xiong, Liu et "
    "al.'s init), a shorter run; no embedding scale or RoPE, as measured", {
        **R.TEXT_WITHOUT_ROPE_OR_EMBED_SCALE, "model.n_layers": 8, "model.init": "xavier",
        "steps": 150, "warmup": 15, "eval_interval": 150})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (placement, lr, seed vary)
    lrs: tuple[float, ...] = (1e-2, 1e-1)  # peak learning rates; the checks read the highest
    seeds: int = 3  # training seeds shared by both placements (seed, seed + 1, ...)
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(),  # the lab's tiny model
             "seeds": 2, "base.steps": 30, "base.warmup": 3, "base.eval_interval": 15,
             "base.batch_size": 8, "base.model.n_layers": 4, "base.model.seq_len": 16},
    "quick": {},
    "full": {"seeds": 6, "lrs": (3e-3, 1e-2, 3e-2, 1e-1), "base.steps": 1000,
             "base.warmup": 100, "base.eval_interval": 1000, "base.model.n_layers": 12,
             "base.model.d_model": 64, "base.model.init_std": 64**-0.5},
}


def _embed_stats(trainer: Trainer, idx: np.ndarray) -> dict:
    """RMS and max |x| of the embedding output x_0 on the tokens ``idx``."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.asarray(trainer.model._embed(idx), dtype=np.float64)
    return {"rms": float(np.sqrt(np.mean(x * x))), "max": float(np.abs(x).max())}


def _read(trainer: Trainer, L: int, x0_init: dict) -> dict:
    """One trained run: per step the residual stream's RMS and max |x| after every block, at the
    end (first validation batch) per block RMS, max |x| and the formats' fractions, and the
    embedding output's RMS at init (``x0_init``) and at the end; a run that stopped reads as at
    init."""
    from ...train.trainer import residual_headroom

    idx = trainer.val[0][0]  # (B, T): the first validation batch, the same tokens in every run
    hist = trainer.history
    top = [h["residual_max"][L - 1] for h in hist]
    rms0 = [h["residual_rms"][i] for h, i in ((hist[0], i) for i in range(L))]
    max0 = [hist[0]["residual_max"][i] for i in range(L)]
    loss = float(trainer.evals[-1]["val_loss"] if trainer.stopped is None
                 else trainer.first_loss or math.nan)
    if trainer.stopped is not None:
        return {"rms": rms0, "max": max0, "x0_rms": x0_init["rms"], "growth": 1.0,
                "nonfinite": 0.0, "formats": {f: {"overflow": 0.0, "flush": 0.0}
                                              for f in FORMATS},
                "diverged": True, "loss": loss,
                "curve": {"rms0": [h["residual_rms"][0] for h in hist],
                          "rms_last": [h["residual_rms"][L - 1] for h in hist], "max_last": top}}
    tail = top[-max(1, int(TAIL * len(top))):]
    head = residual_headroom(trainer.model, idx)
    x0 = _embed_stats(trainer, idx)
    return {"rms": [h["rms"] for h in head], "max": [h["amax"] for h in head],
            "x0_rms": x0["rms"], "x0_rms_init": x0_init["rms"],
            "growth": float(np.mean(tail)) / top[0],
            "nonfinite": float(np.mean([h["nonfinite"] for h in head])),
            "formats": {f: {k: float(np.mean([h["formats"][f][k] for h in head]))
                            for k in ("overflow", "flush")} for f in FORMATS},
            "diverged": False, "loss": loss,
            "curve": {"rms0": [h["residual_rms"][0] for h in hist],
                      "rms_last": [h["residual_rms"][L - 1] for h in hist], "max_last": top}}


def _train(configs: list[TrainConfig], L: int, progress) -> list[dict]:
    """The runs of ``configs`` (one placement) trained in-process as one ensemble, each member
    its single run bit for bit (``normlab.train.Ensemble``), then read (``_read``) from its own
    trained model; ``progress(step)`` after every step."""
    ens = Ensemble(configs)
    x0_init = [_embed_stats(t, t.val[0][0]) for t in ens.members]
    ens.run(progress=lambda step, total, _record: progress(step))
    return [_read(t, L, x0) for t, x0 in zip(ens.members, x0_init)]


def _key(placement: str, lr: float) -> str:
    """The data's key (and the plots' label) of an arm: placement and learning rate."""
    return f"{placement} lr={lr:g}"


def measure(config: Config, ctx) -> dict:
    cfg = config
    L = cfg.base.model.n_layers
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    lrs = sorted(cfg.lrs)
    arms: dict[str, dict] = {}
    curves: dict[str, dict] = {}
    steps = cfg.base.steps
    total = len(PLACEMENTS) * steps
    for k, p in enumerate(PLACEMENTS):
        configs = [cfg.base.with_overrides({"model.placement": p, "lr": float(lr), "seed": seed})
                   for lr in lrs for seed in seeds]
        ctx.progress(k * steps, total, f"{p}: {len(configs)} runs in one ensemble")
        runs = iter(_train(configs, L, lambda step, k=k, p=p: ctx.progress(
            k * steps + step, total, f"{p}, step {step}")))
        for lr in lrs:
            rows = [next(runs) for _ in seeds]
            curves[_key(p, lr)] = {"steps": list(range(len(rows[0]["curve"]["rms0"]))),
                                   **rows[0]["curve"]}
            for r in rows:
                del r["curve"]
            arms[_key(p, lr)] = {"runs": rows, "loss": [r["loss"] for r in rows]}
    ctx.progress(total, total, "done")
    return {"lrs": lrs, "seeds": seeds, "n_layers": L, "arms": arms, "curves": curves,
            "fmax": {f: float(get_format(f).max_finite) for f in FORMATS}}


# ---- the per-seed quantities, paired Pre-LN against sandwich ----------------------------------
def values(data: dict, placement: str, lr: float, what: str) -> list[float]:
    """Per seed: ``log_max`` (log10 max|x| of the last block), ``layer_ratio`` (RMS of the
    last block over block 1's, log10), ``depth_ratio`` (RMS of the last block over the embedding
    output's, log10), ``log_growth`` (log10 of the last block's max|x| at the end of training
    over its value at step 0) or ``fp8_overflow`` (the fraction of the residual stream that
    overflows float8_e4m3fn, non-finite values counted as overflowing)."""
    rows = data["arms"][_key(placement, lr)]["runs"]
    if what == "log_max":
        return [math.log10(r["max"][-1]) for r in rows]
    if what == "layer_ratio":  # log10 RMS(x_L) / RMS(x_1): block by block, after block 1
        return [math.log10(r["rms"][-1] / r["rms"][0]) for r in rows]
    if what == "depth_ratio":  # log10 RMS(x_L) / RMS(x_0), x_0 the embedding output
        return [math.log10(r["rms"][-1] / r["x0_rms"]) for r in rows]
    if what == "log_growth":
        return [math.log10(r["growth"]) for r in rows]
    if what == "fp8_overflow":
        return [r["nonfinite"] + r["formats"][FP8]["overflow"] for r in rows]
    raise ValueError(f"unknown quantity {what!r}")


def _paired(data: dict, lr: float, what: str):
    return paired_interval(values(data, "pre", lr, what), values(data, "sandwich", lr, what))


def _exp10(v: float) -> float:
    return 10.0 ** v


def _means(data: dict, lr: float, what: str, f=lambda v: v) -> str:
    return ", ".join(f"{p} {fmt(f(np.mean(values(data, p, lr, what))))}" for p in PLACEMENTS)


# The rows read at the highest learning rate, each a paired superiority of Pre-LN over Peri-LN:
# (quantity, record id, kind, claim, published, measured, source). Only the first two are the
# source's claims counted (the register): the growth over training and the ratio against the
# embedding restate max|x| (one effect), and fp8's overflow follows from max|x| beyond 448.
_ROWS = (
    ("log_max", "pre-ln-activations-much-larger-than-peri-ln", CLAIM,
     "Pre-LN's residual stream carries much larger activations than Peri-LN's",
     "Pre-LN: massive activations; Peri-LN: bounded (Kim et al. 2025)",
     "log10 max|x| of block {L}: {iv}; max|x| {means}", "Kim et al. 2025 [S]"),
    ("layer_ratio", "pre-ln-rms-grows-more-layer-by-layer", CLAIM,
     "Pre-LN's RMS grows more from the first block to the last",
     "Pre-LN: fast variance growth layer by layer; Peri-LN: balanced (Kim et al. 2025)",
     "log10 RMS(block {L}) / RMS(block 1): {iv}; ratio {means}",
     "Kim et al. 2025 [S]; papers.md section 9, reproduction 3"),
    ("depth_ratio", "rms-ratio-against-the-embedding", SHOWN,
     "Pre-LN's RMS grows more from the embedding to the last block",
     "Pre-LN RMS grows with depth and lr; Peri-LN ~ sqrt(l) (papers.md section 9)",
     "log10 RMS(block {L}) / RMS(x_0), x_0 the embedding: {iv}; ratio {means}",
     "papers.md section 9, reproduction 3 (its pass rule) [D]"),
    ("log_growth", "pre-ln-max-grows-more-over-training", SHOWN,
     "Pre-LN's max |x| grows more over training",
     "fast variance growth over training in Pre-LN (Kim et al. 2025)",
     "log10 (max|x| at the end / at step 0), block {L}: {iv}; growth {means}",
     "Kim et al. 2025 [S]"),
    ("fp8_overflow", "more-of-pre-ln-overflows-fp8", DERIVATION,
     f"more of Pre-LN's residual stream overflows {FP8} (max 448)",
     "- (follows from max |x| beyond 448)", "fraction overflowing: {iv}; {means}",
     "OCP fp8 range [D]"),
)
_NOT_COUNTED = {
    "depth_ratio": "shown, not counted: x_0 is the unscaled embedding (RMS about 0.2), so the "
                   "ratio restates max|x|, the first row (counted once); the claim's "
                   "layer-by-layer growth is the ratio against block 1",
    "log_growth": "shown, not counted: both placements start alike, so the growth over "
                  "training restates max|x| at the end, the first row (counted once)",
}


def judge(data: dict, config: Config) -> list[Check]:
    lr, L = data["lrs"][-1], data["n_layers"]
    at = f"lr {lr:g}, L={L}"
    growth = mean_interval(values(data, "pre", lr, "log_growth"))
    checks = [Check.superiority(
        claim=f"premise: Pre-LN's max |x| of the last block grows over training ({at})",
        published="Pre-LN: fast variance growth and massive activations over training",
        interval=growth, side=ABOVE, margin=THRESHOLD, kind=PREMISE,
        measured=f"log10 (max|x| over the last 10% of steps / at step 0): {growth.text(3)}",
        rule="superiority: the Student-t interval over seeds of Pre-LN's log10 growth > 0",
        margin_source="the sources give curves, no factor: the phenomenon has to occur at all",
        source="Kim et al. 2025 [S]", id="pre-ln-max-grows-over-training")]
    unit = {"log_max": _exp10, "layer_ratio": _exp10, "depth_ratio": _exp10,
            "log_growth": _exp10}
    for what, rid, kind, claim, published, measured, source in _ROWS:
        iv = _paired(data, lr, what)
        row = Check.superiority(
            claim=f"{claim} ({at})", published=published, interval=iv, margin=THRESHOLD,
            side=ABOVE, kind=CLAIM if kind == SHOWN else kind, id=rid,
            measured=measured.format(L=L, iv="Pre-LN - Peri-LN = " + iv.text(3),
                                     means=_means(data, lr, what, unit.get(what, _same))),
            rule="superiority: the paired Student-t interval of Pre-LN - Peri-LN over seeds "
                 "wholly > 0 pass, wholly <= 0 FAIL, straddling 0 inconclusive",
            margin_source="no published factor (Kim et al. 2025 give curves; papers.md section "
                          "9: 'lower for Peri-LN')", source=source)
        checks.append(_shown_row(row, _NOT_COUNTED[what]) if kind == SHOWN else row)
    return checks + _shown(data)


def _same(v: float) -> float:
    return v


def _shown_row(row: Check, why: str) -> Check:
    """A paired row kept as context: its numbers, no decision."""
    return dataclasses.replace(row, passed=None, inconclusive=False, kind=SHOWN, form="",
                               threshold=None, side="", margin_source="", rule=why)


def _shown(data: dict) -> list[Check]:
    lr, L = data["lrs"][-1], data["n_layers"]
    parts = []
    for f in FORMATS:
        cells = []
        for p in PLACEMENTS:
            rows = data["arms"][_key(p, lr)]["runs"]
            out = mean_interval([r["formats"][f]["overflow"] + r["formats"][f]["flush"]
                                 for r in rows])
            room = np.mean([math.log2(data["fmax"][f] / max(r["max"][-1], 1e-30)) for r in rows])
            cells.append(f"{p} {out.text(2)}, headroom {room:.1f} binades")
        parts.append(f"{f}: " + "; ".join(cells))
    low = data["lrs"][0]
    sandwich = np.mean(values(data, "sandwich", lr, "depth_ratio"))
    return [
        Check(claim="the fraction of the residual stream outside each format's range (overflow + "
              "flush to zero, no scaling) and the headroom log2(max finite / max|x|)",
              published="- (the formats' ranges: bf16 3.4e38, fp16 65504, e5m2 57344, e4m3 448)",
              measured=f"lr {lr:g}: " + " | ".join(parts), rule="shown", passed=None,
              kind=SHOWN, source="normlab.precision formats", id="formats-headroom"),
        Check(claim="the effect grows with the learning rate",
              published="Pre-LN RMS grows with lr (Wortsman et al. Fig. C.1; papers.md section 9)",
              measured=
                  "; ".join(f"lr {x:g}: max|x| of block {L} {_means(data, x, 'log_max', _exp10)}"
                        for x in data["lrs"]), rule="shown", passed=None, kind=SHOWN,
                        source="papers.md section 9", id="effect-grows-with-the-lr"),
        Check(claim="Peri-LN's stream grows at most linearly in depth: each block adds branch "
              "outputs of a fixed RMS (their gains)",
              published=
                  "RMS ~ sqrt(l) for uncorrelated branches (papers.md section 9 [D]); l if aligned",
              measured=f"RMS(block {L}) / RMS(x_0) = {10 ** sandwich:.2f} at lr {lr:g} (sqrt({L}) "
              f"= {math.sqrt(L):.2f}, {L} if aligned); at lr {low:g}: "
              f"{10 ** np.mean(values(data, 'sandwich', low, 'depth_ratio')):.2f}", rule="shown",
              passed=None, kind=SHOWN,
              source="papers.md section 9 [D]", id="peri-ln-growth-against-sqrt-depth"),
        Check(claim="final loss of each arm", published="-",
              measured="; ".join(f"{k} {fmt(np.mean(v['loss']))}"
                        + (f" ({sum(r['diverged'] for r in v['runs'])} diverged)"
                           if any(r["diverged"] for r in v["runs"]) else "")
                        for k, v in data["arms"].items()), rule="shown", passed=None,
              kind=SHOWN, source="-", id="final-loss-of-each-arm"),
    ]


def headline(data: dict, config: Config) -> str:
    lr, L = data["lrs"][-1], data["n_layers"]
    mx = {p: 10 ** np.mean(values(data, p, lr, "log_max")) for p in PLACEMENTS}
    of = {p: np.mean(values(data, p, lr, "fp8_overflow")) for p in PLACEMENTS}
    return (f"at lr {lr:g}, block {L}: max|x| Pre-LN {fmt(mx['pre'])} vs Peri-LN "
            f"{fmt(mx['sandwich'])} (geometric means); {FP8} overflow {of['pre']:.2%} vs "
            f"{of['sandwich']:.2%}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, moving_average, save, style

    d = result.data
    L, lr = d["n_layers"], d["lrs"][-1]
    fig, (a, b, c) = figure(3)
    blocks = np.arange(1, L + 1)
    for p in PLACEMENTS:
        for x in d["lrs"]:
            rows = d["arms"][_key(p, x)]["runs"]
            ls = "-" if x == lr else "--"
            a.plot(blocks, np.mean([r["rms"] for r in rows], axis=0), ls, marker="o", ms=3,
                   color=COLORS[p], label=f"{p} RMS, lr {x:g}")
            a.plot(blocks, np.mean([r["max"] for r in rows], axis=0), ls, marker="^", ms=3,
                   color=COLORS[p], alpha=0.5, label=f"{p} max|x|, lr {x:g}")
    a.set_yscale("log")
    style(a, "residual stream after each block (end of training)", "block", "RMS / max |x|")
    a.legend(fontsize=6)
    for p in PLACEMENTS:
        for x in d["lrs"]:
            cv = d["curves"][_key(p, x)]
            b.plot(cv["steps"], moving_average(cv["max_last"]), color=COLORS[p],
                   ls="-" if x == lr else "--", lw=1.1, label=_key(p, x))
    b.axhline(d["fmax"][FP8], color="k", ls=":", lw=0.9, label=f"{FP8} max (448)")
    b.set_yscale("log")
    style(b, f"max |x| of block {L} during training, seed {d['seeds'][0]}", "step",
          "max |x| (smoothed)")
    b.legend(fontsize=6)
    width = 0.35
    for j, p in enumerate(PLACEMENTS):
        rows = d["arms"][_key(p, lr)]["runs"]
        fr = [np.mean([r["formats"][f]["overflow"] + r["formats"][f]["flush"] for r in rows])
              for f in FORMATS]
        c.bar(np.arange(len(FORMATS)) + (j - 0.5) * width, np.maximum(fr, 1e-7), width,
              color=COLORS[p], label=p)
    c.set_yscale("log")
    c.set_xticks(range(len(FORMATS)))
    c.set_xticklabels([f.replace("float", "f") for f in FORMATS], fontsize=7)
    style(c, f"outside the range (overflow + flush), lr {lr:g}", "", "fraction (1e-7: none)")
    return [save(fig, out_dir, "massive_activations.png")]


# ---- the claim register (normlab.lab.register) ---------------------------------------------
_KIM = "Kim et al. 2025, 'Peri-LN' (arXiv:2502.02732)"
_KIM_SOURCE = ("\"Pre-LN is prone to 'massive activations' and fast variance growth ... Peri-LN "
               "gives balanced variance growth and steadier gradients\" (papers.md 11 [S])")
_SEEDS_FROM = ("3 at quick, 6 at full, set with the rows (2f5b933, 2026-12-02); not piloted "
               "again for the set-up of 9d949f6 (the notes), never raised after a verdict")
_COMMON: dict[str, Any] = {"grid": ("lrs", "base.model.n_layers", "base.steps"),
                           "seeds": "seeds", "seeds_from": _SEEDS_FROM}
_PAIRED: dict[str, Any] = {"form": "superiority", "margin": (THRESHOLD,), "side": "above",
                           "margin_source": "no published factor (Kim et al. 2025 give curves; "
                                            "papers.md section 9: 'lower for Peri-LN')"}
REGISTER = (
    Record(id="pre-ln-max-grows-over-training", kind=PREMISE,
           claim="premise: Pre-LN's max |x| of the last block grows over training",
           source=_KIM_SOURCE, where=f"{_KIM}; papers.md section 9", form="superiority",
           margin=(THRESHOLD,), side="above",
           margin_source="the sources give curves, no factor: the phenomenon has to occur at "
                         "all", registered="2026-12-03", **_COMMON),
    Record(id="pre-ln-activations-much-larger-than-peri-ln", kind=CLAIM,
           claim="Pre-LN's residual stream carries much larger activations than Peri-LN's",
           source=_KIM_SOURCE, where=_KIM, registered="2026-12-02", **_PAIRED, **_COMMON),
    Record(id="pre-ln-rms-grows-more-layer-by-layer", kind=CLAIM,
           claim="Pre-LN's RMS grows more from the first block to the last",
           source=_KIM_SOURCE + "; the card: \"the hidden-state RMS and max |x| growing layer "
                                "by layer\"", where=f"{_KIM}; papers.md section 9, reproduction 3",
           registered="2026-12-02", **_PAIRED, **_COMMON),
    Record(id="rms-ratio-against-the-embedding", kind=SHOWN,
           claim="Pre-LN's RMS grows more from the embedding to the last block",
           registered="2026-12-07", **_COMMON),
    Record(id="pre-ln-max-grows-more-over-training", kind=SHOWN,
           claim="Pre-LN's max |x| grows more over training", registered="2026-12-02",
           **_COMMON),
    Record(id="more-of-pre-ln-overflows-fp8", kind=DERIVATION,
           claim=f"more of Pre-LN's residual stream overflows {FP8} (max 448)",
           where="the OCP fp8 formats: float8_e4m3fn's largest value is 448",
           registered="2026-12-02", **_PAIRED, **_COMMON),
    Record(id="formats-headroom", kind=SHOWN,
           claim="the fraction of the residual stream outside each format's range and the "
                 "headroom", registered="2026-12-02", **_COMMON),
    Record(id="effect-grows-with-the-lr", kind=SHOWN,
           claim="the effect grows with the learning rate", registered="2026-12-02",
           **_COMMON),
    Record(id="peri-ln-growth-against-sqrt-depth", kind=SHOWN,
           claim="Peri-LN's stream grows at most linearly in depth", registered="2026-12-02",
           **_COMMON),
    Record(id="final-loss-of-each-arm", kind=SHOWN, claim="final loss of each arm",
           registered="2026-12-02", **_COMMON),
)

_SETUP_CHANGED = ("the set-up of 9d949f6: eight blocks (was six), Xavier block matrices (was "
                  "GPT-2 init), runs in-process; measured again")
_SETUP_WHY = ("the notes: more depth for a profile, the placement experiments' init; the same "
              "commit moved the depth ratio to the embedding after the audit found Pre-LN's "
              "large values already inside block 1, where the block-1 ratio had failed "
              "(docs/lab.md, 'What changed after first results')")
_ONE_EFFECT_WHY = ("issue 52 and lab-audit.md, row 20: both placements start alike, so the "
                   "growth over training restates max|x| at the end (1.41 against 1.3 at quick, "
                   "1.79 against 1.62 at full, log10): one effect, counted once, as the first "
                   "row; Pre-LN's own growth stays the premise")
AMENDMENTS = (
    Amendment(
        id="pre-ln-activations-much-larger-than-peri-ln", date="2026-12-03",
        changed=_SETUP_CHANGED,
        why=_SETUP_WHY,
        before={},
        remeasure=True,
        commit="778a154",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [1.3324238034319633, 1.5837575133485429],
                "measured": "log10 max|x| of block 6: Pre-LN - Peri-LN = 1.46 [1.33, 1.58] "
                            "(n=3); max|x| pre 846, sandwich 29.5"},
        },
    ),
    Amendment(
        id="pre-ln-rms-grows-more-layer-by-layer", date="2026-12-03",
        changed=("the ratio read against the embedding output x_0 instead of block 1 (9d949f6), "
                 "with the new set-up (eight blocks, Xavier block matrices; was six, GPT-2 "
                 "init); measured again"),
        why=_SETUP_WHY,
        before={},
        remeasure=True,
        commit="778a154",
        results_before={
            "quick": {"status": "FAIL", "kind": "claim",
                "interval": [-1.312457760867251, -1.147008331066887],
                "measured": "RMS(block 6) / RMS(block 1): Pre-LN - Peri-LN = -1.23 [-1.31, "
                            "-1.15] (n=3); pre 1.85, sandwich 3.08"},
        },
    ),
    Amendment(
        id="pre-ln-max-grows-more-over-training", date="2026-12-03",
        changed=_SETUP_CHANGED,
        why=_SETUP_WHY,
        before={"kind": "claim"},
        remeasure=True,
        commit="778a154",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [1.8520868841784528, 2.063716893072389],
                "measured": "log10 (max|x| at the end / at step 0), block 6: Pre-LN - Peri-LN = "
                            "1.96 [1.85, 2.06] (n=3); growth pre 210, sandwich 2.31"},
        },
    ),
    Amendment(
        id="more-of-pre-ln-overflows-fp8", date="2026-12-03",
        changed=_SETUP_CHANGED,
        why=_SETUP_WHY,
        before={"kind": "claim"},
        remeasure=True,
        commit="778a154",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [0.007256011657566931, 0.05345362375909973],
                "measured": "fraction overflowing: Pre-LN - Peri-LN = 0.0304 [0.00726, 0.0535] "
                            "(n=3); pre 0.0304, sandwich 0"},
        },
    ),
    Amendment(
        id="pre-ln-max-grows-over-training", date="2026-12-03",
        changed=("the premise added (9d949f6): Pre-LN's own max|x| of the last block grows over "
                 "training, judged first; the first registration had none, so it is left out of "
                 "its tally"),
        why=("the lab's rule forms: without the blow-up there is nothing for Peri-LN to fix (the "
             "notes)"),
        before={"kind": None},
    ),
    Amendment(
        id="pre-ln-rms-grows-more-layer-by-layer", date="2026-12-07",
        changed=("back to the ratio against block 1, the claim's 'layer by layer' as first "
                 "registered (now as a log10 ratio, like the other rows); the ratio against the "
                 "embedding is shown (rms-ratio-against-the-embedding); to be judged again from "
                 "the stored runs (each run records every block's RMS), no training"),
        why=("issue 52 and lab-audit.md, row 20: the ratio was re-referenced after the block-1 "
             "version failed, and against the unscaled embedding (RMS about 0.2) it restates "
             "max|x| (one effect counted twice); a claim the card states is counted, not moved"),
        before={"claim": "Pre-LN's RMS grows more from the embedding to the last block"},
        remeasure=True,
        commit="8ed4d62",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [1.3610198870546195, 1.6133603113011088],
                "measured": "log10 RMS(block 8) / RMS(x_0), x_0 the embedding: Pre-LN - Peri-LN "
                            "= 1.49 [1.36, 1.61] (n=3); ratio pre 403, sandwich 13.1"},
            "full": {"status": "pass", "kind": "claim",
                "interval": [1.5900833464315365, 1.8730265495928646],
                "measured": "log10 RMS(block 12) / RMS(x_0), x_0 the embedding: Pre-LN - Peri-LN "
                            "= 1.73 [1.59, 1.87] (n=6); ratio pre 1.04e+03, sandwich 19.3"},
        },
    ),
    Amendment(
        id="pre-ln-max-grows-more-over-training", date="2026-12-07",
        changed=("kind claim -> shown"),
        why=_ONE_EFFECT_WHY,
        before={"kind": "claim"},
        commit="8ed4d62",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [0.969024549926863, 1.8427641563149912],
                "measured": "log10 (max|x| at the end / at step 0), block 8: Pre-LN - Peri-LN = "
                            "1.41 [0.969, 1.84] (n=3); growth pre 69.2, sandwich 2.72"},
            "full": {"status": "pass", "kind": "claim",
                "interval": [1.6391743216851085, 1.9434382035202686],
                "measured": "log10 (max|x| at the end / at step 0), block 12: Pre-LN - Peri-LN = "
                            "1.79 [1.64, 1.94] (n=6); growth pre 275, sandwich 4.45"},
        },
    ),
    Amendment(
        id="more-of-pre-ln-overflows-fp8", date="2026-12-07",
        changed=("kind claim -> derivation"),
        why=("issue 52 and lab-audit.md, row 20: the row's own published text is 'follows from "
             "max |x| beyond 448': given the first row's max|x|, the overflow of e4m3 is "
             "arithmetic"),
        before={"kind": "claim"},
        commit="8ed4d62",
        results_before={
            "quick": {"status": "inconclusive", "kind": "claim",
                "interval": [-0.031293044970937496, 0.10750561007510417],
                "measured": "fraction overflowing: Pre-LN - Peri-LN = 0.0381 [-0.0313, 0.108] "
                            "(n=3); pre 0.0381, sandwich 0"},
            "full": {"status": "pass", "kind": "claim",
                "interval": [0.11911931136719354, 0.26035066611761554],
                "measured": "fraction overflowing: Pre-LN - Peri-LN = 0.19 [0.119, 0.26] (n=6); "
                            "pre 0.19, sandwich 0"},
        },
    ),
)
