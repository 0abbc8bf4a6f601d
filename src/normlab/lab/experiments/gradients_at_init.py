"""``gradients-at-init``: Xiong et al. 2020, Theorem 1 and Fig. 3, on normlab's GPT.

Xiong et al.'s simplified Transformer (one head, W^Q = W^K = 0 so attention is uniform, a ReLU
FFN d -> d, Xavier weights, Gaussian inputs, softmax cross-entropy through a random head) is built
from normlab's GPT with placement post or pre. The statistic is the paper's: the Frobenius norm
of the *expected* gradient, ||E_batch[dL/dW]||_F (the gradient of the mean loss over
``batches x batch x seq_len`` tokens), averaged over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..framework import Card, Check, fmt
from ._setups import xiong_model

CARD = Card(
    name="gradients-at-init",
    title="Gradients at initialization: Post-LN vs Pre-LN (Xiong et al. 2020)",
    citation="Xiong et al. 2020, 'On Layer Normalization in the Transformer Architecture', "
             "Thm. 1, Fig. 3",
    claim="At initialization, Post-LN's gradient near the output does not shrink with depth (so "
          "a large learning rate is unsafe without warmup), while Pre-LN's shrinks as 1/sqrt(L).",
    published="last-layer ||dL/dW2|| ~1.6 for every depth with Post-LN, decreasing with Pre-LN "
              "(Fig. 3c, d); theory: slopes 0 and -1/2",
    method="normlab GPT as Xiong's simplified model: one head, W^Q = W^K = 0, ReLU FFN d->d, "
           "Xavier, Gaussian inputs; ||E g|| of each block's FFN output weight over `batches` x "
           "`batch` x `seq_len` tokens, averaged over `seeds` initializations.",
    explanation="Post-LN puts a LayerNorm after every residual add, so the gradient that reaches "
                "the last block's weights is not divided among layers; Pre-LN's residual stream "
                "grows as sqrt(L) and the final LayerNorm divides the gradient by it. With Adam, "
                "the large Post-LN gradients near the output at initialization are what "
                "learning-rate warmup protects against.",
)


@dataclass(frozen=True)
class Config:
    d_model: int = 128  # d: width (the paper's theory is for d x d matrices)
    seq_len: int = 16  # n: positions per sequence
    vocab: int = 256  # V: classes of the softmax cross-entropy
    batch: int = 32  # sequences per batch
    batches: int = 2  # batches the expected gradient is averaged over
    depths: tuple[int, ...] = (6, 8, 12, 24, 48)  # L: blocks, for the last-layer sweep
    profile_depth: int = 12  # L of the per-layer profile (must be one of depths)
    seeds: int = 6  # model initializations the norms are averaged over
    dtype: str = "float32"  # parameter and activation dtype
    seed: int = 0  # first seed; seed + i draws model i and its data


SIZES = {
    "tiny": {"d_model": 32, "vocab": 64, "seq_len": 8, "batch": 8, "batches": 1,
             "depths": (2, 4, 8), "profile_depth": 8, "seeds": 2},
    "quick": {},
    "full": {"seeds": 10, "batches": 4},
}

POST_SLOPE = (-0.15, 0.15)  # papers.md section 1 / 12: log-log slope vs L
PRE_SLOPE = (-0.7, -0.3)


def _grad_norms(placement: str, L: int, cfg: Config, i: int) -> np.ndarray:
    """||E g|| of every block's FFN output weight W^{2,l}, l = 1..L, for model i."""
    model = xiong_model(placement, L, d=cfg.d_model, vocab=cfg.vocab, seq_len=cfg.seq_len,
                        seed=cfg.seed + i, dtype=cfg.dtype)
    rng = np.random.default_rng([cfg.seed + i, 1])
    perm = rng.permutation(cfg.vocab)  # structured targets: a fixed map of the input token
    model.zero_grad()
    for _ in range(cfg.batches):
        idx = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.seq_len))  # (B, T)
        model.forward(idx, perm[idx])
        model.backward(1.0 / cfg.batches)  # the gradient of the mean loss: E_batch[g]
    return np.array([np.linalg.norm(blk.mlp.branch.proj.grads["weight"].astype(np.float64))
                     for blk in model.blocks])


def _slope(x, y) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def measure(config: Config, ctx) -> dict:
    cfg = config
    if cfg.profile_depth not in cfg.depths:
        raise ValueError(f"profile_depth ({cfg.profile_depth}) must be one of depths {cfg.depths}")
    work = 2 * cfg.seeds * sum(cfg.depths)
    done = 0
    norms = {}  # (placement, L) -> (seeds, L)
    for placement in ("post", "pre"):
        for L in cfg.depths:
            runs = []
            for i in range(cfg.seeds):
                runs.append(_grad_norms(placement, L, cfg, i))
                done += L
                ctx.progress(done, work, f"{placement}-LN L={L}")
            norms[(placement, L)] = np.array(runs)
    Ls = np.array(cfg.depths, dtype=float)
    last = {p: np.array([norms[(p, L)][:, -1].mean() for L in cfg.depths]) for p in ("post", "pre")}
    last_sd = {p: np.array([norms[(p, L)][:, -1].std() for L in cfg.depths]) for p in ("post", "pre")}
    # the slope's spread over seeds (one slope per seed): how firm the fitted number is
    slope_se = {p: float(np.std([_slope(Ls, [norms[(p, L)][i, -1] for L in cfg.depths])
                                 for i in range(cfg.seeds)]) / np.sqrt(cfg.seeds)) for p in last}
    prof = {p: norms[(p, cfg.profile_depth)].mean(axis=0) for p in ("post", "pre")}
    layers = np.arange(1, cfg.profile_depth + 1)
    return {"depths": list(cfg.depths), "last": last, "last_sd": last_sd,
            "slope": {p: _slope(Ls, last[p]) for p in last}, "slope_se": slope_se,
            "profile": prof, "profile_slope": {p: _slope(layers, prof[p]) for p in prof},
            "profile_depth": cfg.profile_depth}


def _ratio(data: dict) -> dict:
    """The per-layer profile's top / bottom gradient norm, per placement."""
    return {p: float(v[-1] / v[0]) for p, v in data["profile"].items()}


def judge(data: dict, config: Config) -> list[Check]:
    cfg = config
    slope, slope_se, last = data["slope"], data["slope_se"], data["last"]
    pslope, ratio = data["profile_slope"], _ratio(data)
    Lstr = ", ".join(str(L) for L in cfg.depths)
    return [
        Check("Post-LN: the last layer's gradient does not depend on depth L",
              "~1.6 at every depth 6..14 (Fig. 3c); theory O(d sqrt(ln d)), independent of L",
              f"log-log slope {slope['post']:+.3f} (+-{slope_se['post']:.3f} s.e. over seeds); "
              f"||g|| = {', '.join(fmt(v) for v in last['post'])} at L = {Lstr}",
              f"slope in [{POST_SLOPE[0]}, {POST_SLOPE[1]}] (papers.md section 1)",
              POST_SLOPE[0] <= slope["post"] <= POST_SLOPE[1], "Xiong et al. Thm. 1, Fig. 3(c) [V]"),
        Check("Pre-LN: the last layer's gradient shrinks as 1/sqrt(L)",
              "decreasing with depth (Fig. 3d); theory slope -1/2",
              f"log-log slope {slope['pre']:+.3f} (+-{slope_se['pre']:.3f}); ||g|| = "
              + ", ".join(fmt(v) for v in last["pre"]),
              f"slope in [{PRE_SLOPE[0]}, {PRE_SLOPE[1]}]",
              PRE_SLOPE[0] <= slope["pre"] <= PRE_SLOPE[1], "Xiong et al. Thm. 1, Fig. 3(d) [V]"),
        Check("Post-LN's last-layer gradient is larger than Pre-LN's (why it needs warmup)",
              "Post-LN bound larger by sqrt(L) (Thm. 1)",
              "post / pre = " + ", ".join(f"{a / b:.2f}" for a, b in zip(last["post"], last["pre"]))
              + f" at L = {Lstr}", "post > pre at every L",
              all(a > b for a, b in zip(last["post"], last["pre"])), "Xiong et al. Thm. 1 [V]"),
        Check(f"Post-LN's gradient grows with the layer index; Pre-LN's does not (L = "
              f"{cfg.profile_depth})", "Fig. 3(a): Post-LN grows toward the output",
              f"per-layer log-log slope: post {pslope['post']:+.3f}, pre {pslope['pre']:+.3f}; "
              f"top/bottom: post {ratio['post']:.2f}, pre {ratio['pre']:.2f}",
              "slope_post > 0 and slope_post > slope_pre (papers.md: the robust check)",
              pslope["post"] > 0 and pslope["post"] > pslope["pre"], "Xiong et al. Fig. 3(a, b) [V]"),
        Check("Pre-LN's per-layer gradient is 'almost the same' at every layer",
              "flat (Fig. 3b)", f"top/bottom = {ratio['pre']:.2f} (decreasing with the layer)",
              "shown, not counted: a documented difference", None,
              "Xiong et al. Fig. 3(b) [V]; papers.md [D]: 0.2-0.3",
              note="NormFormer, DeepNet and Mix-LN also find larger gradients in Pre-LN's bottom "
                   "layers; papers.md's simulation gives top/bottom 0.2-0.3"),
    ]


def headline(data: dict, config: Config) -> str:
    slope, ratio = data["slope"], _ratio(data)
    return (f"log-log slope vs L: Post-LN {slope['post']:+.2f}, Pre-LN {slope['pre']:+.2f} "
            f"(theory 0, -0.5); per-layer top/bottom at L={config.profile_depth}: post "
            f"{ratio['post']:.2f}, pre {ratio['pre']:.2f}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, (a, b) = figure(2)
    for p in ("post", "pre"):
        prof = np.asarray(d["profile"][p])
        a.plot(np.arange(1, prof.size + 1), prof, "o-", color=COLORS[p], label=f"{p}-LN")
    style(a, f"per-layer ||E g|| of W2 (L = {d['profile_depth']})", "layer l",
          "||dL/dW2_l||_F")
    a.set_yscale("log")
    L = np.asarray(d["depths"], dtype=float)
    for p, theory in (("post", 0.0), ("pre", -0.5)):
        y = np.asarray(d["last"][p])
        b.errorbar(L, y, yerr=np.asarray(d["last_sd"][p]), fmt="o-", color=COLORS[p], capsize=3,
                   label=f"{p}-LN: slope {d['slope'][p]:+.2f}")
        b.plot(L, y[0] * (L / L[0]) ** theory, ":", color=COLORS[p], lw=1.2,
               label=f"theory slope {theory:g}")
    from matplotlib.ticker import NullLocator

    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xticks(L, [str(int(v)) for v in L])
    b.xaxis.set_minor_locator(NullLocator())
    style(b, "last layer's gradient vs depth", "layers L", "||dL/dW2_L||_F")
    return [save(fig, out_dir, "gradients_at_init.png")]
