"""``output-change``: Liu et al. 2020 (Admin)'s amplification effect, with DeepNorm beside it.

A stack of N sublayers (N/2 of normlab's GPT blocks: random-init causal self-attention and a ReLU
FFN, Xavier weights) maps a fixed input x0 to F(x0, W), the hidden states after the last block
(and the final LayerNorm for Pre-LN). Every block weight is then perturbed by
delta ~ N(0, delta_std^2 / d) and the output change ||F(x0, W) - F(x0, W + delta)||^2 is measured,
averaged over tokens and seeds. Forward passes only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...models import GPT, GPTConfig, deepnorm_beta
from ..framework import Card, Check, fmt
from ._setups import gaussian_inputs_, hidden_states, xavier_

CARD = Card(
    name="output-change",
    title="Output change under a small perturbation vs depth (Liu et al. 2020)",
    citation="Liu et al. 2020, 'Understanding the Difficulty of Training Transformers' (Admin), "
             "output-change figure; Wang et al. 2022 (DeepNet)",
    claim="A small parameter perturbation changes a Post-LN Transformer's output by O(N) (N "
          "sublayers) but a Pre-LN one's by O(log N): Post-LN's heavy dependence on its residual "
          "branches amplifies updates. DeepNorm's scaled residual bounds it.",
    published="output change at N=200: Post-LN ~2100, Pre-LN and Admin ~150-165 (ratio ~13); "
              "Post-LN linear in N, Pre-LN linear in log N",
    method="normlab GPT blocks (causal attention + ReLU FFN 4d), Xavier init (DeepNorm: gain "
           "(8L)^-1/4, alpha (2L)^1/4), a fixed input of `seq_len` tokens, delta ~ N(0, "
           "delta_std^2/d) on every block weight, averaged over `seeds`.",
    explanation="In Post-LN every layer depends heavily on its own residual branch (the skip path "
                "is renormalized after each add), so a change in any weight is carried and "
                "re-amplified by every layer above it. In Pre-LN the skip path is the identity "
                "and each branch's share of the growing stream shrinks, so the change grows only "
                "logarithmically. That is Liu et al.'s explanation of why Post-LN needs warmup "
                "and Admin/DeepNorm-style rescaling at depth.",
)

PLACEMENTS = ("post", "pre", "deepnorm")


@dataclass(frozen=True)
class Config:
    sublayers: tuple[int, ...] = (2, 4, 10, 20, 50, 100, 200)  # N: attention + FFN sublayers
    d_model: int = 64  # d: width
    n_heads: int = 4  # attention heads (head width d / n_heads)
    seq_len: int = 32  # tokens of the fixed input x0
    delta_std: float = 0.02  # the perturbation: delta ~ N(0, delta_std^2 / d) on every weight
    seeds: int = 8  # initializations (and inputs, perturbations) averaged over
    dtype: str = "float32"  # parameter and activation dtype
    seed: int = 0  # first seed


SIZES = {
    "tiny": {"sublayers": (2, 4, 8, 16), "d_model": 16, "n_heads": 2, "seq_len": 8, "seeds": 2},
    "quick": {},
    "full": {"seeds": 24, "d_model": 128},
}


def _change(placement: str, N: int, cfg: Config, i: int) -> float:
    L = N // 2
    d = cfg.d_model
    mc = GPTConfig(vocab_size=64, seq_len=cfg.seq_len, n_layers=L, d_model=d,
                   n_heads=cfg.n_heads, d_ff=4 * d, activation="relu", placement=placement,
                   norm="layernorm", init_std=d**-0.5, dtype=cfg.dtype)
    rng = np.random.default_rng([cfg.seed + i, N])
    model = GPT(mc, rng=rng)
    xavier_(model, rng, beta=deepnorm_beta(L) if placement == "deepnorm" else 1.0)
    gaussian_inputs_(model, rng)
    idx = rng.integers(0, 64, size=(1, cfg.seq_len))  # (1, T) the fixed input x0
    F0 = hidden_states(model, idx).astype(np.float64)  # (1, T, C)
    for blk in model.blocks:
        for lin in (blk.attn.branch.qkv, blk.attn.branch.proj, blk.mlp.branch.fc,
                    blk.mlp.branch.proj):
            w = lin.params["weight"]
            w += rng.normal(0.0, cfg.delta_std / np.sqrt(d), w.shape).astype(w.dtype)
    F1 = hidden_states(model, idx).astype(np.float64)
    return float(np.mean(np.sum((F1 - F0) ** 2, axis=-1)))  # mean over tokens of ||dF||^2


def _r2(x, y) -> tuple[float, float]:
    """Slope and R^2 of the least-squares line y = a + b x."""
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    return float(b), float(1 - resid.var() / y.var())


def measure(config: Config, ctx) -> dict:
    cfg = config
    if any(N % 2 or N < 2 for N in cfg.sublayers):
        raise ValueError(f"sublayers must be even numbers >= 2 (two per block); got {cfg.sublayers}")
    work = len(PLACEMENTS) * cfg.seeds * sum(cfg.sublayers)
    done = 0
    raw = {}
    for p in PLACEMENTS:
        rows = []
        for N in cfg.sublayers:
            vals = []
            for i in range(cfg.seeds):
                vals.append(_change(p, N, cfg, i))
                done += N
                ctx.progress(done, work, f"{p} N={N}")
            rows.append(vals)
        raw[p] = np.array(rows)  # (len(N), seeds)
    N = np.array(cfg.sublayers, dtype=float)
    mean = {p: raw[p].mean(axis=1) for p in raw}
    sem = {p: raw[p].std(axis=1) / np.sqrt(cfg.seeds) for p in raw}
    b_pre, r2_pre = _r2(np.log(N), mean["pre"])
    small = N <= 50
    b_post, r2_post = _r2(N[small], mean["post"][small])
    return {"sublayers": list(cfg.sublayers), "mean": mean, "sem": sem,
            "ratio": mean["post"] / mean["pre"],
            "fits": {"pre_log": [b_pre, r2_pre], "post_lin": [b_post, r2_post]}}


def judge(data: dict, config: Config) -> list[Check]:
    N = np.array(data["sublayers"], dtype=float)
    mean = {p: np.asarray(v) for p, v in data["mean"].items()}
    post_rel_sem = np.asarray(data["sem"]["post"]) / mean["post"]
    (b_pre, r2_pre), (b_post, r2_post) = data["fits"]["pre_log"], data["fits"]["post_lin"]
    _, r2_post_log = _r2(np.log(N[N <= 50]), mean["post"][N <= 50])
    ratio, dn = np.asarray(data["ratio"]), mean["deepnorm"]
    mid = (N >= 10) & (N <= 100)
    dn_flat = float(dn[-1] / dn[0])
    dn_below = bool(np.all(dn[N >= 10] < mean["post"][N >= 10]))
    Nmax = int(N[-1])
    return [
        Check("Pre-LN's output change grows logarithmically in N",
              "O(log N): ~150-165 at N=200 on a log-x plot (figure)",
              f"fit a + b ln N: b = {fmt(b_pre)}, R^2 = {r2_pre:.3f}",
              "R^2 > 0.9 with b > 0 (papers.md section 5)", r2_pre > 0.9 and b_pre > 0,
              "Liu et al. 2020, output-change figure [V]"),
        Check("Post-LN's output change grows about linearly in N (up to N = 50)",
              "O(N): rises roughly linearly to ~2100 at N=200 (figure)",
              f"fit a + b N over N <= 50: b = {fmt(b_post)}, R^2 = {r2_post:.3f} (a + b ln N: "
              f"R^2 = {r2_post_log:.3f})", "R^2 > 0.8 with b > 0 (papers.md section 5)",
              r2_post > 0.8 and b_post > 0, "Liu et al. 2020 [V]"),
        Check("Post-LN amplifies a perturbation far more than Pre-LN, more so with depth",
              "post / pre ~13 at N=200 (2100 vs ~160)",
              "post / pre = " + ", ".join(f"{r:.1f}" for r in ratio) + " at N = "
              + ", ".join(str(int(n)) for n in N)
              + f" (Post-LN's standard error over seeds at N >= 50: "
              + "/".join(f"{100 * v:.0f}%" for v in post_rel_sem[N >= 50]) + ")",
              f"post / pre > 3 at N = {Nmax} and increasing over N in [10, 100] (papers.md)",
              bool(ratio[-1] > 3) and bool(np.all(np.diff(ratio[mid]) > 0)), "Liu et al. 2020 [V]"),
        Check("DeepNorm bounds the output change independently of depth",
              "model update bounded by O(eta), independent of depth (Wang et al. 2022)",
              f"deepnorm ||dF||^2 = {fmt(dn[0])} at N={int(N[0])}, {fmt(dn[-1])} at N={Nmax} "
              f"(ratio {dn_flat:.2f}); below Post-LN at every N >= 10: {dn_below}",
              f"change(N={Nmax}) / change(N={int(N[0])}) < 2 and below Post-LN at every N >= 10",
              dn_flat < 2 and dn_below, "Wang et al. 2022 [S]"),
    ]


def headline(data: dict, config: Config) -> str:
    mean, r2_pre = data["mean"], data["fits"]["pre_log"][1]
    return (f"||dF||^2 at N={data['sublayers'][-1]}: post {fmt(mean['post'][-1])}, pre "
            f"{fmt(mean['pre'][-1])}, deepnorm {fmt(mean['deepnorm'][-1])}; post/pre "
            f"{data['ratio'][-1]:.1f}; pre vs ln N R^2 {r2_pre:.2f}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    N = np.asarray(d["sublayers"], dtype=float)
    fig, (a, b) = figure(2)
    for ax, xscale in ((a, "linear"), (b, "log")):
        for p in PLACEMENTS:
            ax.errorbar(N, d["mean"][p], yerr=d["sem"][p], fmt="o-", ms=4, capsize=3,
                        color=COLORS[p], label=f"{p}-LN" if p != "deepnorm" else "DeepNorm")
        ax.set_xscale(xscale)
    style(a, "output change vs depth", "sublayers N", "||F(x,W) - F(x,W+delta)||^2")
    b.set_yscale("log")
    style(b, "the same, log-log", "sublayers N", "||dF||^2")
    return [save(fig, out_dir, "output_change.png")]
