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
    layer by layer: log10 RMS(x_L) / RMS(x_0) at the end, x_0 the embedding output
    over training:  log10 [max|x_L| over the last 10% of steps / at step 0]
    fp8 range:      the fraction of the residual stream that overflows float8_e4m3fn

The depth ratio reads against the embedding x_0, not block 1: Pre-LN's stream can blow up
inside the first block already, and a ratio against block 1 hides that. The runs are trained
in-process, each placement's runs as one ensemble (``normlab.train.Ensemble``: each member is its
single run, bit for bit), and read from each member's trained model (the embedding's output, the
headroom). A diverged run reads as at initialization (its step-0 values: no growth, nothing out
of range), never as NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...precision import get_format
from ...precision.headroom import HEADROOM_FORMATS as FORMATS
from ...train import Ensemble, TrainConfig, Trainer
from ..contract import PREMISE, SHOWN, Card, Check
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
    """Per seed: ``log_max`` (log10 max|x| of the last block), ``depth_ratio`` (RMS of the last
    block over the embedding output's, log10), ``log_growth`` (log10 of the last block's max|x|
    at the end of training over its value at step 0) or ``fp8_overflow`` (the fraction of the
    residual stream that overflows float8_e4m3fn, non-finite values counted as overflowing)."""
    rows = data["arms"][_key(placement, lr)]["runs"]
    if what == "log_max":
        return [math.log10(r["max"][-1]) for r in rows]
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


def judge(data: dict, config: Config) -> list[Check]:
    lr, L = data["lrs"][-1], data["n_layers"]
    at = f"lr {lr:g}, L={L}"
    rows = [
        ("log_max", "Pre-LN's residual stream carries much larger activations than Peri-LN's",
         "Pre-LN: massive activations; Peri-LN: bounded (Kim et al. 2025)",
         f"log10 max|x| of block {L}: {{iv}}; max|x| {_means(data, lr, 'log_max', _exp10)}",
         "Kim et al. 2025 [S]"),
        ("depth_ratio", "Pre-LN's RMS grows more from the embedding to the last block",
         "Pre-LN RMS grows with depth and lr; Peri-LN ~ sqrt(l) (papers.md section 9)",
         f"log10 RMS(block {L}) / RMS(x_0), x_0 the embedding: {{iv}}; ratio "
         f"{_means(data, lr, 'depth_ratio', _exp10)}",
         "papers.md section 9, reproduction 3 (its pass rule) [D]"),
        ("log_growth", "Pre-LN's max |x| grows more over training",
         "fast variance growth over training in Pre-LN (Kim et al. 2025)",
         (f"log10 (max|x| at the end / at step 0), block {L}: {{iv}}; growth "
         f"{_means(data, lr, 'log_growth', _exp10)}"), "Kim et al. 2025 [S]"),
        ("fp8_overflow", f"more of Pre-LN's residual stream overflows {FP8} (max 448)",
         "- (follows from max |x| beyond 448)",
         f"fraction overflowing: {{iv}}; {_means(data, lr, 'fp8_overflow')}",
         "OCP fp8 range [D]"),
    ]
    growth = mean_interval(values(data, "pre", lr, "log_growth"))
    checks = [Check.superiority(
        claim=f"premise: Pre-LN's max |x| of the last block grows over training ({at})",
        published="Pre-LN: fast variance growth and massive activations over training",
        interval=growth, side=ABOVE, margin=THRESHOLD, kind=PREMISE,
        measured=f"log10 (max|x| over the last 10% of steps / at step 0): {growth.text(3)}",
        rule="superiority: the Student-t interval over seeds of Pre-LN's log10 growth > 0",
        margin_source="the sources give curves, no factor: the phenomenon has to occur at all",
        source="Kim et al. 2025 [S]")]
    for what, claim, published, measured, source in rows:
        iv = _paired(data, lr, what)
        checks.append(Check.superiority(
            claim=f"{claim} ({at})", published=published, interval=iv, margin=THRESHOLD,
            side=ABOVE,
            measured=measured.format(iv="Pre-LN - Peri-LN = " + iv.text(3)),
            rule="superiority: the paired Student-t interval of Pre-LN - Peri-LN over seeds "
                 "wholly > 0 pass, wholly <= 0 FAIL, straddling 0 inconclusive",
            margin_source="no published factor (Kim et al. 2025 give curves; papers.md section "
                          "9: 'lower for Peri-LN')", source=source))
    return checks + _shown(data)


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
              kind=SHOWN, source="normlab.precision formats"),
        Check(claim="the effect grows with the learning rate",
              published="Pre-LN RMS grows with lr (Wortsman et al. Fig. C.1; papers.md section 9)",
              measured=
                  "; ".join(f"lr {x:g}: max|x| of block {L} {_means(data, x, 'log_max', _exp10)}"
                        for x in data["lrs"]), rule="shown", passed=None, kind=SHOWN,
                        source="papers.md section 9"),
        Check(claim="Peri-LN's stream grows at most linearly in depth: each block adds branch "
              "outputs of a fixed RMS (their gains)",
              published=
                  "RMS ~ sqrt(l) for uncorrelated branches (papers.md section 9 [D]); l if aligned",
              measured=f"RMS(block {L}) / RMS(x_0) = {10 ** sandwich:.2f} at lr {lr:g} (sqrt({L}) "
              f"= {math.sqrt(L):.2f}, {L} if aligned); at lr {low:g}: "
              f"{10 ** np.mean(values(data, 'sandwich', low, 'depth_ratio')):.2f}", rule="shown",
              passed=None, kind=SHOWN,
              source="papers.md section 9 [D]"),
        Check(claim="final loss of each arm", published="-",
              measured="; ".join(f"{k} {fmt(np.mean(v['loss']))}"
                        + (f" ({sum(r['diverged'] for r in v['runs'])} diverged)"
                           if any(r["diverged"] for r in v["runs"]) else "")
                        for k, v in data["arms"].items()), rule="shown", passed=None,
              kind=SHOWN, source="-"),
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
