"""``dyt``: Zhu et al. 2025, "Transformers without Normalization": Dynamic Tanh,
DyT(x) = gamma * tanh(alpha x) + beta, in place of every norm of a Pre-LN model.

Three parts, the first two a sweep of training runs of normlab's GPT on the characters of
``pydoc_data.topics`` (English prose, offline), every run with the same hyperparameters:

1. parity: Pre-LN with LayerNorm, RMSNorm and DyT (alpha0 = 0.5, the paper's default), over seeds;
2. alpha0 sensitivity: DyT with alpha0 in a grid (one seed);
3. the S-curve that motivates DyT: in the trained LayerNorm model (the parity run with the first
   seed, retrained here in-process, bit-identical), every LayerNorm's input x against its
   pre-affine output (x - mean) / std, over all tokens of a validation batch, fitted by
   y = a tanh(b x) and by y = c x.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ...models import GPTConfig
from ...train import TrainConfig, Trainer
from ..framework import Card, Check, fmt
from ._training import require_finished, run_grid

CARD = Card(
    name="dyt",
    title="DyT vs LayerNorm and RMSNorm: parity, alpha0, the S-curve (Zhu et al. 2025)",
    citation="Zhu, Chen, He, LeCun & Liu 2025, 'Transformers without Normalization' (DyT), "
             "CVPR 2025",
    claim="DyT(x) = gamma tanh(alpha x) + beta replaces every LayerNorm or RMSNorm with no loss "
          "of quality at the same hyperparameters (alpha0 = 0.5; LLMs need a tuned, smaller "
          "alpha0), because trained LayerNorms act as S-shaped squashing maps.",
    published="ImageNet top-1 LN vs DyT: ViT-B 82.3 vs 82.5, ViT-L 83.1 vs 83.6; LLaMA 7B-70B "
              "loss parity with RMSNorm (tuned alpha0); S-shaped LN maps in ViT, wav2vec 2.0, DiT",
    method="normlab GPT, Pre-LN, on the characters of pydoc_data.topics, every run with the "
           "`base` recipe (AdamW, warmup then cosine); parity of the three norms over `seeds`, "
           "DyT's alpha0 over `alphas` (one seed); the S-curve fitted on `fit_tokens` "
           "validation tokens of the retrained LayerNorm model.",
    explanation="A LayerNorm is linear per token, but tokens with large activations get a small "
                "slope 1/std, so over all tokens the input-output cloud bends like tanh: the big "
                "values are squashed. DyT keeps only that squashing, with one learned scale "
                "alpha, and no statistics over the channels. What DyT loses is LayerNorm's "
                "invariance to the input's scale: its inputs must stay in a range where "
                "tanh(alpha x) neither saturates nor stays tiny, which is why alpha0 and the "
                "scale of the activations matter.",
)

NORMS = ("layernorm", "rmsnorm", "dyt")
PARITY_TOL = 0.03  # nats: papers.md section 10 (or within the 2-sigma seed spread)
S_CURVE_GAIN = 0.01  # R^2_tanh - R^2_linear: > this in the deepest LN, below it in the first

BASE = TrainConfig(  # Pre-LN, Xavier-like init N(0, 1/d); AdamW (0.9, 0.95), wd 0.1, clip 1.0
    model=GPTConfig(vocab_size=64, seq_len=32, n_layers=4, d_model=32, n_heads=4,
                    placement="pre", init_std=32**-0.5),
    data="pydoc", steps=400, batch_size=16, lr=1e-2, warmup=40, eval_interval=100,
    eval_batches=4)


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (the norm and seed vary)
    seeds: int = 3  # training seeds of the parity runs (seed, seed + 1, ...)
    alphas: tuple[float, ...] = (0.05, 0.2, 0.5, 1.0, 2.0)  # DyT's alpha0 grid (first seed)
    fit_tokens: int = 512  # validation tokens whose LayerNorm inputs the S-curve fits use
    seed: int = 0  # first training seed


SIZES = {
    "tiny": {"seeds": 2, "alphas": (0.5, 2.0), "fit_tokens": 128, "base.steps": 40,
             "base.warmup": 4, "base.eval_interval": 10, "base.batch_size": 8,
             "base.model.n_layers": 2, "base.model.d_model": 16, "base.model.n_heads": 2,
             "base.model.seq_len": 16, "base.model.init_std": 16**-0.5},
    "quick": {},
    "full": {"seeds": 5, "fit_tokens": 2048, "base.steps": 2000, "base.warmup": 200,
             "base.eval_interval": 500, "base.model.n_layers": 6, "base.model.d_model": 64,
             "base.model.init_std": 64**-0.5},
}


def _parity_variant(norm: str) -> dict:
    return {"model.norm": norm}


def _alpha_name(a: float) -> str:
    return f"dyt a0={a:g}"


# ---- the S-curve -----------------------------------------------------------------------------
def fit_tanh_vs_linear(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Least-squares fits of y = c x and y = a tanh(b x) (b on a log grid, a in closed form)
    to the points (x, y); their R^2 (about the mean of y), b, and the fraction of points in the
    near-linear range |b x| < 1 of the tanh fit. x, y: (N,)."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    sst = float(np.sum((y - y.mean()) ** 2))
    c = float(np.dot(x, y) / np.dot(x, x))
    r2_lin = 1.0 - float(np.sum((y - c * x) ** 2)) / sst
    best = (-math.inf, 0.0, 0.0)
    for b in np.geomspace(1e-3, 1e2, 161) / x.std():  # b -> 0 is the linear fit
        t = np.tanh(b * x)
        a = float(np.dot(t, y) / np.dot(t, t))
        r2 = 1.0 - float(np.sum((y - a * t) ** 2)) / sst
        if r2 > best[0]:
            best = (r2, a, float(b))
    r2_tanh, a, b = best
    return {"r2_linear": r2_lin, "r2_tanh": r2_tanh, "gain": r2_tanh - r2_lin, "a": a, "b": b,
            "c": c, "linear_fraction": float(np.mean(np.abs(b * x) < 1.0))}


def layernorm_inputs(model, idx: np.ndarray) -> list[np.ndarray]:
    """The input of every norm of a Pre-LN model on the tokens ``idx`` (B, T), in forward order
    (block 1 attention, block 1 MLP, ..., the final norm): each (B, T, C)."""
    T = idx.shape[1]
    x = model.wte(idx)  # (B, T, C)
    if hasattr(model, "wpe"):
        x = x + model.wpe(np.arange(T))
    out = []
    for blk in model.blocks:
        out.append(x)
        x = blk.attn(x)
        out.append(x)
        x = blk.mlp(x)
    out.append(x)
    return out


def _s_curve(config: TrainConfig, cfg: Config) -> tuple[float, list[dict], dict]:
    """Train the LayerNorm model in-process and fit every LayerNorm's input-output map."""
    trainer = Trainer(config)
    trainer.run()
    model = trainer.model
    model.eval()
    xs, n = [], 0
    for x, _ in trainer.val:
        xs.append(x)
        n += x.size
        if n >= cfg.fit_tokens:
            break
    idx = np.concatenate(xs)[: max(cfg.fit_tokens // config.model.seq_len, 1)]  # (B, T)
    fits, scatter = [], {}
    ins = layernorm_inputs(model, idx)
    rng = np.random.default_rng(cfg.seed)
    for i, h in enumerate(ins):
        h = h.reshape(-1, h.shape[-1]).astype(np.float64)  # (tokens, C)
        mu = h.mean(axis=-1, keepdims=True)
        y = (h - mu) / np.sqrt(h.var(axis=-1, keepdims=True) + config.model.norm_eps)
        f = fit_tanh_vs_linear(h, y)
        f["std_min"], f["std_max"] = float(h.std(axis=-1).min()), float(h.std(axis=-1).max())
        fits.append(f)
        if i in (0, len(ins) - 1):  # points for the figure: the first and the deepest
            pick = rng.choice(h.size, size=min(h.size, 1500), replace=False)
            scatter["first" if i == 0 else "deepest"] = {"x": h.ravel()[pick], "y": y.ravel()[pick]}
    return trainer.evals[-1]["val_loss"], fits, scatter


# ---- the experiment --------------------------------------------------------------------------
def _parity(a: list[float], b: list[float]) -> tuple[float, float, bool]:
    """Difference of means, its standard error, and the rule |d| <= max(0.03, 2 se)."""
    a_, b_ = np.asarray(a), np.asarray(b)
    d = float(a_.mean() - b_.mean())
    se = float(np.sqrt((a_.var(ddof=1) if a_.size > 1 else 0.0) / a_.size
                       + (b_.var(ddof=1) if b_.size > 1 else 0.0) / b_.size))
    return d, se, abs(d) <= max(PARITY_TOL, 2 * se)


def measure(config: Config, ctx) -> dict:
    cfg, lr = config, config.base.lr
    seeds = [cfg.seed + i for i in range(cfg.seeds)]
    other = [a for a in cfg.alphas if a != 0.5]
    total = len(NORMS) * len(seeds) + len(other) + 1

    def at(offset):  # the context with this part's progress shifted into the whole
        return dataclasses.replace(ctx, progress=lambda done, _t, note="": ctx.progress(
            offset + done, total, note))

    parity = run_grid(cfg.base, {n: _parity_variant(n) for n in NORMS}, at(0), lrs=[lr],
                      seeds=seeds, name="dyt-parity")
    sweep = run_grid(cfg.base, {_alpha_name(a): {"model.norm": "dyt", "model.dyt_alpha": float(a)}
                                for a in other}, at(len(NORMS) * len(seeds)), lrs=[lr],
                     seeds=seeds[:1], name="dyt-alpha") if other else []
    require_finished(parity + sweep)
    losses = {n: [_final(r) for r in parity if r.variant == n] for n in NORMS}
    alpha_loss = {a: _final(next(r for r in sweep if r.variant == _alpha_name(a))) for a in other}
    if 0.5 in cfg.alphas:
        alpha_loss[0.5] = _final(next(r for r in parity
                                      if r.variant == "dyt" and r.seed == seeds[0]))
    alphas = sorted(alpha_loss)
    ctx.progress(total - 1, total, "S-curve: training the LayerNorm model in-process")
    ln_config = cfg.base.with_overrides({**_parity_variant("layernorm"), "lr": lr,
                                         "seed": seeds[0]})
    ln_again, fits, scatter = _s_curve(ln_config, cfg)
    ctx.progress(total, total, "done")
    ln_sweep = next(r for r in parity if r.variant == "layernorm" and r.seed == seeds[0])
    sd = {n: float(np.std(losses[n], ddof=1)) if len(seeds) > 1 else 0.0 for n in NORMS}
    return {"norms": list(NORMS), "losses": losses,
            "mean": {n: float(np.mean(losses[n])) for n in NORMS}, "sd": sd,
            "alphas": alphas, "alpha_loss": [alpha_loss[a] for a in alphas],
            "fits": fits, "scatter": scatter, "s_curve_loss": [ln_again, ln_sweep.final_val_loss],
            "curves": {n: [{"step": e["step"], "val_loss": e["val_loss"]} for e in r.evals]
                       for n in NORMS for r in parity if r.variant == n and r.seed == seeds[0]}}


def _final(r) -> float:
    """A run's final validation loss; its loss at init when it diverged or did not finish."""
    v = r.final_val_loss if r.status == "done" and r.final_val_loss is not None else None
    return r.loss_at_init if v is None else v


def judge(data: dict, config: Config) -> list[Check]:
    losses, mean, sd, k = data["losses"], data["mean"], data["sd"], config.seeds
    alpha_loss = dict(zip(data["alphas"], data["alpha_loss"]))
    d_ln, se_ln, ok_ln = _parity(losses["dyt"], losses["layernorm"])
    d_rms, se_rms, ok_rms = _parity(losses["dyt"], losses["rmsnorm"])
    best_a = min(data["alphas"], key=lambda a: alpha_loss[a])
    d_best = alpha_loss[best_a] - mean["layernorm"]
    first, deep = data["fits"][0], data["fits"][-1]
    return [
        Check("DyT (alpha0 = 0.5) matches LayerNorm with the same hyperparameters",
              "ViT-B 82.3 (LN) vs 82.5 (DyT); LLaMA loss curves match",
              f"DyT {fmt(mean['dyt'])} +- {sd['dyt']:.3f}, LN {fmt(mean['layernorm'])} +- "
              f"{sd['layernorm']:.3f} ({k} seeds): difference {d_ln:+.3f} (s.e. {se_ln:.3f})",
              f"|difference| <= max({PARITY_TOL}, 2 s.e.) (papers.md section 10)", ok_ln,
              "Zhu et al. 2025, Tables 1-7 [V]"),
        Check("DyT (alpha0 = 0.5) matches RMSNorm", "LLaMA 7B-70B: DyT matches RMSNorm's loss",
              f"DyT {fmt(mean['dyt'])}, RMSNorm {fmt(mean['rmsnorm'])} +- {sd['rmsnorm']:.3f}: "
              f"difference {d_rms:+.3f} (s.e. {se_rms:.3f})",
              f"|difference| <= max({PARITY_TOL}, 2 s.e.)", ok_rms, "Zhu et al. 2025 [S]"),
        Check("With alpha0 tuned, DyT matches LayerNorm (as for the LLaMA models)",
              "LLaMA needs alpha0 0.05-0.8 by model size and position, then matches",
              f"best alpha0 = {best_a:g}: {fmt(alpha_loss[best_a])} (seed {config.seed}) vs LN "
              f"{fmt(mean['layernorm'])}: {d_best:+.3f}",
              f"best alpha0's loss - LN's mean <= max({PARITY_TOL}, 2 sd(LN))",
              d_best <= max(PARITY_TOL, 2 * sd["layernorm"]), "Zhu et al. 2025, LLaMA README [V]"),
        Check("A trained LayerNorm maps input to output in an S-shape, tanh-like in deep layers "
              "and linear in the first",
              "S-shaped curves in deeper LN layers, linear in early ones; ~99% of points in the "
              "near-linear range (ViT, wav2vec 2.0, DiT)",
              f"R^2_tanh - R^2_linear = {deep['gain']:.4f} in the deepest LN (R^2 "
              f"{deep['r2_linear']:.3f} -> {deep['r2_tanh']:.3f}), {first['gain']:.4f} in the "
              f"first; {100 * deep['linear_fraction']:.1f}% of the deepest LN's points in |bx| < 1",
              f"gain > {S_CURVE_GAIN} in the deepest LN and < {S_CURVE_GAIN} in the first "
              "(papers.md section 10)",
              deep["gain"] > S_CURVE_GAIN and first["gain"] < S_CURVE_GAIN,
              "Zhu et al. 2025, Fig. 2-4 [S]",
              note="the LayerNorm model retrained in-process ends at "
                   f"{data['s_curve_loss'][0]:.6f}, the sweep's run at "
                   f"{data['s_curve_loss'][1]:.6f}"),
        Check("Sensitivity to alpha0 (too large an alpha0 hurts, more so in larger models)",
              "LLaMA 7B: alpha0 0.8 / 0.2 / 0.2 (attention / FFN / final); 70B: 0.2 / 0.05",
              ", ".join(f"{a:g}: {fmt(alpha_loss[a])}" for a in data["alphas"])
              + f" (spread {max(alpha_loss.values()) - min(alpha_loss.values()):.3f} nats)",
              "shown (papers.md: a qualitative match)", None, "Zhu et al. 2025 [V]"),
    ]


def headline(data: dict, config: Config) -> str:
    mean, first, deep = data["mean"], data["fits"][0], data["fits"][-1]
    best_a = data["alphas"][int(np.argmin(data["alpha_loss"]))]
    d_ln = _parity(data["losses"]["dyt"], data["losses"]["layernorm"])[0]
    return (f"final loss LN {fmt(mean['layernorm'])}, RMSNorm {fmt(mean['rmsnorm'])}, DyT "
            f"{fmt(mean['dyt'])} (DyT - LN {d_ln:+.3f}); best alpha0 {best_a:g}; S-curve "
            f"gain {deep['gain']:.3f} deepest vs {first['gain']:.3f} first")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, (a, b, c) = figure(3)
    for n in d["norms"]:
        ev = d["curves"][n]
        a.plot([e["step"] for e in ev], [e["val_loss"] for e in ev], marker="o", ms=4,
               color=COLORS[n], label=f"{n} ({d['mean'][n]:.3f})")
    style(a, "validation loss (first seed; legend: mean over seeds)", "step",
          "validation NLL (nats/char)")
    b.plot(d["alphas"], d["alpha_loss"], marker="o", color=COLORS["dyt"], label="DyT")
    b.axhline(d["mean"]["layernorm"], color=COLORS["layernorm"], ls="--", lw=0.9,
              label="LayerNorm (mean)")
    b.set_xscale("log")
    b.set_xticks(d["alphas"])
    b.set_xticklabels([f"{x:g}" for x in d["alphas"]])
    b.minorticks_off()
    style(b, "DyT: final loss vs alpha0", "alpha0", "final validation loss")
    for key, col in (("first", "#aaaaaa"), ("deepest", COLORS["layernorm"])):
        s = d["scatter"].get(key)
        if s:
            c.scatter(s["x"], s["y"], s=2, alpha=0.4, color=col, label=f"{key} LayerNorm")
    deep = d["fits"][-1]
    xs = np.linspace(min(d["scatter"]["deepest"]["x"]), max(d["scatter"]["deepest"]["x"]), 200)
    c.plot(xs, deep["a"] * np.tanh(deep["b"] * xs), color="k", lw=1,
           label=f"a tanh(bx), R^2 {deep['r2_tanh']:.3f}")
    c.plot(xs, deep["c"] * xs, color="k", ls=":", lw=1, label=f"cx, R^2 {deep['r2_linear']:.3f}")
    c.set_ylim(-6, 6)
    style(c, "trained LayerNorm: input vs normalized output", "LN input x",
          "(x - mean) / std")
    return [save(fig, out_dir, "dyt.png")]
