"""``ngpt-speedup``: the normalized Transformer's speed-up (Loshchilov et al. 2024, nGPT, arXiv
2410.01131) against a fair Pre-LN baseline, on pydoc characters (a task whose arms end apart).

The two arms share the text recipe's model size, data, batch, steps, evaluation and seeds:

* **the baseline** is the text recipe as it is (Pre-LN GPT with RoPE, AdamW with weight decay
  0.1, warmup then cosine, clipping at 1), at ``baseline_lr``, fixed by a pilot on the grid
  ``lr_grid`` (the notes);
* **nGPT** is ``model.placement='ngpt'`` (no norm layers, every matrix on the unit sphere after
  each step, the eigen learning rates and the s_qk / s_uv / s_z scalings of the official code),
  with the official code's optimizer settings for it (no weight decay, no warmup) at its own
  tuned ``ngpt_lr`` (the same pilot).

The counted row is the paper's: per seed (the arms paired by seed), the steps the baseline needs
to reach its final validation loss divided by the steps nGPT needs to reach that loss, both read
from the evaluation curves (interpolated linearly between evaluations, from the loss at init at
step 0). Where nGPT ends above the baseline the loss read is nGPT's final one (the one both
curves reach): the steps the baseline needs to reach it over the steps nGPT needs, below 1.
Premises first: both arms train, and the baseline's learning rate is the best of its grid
and at its interior (the grid runs at every size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...train import TrainConfig
from .. import stats as S
from ..contract import CLAIM, PREMISE, SHOWN, THRESHOLD, Card, Check, Record
from ..formatting import fmt
from . import _pilots as P
from . import _recipes as R
from ._training import require_finished, run_points

LANE = "pool"  # its training runs go to the executor's workers (normlab.lab.reporting.lanes)

CARD = Card(
    name="ngpt-speedup",
    title="nGPT: the normalized Transformer's speed-up against a fair Pre-LN baseline",
    citation="Loshchilov, Hsieh, Sun & Ginsburg 2024, nGPT: Normalized Transformer with "
             "Representation Learning on the Hypersphere, arXiv 2410.01131 (ICLR 2025); the "
             "official code github.com/NVIDIA/ngpt",
    claim="nGPT reaches the baseline Transformer's validation loss in several times fewer "
          "training steps: 4x at 1k context, 10x at 4k, 20x at 8k.",
    published="4x to 20x fewer steps to the same accuracy (abstract; 4x at 1k context after "
              "about 200k steps, the official README). Reproductions report less: 1.5-2x at 1k "
              "context and about 4x at 4k with float32 parameters (JoeLi12345/nGPT); the "
              "official README says its own bfloat16 baseline overstates the factor",
    method="normlab GPT on pydoc characters (`base`: the text recipe, evaluated every "
           "`base.eval_interval` steps). The baseline: Pre-LN at `baseline_lr` (best of "
           "`lr_grid` in the pilot; the grid's other points run too). nGPT: "
           "placement 'ngpt', no weight decay, no warmup, at `ngpt_lr`. `seeds` seeds paired. "
           "The speed-up per seed from the evaluation curves; premises first.",
    explanation="In nGPT every hidden state and every matrix row lives on the unit sphere; a "
                "block moves the hidden state towards its branch's output by a learned, "
                "per-channel step (the eigen learning rate), and the logits and the attention "
                "scores are cosines times learned scales. The paper reads the speed-up as the "
                "steps a GPT needs to reach a loss over the steps nGPT needs: the factor grows "
                "with the context length and with the length of the run. A fair comparison "
                "gives the baseline its own tuned learning rate and the same tokens.",
    short="nGPT reaches the baseline's loss in 4x fewer steps or more",
)

# The margins, fixed before measuring, with where they come from:
FACTOR = 4.0  # the paper's smallest published factor (1k context; abstract's "4 to 20")
HALF = 0.5  # "trains": closes at least half the way from its loss at init to the plateau

_NGPT: dict[str, Any] = {"model.placement": "ngpt", "model.norm": "none", "model.embed_scale": 1.0,
         "weight_decay": 0.0, "warmup": 0}  # NVIDIA/ngpt train.py's settings for nGPT
BASE = R.derive(R.TEXT, "the text recipe as it is, evaluated every 20 steps so that the curves "
                "resolve a speed-up of 4 (15 evaluations over 300 steps)", {
                    "eval_interval": 20})


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # both arms' runs; the baseline's model as it is (Pre-LN)
    lr_grid: tuple[float, ...] = (1e-2, 3e-2, 1e-1)  # the baseline's grid: every point runs
    baseline_lr: float = 3e-2  # the baseline's learning rate: the pilot's best of lr_grid
    ngpt_lr: float = 3e-2  # nGPT's learning rate: the pilot's best of its own grid (the notes)
    seeds: int = 3  # training seeds per arm (seed, seed + 1, ...): paired by seed
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {**R.tiny_model(embed_scale=True), "base.steps": 40, "base.warmup": 8,
             "base.eval_interval": 10, "base.batch_size": 8, "base.model.seq_len": 16,
             "seeds": 2},
    "quick": {},
    "full": {"seeds": 5},
}

# ---- the claim register (normlab.lab.register): every row judge can produce ----------------
_SEEDS = "seeds"
_SEEDS_FROM = ("a pilot at seeds 50000-50001 (2026-12-07, the notes): at the pilot's learning "
               "rates (3e-2 both) the speed-up was 0.678 / 0.681 (sd 0.002), 3.3 below the "
               "factor 4, so 3 seeds (quick) and 5 (full) resolve it by far")
_WHERE = ("arXiv 2410.01131, abstract and section 4.1 (Figures 1-2: 1k, 4k and 8k context); "
          "NVIDIA/ngpt README, 'Experiment Replication'")
_SOURCE = ("\"Experiments show that nGPT learns much faster, reducing the number of training "
           "steps required to achieve the same accuracy by a factor of 4 to 20, depending on "
           "the sequence length.\" (the official README: \"For 1k context length, the expected "
           "speedup is of a factor of 4 at about 200k iteration steps of training ... For "
           "shorter training runs, the expected speedup is smaller.\")")
_FAIR = ("\"For both GPT and nGPT, we report results using the best initial learning rate "
         "settings (see Appendix A.7).\"")
REGISTER = (
    Record(id="both-arms-train", kind=PREMISE,
           claim="Both arms train: each closes half the way from its loss at init to the "
                 "plateau (the better arm's mean final loss)",
           source="\"We train both the baseline Transformer (GPT) and the normalized "
                  "Transformer (nGPT) on the OpenWebText dataset\"",
           where="arXiv 2410.01131, section 3", form=THRESHOLD, margin=(HALF,), side="above",
           margin_source="the lab's half-way rule (warmup, residual-and-final-norm)",
           grid=("baseline_lr", "ngpt_lr"), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           registered="2026-12-07"),
    Record(id="baseline-lr-interior", kind=PREMISE,
           claim="The baseline's learning rate and its grid's best are at the grid's interior",
           source=_FAIR, where="arXiv 2410.01131, section 3 and Appendix A.7",
           grid=("lr_grid", "baseline_lr"), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           registered="2026-12-07"),
    Record(id="seeds-resolve-the-factor", kind=PREMISE,
           claim="This size's seed count resolves the counted row (its pilot's expected "
                 "interval clears the factor)",
           source="the lab's rule (issue 58, section 4): a seed count from a pilot at seeds "
                  "no verdict uses", where="normlab.lab.experiments._pilots",
           seeds=_SEEDS, seeds_from=_SEEDS_FROM, registered="2026-12-07"),
    Record(id="ngpt-speedup-at-least-4", kind=CLAIM,
           claim="nGPT reaches the baseline's final loss in at least 4x fewer steps",
           source=_SOURCE, where=_WHERE, form=THRESHOLD, margin=(FACTOR,), side="above",
           margin_source="the paper's smallest factor: 4x at 1k context (abstract's '4 to "
                         "20'; the official README's 'a factor of 4 at about 200k steps')",
           grid=("baseline_lr", "ngpt_lr"), seeds=_SEEDS, seeds_from=_SEEDS_FROM,
           premise=("both-arms-train", "baseline-lr-interior", "seeds-resolve-the-factor"),
           registered="2026-12-07"),
    Record(id="ngpt-speedup-above-1", kind=SHOWN,
           claim="The same speed-up against 1: whether nGPT is faster at all (context)",
           grid=("baseline_lr", "ngpt_lr"), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="final-loss-gap", kind=SHOWN,
           claim="loss(nGPT) - loss(baseline) at the end of the run (context)",
           grid=("baseline_lr", "ngpt_lr"), seeds=_SEEDS, registered="2026-12-07"),
    Record(id="baseline-lr-grid", kind=SHOWN,
           claim="The baseline's final loss over its learning-rate grid (context)",
           grid=("lr_grid",), seeds=_SEEDS, registered="2026-12-07"),
)
RECORDS = {r.id: r for r in REGISTER}
AMENDMENTS: tuple = ()

# The pilot of the counted row (the speed-up per seed) by the base's steps: the notes.
PILOTS: dict[int, P.Pilot] = {300: P.Pilot(0.6795, 0.0021, 2, "50000-50001")}

ARMS = ("baseline", "ngpt")


def _variant(arm: str, lr: float) -> str:
    """The data's key of an arm at a learning rate."""
    return f"{arm} lr={lr:g}"


def validate(cfg: Config) -> None:
    """The cross-field rules (the framework calls this before ``measure``)."""
    if cfg.base.model.placement != "pre" or cfg.base.model.norm == "none":
        raise ValueError("base: the baseline is Pre-LN with a norm (model.placement 'pre', "
                         "model.norm not 'none'); the nGPT arm sets its own")
    if len(cfg.lr_grid) < 3 or list(cfg.lr_grid) != sorted(set(cfg.lr_grid)):
        raise ValueError(f"lr_grid: at least three increasing learning rates, so that a best "
                         f"one can sit at the interior; got {cfg.lr_grid}")
    if cfg.baseline_lr not in cfg.lr_grid:
        raise ValueError(f"baseline_lr: one of lr_grid {cfg.lr_grid}; got {cfg.baseline_lr}")
    if not cfg.ngpt_lr > 0:
        raise ValueError(f"ngpt_lr: a learning rate > 0; got {cfg.ngpt_lr}")
    if cfg.seeds < 2:
        raise ValueError(f"seeds: at least 2 (an interval over paired seeds); got {cfg.seeds}")


def _points(cfg: Config, seeds: list[int]) -> list:
    """The two arms at their learning rates first, then the baseline's other grid points."""
    pts = [(_variant("baseline", cfg.baseline_lr), {"lr": cfg.baseline_lr, "seed": s},
            {"arm": "baseline"}) for s in seeds]
    pts += [(_variant("ngpt", cfg.ngpt_lr), {**_NGPT, "lr": cfg.ngpt_lr, "seed": s},
             {"arm": "ngpt"}) for s in seeds]
    pts += [(_variant("baseline", lr), {"lr": lr, "seed": s}, {"arm": "baseline"})
            for lr in cfg.lr_grid if lr != cfg.baseline_lr for s in seeds]
    return pts


def measure(config: Config, ctx) -> dict:
    """Per arm and seed: the loss at init, the evaluation curve and the final validation loss
    (a diverged run at its loss at init); the baseline's other grid points."""
    cfg = config
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    runs = run_points(cfg.base, _points(cfg, seeds), ctx, name="ngpt-speedup")
    require_finished(runs)
    arms: dict[str, Any] = {}
    for r in runs:
        a = arms.setdefault(r.variant, {"init": [], "final": [], "curve": [], "status": []})
        init = float(r.loss_at_init) if r.loss_at_init is not None else math.log(
            cfg.base.model.vocab_size)
        final = r.final_val_loss if r.status == "done" else None
        a["init"].append(init)
        a["final"].append(init if final is None else min(float(final), init))
        a["curve"].append([[int(e["step"]), float(e["val_loss"])] for e in r.evals
                           if e.get("val_loss") is not None and math.isfinite(e["val_loss"])])
        a["status"].append(r.status)
    return {"seeds": seeds, "baseline_lr": cfg.baseline_lr, "ngpt_lr": cfg.ngpt_lr,
            "lr_grid": list(cfg.lr_grid), "arms": arms,
            "steps": cfg.base.steps}


# ---- the speed-up -------------------------------------------------------------------------
def steps_to(curve: list, target: float, loss0: float) -> float | None:
    """The first step at which an evaluation curve ``[[step, loss], ...]`` (starting from
    ``loss0`` at step 0) reaches ``target``, interpolated linearly between evaluations; None
    when it never does."""
    s0, v0 = 0.0, float(loss0)
    if v0 <= target:
        return 0.0
    for s, v in curve:
        if v <= target:
            return s0 + (s - s0) * (v0 - target) / (v0 - v)
        s0, v0 = float(s), float(v)
    return None


def speedup(base_curve: list, base0: float, ngpt_curve: list, ngpt0: float) -> float:
    """The paper's speed-up of one seed: the steps the baseline needs to reach its final loss
    over the steps nGPT needs to reach it. Where nGPT ends above the baseline the loss read is
    nGPT's final one (the one both curves reach), and the ratio is below 1."""
    if not base_curve or not ngpt_curve:
        raise ValueError("speedup: each curve needs at least one evaluation")
    target = max(base_curve[-1][1], ngpt_curve[-1][1])  # the loss both curves reach
    tb, tn = steps_to(base_curve, target, base0), steps_to(ngpt_curve, target, ngpt0)
    assert tb is not None and tn is not None  # each curve reaches its own final loss
    return float(tb) / max(float(tn), 1e-9)


def speedups(data: dict) -> np.ndarray:
    """The speed-up per seed, the arms paired by seed."""
    b = data["arms"][_variant("baseline", data["baseline_lr"])]
    n = data["arms"][_variant("ngpt", data["ngpt_lr"])]
    return np.array([speedup(cb, ib, cn, i_n) for cb, ib, cn, i_n in
                     zip(b["curve"], b["init"], n["curve"], n["init"])])


# ---- the rows ----------------------------------------------------------------------------------
def _two(data: dict) -> tuple[dict, dict]:
    return (data["arms"][_variant("baseline", data["baseline_lr"])],
            data["arms"][_variant("ngpt", data["ngpt_lr"])])


def _train_premise(data: dict) -> Check:
    """Per seed, the smaller share of the way from its loss at init to the plateau (the better
    arm's mean final loss) that the two arms close."""
    rec = RECORDS["both-arms-train"]
    arms = _two(data)
    plateau = min(float(np.mean(a["final"])) for a in arms)
    shares = [(np.asarray(a["init"]) - np.asarray(a["final"])) / (np.asarray(a["init"])
                                                                  - plateau) for a in arms]
    iv = S.mean_interval(np.minimum(*shares))
    return Check.decided(
        id=rec.id, claim=rec.claim, published="-", interval=iv, threshold=rec.margin[0],
        side=rec.side, kind=PREMISE,
        measured=f"the lesser arm's share of the way to the plateau {fmt(plateau)}: {iv.text()}",
        rule=f"interval > {rec.margin[0]:g}: both arms train (a speed-up between a trained arm "
             f"and a stalled one says nothing)", source="normlab [D]",
        margin_source=rec.margin_source)


def _grid_means(data: dict) -> dict[float, float]:
    return {lr: float(np.mean(data["arms"][_variant("baseline", lr)]["final"]))
            for lr in data["lr_grid"]}


def _lr_premise(data: dict) -> Check:
    rec = RECORDS["baseline-lr-interior"]
    means = _grid_means(data)
    best = min(means, key=lambda lr: means[lr])
    grid = sorted(means)
    lr = data["baseline_lr"]
    ok = grid[0] < best < grid[-1] and grid[0] < lr < grid[-1]
    return Check(id=rec.id, claim=rec.claim, published="the best initial learning rate (A.7)",
                 measured=f"best of the grid: lr {best:g} (mean final loss {fmt(means[best])}); "
                          f"the baseline runs at {lr:g} ({fmt(means[lr])})",
                 rule="holds when the grid's best lr (lowest mean final loss over seeds) and the "
                      "baseline's lr are both inside the grid (neither end)", passed=ok,
                 kind=PREMISE, source="normlab [D]")


def _seeds_premise(data: dict) -> Check | None:
    pilot = PILOTS.get(int(data["steps"]))
    if pilot is None:
        return None
    return P.premise(pilot, len(data["seeds"]), FACTOR, "the speed-up",
                     id="seeds-resolve-the-factor", source="normlab [D]")


def _speedup_rows(data: dict, decided: bool) -> list[Check]:
    rec = RECORDS["ngpt-speedup-at-least-4"]
    x = speedups(data)
    iv = S.mean_interval(x)
    per = ", ".join(f"{v:.2f}" for v in x)
    at = f"baseline lr {data['baseline_lr']:g}, nGPT lr {data['ngpt_lr']:g}"
    counted = Check.decided(
        id=rec.id, claim=rec.claim, published="4x (1k context) to 20x (8k context)",
        interval=iv, threshold=rec.margin[0], side=rec.side,
        measured=f"speed-up {iv.text()} (per seed {per}; {at})",
        rule=f"threshold: the {iv.method} interval of the speed-up over paired seeds > "
             f"{rec.margin[0]:g}", source="arXiv 2410.01131, abstract, section 4.1 [V]",
        margin_source=rec.margin_source)
    if not decided:
        counted = Check(id=rec.id, claim=rec.claim, published=counted.published,
                        measured=f"not judged: a premise did not hold ({counted.measured})",
                        rule=counted.rule, passed=None, kind=CLAIM, source=counted.source)
    above = "the whole interval above 1" if iv.lo > 1 else (
        "the whole interval below 1" if iv.hi < 1 else "the interval straddles 1")
    shown = Check(id="ngpt-speedup-above-1", claim=RECORDS["ngpt-speedup-above-1"].claim,
                  published="-", measured=f"speed-up {iv.text()}: {above}",
                  rule="shown: the counted row's interval against 1", passed=None, kind=SHOWN,
                  source="normlab [D]")
    b, n = _two(data)
    gap = S.paired_interval(n["final"], b["final"])
    loss = Check(id="final-loss-gap", claim=RECORDS["final-loss-gap"].claim, published="-",
                 measured=f"{gap.text()} nats (baseline {fmt(float(np.mean(b['final'])))}, nGPT "
                          f"{fmt(float(np.mean(n['final'])))})",
                 rule="shown: the paired interval over seeds", passed=None, kind=SHOWN,
                 source="normlab [D]")
    return [counted, shown, loss]


def judge(data: dict, config: Config) -> list[Check]:
    premises = [_train_premise(data)]
    if data.get("lr_grid"):
        premises.append(_lr_premise(data))
    seeds = _seeds_premise(data)
    if seeds is not None:
        premises.append(seeds)
    rows = premises + _speedup_rows(data, all(p.passed is True for p in premises))
    if data.get("lr_grid"):
        means = _grid_means(data)
        rows.append(Check(id="baseline-lr-grid", claim=RECORDS["baseline-lr-grid"].claim,
                          published="-", measured=", ".join(f"lr {lr:g}: {fmt(v)}"
                                                            for lr, v in means.items()),
                          rule="shown: mean final validation loss over seeds", passed=None,
                          kind=SHOWN, source="normlab [D]"))
    return rows


def headline(data: dict, config: Config) -> str:
    b, n = _two(data)
    x = speedups(data)
    return (f"pydoc characters, {data['steps']} steps: baseline (Pre-LN, lr "
            f"{data['baseline_lr']:g}) {fmt(float(np.mean(b['final'])))}, nGPT (lr "
            f"{data['ngpt_lr']:g}) {fmt(float(np.mean(n['final'])))}; speed-up "
            f"{fmt(float(np.mean(x)))} (mean over {len(x)} seeds; the paper's smallest: 4)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, axes = figure(2)
    a, b = axes
    for arm, color in (("baseline", COLORS["pre"]), ("ngpt", "#cc6600")):
        v = _variant(arm, d[f"{arm}_lr"])
        for i, curve in enumerate(d["arms"][v]["curve"]):
            xs, ys = zip(*curve) if curve else ((), ())
            a.plot(xs, ys, color=color, lw=0.9, alpha=0.8, label=v if i == 0 else None)
    style(a, "validation loss per seed", "step", "validation loss (nats/token)")
    a.legend(fontsize=6)
    x = speedups(d)
    b.scatter(range(len(x)), x, color="#cc6600", s=18)
    b.axhline(FACTOR, color="k", ls="--", lw=0.9, label=f"the paper's smallest ({FACTOR:g}x)")
    b.axhline(1.0, color="#999999", ls=":", lw=0.9, label="no speed-up")
    b.set_yscale("log")
    b.legend(fontsize=6)
    style(b, "speed-up per seed", "seed (index)", "steps(baseline) / steps(nGPT)")
    return [save(fig, out_dir, "ngpt_speedup.png")]
