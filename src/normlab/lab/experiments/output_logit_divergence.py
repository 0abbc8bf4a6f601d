"""``output-logit-divergence``: without weight decay, at a high learning rate, the output logits
drift (log Z moves far from 0) and the loss degrades late in training; a z-loss of 1e-4 log^2 Z
holds log Z near 0 (Wortsman et al. 2023, section 3.1.2), and a final-logit soft-cap of 30
bounds the logits (Gemma 2).

normlab's GPT with QK-norm (so that the attention logits, the other instability, stay bounded)
on a character corpus, weight decay 0, at high learning rates, four arms: no fix, z-loss 1e-4,
final soft-cap 30, and weight decay 0.1 (which Wortsman et al. found also prevents the drift in
their larger models). Every run goes through the sweep API (``_training.run_grid``); the trainer
records the mean log Z of the output softmax at every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...models import GPTConfig
from ...train import TrainConfig
from ..framework import Card, Check, fmt
from . import _training as T

CARD = Card(
    name="output-logit-divergence",
    title="Output-logit divergence without weight decay: z-loss and final-logit soft-capping",
    citation="Wortsman et al. 2023, 'Small-scale proxies for large-scale Transformer training "
             "instabilities', section 3.1.2 and Fig. 4; Gemma Team 2024 (Gemma 2), final soft-cap "
             "30; PaLM (Chowdhery et al. 2022) for the z-loss",
    claim="Without weight decay, at a high learning rate, the output logits drift (log Z far from "
          "0) and the loss degrades late in training; a z-loss of 1e-4 keeps log Z near 0 and "
          "prevents it, as does a final-logit soft-cap of 30.",
    published="2.4M-parameter model at LR 0.1 without weight decay: logits drift very negative "
              "and the loss diverges late in training; z-loss 1e-4 fixes it (Wortsman Fig. 4)",
    method="normlab GPT with QK-norm (LayerNorm), Pre-LN; AdamW (0.9, 0.95), clip 1, warmup 5% "
           "then cosine to min_lr (`base`; base.lr is the learning rate the counted checks "
           "read); four arms (no fix, z-loss, soft-cap, weight decay) x `lrs` x `seeds` through "
           "the sweep API.",
    explanation="The softmax is unchanged when every logit moves by the same amount, so nothing "
                "in the cross-entropy pins the logits' level: log Z = log sum exp z is free to "
                "wander. Adam's per-coordinate normalization lets the logits of rarely seen "
                "tokens fall at about the learning rate per step, and without weight decay "
                "nothing pulls the weights back. The z-loss (log Z)^2 adds the missing restoring "
                "force towards log Z = 0; a soft-cap instead bounds every logit.",
)

ARMS = ("no fix", "z-loss", "soft-cap", "weight decay")

BASE = TrainConfig(  # QK-norm on in every arm; pydoc characters: a vocabulary with rare symbols
    model=GPTConfig(vocab_size=16, seq_len=32, n_layers=2, d_model=32, n_heads=2,
                    qk_norm="layernorm"),
    data="pydoc", lr=0.1, min_lr=1e-5, warmup=75, schedule="cosine", steps=1500,
    batch_size=16, eval_interval=150)


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer; base.lr: the LR the
    #                           counted checks read (Wortsman Fig. 4: 0.1), one of lrs
    lrs: tuple[float, ...] = (0.1, 0.3)  # peak learning rates (the paper's case: 0.1)
    z_loss: float = 1e-4  # the z-loss arm's weight of mean (log Z)^2 (Wortsman et al., PaLM)
    final_softcap: float = 30.0  # the soft-cap arm's cap on the output logits (Gemma 2)
    weight_decay: float = 0.1  # the weight-decay arm's AdamW decay (the other arms: 0)
    seeds: int = 1  # training seeds per point
    seed: int = 0  # the first training seed


SIZES = {
    "tiny": {"lrs": (0.3,), "base.lr": 0.3, "base.data": "markov", "base.steps": 60,
             "base.warmup": 3, "base.eval_interval": 6, "base.batch_size": 4,
             "base.model.d_model": 16, "base.model.n_heads": 1, "base.model.n_layers": 1,
             "base.model.seq_len": 16},
    "quick": {},
    "full": {"lrs": (0.03, 0.1, 0.3), "seeds": 2, "base.steps": 6000, "base.warmup": 300,
             "base.eval_interval": 600, "base.model.seq_len": 64},
}


def _variants(cfg: Config) -> dict[str, dict]:
    return {"no fix": {"weight_decay": 0.0},
            "z-loss": {"weight_decay": 0.0, "model.z_loss": cfg.z_loss},
            "soft-cap": {"weight_decay": 0.0, "model.final_softcap": cfg.final_softcap},
            "weight decay": {"weight_decay": cfg.weight_decay}}


SERIES = {"log_z": lambda rec: rec["log_z"], "nll": lambda rec: rec["nll"],
          "neg_log_z": lambda rec: -rec["log_z"]}


def _mean(vals) -> float | None:
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def _final_log_z(r: T.Run) -> float | None:
    """Mean log Z over the last 5% of the run's sampled steps (one step is noisy)."""
    z = [v for v in r.curves.get("log_z", []) if v is not None]
    if not z:
        return None
    k = max(1, len(z) // 20)
    return float(np.mean(z[-k:]))


def measure(config: Config, ctx) -> dict:
    cfg, main_lr = config, config.base.lr
    if main_lr not in cfg.lrs:
        raise ValueError(f"base.lr ({main_lr}) must be one of lrs {cfg.lrs}")
    runs = T.run_grid(cfg.base, _variants(cfg), ctx, lrs=cfg.lrs,
                      seeds=[cfg.seed + i for i in range(cfg.seeds)], series=SERIES, name="arms")
    T.require_finished(runs)
    per = {}
    for arm in ARMS:
        rs = [r for r in runs if r.variant == arm]
        per[arm] = {
            "lrs": list(cfg.lrs),
            "loss": [_mean(r.final_val_loss for r in rs if r.lr == lr) for lr in cfg.lrs],
            "log_z": [_mean(_final_log_z(r) for r in rs if r.lr == lr) for lr in cfg.lrs],
            # the largest |log Z| reached at any step (min and max of the per-step mean log Z)
            "log_z_max": [_mean(r.peaks.get("log_z") for r in rs if r.lr == lr)
                          for lr in cfg.lrs],
            "log_z_min": [_mean(-(r.peaks.get("neg_log_z") or math.nan) for r in rs
                                if r.lr == lr) for lr in cfg.lrs],
            "stopped": [sum(r.status != "done" for r in rs if r.lr == lr) for lr in cfg.lrs],
        }
    return {"per": per, "runs": T.as_data(runs), "lrs": list(cfg.lrs), "main_lr": main_lr,
            "floor": next((r.entropy_floor for r in runs if r.entropy_floor is not None), None),
            "loss0": _mean(r.loss_at_init for r in runs),
            "log_z0": _mean(r.curves["log_z"][0] for r in runs if r.curves.get("log_z"))}


def _at(data: dict, arm: str, key: str) -> float:
    """An arm's value at the main learning rate (nan when no run reached it)."""
    v = data["per"][arm][key][data["lrs"].index(data["main_lr"])]
    return math.nan if v is None else v


def judge(data: dict, config: Config) -> list[Check]:
    def at(arm, key):
        return _at(data, arm, key)

    z_fix, z_none = abs(at("z-loss", "log_z")), abs(at("no fix", "log_z"))
    l_none, l_z, l_cap = at("no fix", "loss"), at("z-loss", "loss"), at("soft-cap", "loss")
    lr_text = f"LR {data['main_lr']:g}"
    checks = [
        Check(f"with z-loss {config.z_loss:g}, log Z stays near 0",
              "log Z held near 0 by z-loss 1e-4 (Wortsman Fig. 4); papers.md D: final |log Z| < 1",
              f"{lr_text}: final |log Z| {fmt(z_fix)} with z-loss (at init "
              f"{fmt(data['log_z0'] or math.nan)}, about ln V)",
              "|log Z| < 1 at the end (mean of the last 5% of the sampled steps)", z_fix < 1,
              "Wortsman et al. 2023 [V]; papers.md section 7 D"),
        Check("without weight decay or z-loss, log Z drifts far from 0",
              "the output logits drift very negative late in training without weight decay (2.4M "
              "model, LR 0.1); papers.md D: |log Z| >= 10 x the z-loss arm's",
              f"{lr_text}: final |log Z| {fmt(z_none)} without, {fmt(z_fix)} with z-loss "
              f"(x{fmt(z_none / z_fix if z_fix > 0 else math.inf)}); per-step range without: "
              f"{fmt(at('no fix', 'log_z_min'))} to {fmt(at('no fix', 'log_z_max'))}",
              "|log Z| without >= 10 x |log Z| with z-loss", z_none >= 10 * z_fix,
              "Wortsman et al. 2023, section 3.1.2 [V]"),
        Check("z-loss does not cost loss (and saves it when the logits diverge)",
              "papers.md D: final loss with z-loss <= without",
              f"{lr_text}: final validation loss {fmt(l_z, 4)} with z-loss, {fmt(l_none, 4)} "
              f"without", "loss(z-loss) <= loss(no fix)", l_z <= l_none,
              "Wortsman et al. 2023 [V]; papers.md section 7 D"),
        Check(f"a final-logit soft-cap of {config.final_softcap:g} prevents the divergence as well",
              "Gemma 2 caps the output logits at 30 (a design choice; no ablation published)",
              f"{lr_text}: final validation loss {fmt(l_cap, 4)} with the cap, {fmt(l_none, 4)} "
              f"without; final log Z {fmt(at('soft-cap', 'log_z'))}",
              "loss(soft-cap) <= loss(no fix), the rule papers.md sets for z-loss",
              l_cap <= l_none, "Gemma Team 2024 [V]",
              note="the cap bounds every logit by 30, so log Z <= 30 + ln V: it cannot drift "
                   "without bound, but it is not pulled to 0 either"),
        Check("weight decay also prevents the drift",
              "weight decay also fixes it for the larger models (Wortsman section 3.1.2)",
              f"{lr_text}: final |log Z| {fmt(abs(at('weight decay', 'log_z')))}, loss "
              f"{fmt(at('weight decay', 'loss'), 4)} with weight decay {config.weight_decay:g}",
              "shown, not counted (a reference arm)", None, "Wortsman et al. 2023 [V]"),
    ]
    return checks + _other_lrs(data)


def _other_lrs(data: dict) -> list[Check]:
    """A shown row with every arm at the learning rates other than the main one."""
    per, lrs = data["per"], data["lrs"]
    if all(lr == data["main_lr"] for lr in lrs):
        return []
    return [Check(
        "the same at the other learning rates", "-",
        "; ".join(f"LR {lr:g}: " + ", ".join(
            f"{a} loss {fmt(per[a]['loss'][j] or math.nan, 4)} log Z "
            f"{fmt(per[a]['log_z'][j] or math.nan)}" for a in ARMS)
            for j, lr in enumerate(lrs) if lr != data["main_lr"]),
        "shown, not counted", None, "-")]


def headline(data: dict, config: Config) -> str:
    def at(arm, key):
        return fmt(_at(data, arm, key), 4 if key == "loss" else 3)

    return (f"LR {data['main_lr']:g}: final log Z no fix {at('no fix', 'log_z')}, z-loss "
            f"{at('z-loss', 'log_z')}, soft-cap {at('soft-cap', 'log_z')}, weight "
            f"decay {at('weight decay', 'log_z')}; final loss {at('no fix', 'loss')} / "
            f"{at('z-loss', 'loss')} / {at('soft-cap', 'loss')} / {at('weight decay', 'loss')}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    colors = {"no fix": "#d62728", "z-loss": "#1f77b4", "soft-cap": "#2ca02c",
              "weight decay": "#7f7f7f"}
    fig, (a, b, c) = figure(3, 1, width=4.4, height=3.4)
    main = d["main_lr"]
    first = d["runs"][0]["seed"] if d["runs"] else 0
    for r in d["runs"]:
        if r["lr"] != main or r["seed"] != first or not r["steps"]:
            continue
        col = colors[r["variant"]]
        a.plot(r["steps"], [np.nan if v is None else v for v in r["curves"]["log_z"]], color=col,
               label=r["variant"])
        ev = r["evals"]
        b.plot([e["step"] for e in ev], [e["val_loss"] for e in ev], "o-", ms=3, color=col,
               label=r["variant"])
    a.axhline(0, color="k", lw=0.8, ls=":")
    style(a, f"mean log Z of the output softmax, LR {main:g}", "step", "log Z")
    if d["floor"] is not None:
        b.axhline(d["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    style(b, f"validation loss, LR {main:g}", "step", "nats/token")
    lrs = d["lrs"]
    for arm, p in d["per"].items():
        c.plot(lrs, [np.nan if v is None else v for v in p["loss"]], "o-", color=colors[arm],
               label=arm)
    c.set_xscale("log")
    style(c, "final validation loss vs learning rate", "peak learning rate", "nats/token")
    return [save(fig, out_dir, "output_logit_divergence.png")]
