"""``attention-logit-growth``: at high learning rates the attention logits grow without bound unless
q and k are normalized (Wortsman et al. 2023; Dehghani et al. 2023); soft-capping bounds them by
construction (Gemma 2).

A learning-rate sweep of normlab's GPT on the Markov source, three arms: the baseline (Pre-LN, no
QK-norm), QK-norm (LayerNorm on q and k per head, ViT-22B / Wortsman's qk-layernorm, 1/sqrt(D)
kept) and attention soft-capping (cap tanh(s / cap), cap 50). Every run goes through the sweep
API (``_training.run_grid``). Measured per run: the final validation loss, the largest raw
attention logit of block 0 at every step (the trainer's ``max_attn_logit``; Wortsman et al.
report block 0), and per arm Wortsman et al.'s LR sensitivity.
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
    method="normlab GPT, Pre-LN, head width 16, on the order-2 Markov source; AdamW, warmup 5% "
           "then cosine to min_lr (`base`); three arms (baseline, QK-norm, soft-cap) x `widths` "
           "x `lrs` x `seeds` through the sweep API.",
    explanation="A logit q.k / sqrt(D) grows with the product of the norms of q and k, i.e. "
                "quadratically in the weights, and a large learning rate grows the weights fast: "
                "the softmax turns one-hot, its gradient vanishes, and the run stalls or "
                "diverges. Normalizing q and k per head bounds |logit| by sqrt(D) times the "
                "product of the two gains, so the logit can only grow as fast as those gains. A "
                "soft-cap squashes the logit the softmax sees into (-cap, cap) but leaves q and k "
                "free to grow.",
)

ARMS = ("baseline", "qk-norm", "soft-cap")
TRAINS_FRACTION = 0.5  # a run "trains" when it recovers this share of its arm's best improvement

BASE = TrainConfig(  # AdamW (0.9, 0.95), clip 1, lr-coupled weight decay 0.1 (Wortsman's lambda)
    model=GPTConfig(vocab_size=16, seq_len=32, n_layers=2, d_model=32, n_heads=2),
    data="markov", lr=3e-4, min_lr=1e-5, warmup=50, schedule="cosine", steps=1000,
    batch_size=16, weight_decay=0.1, eval_interval=1000)


@dataclass(frozen=True)
class Config:
    base: TrainConfig = BASE  # every run's model, data and optimizer (arm, width, lr, seed vary)
    lrs: tuple[float, ...] = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)  # peak LRs: Wortsman's grid
    widths: tuple[int, ...] = (32,)  # d_model of the swept models (head width 16: H = d / 16)
    qk_norm: str = "layernorm"  # the QK-norm arm's norm on q and k (Wortsman: qk-layernorm)
    softcap: float = 50.0  # the soft-cap arm's cap on the attention logits (Gemma 2: 50)
    seeds: int = 1  # training seeds per point (losses averaged)
    seed: int = 0  # the first training seed; the Markov source is fixed (data_seed)


SIZES = {
    "tiny": {"lrs": (1e-3, 1e-1, 1.0), "widths": (16,), "base.model.n_layers": 1,
             "base.model.seq_len": 16, "base.batch_size": 4, "base.steps": 60, "base.warmup": 3,
             "base.eval_interval": 60},
    "quick": {},
    "full": {"lrs": (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0), "widths": (32, 64),
             "seeds": 2, "base.model.n_layers": 4, "base.model.seq_len": 64, "base.steps": 1500,
             "base.warmup": 75, "base.eval_interval": 1500},
}


def _variants(cfg: Config) -> dict[str, dict]:
    out = {}
    for d in cfg.widths:
        for arm, over in (("baseline", {}), ("qk-norm", {"model.qk_norm": cfg.qk_norm}),
                          ("soft-cap", {"model.attn_softcap": float(cfg.softcap)})):
            out[_key(arm, d)] = {"model.d_model": d, "model.n_heads": max(d // 16, 1), **over}
    return out


def _key(arm: str, d: int) -> str:
    return f"{arm} d={d}"


SERIES = {"max_logit_0": lambda rec: rec["max_attn_logit"][0],
          "max_logit": lambda rec: max(rec["max_attn_logit"]),
          "nll": lambda rec: rec["nll"]}


def _at(run: T.Run, name: str, frac: float) -> float | None:
    """A series' value at the last sampled step <= frac of training (frac = 1: the last step)."""
    if not run.steps:
        return None
    limit = frac * max(run.steps[-1], 1)
    i = max((j for j, s in enumerate(run.steps) if s <= limit), default=0)
    return run.curves[name][i]


def _mean(vals) -> float | None:
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def measure(config: Config, ctx) -> dict:
    cfg = config
    runs = T.run_grid(cfg.base, _variants(cfg), ctx, lrs=cfg.lrs,
                      seeds=[cfg.seed + i for i in range(cfg.seeds)], series=SERIES,
                      name="lr-sweep")
    T.require_finished(runs)
    return {"per": {key: _arm(runs, key, cfg.lrs) for key in _variants(cfg)},
            "runs": T.as_data(runs), "lrs": list(cfg.lrs), "widths": list(cfg.widths),
            "top_lr": max(cfg.lrs), "softcap": cfg.softcap,
            "floor": next((r.entropy_floor for r in runs if r.entropy_floor is not None), None)}


def _arm(runs: list, key: str, lrs: tuple) -> dict:
    """One arm at one width: losses and LR sensitivity, and per learning rate of ``lrs`` the
    block-0 max logit at the end and at 2% of training (the paper's step 2e3 of 1e5) and the
    largest logit of any block at any step."""
    rs = [r for r in runs if r.variant == key]
    losses = T.final_losses(runs, key)
    return {
        "lrs": list(losses), "loss": list(losses.values()),
        "loss_raw": list(T.final_losses(runs, key, clip=False).values()),
        "loss0": T.loss_at_init(runs, key), "sens": T.sensitivity(runs, key),
        "best": min(losses.values()),
        "end_logit": [_mean(_at(r, "max_logit_0", 1.0) for r in rs if r.lr == lr) for lr in lrs],
        "early_logit": [_mean(_at(r, "max_logit_0", 0.02) for r in rs if r.lr == lr)
                        for lr in lrs],
        "peak_logit": [_mean(r.peaks.get("max_logit") for r in rs if r.lr == lr) for lr in lrs],
        "top_end_logit": _mean(_at(r, "max_logit_0", 1.0) for r in rs if r.lr == max(lrs)),
        "diverged": sum(r.status != "done" for r in rs),
    }


def judge(data: dict, config: Config) -> list[Check]:
    return [*_growth_checks(data, config), _cap_check(data, config),
            _trains_check(data, config), _divergence_check(data)]


def _width_text(config: Config, f) -> str:
    return "; ".join(f"d={d}: {f(d)}" for d in config.widths)


def _growth_checks(data: dict, config: Config) -> list[Check]:
    per, top = data["per"], data["top_lr"]
    ratios, logit_ratios, sens_ok, logit_ok = {}, {}, [], []
    for d in config.widths:
        b, q = per[_key("baseline", d)], per[_key("qk-norm", d)]
        ratios[d] = q["sens"] / b["sens"] if b["sens"] > 0 else math.inf
        sens_ok.append(q["sens"] <= 0.7 * b["sens"])
        lb, lq = b["top_end_logit"], q["top_end_logit"]
        logit_ratios[d] = (lb / lq) if (lb is not None and lq) else math.nan
        logit_ok.append(lb is not None and lq is not None and lb >= 10 * abs(lq))
    worse = [(d, lr, per[_key("qk-norm", d)]["loss"][j], per[_key("baseline", d)]["loss"][j])
             for d in config.widths for j, lr in enumerate(per[_key("qk-norm", d)]["lrs"])
             if per[_key("qk-norm", d)]["loss"][j] > per[_key("baseline", d)]["loss"][j] + 0.1]
    return [
        Check("QK-norm lowers the LR sensitivity",
              "qk-layernorm lowers LR sensitivity markedly at every scale (Wortsman Fig. 1); "
              "papers.md reproduction C: <= 0.7 x baseline",
              _width_text(config, lambda d: f"baseline {fmt(per[_key('baseline', d)]['sens'])}, "
                          f"QK-norm {fmt(per[_key('qk-norm', d)]['sens'])} (ratio "
                          f"{fmt(ratios[d])})"),
              "LRsens(QK-norm) <= 0.7 x LRsens(baseline) at every width", all(sens_ok),
              "Wortsman et al. 2023, section 3.1.1 [V]; papers.md section 7 C",
              note="" if not worse else "QK-norm trains worse than the baseline by more than "
              "0.1 nats at " + "; ".join(f"d={d} LR {lr:g} ({fmt(q, 4)} vs {fmt(b, 4)})"
                                         for d, lr, q, b in worse)),
        Check(f"without QK-norm the attention logits grow by orders of magnitude at the top LR "
              f"({top:g})",
              "max logits grow at high LR even in small models; divergence above ~1e4 (Wortsman "
              "Fig. 1, 3.3); papers.md: >= 10 x the QK-norm arm",
              _width_text(config, lambda d: "block-0 max logit at the end: baseline "
                          f"{fmt(per[_key('baseline', d)]['top_end_logit'] or math.nan)}, QK-norm "
                          f"{fmt(per[_key('qk-norm', d)]['top_end_logit'] or math.nan)}"
                          f" (x{fmt(logit_ratios[d])})"),
              "baseline >= 10 x QK-norm at the largest LR, every width", all(logit_ok),
              "Wortsman et al. 2023 [V]; Dehghani et al. 2023 [S]"),
    ]


def _cap_check(data: dict, config: Config) -> Check:
    cap = config.softcap
    peaks = {d: [r["peaks"]["max_logit"] for r in data["runs"]
                 if r["variant"] == _key("soft-cap", d) and r["peaks"].get("max_logit") is not None]
             for d in config.widths}
    capped = {d: max((cap * math.tanh(v / cap) for v in peaks[d]), default=math.nan)
              for d in config.widths}
    return Check(
        f"soft-capping bounds every attention logit by {cap:g}",
        f"cap tanh(s / cap) < cap by construction (Gemma 2: cap 50; in floating point tanh "
        f"rounds to 1 past s = 19 cap); papers.md: report its LR sensitivity beside the other two",
        _width_text(config, lambda d: f"largest capped logit {capped[d]:.6g} (raw "
                    f"{fmt(max(peaks[d], default=math.nan))}); LR sensitivity "
                    f"{fmt(data['per'][_key('soft-cap', d)]['sens'])}"),
        "shown, not counted (true by construction)", None, "Gemma Team 2024 [V]",
        note="the cap bounds what the softmax sees, not the raw q.k, which keeps growing: the "
             "cap hides the growth rather than removing its cause")


def _trains_check(data: dict, config: Config) -> Check:
    per, top = data["per"], data["top_lr"]

    def trains(key: str) -> bool:
        p = per[key]
        return p["loss"][-1] <= p["loss0"] - TRAINS_FRACTION * (p["loss0"] - p["best"])

    return Check(
        f"with QK-norm the model still trains at the top LR ({top:g})",
        "a 1.2B model with qk-layernorm trains at LR 0.3 (Wortsman section 3.1.1)",
        _width_text(config, lambda d: "final loss " + ", ".join(
            f"{a} {fmt(per[_key(a, d)]['loss_raw'][-1])}" for a in ARMS)
            + f" (loss at init {fmt(per[_key('baseline', d)]['loss0'])})"),
        f"shown, not counted: 'trains' = recovers >= {TRAINS_FRACTION:g} of its best "
        f"improvement over the loss at init: "
        + _width_text(config, lambda d: ", ".join(f"{a} {'yes' if trains(_key(a, d)) else 'no'}"
                                                  for a in ARMS)),
        None, "Wortsman et al. 2023 [V]",
        note="papers.md lists this as an expectation, not a pass measure")


def _divergence_check(data: dict) -> Check:
    big = [(r["variant"], r["lr"], r["peaks"].get("max_logit_0"), r["final_val_loss"])
           for r in data["runs"] if (r["peaks"].get("max_logit_0") or 0) > 1e4]
    return Check(
        "runs whose block-0 max logit passed 1e4 diverged",
        "every run with max attention logit > 1e4 diverged (Wortsman section 3.3)",
        ("; ".join(f"{v} lr {lr:g}: peak {fmt(p)}, final loss "
                   f"{fmt(math.nan if loss is None else loss)}" for v, lr, p, loss in big)
         or "no run passed 1e4"),
        "shown, not counted (a different model, data and step count)", None,
        "Wortsman et al. 2023 [V]")


def headline(data: dict, config: Config) -> str:
    per, d0, top = data["per"], config.widths[0], data["top_lr"]
    return (f"LR sensitivity baseline {fmt(per[_key('baseline', d0)]['sens'])}, QK-norm "
            f"{fmt(per[_key('qk-norm', d0)]['sens'])}, soft-cap "
            f"{fmt(per[_key('soft-cap', d0)]['sens'])} (d={d0}); block-0 max logit at "
            f"LR {top:g}: {fmt(per[_key('baseline', d0)]['top_end_logit'] or math.nan)} "
            f"without vs {fmt(per[_key('qk-norm', d0)]['top_end_logit'] or math.nan)} with "
            f"QK-norm")


def plot(result, out_dir) -> list[str]:
    from ..plotting import figure, save, style

    d = result.data
    colors = {"baseline": "#d62728", "qk-norm": "#1f77b4", "soft-cap": "#2ca02c"}
    styles = ["-", "--", ":"]
    fig, (a, b, c, e) = figure(2, 2, width=5.0, height=3.5)
    top = d["top_lr"]
    for wi, w in enumerate(d["widths"]):
        for arm in ARMS:
            p = d["per"][_key(arm, w)]
            label = arm if len(d["widths"]) == 1 else f"{arm}, d={w}"
            a.plot(p["lrs"], p["loss"], "o" + styles[wi % 3], color=colors[arm], ms=4,
                   label=label)
            c.plot(d["lrs"], [np.nan if v is None else max(v, 1e-2) for v in p["end_logit"]],
                   "o" + styles[wi % 3], color=colors[arm], ms=4, label=label)
    p0 = d["per"][_key("baseline", d["widths"][0])]
    a.axhline(p0["loss0"], color="#777777", ls="--", lw=0.9, label="loss at init")
    if d["floor"] is not None:
        a.axhline(d["floor"], color="k", ls=":", lw=0.9, label="entropy floor")
    a.set_xscale("log")
    style(a, "final loss vs learning rate (min(loss, loss at init))", "peak learning rate",
          "validation loss (nats/token)")
    c.set_xscale("log")
    c.set_yscale("log")
    style(c, "block-0 max attention logit at the end", "peak learning rate", "max logit (raw)")
    w0 = d["widths"][0]
    first = d["runs"][0]["seed"]
    for arm in ARMS:
        for r in d["runs"]:
            if r["variant"] == _key(arm, w0) and r["lr"] == top and r["seed"] == first:
                ys = [np.nan if v is None else max(abs(v), 1e-2)
                      for v in r["curves"]["max_logit_0"]]
                b.plot(r["steps"], ys, color=colors[arm], label=arm)
    b.axhline(d["softcap"], color=colors["soft-cap"], ls=":", lw=0.8, label="cap")
    b.axhline(1e4, color="k", ls="--", lw=0.8, label="1e4 (Wortsman)")
    b.set_yscale("log")
    style(b, f"block-0 max logit during training, LR {top:g}, d={w0}", "step", "max logit (raw)")
    names, vals, cols = [], [], []
    for w in d["widths"]:
        for arm in ARMS:
            names.append(arm if len(d["widths"]) == 1 else f"{arm} d={w}")
            vals.append(d["per"][_key(arm, w)]["sens"])
            cols.append(colors[arm])
    e.barh(names, vals, color=cols)
    for i, v in enumerate(vals):
        e.annotate(f"{v:.3g}", (v, i), xytext=(3, 0), textcoords="offset points", va="center",
                   fontsize=8)
    e.invert_yaxis()
    e.margins(x=0.2)
    style(e, "LR sensitivity (lower is more robust)", "mean min(loss, loss0) - best (nats)", "",
          legend=False)
    return [save(fig, out_dir, "attention_logit_growth.png")]
