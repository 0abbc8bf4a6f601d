"""``attention-logit-growth``: at high learning rates the attention logits grow without bound unless
q and k are normalized, and qk-layernorm lowers the LR sensitivity (Wortsman et al. 2023, section
3.1.1; Dehghani et al. 2023); soft-capping bounds the logits by construction (Gemma 2).

A learning-rate sweep of normlab's GPT on Python's pydoc text (characters) with Wortsman et al.'s
recipe in every arm: init N(0, 1/fan_in) (``model.init="fan_in"``), RoPE, LayerNorm eps 1e-6, no
biases, z-loss 1e-4, AdamW (0.9, 0.95, eps 1e-8), clipping at 1, warmup 5% then cosine to 1e-5,
and weight decay independent of the learning rate (lambda = 1e-4: AdamW's coupled
``weight_decay`` is lambda / lr in each run). Arms: the baseline (Pre-LN, no QK-norm) and QK-norm
(LayerNorm on q and k per head), over ``lrs`` x ``seeds``; a soft-cap arm (cap tanh(s / cap),
cap 50) at ``softcap_lrs``. Every run goes through the sweep API (``_training.run_grid``).

Per seed: the LR sensitivity of each arm (the paper's: the mean over the grid of min(loss,
loss0) - the best loss), and at the top learning rate the peak attention logit (the largest raw
q.k / sqrt(D) of any block at any step). The checks pair the arms seed by seed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig
from .. import stats
from ..contract import CLAIM, DERIVATION, IDENTITY, PREMISE, SHOWN, Amendment, Card, Check, Record
from ..formatting import fmt
from ..sweep import lr_sensitivity
from . import _pilots as P
from . import _recipes as R
from . import _training as T

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="attention-logit-growth",
    title="Attention-logit growth at high learning rates: QK-norm and soft-capping",
    citation="Wortsman et al. 2023, 'Small-scale proxies for large-scale Transformer training "
             "instabilities', section 3.1.1 and Fig. 1; Dehghani et al. 2023 (ViT-22B); Gemma "
             "Team 2024 (Gemma 2), attention soft-cap 50",
    claim="At high learning rates the attention logits grow until attention collapses and "
          "training fails; QK-norm keeps them small and lowers the LR sensitivity; a soft-cap "
          "bounds what the softmax sees.",
    published="qk-layernorm lowers LR sensitivity (1.2B trains at LR 0.3); runs with max logit > "
              "1e4 diverged; Gemma 2 caps attention logits at 50",
    method="normlab GPT, Pre-LN, head width 16, on pydoc characters, with Wortsman et al.'s "
           "recipe in every arm (init 1/sqrt(fan_in), RoPE, LN eps 1e-6, z-loss 1e-4, AdamW "
           "(0.9, 0.95), clip 1, warmup 5% then cosine to 1e-5, weight decay 1e-4 independent of "
           "the LR; `base`, `independent_wd`); baseline and QK-norm x `widths` x `lrs` x `seeds`, "
           "soft-cap at `softcap_lrs`, through the sweep API; intervals pair the arms by seed.",
    explanation="A logit q.k / sqrt(D) grows with the product of the norms of q and k, i.e. "
                "quadratically in the weights, and a large learning rate grows the weights fast: "
                "the softmax turns one-hot, its gradient vanishes, and the run stalls or "
                "diverges. Normalizing q and k per head bounds |logit| by sqrt(D) times the "
                "product of the two gains, so the logit can only grow as fast as those gains. A "
                "soft-cap squashes the logit the softmax sees into (-cap, cap) but leaves q and k "
                "free to grow.",
    short="attention logits grow at high LR without QK-norm; QK-norm lowers the LR "
          "sensitivity (Wortsman et al.'s recipe, LR up to 3)",
    notebooks=("2.4.5-qk-norm-and-softcapping.ipynb",),
)

# The margins, written before this version measured anything, and where they come from:
SENS_RATIO = 0.7  # papers.md section 7 C: LRsens(QK-norm) <= 0.7 x LRsens(baseline)
LOGIT_RATIO = 10.0  # papers.md section 7 C: max_logit(baseline, lr_max) >= 10 x QK-norm's
GROWTH = 10.0  # the premise: the baseline's peak logit at the claim grid's top LR >= 10 x its
#                peak at the lowest LR ("grow by orders of magnitude", papers.md 7 C: one order)
DIVERGED_LOGIT = 1e4  # Wortsman et al. 3.3: every run with max attention logit > 1e4 diverged
# The lab's one learning-rate grid rule (issue 58, section 3), for every LR-sensitivity claim of
# Wortsman et al. (this experiment and lr-sensitivity-recipes): the source's grid, section 2.2's
# {3e-4, ..., 0.3}, with the source's measure (paper_sensitivity: the mean over the grid of
# min(loss, loss0) minus the grid's best); points swept beyond the grid are shown, never counted.
PAPER_LRS = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
PAPER_TOP_LR = max(PAPER_LRS)  # the top of Wortsman et al.'s grid (section 2.2)
NOTES_TOP_LR = 1.0  # papers.md 7 C extends the grid to 1.0 when nothing diverges at 0.3 (shown)
TRAINS_FRACTION = 0.5  # a run "trains" when it recovers this share of its arm's best improvement
PROBE_SCALE = 30.0  # the soft-cap probe multiplies q's and k's weights by this (logits x 900)

BASE = R.WORTSMAN  # Wortsman et al. 2023 section 2.1's recipe at CPU size


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (arm, width, lr, seed vary;
    #                           its weight_decay is replaced by independent_wd / lr)
    lrs: tuple[float, ...] = (*PAPER_LRS, 1.0, 3.0)  # peak LRs: Wortsman's grid {3e-4, ...,
    #   0.3} (counted) and 1 and 3 beyond it, where the baseline diverges (shown)
    independent_wd: float = 1e-4  # lambda in theta <- theta - s_t (lr Delta + lambda theta)
    widths: tuple[int, ...] = (32,)  # d_model of the swept models (head width 16: H = d / 16)
    qk_norm: str = "layernorm"  # the QK-norm arm's norm on q and k (Wortsman: qk-layernorm)
    softcap: float = 50.0  # the soft-cap arm's cap on the attention logits (Gemma 2: 50)
    softcap_lrs: tuple[float, ...] = (0.3,)  # the soft-cap arm's learning rates
    softcap_seeds: int = 1  # the soft-cap arm's seeds (the first ones)
    seeds: int = 3  # training seeds per point: the intervals are over these
    seed: int = 0  # the first training seed (the text and its split are fixed)


SIZES = {
    "tiny": {"lrs": (1e-2, 0.3, 3.0), "widths": (16,), "seeds": 2, "softcap_lrs": (3.0,),

             "base.model.n_layers": 1, "base.model.seq_len": 16, "base.batch_size": 4,
             "base.steps": 60, "base.warmup": 3, "base.eval_interval": 60},
    "quick": {},
    "full": {"widths": (32, 64), "seeds": 5,
             "softcap_lrs": (3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0), "softcap_seeds": 5,
             "base.model.n_layers": 4, "base.model.seq_len": 64, "base.batch_size": 16,
             "base.steps": 2000, "base.warmup": 100, "base.eval_interval": 2000},
}

# The pilots of the counted row on the source's grid, by the size's step count (seeds >= 50000,
# which no verdict run uses): the mean and sd over seeds of LRsens(QK-norm) - 0.7
# LRsens(baseline) at d = 32, and the pilot's seed count. The quick size's (550 steps): seeds
# 50000-50002 on 2026-12-07. The full size has none (its 5 seeds were fixed with its set-up,
# 70634b9): no premise row there, its own interval decides.
PILOTS: dict[int, P.Pilot] = {550: P.Pilot(-0.0179, 0.0201, 3, "50000-50002")}

ARMS = ("baseline", "qk-norm", "soft-cap")
SERIES = {"max_logit": lambda rec: max(rec["max_attn_logit"]),
          "max_logit_0": lambda rec: rec["max_attn_logit"][0],
          "nll": lambda rec: rec["nll"]}


def on_paper_grid(lrs) -> list[int]:
    """The indices of the swept learning rates ``lrs`` that the counted sensitivity reads: those
    inside the source's grid's range, [3e-4, 0.3] (every point of PAPER_LRS at the quick and
    full sizes; ``validate`` holds the sizes to it)."""
    return [j for j, lr in enumerate(lrs) if min(PAPER_LRS) <= lr <= PAPER_TOP_LR]


def paper_sensitivity(lrs, losses, loss0: float) -> float:
    """Wortsman et al.'s LR sensitivity over the points of ``lrs`` on the source's grid (the
    lab's one rule): the mean of min(loss, loss0) minus the best of those points; a diverged
    run (None) counts as ``loss0``. ``lrs``, ``losses``: one per swept LR."""
    keep = on_paper_grid(lrs)
    if len(keep) < 2:
        raise ValueError(f"lrs: the counted sensitivity needs >= 2 learning rates on the "
                         f"source's grid {list(PAPER_LRS)}; got {list(lrs)}")
    return lr_sensitivity([lrs[j] for j in keep], [losses[j] for j in keep], loss0)


def _arm_key(arm: str, d: int) -> str:
    """The data's key of an arm at one width (``data["per"]``)."""
    return f"{arm} d={d}"


def _key(arm: str, d: int, lr: float) -> str:
    """The variant's name of a point: its arm, width and learning rate (the data's runs)."""
    return f"{_arm_key(arm, d)} lr={lr:g}"


def _points(cfg: Config) -> list[T.Point]:
    """One run per (arm, width, lr, seed): the weight decay depends on the learning rate (so
    every (arm, width, lr) is its own variant), and the soft-cap arm has its own LRs and seeds.
    The soft-cap runs come first (a pool starts the points in order)."""
    over: dict[str, dict[str, Any]] = {"baseline": {}, "qk-norm": {"model.qk_norm": cfg.qk_norm},
            "soft-cap": {"model.attn_softcap": float(cfg.softcap)}}
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    out: list[T.Point] = []
    for arm in ("soft-cap", "baseline", "qk-norm"):
        lrs, arm_seeds = ((cfg.softcap_lrs, seeds[:cfg.softcap_seeds]) if arm == "soft-cap"
                          else (cfg.lrs, seeds))
        for d in cfg.widths:
            for lr in lrs:
                for seed in arm_seeds:
                    out.append((_key(arm, d, lr), {
                        "model.d_model": d, "model.n_heads": max(d // 16, 1), "lr": float(lr),
                        "weight_decay": cfg.independent_wd / lr, "seed": seed, **over[arm]},
                        {"arm": arm}))
    return out


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if cfg.seeds < 2:
        raise ValueError(f"seeds must be >= 2 (the checks are intervals over seeds); got "
                         f"{cfg.seeds}")
    if not 0 < cfg.softcap_seeds <= cfg.seeds:
        raise ValueError(f"softcap_seeds must be in [1, seeds = {cfg.seeds}]; got "
                         f"{cfg.softcap_seeds}")


def measure(config: Config, ctx) -> dict:
    cfg = config
    runs = T.run_points(cfg.base, _points(cfg), ctx, series=SERIES, name="lr-sweep")
    T.require_finished(runs)
    per = {_arm_key(arm, d): _arm(T.select(runs, arm=arm, d_model=d),
                                  cfg.softcap_lrs if arm == "soft-cap" else cfg.lrs)
           for d in cfg.widths for arm in ARMS}
    return {"per": per, "runs": T.as_data(runs), "lrs": list(cfg.lrs), "widths": list(cfg.widths),
            "top_lr": max(cfg.lrs), "softcap": cfg.softcap,
            "seeds": [cfg.seed + i for i in range(cfg.seeds)], "cap_probe": _cap_probe(cfg)}


def _cap_probe(cfg: Config) -> dict:
    """The soft-cap read from the model's attention: a soft-capped GPT of the swept shape, its
    q and k weights times PROBE_SCALE (raw logits far above the cap), one forward on random
    tokens; per block, the op's raw max logit, the largest logit the softmax saw (cap x the
    cached tanh, over the kept positions), and how far the cached probabilities are from the
    softmax of those capped logits."""
    from ...models import GPT

    d = cfg.widths[0]
    m = dataclasses.replace(cfg.base.model, d_model=d, n_heads=max(d // 16, 1),
                            attn_softcap=float(cfg.softcap))
    rng = np.random.default_rng([cfg.seed, 7])
    model = GPT(m, rng=rng)
    for b in model.blocks:
        a: Any = b.attn.branch  # a CausalSelfAttention
        W = a.qkv.params["weight"]
        W[: (a.n_heads + a.n_kv_heads) * a.head_dim] *= W.dtype.type(PROBE_SCALE)
    idx = rng.integers(0, m.vocab_size, (2, m.seq_len))
    model.forward(idx, idx)
    raw, seen, p_err = [], [], []
    for b in model.blocks:
        c = b.attn.branch._cache
        T_ = c.tanh.shape[-1]
        keep = np.tril(np.ones((T_, T_), bool))
        capped = (c.softcap * c.tanh.astype(np.float64))
        raw.append(float(c.max_logit))
        seen.append(float(capped[..., keep].max()))
        z = np.where(keep, capped, -np.inf)
        q = np.exp(z - z.max(axis=-1, keepdims=True))
        q /= q.sum(axis=-1, keepdims=True)
        p_err.append(float(np.abs(q - c.softmax.p.astype(np.float64)).max()))
    return {"raw": raw, "seen": seen, "p_err": p_err, "scale": PROBE_SCALE}


def _outcome(r: T.Run) -> float | None:
    """A run's final validation loss; None when it diverged (read as the loss at init)."""
    return r.final_val_loss if r.status == "done" else None


def _arm(runs: list, lrs) -> dict:
    """The runs of one arm at one width, seed by seed (lists over seeds, inner lists over
    ``lrs``): the final losses (None: diverged), the loss at init, the LR sensitivity over the
    whole grid and over the paper's range (<= 0.3), and per LR the peak attention logit of any
    block at any step, the max logit of any block at the end and at 2% of training."""
    by_seed: dict[int, dict[float, T.Run]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, {})[r.lr] = r
    out: dict[str, list[Any]] = {
        k: [] for k in ("seeds", "loss", "loss0", "sens", "sens_paper", "peak", "end",
                        "early", "diverged", "sens_notes")}
    for seed, at in sorted(by_seed.items()):
        rs = [at[lr] for lr in lrs]
        loss0: Any = rs[0].loss_at_init  # set for every run that started
        losses = [_outcome(r) for r in rs]
        out["seeds"].append(seed)
        out["loss"].append(losses)
        out["loss0"].append(loss0)
        out["sens"].append(lr_sensitivity(list(lrs), losses, loss0))
        out["sens_paper"].append(paper_sensitivity(list(lrs), losses, loss0)
                                 if len(on_paper_grid(lrs)) >= 2 else None)
        mid = [j for j, lr in enumerate(lrs) if lr <= NOTES_TOP_LR]
        out["sens_notes"].append(lr_sensitivity([lrs[j] for j in mid], [losses[j] for j in mid],
                                                loss0) if len(mid) >= 2 else None)
        out["peak"].append([r.peaks.get("max_logit") for r in rs])
        out["end"].append([_at(r, 1.0) for r in rs])
        out["early"].append([_at(r, 0.02) for r in rs])
        out["diverged"].append([r.status != "done" for r in rs])
    out["lrs"] = list(lrs)
    return out


def _at(run: T.Run, frac: float) -> float | None:
    """The max logit of any block at the last sampled step <= frac of the run's steps."""
    if not run.steps:
        return None
    limit = frac * max(run.steps[-1], 1)
    i = max((j for j, s in enumerate(run.steps) if s <= limit), default=0)
    return run.curves["max_logit"][i]


def judge(data: dict, config: Config) -> list[Check]:
    pilot = PILOTS.get(config.base.steps)
    checks = [] if pilot is None else [P.premise(
        pilot, config.seeds, 0.0, "LRsens(QK-norm) - 0.7 LRsens(baseline)",
        id="size-resolves-the-sensitivity-margin",
        source="the quick size's pilot; issue 58, sections 3 and 4")]
    for d in data["widths"]:
        checks += [_premise(data, d), _sens_check(data, d), _growth_check(data, d)]
    return checks + [_grid_row(data), _divergence_lr_row(data), _trains_check(data),
                     _cap_check(data), _divergence_check(data)]


def _pair(data: dict, d: int, key: str) -> tuple[list, list]:
    return data["per"][_arm_key("baseline", d)][key], data["per"][_arm_key("qk-norm", d)][key]


def _claim_lrs(data: dict) -> list[float]:
    """The claim's grid: the swept LRs on the source's grid, 3e-4 to 0.3 (Wortsman 2.2)."""
    return [data["lrs"][j] for j in on_paper_grid(data["lrs"])]


def _premise(data: dict, d: int) -> Check:
    """Without QK-norm the attention logits grow with the LR: the baseline's peak logit at the
    claim grid's top LR over its peak at the grid's lowest, per seed, log10, against one order."""
    lrs = data["lrs"]
    lo, hi = lrs.index(min(_claim_lrs(data))), lrs.index(max(_claim_lrs(data)))
    base = data["per"][_arm_key("baseline", d)]["peak"]
    logs = [_log_ratio(row[hi], row[lo]) for row in base]
    iv = stats.mean_interval(logs)
    return Check.superiority(
        claim=f"premise: without QK-norm the attention logits grow with the LR (d={d})",
        published="attention logits grow at high LR even in small models (Wortsman Fig. 1)",
        interval=iv, side=stats.ABOVE, margin=math.log10(GROWTH), kind=PREMISE,
        measured=f"baseline peak logit at LR {lrs[hi]:g} over LR {lrs[lo]:g}, log10 per seed: "
                 f"{iv.text()} (peaks {', '.join(fmt(r[hi] or math.nan) for r in base)} vs "
                 f"{', '.join(fmt(r[lo] or math.nan) for r in base)})",
        rule=f"superiority: {iv.method} of log10(peak at LR {lrs[hi]:g} / at {lrs[lo]:g}) > "
             f"log10({GROWTH:g}) = 1",
        source="Wortsman et al. 2023, section 3.1.1 [V]; papers.md 7 C",
        margin_source="one order of magnitude: papers.md 7 C 'grows by orders of magnitude'",
        id=f"baseline-logits-grow-with-lr-d{d}")


def _sens_check(data: dict, d: int) -> Check:
    base, qk = _pair(data, d, "sens_paper")
    lrs = _claim_lrs(data)
    if len(lrs) < 2 or None in base + qk:
        raise ValueError(f"the claim's grid needs >= 2 LRs of {list(PAPER_LRS)}; got {lrs}")
    iv = stats.paired_interval(qk, [SENS_RATIO * b for b in base])
    ratio = np.mean(qk) / np.mean(base) if np.mean(base) > 0 else math.inf
    return Check.superiority(
        claim=f"QK-norm lowers the LR sensitivity (d={d})",
        published="qk-layernorm lowers LR sensitivity markedly at every scale (Wortsman Fig. 1, "
        "grid up to 0.3); papers.md reproduction C: <= 0.7 x baseline",
        interval=iv, side=stats.BELOW, margin=0.0,
        source="Wortsman et al. 2023, sections 2.2 and 3.1.1 [V]; papers.md 7 C",
        margin_source=f"papers.md 7 C: LRsens(qk-LN) <= {SENS_RATIO:g} LRsens(no qk-LN); the grid "
                      f"is the paper's, up to {PAPER_TOP_LR:g} (section 2.2)",
        measured=f"LR sensitivity over {_lrs_text(lrs)}: baseline "
                 f"{stats.mean_interval(base).text()}, QK-norm {stats.mean_interval(qk).text()} "
                 f"(ratio of means {fmt(ratio)}); LRsens(QK) - {SENS_RATIO:g} LRsens(base) per "
                 f"seed: {iv.text()}",
        rule=f"superiority: paired interval of LRsens(QK-norm) - {SENS_RATIO:g} LRsens(baseline) "
             f"< 0 over the source's grid, {_lrs_text(lrs)} (a diverged run counts as its loss "
             "at init)",
        note=_diverged_note(data, d), id=f"qk-norm-lowers-lr-sensitivity-d{d}")


def _lrs_text(lrs) -> str:
    return f"LR {min(lrs):g}..{max(lrs):g} ({len(lrs)} points)"


def _diverged_note(data: dict, d: int) -> str:
    parts = []
    for arm in ("baseline", "qk-norm"):
        p = data["per"][_arm_key(arm, d)]
        counts = [sum(row[j] for row in p["diverged"]) for j in range(len(p["lrs"]))]
        hit = [f"LR {lr:g}: {c}/{len(p['diverged'])}" for lr, c in zip(p["lrs"], counts) if c]
        parts.append(f"{arm} diverged at " + (", ".join(hit) if hit else "no LR"))
    return "; ".join(parts)


def _log_ratio(a: float | None, b: float | None) -> float:
    """log10(a / b) of two peak logits (a missing one counts as 1: no growth seen)."""
    return math.log10(max(a or 1.0, 1e-12)) - math.log10(max(b or 1.0, 1e-12))


def _growth_check(data: dict, d: int) -> Check:
    base, qk = _pair(data, d, "peak")
    top = max(_claim_lrs(data))
    j = data["lrs"].index(top)
    logs = [_log_ratio(b[j], q[j]) for b, q in zip(base, qk)]
    iv = stats.mean_interval(logs)
    return Check.superiority(
        claim=f"QK-norm keeps the attention logits small: >= {LOGIT_RATIO:g} x below the "
        f"baseline's at the top LR ({top:g}, d={d})",
        published="max logits grow at high LR without qk-layernorm, not with it (Wortsman "
        "Fig. 1); papers.md C: baseline >= 10 x the QK-norm arm at lr_max",
        interval=iv, side=stats.ABOVE, margin=math.log10(LOGIT_RATIO),
        source="Wortsman et al. 2023 [V]; Dehghani et al. 2023 [S]; papers.md 7 C",
        margin_source="papers.md 7 C: max_logit(no qk-LN, lr_max) >= 10 x max_logit(qk-LN)",
        measured=f"peak max logit (any block, any step) per seed: baseline "
                 f"{', '.join(fmt(b[j] or math.nan) for b in base)}; QK-norm "
                 f"{', '.join(fmt(q[j] or math.nan) for q in qk)}; log10 ratio {iv.text()}",
        rule=f"superiority: paired interval of log10(baseline / QK-norm) > log10({LOGIT_RATIO:g})"
             " = 1",
        note="peak over all blocks and steps (a run that diverged stops early: its peak is "
             "before it stopped); a derivation: QK-norm bounds a logit by sqrt(D) g_q g_k",
        kind=DERIVATION, id=f"qk-norm-logits-10x-below-baseline-d{d}")


def _grid_row(data: dict) -> Check:
    d = data["widths"][0]
    parts = []
    for key, top in (("sens_notes", NOTES_TOP_LR), ("sens", max(data["lrs"]))):
        base, qk = _pair(data, d, key)
        lrs = [lr for lr in data["lrs"] if lr <= top]
        if len(lrs) < 2 or None in base + qk:
            continue
        iv = stats.paired_interval(qk, [SENS_RATIO * b for b in base])
        parts.append(f"over {_lrs_text(lrs)}: baseline {stats.mean_interval(base).text()}, "
                     f"QK-norm {stats.mean_interval(qk).text()} (ratio of means "
                     f"{fmt(np.mean(qk) / np.mean(base))}); QK - {SENS_RATIO:g} base {iv.text()}")
    return Check(
        claim=f"the LR sensitivity over the grid extended past the paper's (d={d})",
        published="papers.md 7 C extends the grid to 1.0 when nothing diverges at 0.3",
        measured="; ".join(parts) or "-",
        rule="shown, not counted: the claim is about the paper's grid (up to 0.3), and a grid "
             "point where both arms diverge adds the same loss-at-init term to both "
             "sensitivities (the divergence LR is the next row)",
        passed=None, kind=SHOWN, source="Wortsman et al. 2023, section 2.2 [V]; papers.md 7 C",
        id="lr-sensitivity-over-extended-grid")


def _divergence_lr_row(data: dict) -> Check:
    parts = []
    for d in data["widths"]:
        for arm in ("baseline", "qk-norm"):
            p = data["per"][_arm_key(arm, d)]
            first = [min((lr for lr, dv in zip(p["lrs"], row) if dv), default=None)
                     for row in p["diverged"]]
            parts.append(f"{arm} d={d}: " + ", ".join("none" if x is None else f"{x:g}"
                                                      for x in first))
    return Check(
        claim="the divergence LR: the lowest swept LR at which a run diverged, per seed",
        published="without qk-layernorm the divergence LR shrinks with size (Wortsman Fig. 1)",
        measured="; ".join(parts),
        rule="shown, not counted (the trainer stops a run whose loss passes 3 x its first step's)",
        passed=None, kind=SHOWN, source="Wortsman et al. 2023 [V]", id="divergence-lr-per-seed")


def _trains_check(data: dict) -> Check:
    d = data["widths"][0]
    lrs = data["lrs"]
    parts = []
    for lr in [x for x in lrs if x >= PAPER_TOP_LR]:
        j = lrs.index(lr)
        row = []
        for arm in ("baseline", "qk-norm"):
            p = data["per"][_arm_key(arm, d)]
            fr = [_recovered(p, i, j) for i in range(len(p["seeds"]))]
            row.append(f"{arm} {stats.mean_interval(fr).text(2) if len(fr) > 1 else fmt(fr[0])}")
        parts.append(f"LR {lr:g}: " + ", ".join(row))
    return Check(
        claim=f"with QK-norm the model still trains at LR {PAPER_TOP_LR:g}",
        published="a 1.2B model with qk-layernorm trains at LR 0.3 (Wortsman section 3.1.1)",
        measured=f"d={d}, share of the best improvement over the loss at init recovered: "
        + "; ".join(parts),
        rule=f"shown, not counted: 'trains' = recovers >= {TRAINS_FRACTION:g} "
        "of its best improvement",
        passed=None, kind=SHOWN, source="Wortsman et al. 2023 [V]",
        note="papers.md lists this as an expectation", id="qk-norm-trains-at-lr-0-3")


def _recovered(p: dict, i: int, j: int) -> float:
    """Seed i's share of its best improvement over the loss at init recovered at LR index j."""
    loss0 = p["loss0"][i]
    losses = [stats.outcome(v, loss0) for v in p["loss"][i]]
    best = min(losses)
    return (loss0 - losses[j]) / (loss0 - best) if loss0 > best else 0.0


def _cap_check(data: dict) -> Check:
    cap, probe = data["softcap"], data["cap_probe"]
    seen, raw = max(probe["seen"]), max(probe["raw"])
    arms = [data["per"][_arm_key("soft-cap", d)] for d in data["widths"]]
    trained = max((v for p in arms for row in p["peak"] for v in row if v is not None),
                  default=math.nan)
    return Check(
        claim=f"soft-capping bounds every attention logit the softmax sees by {cap:g}",
        published="cap tanh(s / cap) < cap by construction (Gemma 2: cap 50)",
        measured=f"read from the model's attention (q, k weights x {fmt(probe['scale'])}): raw "
        f"max logit per block {', '.join(fmt(v) for v in probe['raw'])}, largest logit the "
        f"softmax saw {', '.join(f'{v:.6g}' for v in probe['seen'])}; the cached probabilities "
        f"are the softmax of the capped logits to {fmt(max(probe['p_err']))}; the trained "
        f"soft-cap runs' raw peak {fmt(trained)}",
        rule=f"holds when every capped logit the op saved is <= {cap:g} while the raw logit is "
             f"above it, and the softmax read the capped logits (to 1e-5)",
        passed=bool(seen <= cap < raw and max(probe["p_err"]) < 1e-5),
        source="Gemma Team 2024 [V]", kind=IDENTITY,
        note="the cap bounds what the softmax sees, not the raw q.k, which keeps growing: the "
             "cap hides the growth rather than removing its cause",
        id="softcap-bounds-the-logits-the-softmax-sees")


def _divergence_check(data: dict) -> Check:
    big = [r for r in data["runs"] if (r["peaks"].get("max_logit") or 0) > DIVERGED_LOGIT]
    stopped = sum(r["status"] != "done" for r in big)
    return Check(
        claim=f"runs whose max logit passed {DIVERGED_LOGIT:g} diverged",
        published="every run with max attention logit > 1e4 diverged (Wortsman section 3.3)",
        measured=f"{len(big)} run(s) passed {DIVERGED_LOGIT:g}; {stopped} of them diverged, "
        f"{len(big) - stopped} trained on (LRs "
        f"{_lrs_of(r['lr'] for r in big if r['status'] == 'done') or '-'})",
        rule="shown, not counted (a 1e4 threshold of 1e5-step runs at scale)", passed=None,
        kind=SHOWN, source="Wortsman et al. 2023 [V]", id="runs-past-1e4-logit")


def _lrs_of(lrs: Iterable[float]) -> str:
    return ", ".join(f"{x:g}" for x in sorted(set(lrs)))


def headline(data: dict, config: Config) -> str:
    d = data["widths"][0]
    base, qk = _pair(data, d, "sens_paper")
    top = max(_claim_lrs(data))
    j = data["lrs"].index(top)
    pb, pq = _pair(data, d, "peak")
    return (f"LR sensitivity over the source's grid, {_lrs_text(_claim_lrs(data))} (d={d}, mean "
            f"over {len(base)} seeds) "
            f"baseline {fmt(np.mean(base))}, QK-norm {fmt(np.mean(qk))}; peak attention logit "
            f"at LR {top:g}: {fmt(np.median([b[j] or 1.0 for b in pb]))} without vs "
            f"{fmt(np.median([q[j] or 1.0 for q in pq]))} with QK-norm (median over seeds)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    colors = {"baseline": "#d62728", "qk-norm": "#1f77b4", "soft-cap": "#2ca02c"}
    fig, (a, c, b, e) = figure(2, 2, width=5.0, height=3.5)
    w0 = d["widths"][0]
    for arm in ("baseline", "qk-norm"):
        p = d["per"][_arm_key(arm, w0)]
        loss = np.array([[stats.outcome(v, l0) for v in row]
                         for row, l0 in zip(p["loss"], p["loss0"])])
        a.errorbar(p["lrs"], loss.mean(0), yerr=loss.std(0), fmt="o-", color=colors[arm],
                   ms=4, capsize=2, label=arm)
        peak = np.array([[max(v or 1e-2, 1e-2) for v in row] for row in p["peak"]])
        c.plot(p["lrs"], np.exp(np.log(peak).mean(0)), "o-", color=colors[arm], ms=4, label=arm)
        e.bar([arm], [np.mean(p["sens"])], yerr=[np.std(p["sens"])], color=colors[arm],
              capsize=3)
    a.axhline(np.mean(d["per"][_arm_key("baseline", w0)]["loss0"]), color="#777777", ls="--",
              lw=0.9, label="loss at init")
    for ax in (a, c):
        ax.set_xscale("log")
    style(a, f"final loss vs LR (mean, sd over seeds; diverged = loss at init), d={w0}",
          "peak learning rate", "validation loss (nats/char)")
    c.set_yscale("log")
    c.axhline(DIVERGED_LOGIT, color="k", ls="--", lw=0.8, label="1e4 (Wortsman)")
    style(c, "peak attention logit, any block (geometric mean)", "peak learning rate",
          "max q.k / sqrt(D)")
    first, top = d["seeds"][0], d["top_lr"]
    lr_b = PAPER_TOP_LR if PAPER_TOP_LR in d["lrs"] else top
    for arm in ARMS:
        for r in d["runs"]:
            if (r["variant"] in {_key(arm, w, lr_b) for w in d["widths"]}
                    and r["seed"] == first and r["steps"]):
                b.plot(r["steps"], [np.nan if v is None else max(abs(v), 1e-2)
                                    for v in r["curves"]["max_logit"]], color=colors[arm],
                       label=arm)
    b.axhline(d["softcap"], color=colors["soft-cap"], ls=":", lw=0.8, label="cap")
    b.set_yscale("log")
    style(b, f"max logit of any block during training, LR {lr_b:g}, seed {first}", "step",
          "max q.k / sqrt(D) (raw)")
    style(e, "LR sensitivity (mean, sd over seeds)", "", "mean min(loss, loss0) - best (nats)",
          legend=False)
    return [save(fig, out_dir, "attention_logit_growth.png")]


# ---- the claim register (normlab.lab.register) ---------------------------------------------
WIDTHS_REGISTERED = (16, 32, 64)  # the widths of the sizes' grids (tiny, quick, full)
_WORTSMAN = "Wortsman et al. 2023 (arXiv:2309.14322)"
_SEEDS_FROM = ("fixed with the set-up of this version (70634b9, 2026-12-02): 3 at quick, 5 at "
               "full; no pilot on record, never raised after a verdict")
_SENS_SOURCE = ("\"qk-LN lowers LR sensitivity markedly\"; LR sensitivity over the grid "
                "\"{3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1}\" (papers.md 7 [V], sections 2.2 "
                "and 3.1.1)")
_GROWTH_SOURCE = ("\"z_ij = <q_i, k_j> / sqrt(d_h) grow at high LR even in small models\" "
                  "(papers.md 7 [V], section 3.1.1 and Fig. 1)")


def _width_records(d: int) -> tuple[Record, ...]:
    common: dict[str, Any] = {"grid": ("lrs", "widths"), "seeds": "seeds",
                              "seeds_from": _SEEDS_FROM}
    return (
        Record(id=f"baseline-logits-grow-with-lr-d{d}", kind=PREMISE,
               claim=f"premise: without QK-norm the attention logits grow with the LR (d={d})",
               source=_GROWTH_SOURCE, where=f"{_WORTSMAN}, section 3.1.1, Fig. 1",
               form="superiority", margin=(math.log10(GROWTH),), side="above",
               margin_source="one order of magnitude: papers.md 7 C 'grows by orders of "
                             "magnitude'", registered="2026-12-03", **common),
        Record(id=f"qk-norm-lowers-lr-sensitivity-d{d}", kind=CLAIM,
               claim=f"QK-norm lowers the LR sensitivity to <= {SENS_RATIO:g} x the baseline's "
                     f"over the paper's grid, up to LR {PAPER_TOP_LR:g} (d={d})",
               source=_SENS_SOURCE, where=f"{_WORTSMAN}, sections 2.2 and 3.1.1, Fig. 1",
               form="superiority", margin=(0.0,), side="below",
               margin_source=f"papers.md 7 C: LRsens(qk-LN) <= {SENS_RATIO:g} LRsens(no qk-LN); "
                             f"the grid is the paper's, up to {PAPER_TOP_LR:g} (section 2.2)",
               registered="2026-11-29", **common),
        Record(id=f"qk-norm-logits-10x-below-baseline-d{d}", kind=DERIVATION,
               claim=f"QK-norm keeps the attention logits small: >= {LOGIT_RATIO:g} x below the "
                     f"baseline's at the top LR ({PAPER_TOP_LR:g}, d={d})",
               source=_GROWTH_SOURCE, where=f"{_WORTSMAN}, Fig. 1; papers.md 7 C",
               form="superiority", margin=(math.log10(LOGIT_RATIO),), side="above",
               margin_source="papers.md 7 C: max_logit(no qk-LN, lr_max) >= 10 x "
                             "max_logit(qk-LN)", registered="2026-11-29", **common),
    )


_PILOT_FROM = ("the quick size's pilot at seeds 50000-50002 (2026-12-07; the paper's grid and 1, "
               "3 beyond, d = 32): LRsens(QK-norm) - 0.7 LRsens(baseline) = -0.0179, sd 0.0201 "
               "over the seeds (sensitivities 0.366 / 0.378 / 0.366 against 0.261 / 0.237 / "
               "0.225, ratio 0.65)")
REGISTER = (
    Record(id="size-resolves-the-sensitivity-margin", kind=PREMISE,
           claim="premise: this size resolves the counted row on the source's grid (its pilot's "
                 "expected interval clears the margin at the size's seed count)",
           source="\"Where the quick size cannot show the effect on the source's grid, its quick "
                  "verdict is 'not tested at this size'\" (the lab's one grid rule, issue 58 "
                  "section 3; section 4: a seed count from a pilot)",
           where=f"issue 58, sections 3 and 4; {_WORTSMAN}, section 2.2 (the grid)",
           grid=("lrs", "base.steps"), seeds="seeds", seeds_from=_PILOT_FROM,
           registered="2026-12-07"),
    *(r for d in WIDTHS_REGISTERED for r in _width_records(d)),
    Record(id="lr-sensitivity-over-extended-grid", kind=SHOWN,
           claim="the LR sensitivity over the grid extended past the paper's",
           grid=("lrs",), seeds="seeds", registered="2026-12-03"),
    Record(id="divergence-lr-per-seed", kind=SHOWN,
           claim="the divergence LR: the lowest swept LR at which a run diverged, per seed",
           grid=("lrs", "widths"), seeds="seeds", registered="2026-12-02"),
    Record(id="qk-norm-trains-at-lr-0-3", kind=SHOWN,
           claim=f"with QK-norm the model still trains at LR {PAPER_TOP_LR:g}",
           grid=("lrs",), seeds="seeds", registered="2026-11-29"),
    Record(id="softcap-bounds-the-logits-the-softmax-sees", kind=IDENTITY,
           claim="soft-capping bounds every attention logit the softmax sees by the cap",
           where="Gemma Team 2024 (Gemma 2): attention soft-cap 50", grid=("softcap",),
           registered="2026-11-29"),
    Record(id="runs-past-1e4-logit", kind=SHOWN,
           claim=f"runs whose max logit passed {DIVERGED_LOGIT:g}: how many diverged",
           grid=("lrs", "widths"), seeds="seeds", registered="2026-11-29"),
    Record(id="max-logit-past-1e4-means-divergence", kind=CLAIM,
           claim="every run whose max attention logit passes 1e4 diverges",
           source="\"Every run with max attention logit > 1e4 (block 0, step 2e3) diverged\" "
                  "(papers.md 7 [V], section 3.3)", where=f"{_WORTSMAN}, section 3.3",
           registered="2026-12-07",
           untested="the threshold is read off runs of 1e5 steps at widths >= 256; here runs of "
                    "550 and 2000 steps at d = 32-64 pass 1e4 and train on badly to the end (a "
                    "huge logit collapses attention without ending the run: 7 of 10 at quick, "
                    "54 of 75 at full), so the count measures the step count, not the claim"),
    Record(id="logit-growth-collapses-attention-and-fails-training", kind=CLAIM,
           claim="at high learning rates the attention logits grow until attention collapses "
                 "and training fails",
           source="\"attention collapses to one-hot (entropy collapse). Without qk-LN, the "
                  "divergence LR shrinks with size\" (papers.md 7 [V], section 3.1.1)",
           where=f"{_WORTSMAN}, section 3.1.1, Fig. 1", registered="2026-12-07",
           untested="the paper sees the failure at its larger sizes (the divergence LR falls as "
                    "models grow); at d = 32-64 the baseline still trains at the grid's top, "
                    "0.3 (it recovers 67-78% of its best improvement, the trains row), and at "
                    "LR 3, where it diverges, QK-norm diverges too, so no failure here is the "
                    "logits' own"),
)

_GRID_WHY = ("docs/lab.md and the notes: at the quick report's budget the paper's low end does "
             "not train to the best (LR 1e-3 ended 0.4 nats and 3e-3 0.16 nats above LR 0.01, in "
             "both arms), so it would make the sensitivity measure learning speed; the top was "
             "extended to 1 and 3, where the baseline diverges (papers.md 7 C). The one-seed "
             "result had the sensitivity row failing and the logit row not settled between "
             "machines")
_PAPER_GRID_CHANGED = ("the counted sensitivity read over the paper's grid, the swept LRs up to "
                       "0.3, instead of the whole swept grid up to LR 3 (1a7119f); the "
                       "extended grid became a shown row and the divergence LR a row apart")
_PAPER_GRID_WHY = ("the notes: over the whole grid the row failed, decided by LR 3 alone, where "
                   "both arms diverge within a few steps and add about 0.5 nats of loss at init "
                   "to both sensitivities; Wortsman et al.'s grid stops at 0.3 (section 2.2), "
                   "over which the ratio was about 0.3. The margin (0.7) and the grid's points "
                   "did not change. lab-audit.md, row 8: on the paper's own grid the quick "
                   "ratio is 0.708, inconclusive (a rerun, not committed)")
_TOP_CHANGED = ("read at the claim grid's top LR, 0.3, instead of the swept grid's, 3 "
                "(1a7119f); the baseline's growth with the LR split off as a premise")
_PREMISE_CHANGED = ("the premise added (1a7119f): without QK-norm the peak logit grows by more "
                    "than an order of magnitude from the lowest LR to 0.3; the first "
                    "registration had no premise, so this row is left out of its tally")
_PREMISE_WHY = ("the lab's rule forms (1a7119f): a fix is judged only where the instability it "
                "fixes occurs (papers.md 7 C: the logits 'grow by orders of magnitude')")
_NO_RESULT_64 = ("as at d = 32; no result at d = 64 was committed before the change (the full "
                 "size was first measured on 2026-12-05), so no result before is given")
_DERIVED_WHY = ("issue 52 and lab-audit.md, row 8 and section 2: once the premise holds the row "
                "is near a tautology, since LayerNorm on q and k bounds a logit by sqrt(D) g_q "
                "g_k while the baseline's grows by orders of magnitude (the premise)")
_README = "README's lab table at 847cbac, the one committed record of this result"
AMENDMENTS_SETUP = tuple(
    Amendment(
        id=f"{kind}-d{d}", date="2026-12-02",
        changed=("the previous version's set-up and grid replaced (70634b9): one seed on the "
                 "order-2 Markov source, GPT-2 init, weight decay 0.1 coupled to the LR and the "
                 "paper's grid {3e-4, ..., 0.3} became 3 seeds (full 5) on pydoc characters "
                 "with Wortsman et al.'s recipe over {0.01, ..., 3} (full from 3e-3); measured "
                 "again" + ("" if d == 32 else "; no result at d = 64 was committed before")),
        why=_GRID_WHY, before=before, remeasure=True, commit="847cbac" if d == 32 else "",
        results_before={"quick": {"status": "FAIL", "kind": "claim", "interval": None,
                                  "measured": text}} if d == 32 else {})
    for d in (32, 64)
    for kind, before, text in (
        ("qk-norm-lowers-lr-sensitivity", {},
         "LR sensitivity 0.438 without vs 0.429 with QK-norm (ratio 0.98; 0.52 vs 0.41 on an "
         f"earlier machine), one seed over 3e-4..0.3, rule ratio <= 0.7 ({_README})"),
        ("qk-norm-logits-10x-below-baseline", {"kind": "claim"},
         "block-0 max logit at LR 0.3: 22 without vs 51 with QK-norm (3450 vs 35 on an earlier "
         f"machine), one seed, rule baseline >= 10 x QK-norm; 'not settled' ({_README})")))
AMENDMENTS = (*AMENDMENTS_SETUP,
    Amendment(
        id="qk-norm-lowers-lr-sensitivity-d32", date="2026-12-03",
        changed=_PAPER_GRID_CHANGED,
        why=_PAPER_GRID_WHY,
        before={},
        remeasure=True,
        commit="778a154",
        results_before={
            "quick": {"status": "inconclusive", "kind": "claim",
                "interval": [-0.030236655508643517, 0.5548051278346268],
                "measured": "LR sensitivity over LR 0.01..3 (6 points): baseline 0.892 [0.843, "
                            "0.94] (n=3), QK-norm 0.886 [0.572, 1.2] (n=3) (ratio of means "
                            "0.994); LRsens(QK) - 0.7 LRsens(base) per seed: 0.262 [-0.0302, "
                            "0.555] (n=3)"},
        },
    ),
    Amendment(
        id="qk-norm-logits-10x-below-baseline-d32", date="2026-12-03",
        changed=_TOP_CHANGED,
        why=_PAPER_GRID_WHY,
        before={"kind": "claim"},
        remeasure=True,
        commit="778a154",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [1.945336285496416, 3.341134663958064],
                "measured": "peak max logit (any block, any step) per seed: baseline 7.83e+04, "
                            "1.11e+04, 1.92e+05; QK-norm 107, 122, 150; log10 ratio 2.64 [1.95, "
                            "3.34] (n=3)"},
        },
    ),
    Amendment(
        id="baseline-logits-grow-with-lr-d32", date="2026-12-03",
        changed=_PREMISE_CHANGED,
        why=_PREMISE_WHY,
        before={"kind": None},
    ),
    Amendment(
        id="baseline-logits-grow-with-lr-d64", date="2026-12-03",
        changed=_PREMISE_CHANGED,
        why=_PREMISE_WHY,
        before={"kind": None},
    ),
    Amendment(
        id="qk-norm-lowers-lr-sensitivity-d64", date="2026-12-03",
        changed=_PAPER_GRID_CHANGED,
        why=_NO_RESULT_64,
        before={},
        remeasure=True,
    ),
    Amendment(
        id="qk-norm-logits-10x-below-baseline-d64", date="2026-12-03",
        changed=_TOP_CHANGED,
        why=_NO_RESULT_64,
        before={"kind": "claim"},
        remeasure=True,
    ),
    Amendment(
        id="qk-norm-logits-10x-below-baseline-d32", date="2026-12-07",
        changed=("kind claim -> derivation"),
        why=_DERIVED_WHY,
        before={"kind": "claim"},
        commit="8ed4d62",
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                "interval": [3.261860397959883, 4.157781654652094],
                "measured": "peak max logit (any block, any step) per seed: baseline 4.72e+05, "
                            "2.92e+05, 4.84e+05; QK-norm 67.3, 91.1, 80.8; log10 ratio 3.71 "
                            "[3.26, 4.16] (n=3)"},
            "full": {"status": "pass", "kind": "claim",
                "interval": [3.174996365618504, 4.649060444572038],
                "measured": "peak max logit (any block, any step) per seed: baseline 2.60e+06, "
                            "1.72e+06, 4.67e+06, 3.01e+06, 1.99e+06; QK-norm 628, 927, 78.5, "
                            "648, 116; log10 ratio 3.91 [3.17, 4.65] (n=5)"},
        },
    ),
    Amendment(
        id="qk-norm-logits-10x-below-baseline-d64", date="2026-12-07",
        changed=("kind claim -> derivation"),
        why=_DERIVED_WHY,
        before={"kind": "claim"},
        commit="8ed4d62",
        results_before={
            "full": {"status": "pass", "kind": "claim",
                "interval": [4.605748128989394, 5.045293667676505],
                "measured": "peak max logit (any block, any step) per seed: baseline 7.14e+06, "
                            "7.24e+06, 8.19e+06, 7.94e+06, 6.98e+06; QK-norm 105, 197, 143, "
                            "83.7, 70.2; log10 ratio 4.83 [4.61, 5.05] (n=5)"},
        },
    ),
    Amendment(
        id="size-resolves-the-sensitivity-margin", date="2026-12-07", before={"kind": None},
        remeasure=True,
        changed="registered with the one grid rule: a size whose pilot says its seeds cannot "
                "resolve the counted row on the source's grid is not tested",
        why="issue 58 section 3: the quick size cannot show the effect on the paper's grid at "
            "the seeds its budget pays for (the pilot: ratio 0.65 against the 0.7 margin, 3 "
            "seeds give +-0.05 against a distance of 0.018; about 8 to 10 seeds, some 150 "
            "seconds more, would be needed); the full size decides. Left out of the tally as "
            "first registered"),
    *(Amendment(
        id=f"qk-norm-lowers-lr-sensitivity-d{d}", date="2026-12-07", commit="45a053f",
        remeasure=True,
        changed="the counted sensitivity over the source's whole grid, {3e-4, ..., 0.3} (7 "
                "points), instead of the swept LRs up to 0.3 (quick: 0.01-0.3, 4 points; full: "
                "3e-3-0.3, 5 points): both sizes sweep 3e-4 to 3, the points past 0.3 shown "
                "(lr-sensitivity-over-extended-grid); the quick size is judged behind its "
                "pilot's premise (size-resolves-the-sensitivity-margin)",
        why="issue 58 section 3, the one learning-rate grid rule: the source's grid, the same "
            "sensitivity measure, points beyond shown; lab-audit.md row 8 and section 3.2: the "
            "quick row passed on a grid cut after a FAIL, and on the paper's own grid its ratio "
            "is about 0.7, the margin (0.708, 2 seeds, a rerun). The low end adds the same "
            "undertrained loss to both arms, which is the paper's measure",
        before={}, results_before=before)
      for d, before in (
          (32, {"quick": {"status": "pass", "kind": "claim",
                          "interval": [-0.17044589164212273, -0.08111534280497337],
                          "measured": "LR sensitivity over LR 0.01..0.3 (4 points): baseline "
                                      "0.342 [0.338, 0.346] (n=3), QK-norm 0.114 [0.067, 0.16] "
                                      "(n=3) (ratio of means 0.332); LRsens(QK) - 0.7 "
                                      "LRsens(base) per seed: -0.126 [-0.17, -0.0811] (n=3)"},
                "full": {"status": "pass", "kind": "claim",
                         "interval": [-0.23764187424621513, -0.18192829495048174],
                         "measured": "LR sensitivity over LR 0.003..0.3 (5 points): baseline "
                                     "0.39 [0.359, 0.421] (n=5), QK-norm 0.0631 [0.0515, 0.0748] "
                                     "(n=5) (ratio of means 0.162); LRsens(QK) - 0.7 "
                                     "LRsens(base) per seed: -0.21 [-0.238, -0.182] (n=5)"}}),
          (64, {"full": {"status": "pass", "kind": "claim",
                         "interval": [-0.3427681807154714, -0.31951258038569536],
                         "measured": "LR sensitivity over LR 0.003..0.3 (5 points): baseline "
                                     "0.532 [0.516, 0.549] (n=5), QK-norm 0.0415 [0.033, 0.0499] "
                                     "(n=5) (ratio of means 0.0779); LRsens(QK) - 0.7 "
                                     "LRsens(base) per seed: -0.331 [-0.343, -0.32] (n=5)"}}))),
    *(Amendment(
        id=f"baseline-logits-grow-with-lr-d{d}", date="2026-12-07", commit="45a053f",
        remeasure=True,
        changed="the growth read from the source's grid's lowest LR, 3e-4, to its top, 0.3 "
                "(was from the swept grid's lowest: 0.01 quick, 3e-3 full)",
        why="issue 58 section 3: the one grid rule; the premise reads the grid the claim reads",
        before={}, results_before=before)
      for d, before in (
          (32, {"quick": {"status": "pass", "kind": "premise",
                          "interval": [3.8235446367870938, 4.506982631560807],
                          "measured": "baseline peak logit at LR 0.3 over LR 0.01, log10 per "
                                      "seed: 4.17 [3.82, 4.51] (n=3)"},
                "full": {"status": "pass", "kind": "premise",
                         "interval": [4.890826147450682, 5.330685172295647],
                         "measured": "baseline peak logit at LR 0.3 over LR 0.003, log10 per "
                                     "seed: 5.11 [4.89, 5.33] (n=5)"}}),
          (64, {"full": {"status": "pass", "kind": "premise",
                         "interval": [5.408517678968572, 5.464505428884241],
                         "measured": "baseline peak logit at LR 0.3 over LR 0.003, log10 per "
                                     "seed: 5.44 [5.41, 5.46] (n=5)"}}))),
)
