"""``layernorm-jacobian``: Xiong et al. 2020, Lemma 3: ||J_LN(x)||_2 = O(sqrt(d) / ||x||_2), and
the same for RMSNorm, measured from normlab's own backward.

``layer_norm_backward(v, cache)`` returns J^T v, a vector-Jacobian product. The spectral norm is
found by power iteration on J^T J, with J v taken as J^T v where J is symmetric (no gain: checked
on the Jacobian built from d VJPs) and as gamma * (J_0^T v) with a gain gamma (J = diag(gamma)
J_0). The closed forms, from J_0 = (I - 1 1^T / d - xhat xhat^T / d) / sigma for LayerNorm and
(I - x x^T / (d rms^2)) / rms for RMSNorm, are

    ||J_LN||_2  = 1 / sqrt(Var[x] + eps) = sqrt(d) / sqrt(||x - mean||^2 + d eps)
    ||J_RMS||_2 = 1 / sqrt(mean(x^2) + eps) = sqrt(d) / sqrt(||x||^2 + d eps)

so Lemma 3 is an equality up to eps (for LayerNorm, in ||x - mean||). These rows check normlab's
backward against a theorem: identities. The empirical part is the mechanism: in Xiong's simplified
Pre-LN model at initialization the final LayerNorm reads a stream whose norm grows with depth
(Lemma 2), so its Jacobian, and every gradient that flows through it, shrinks as 1/sqrt(L);
Post-LN's last LayerNorm reads x + F(x) of a constant size at every depth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...functional import (
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)
from .. import stats
from ..contract import DERIVATION, IDENTITY, SHOWN, Amendment, Card, Check, Record
from ..formatting import fmt
from ._setups import xiong_model

CARD = Card(
    name="layernorm-jacobian",
    title="LayerNorm's Jacobian shrinks as sqrt(d)/||x|| (Xiong et al. 2020, Lemma 3)",
    citation="Xiong et al. 2020, 'On Layer Normalization in the Transformer Architecture', "
             "Lemma 3 (with Lemma 2 and Theorem 1); Zhang & Sennrich 2019 (RMSNorm)",
    claim="The spectral norm of LayerNorm's Jacobian is O(sqrt(d)/||x||): a norm that reads a "
          "large input passes back a small gradient. In Pre-LN the final LayerNorm reads a "
          "residual stream whose norm grows as sqrt(L), so the gradients at initialization "
          "shrink as 1/sqrt(L); in Post-LN every LayerNorm reads an input of constant size.",
    published="||J_LN(x)||_2 = O(sqrt(d)/||x||_2) (Lemma 3); Pre-LN E||x_L||^2 in [(1 + L/2) d, "
              "(1 + 3L/2) d] (Lemma 2); last-layer gradient O(d sqrt(ln d / L)) for Pre-LN, "
              "independent of L for Post-LN (Theorem 1)",
    method="Power iteration on J^T J from normlab's layer_norm_backward / rms_norm_backward "
           "(vector-Jacobian products) for inputs x = s z, z ~ N(0, I_d), over `widths` and "
           "`scales`, against the closed forms and the SVD of the Jacobian built from d VJPs; "
           "then the final LayerNorm of Xiong's simplified model (one head, uniform attention, "
           "ReLU FFN d->d, Xavier, Gaussian inputs) at `depths`, `seeds` initializations.",
    explanation="LayerNorm divides by the input's standard deviation, so its Jacobian is the "
                "projection that removes the mean and the input's own direction, divided by "
                "sigma: every direction it passes is scaled by 1/sigma = sqrt(d)/||x - mean||. "
                "That is exact, not only a bound. In Pre-LN the stream x_L = x_0 + sum of L "
                "branch outputs has E||x_L||^2 ~ (1 + L) d at initialization, so the final "
                "LayerNorm multiplies the gradient coming back from the head by about "
                "1/sqrt(1 + L): the mechanism behind Pre-LN's last-layer gradient slope of -1/2 "
                "in gradients-at-init (Theorem 1). Post-LN's norms read x + F(x) with E||.||^2 = "
                "1.5 d at every layer, so its gradient near the output does not shrink with "
                "depth, and a large learning rate there needs warmup.",
    short="||J_LN||_2 = sqrt(d)/||x|| up to eps (Lemma 3); Pre-LN's final LayerNorm Jacobian "
          "~ 1/sqrt(L)",
    notebooks=(
        "16.4-teach-it.ipynb",
        "16.2-residuals-and-where-to-normalize.ipynb",
        "2.4.4-pre-ln-vs-post-ln.ipynb",
    ),
)

LEMMA2 = (0.5, 1.5)  # E||x_L||^2 / d in [1 + a L, 1 + b L] (Xiong et al., Lemma 2)
PRE_SLOPE = (-0.7, -0.3)  # log-log slope vs L: papers.md section 1's Pre-LN range (theory -1/2)
POST_SLOPE = (-0.15, 0.15)  # and Post-LN's (theory 0)
IDENTITY_TOL = 1e-9  # relative error of a float64 identity (rounding only)


@dataclass(frozen=True)
class Config:
    widths: tuple[int, ...] = (16, 64, 256, 1024)  # d: the normalized width
    scales: tuple[float, ...] = (1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)  # s: x = s z, z ~ N(0, I)
    offsets: tuple[float, ...] = (0.0, 1.0, 10.0)  # m: a shared mean, x = z + m (uncentered row)
    eps: float = 1e-5  # eps inside the square root of both norms
    gain_std: float = 0.3  # the gain case: gamma ~ N(1, gain_std^2)
    iters: int = 2000  # most power iterations (stopped at a relative change of 1e-13)
    depths: tuple[int, ...] = (6, 12, 24, 48)  # L: blocks of the simplified model
    d_model: int = 128  # d of the simplified model
    seq_len: int = 16  # n: positions per sequence
    batch: int = 8  # sequences (B x n tokens read by the final LayerNorm)
    seeds: int = 3  # initializations of the simplified model
    seed: int = 0  # first seed (inputs, gains, models)


SIZES = {
    "tiny": {"widths": (16, 64), "scales": (1e-2, 1.0, 100.0), "depths": (2, 4, 8),
             "d_model": 32, "batch": 4, "seeds": 3},
    "quick": {},
    "full": {"widths": (16, 64, 256, 1024, 4096), "seeds": 10, "batch": 32},
}


def _ops(kind: str, x: np.ndarray, eps: float, gamma: np.ndarray | None = None):
    """The forward's output and the VJP v -> J^T v of LayerNorm or RMSNorm at x (n, d), row by
    row, from normlab's functional backward."""
    if kind == "layernorm":
        y, cache = layer_norm_forward(x, gamma, None, eps=eps)
        return y, lambda v: layer_norm_backward(v, cache)[0]
    w = np.ones(x.shape[-1]) if gamma is None else gamma
    y, rms_cache = rms_norm_forward(x, w, eps=eps)
    return y, lambda v: rms_norm_backward(v, rms_cache)[0]


def _power(jtj, v: np.ndarray, iters: int) -> np.ndarray:
    """sigma_max per row by power iteration on J^T J (``jtj`` maps rows v to J^T J v)."""
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    s = np.zeros(v.shape[0])
    for _ in range(iters):
        w = jtj(v)
        s_new = np.sqrt(np.maximum(np.sum(v * w, axis=-1), 0.0))  # Rayleigh quotient
        v = w / np.maximum(np.linalg.norm(w, axis=-1, keepdims=True), 1e-300)
        if np.all(np.abs(s_new - s) <= 1e-13 * s_new):
            return s_new
        s = s_new
    return s


def _closed(kind: str, x: np.ndarray, eps: float) -> np.ndarray:
    if kind == "layernorm":
        return 1.0 / np.sqrt(x.var(axis=-1) + eps)
    return 1.0 / np.sqrt(np.mean(x * x, axis=-1) + eps)


def _jacobian(kind: str, x: np.ndarray, eps: float, gamma=None) -> np.ndarray:
    """The (d, d) Jacobian at one input x (d,) from d VJPs in one call: (J^T e_i)_j = J_ij, so
    the VJP of e_i is row i of J."""
    d = x.size
    _, vjp = _ops(kind, np.broadcast_to(x, (d, d)).copy(), eps, gamma)
    return vjp(np.eye(d))  # (d, d): row i = J^T e_i


def _unit_rows(cfg: Config, rng: np.random.Generator) -> list[dict]:
    rows = []
    for kind in ("layernorm", "rmsnorm"):
        for d in cfg.widths:
            z = rng.normal(size=(1, d))
            for s in cfg.scales:
                x = s * z  # (1, d)
                _, vjp = _ops(kind, x, cfg.eps)
                power = float(_power(lambda v, vjp=vjp: vjp(vjp(v)), rng.normal(size=(1, d)),
                                     cfg.iters)[0])
                J = _jacobian(kind, x[0], cfg.eps)
                centre = x - x.mean() if kind == "layernorm" else x
                rows.append({"kind": kind, "d": d, "scale": s, "power": power,
                             "closed": float(_closed(kind, x, cfg.eps)[0]),
                             "sqrt_d_over_norm": float(np.sqrt(d) / np.linalg.norm(x)),
                             "sqrt_d_over_centred": float(np.sqrt(d) / np.linalg.norm(centre)),
                             "asym": float(np.abs(J - J.T).max() / np.abs(J).max())})
    return rows


def _gain_rows(cfg: Config, rng: np.random.Generator) -> list[dict]:
    """A gain gamma: J = diag(gamma) J_0, so J v = gamma * J_0^T v and J^T u = VJP_gamma(u)."""
    rows = []
    for kind in ("layernorm", "rmsnorm"):
        for d in [w for w in cfg.widths if w <= 256]:
            x = rng.normal(size=(1, d))
            gamma = rng.normal(1.0, cfg.gain_std, size=d)
            _, vjp0 = _ops(kind, x, cfg.eps)
            _, vjp = _ops(kind, x, cfg.eps, gamma)
            power = float(_power(lambda v, vjp=vjp, gamma=gamma, vjp0=vjp0: vjp(gamma * vjp0(v)),
                                 rng.normal(size=(1, d)),
                                 cfg.iters)[0])
            svd = float(np.linalg.norm(_jacobian(kind, x[0], cfg.eps, gamma), 2))
            rows.append({"kind": kind, "d": d, "power": power, "svd": svd,
                         "bound": float(np.abs(gamma).max() * _closed(kind, x, cfg.eps)[0])})
    return rows


def _offset_rows(cfg: Config, rng: np.random.Generator) -> list[dict]:
    """An uncentered input x = z + m: LayerNorm's norm follows ||x - mean||, not ||x||."""
    d = cfg.widths[len(cfg.widths) // 2]
    z = rng.normal(size=(1, d))
    rows = []
    for m in cfg.offsets:
        x = z + m
        out = {"offset": m, "d": d}
        for kind in ("layernorm", "rmsnorm"):
            _, vjp = _ops(kind, x, cfg.eps)
            sigma = float(_power(lambda v, vjp=vjp: vjp(vjp(v)), rng.normal(size=(1, d)),
                                 cfg.iters)[0])
            out[kind] = sigma * float(np.linalg.norm(x)) / np.sqrt(d)  # ||J|| ||x|| / sqrt(d)
        rows.append(out)
    return rows


def _final_ln(placement: str, L: int, cfg: Config, i: int) -> tuple[float, float]:
    """Mean over tokens of the last LayerNorm's ||J||_2 (power iteration on normlab's VJPs) and
    of ||x||^2 / d of its input, in model i of depth L."""
    model = xiong_model(placement, L, d=cfg.d_model, vocab=256, seq_len=cfg.seq_len,
                        seed=cfg.seed + i)
    idx = np.random.default_rng([cfg.seed + i, L, 7]).integers(0, 256, (cfg.batch, cfg.seq_len))
    x = model.wte(idx)  # (B, T, C); no position table (Gaussian inputs)
    for blk in model.blocks[:-1]:
        x = blk(x)
    last = model.blocks[-1]
    x = last.attn(x)
    if placement == "post":  # the last LayerNorm reads x + F(x) of the last sublayer
        x = x + last.mlp.branch(x)
    else:  # Pre-LN: the final norm reads the stream
        x = last.mlp(x)
    x = x.reshape(-1, cfg.d_model).astype(np.float64)  # (B T, C)
    _, vjp = _ops("layernorm", x, model.config.norm_eps)
    rng = np.random.default_rng([cfg.seed + i, L, 8])
    sigma = _power(lambda v: vjp(vjp(v)), rng.normal(size=x.shape), cfg.iters)  # (B T,)
    return float(sigma.mean()), float(np.mean(np.sum(x * x, axis=-1)) / cfg.d_model)


def measure(config: Config, ctx) -> dict:
    cfg = config
    rng = np.random.default_rng(cfg.seed)
    data = {"unit": _unit_rows(cfg, rng), "gain": _gain_rows(cfg, rng),
            "offset": _offset_rows(cfg, rng), "depths": list(cfg.depths)}
    ctx.progress(1, 3, "single inputs")
    stream = {}
    for p in ("pre", "post"):
        runs = [[_final_ln(p, L, cfg, i) for L in cfg.depths] for i in range(cfg.seeds)]
        stream[p] = {"jac": [[r[0] for r in seed] for seed in runs],  # (seeds, depths)
                     "sq": [[r[1] for r in seed] for seed in runs]}
        ctx.progress(2 if p == "pre" else 3, 3, f"{p}-LN stacks")
    data["stream"] = stream
    return data


def _slopes(depths, jac) -> stats.Interval:
    """The interval over seeds of the log-log slope of ||J|| against L (one slope per seed)."""
    return stats.slope_interval(depths, jac)


def judge(data: dict, config: Config) -> list[Check]:
    return _identity_checks(data) + _stream_checks(data)


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))))


def _identity_checks(data: dict) -> list[Check]:
    unit, gain, off = data["unit"], data["gain"], data["offset"]
    rows = {k: [r for r in unit if r["kind"] == k] for k in ("layernorm", "rmsnorm")}
    err = {k: _rel([r["power"] for r in v], [r["closed"] for r in v]) for k, v in rows.items()}
    asym = max(r["asym"] for r in unit)
    lemma = {k: max(r["power"] / r["sqrt_d_over_centred"] for r in v) for k, v in rows.items()}
    tight = {k: min(r["power"] / r["sqrt_d_over_centred"] for r in v if r["scale"] >= 1)
             for k, v in rows.items()}
    small = min(r["scale"] for r in unit)
    sat = max(r["power"] / r["sqrt_d_over_centred"] for r in unit if r["scale"] == small)
    g_err = _rel([r["power"] for r in gain], [r["svd"] for r in gain])
    g_bound = all(r["svd"] <= r["bound"] * (1 + 1e-12) for r in gain)
    grid = f"{len(rows['layernorm'])} inputs per norm (widths x scales)"
    src = "derived from the Jacobian; checks normlab's backward"
    return [
        Check(claim="Without a gain, LayerNorm's and RMSNorm's Jacobians are symmetric",
              published=
                  "J_0 = (I - 1 1^T/d - xhat xhat^T/d) / sigma (LN), (I - x x^T/(d rms^2)) / rms",
              measured=f"max |J - J^T| / max |J| = {fmt(asym)} over {grid}",
              rule=f"< {IDENTITY_TOL:g} (so power iteration may use J v = J^T v)",
              passed=asym < IDENTITY_TOL, source=src, kind=IDENTITY,
              id="jacobian-without-gain-is-symmetric"),
        Check(claim="||J_LN||_2 = 1 / sqrt(Var[x] + eps) = sqrt(d) / sqrt(||x - mean||^2 + d eps)",
              published="O(sqrt(d) / ||x||_2) (Lemma 3)",
              measured=f"power iteration on normlab's VJPs vs the closed form: max relative error "
              f"{fmt(err['layernorm'])} over {grid}", rule=f"< {IDENTITY_TOL:g}",
              passed=err["layernorm"] < IDENTITY_TOL,
              source="Xiong et al. 2020, Lemma 3 [V]; " + src,
              kind=IDENTITY, id="layernorm-jacobian-norm-closed-form"),
        Check(claim="||J_RMS||_2 = 1 / sqrt(mean(x^2) + eps) = sqrt(d) / sqrt(||x||^2 + d eps)",
              published="- (RMSNorm: the same lemma without the mean)",
              measured=f"max relative error {fmt(err['rmsnorm'])} over {grid}",
              rule=f"< {IDENTITY_TOL:g}",
              passed=err["rmsnorm"] < IDENTITY_TOL, source=src, kind=IDENTITY,
              id="rmsnorm-jacobian-norm-closed-form"),
        Check(claim="With a gain gamma, power iteration on J^T J finds "
              "the Jacobian's largest singular "
              "value, at most max|gamma| times the gain-free norm",
              published="- (the lemma has gamma = 1)",
              measured=
                  f"vs the SVD of the Jacobian built from d VJPs: max relative error {fmt(g_err)} "
              f"({len(gain)} inputs); bound holds: {g_bound}", rule="< 1e-6 and the bound holds",
              passed=g_err < 1e-6 and g_bound, source=src, kind=IDENTITY,
              id="jacobian-with-gain-by-power-iteration"),
        Check(claim="Lemma 3 is an equality up to eps: ||J|| <= sqrt(d)/||x - mean|| (LN), "
              "sqrt(d)/||x|| (RMSNorm)", published="O(sqrt(d) / ||x||_2) (Lemma 3)",
              measured=f"||J|| ||x - mean|| / sqrt(d): max {lemma['layernorm']:.6f} (LN), "
              f"{lemma['rmsnorm']:.6f} (RMS); min at scale >= 1: {tight['layernorm']:.6f}, "
              f"{tight['rmsnorm']:.6f}; at scale {small:g} eps dominates: {sat:.3g}",
              rule="max <= 1 and min at scale >= 1 > 0.999", passed=max(lemma.values()) <= 1 + 1e-12
              and min(tight.values()) > 0.999, source="Xiong et al. 2020, Lemma 3 [V]",
              kind=IDENTITY, id="lemma-3-is-an-equality-up-to-eps"),
        Check(claim="For an uncentered input LayerNorm's norm follows ||x - mean||, not ||x||",
              published="the lemma's ||x|| (its inputs are centered at initialization)",
              measured="||J|| ||x|| / sqrt(d) at mean offset " + ", ".join(
                  f"{r['offset']:g}: LN {r['layernorm']:.3g}, RMS {r['rmsnorm']:.3g}" for r in off),
              rule="shown", passed=None, source="follows from the closed form", kind=SHOWN,
              id="uncentered-input-reads-the-centred-norm",
              note="RMSNorm does not subtract the mean, so its bound reads ||x|| itself"),
    ]


def _stream_checks(data: dict) -> list[Check]:
    depths, s = data["depths"], data["stream"]
    pre, post = _slopes(depths, s["pre"]["jac"]), _slopes(depths, s["post"]["jac"])
    sq = {p: np.mean(np.asarray(s[p]["sq"]), axis=0) for p in s}
    lo, hi = ([1 + a * L for L in depths] for a in LEMMA2)
    in_bounds = all(a <= v <= b for a, v, b in zip(lo, sq["pre"], hi))
    Ls = ", ".join(str(L) for L in depths)
    out = []
    for name, iv, (a, b), pub, rec in (
            ("Pre-LN: the final LayerNorm's Jacobian shrinks as 1/sqrt(L) at initialization",
             pre, PRE_SLOPE, "Pre-LN gradient O(d sqrt(ln d / L)) (Theorem 1): slope -1/2",
             "pre-ln-final-layernorm-jacobian-shrinks-with-depth"),
            ("Post-LN: the last LayerNorm's Jacobian does not depend on L",
             post, POST_SLOPE, "Post-LN gradient independent of L (Theorem 1): slope 0",
             "post-ln-last-layernorm-jacobian-independent-of-depth")):
        out.append(Check.band(claim=name, published=pub, interval=iv, lo=a, hi=b,
                              measured=f"log-log slope of ||J|| vs L: {iv.text()}",
                              rule=f"{iv.method} interval inside [{a}, {b}] (papers.md section 1)",
                              source="Xiong et al. 2020, Lemmas 2-3, Thm. 1 [V]",
                              kind=DERIVATION, id=rec,
                              note="||J|| = sqrt(d) / ||x_L - mean|| (Lemma 3, an identity above), "
                                   "so this slope is minus half the slope of the stream's "
                                   "E||x_L||^2 in L (Lemma 2), which residual-growth decides as "
                                   "a derivation too: a consequence, counted apart"))
    out.append(Check(claim=
                         "The final LayerNorm's input grows as Lemma 2 says (Pre-LN) and is 1.5 d "
                     "(Post-LN)",
                     published="(1 + L/2) d <= E||x_L||^2 <= (1 + 3L/2) d; Post-LN 1.5 d",
                     measured=f"E||x||^2 / d at L = {Ls}: pre "
                     + ", ".join(f"{v:.2f}" for v in sq["pre"])
                     + f" (inside the bounds: {in_bounds}); post "
                     + ", ".join(f"{v:.2f}" for v in sq["post"]),
                     rule="shown (residual-growth decides Lemma 2's growth)", passed=None,
                     kind=SHOWN, source="Xiong et al. 2020, Lemma 2 [V]",
                     id="final-layernorm-input-follows-lemma-2"))
    return out


def headline(data: dict, config: Config) -> str:
    unit, s, depths = data["unit"], data["stream"], data["depths"]
    err = _rel([r["power"] for r in unit], [r["closed"] for r in unit])
    pre, post = _slopes(depths, s["pre"]["jac"]), _slopes(depths, s["post"]["jac"])
    return (f"power iteration vs closed form: max relative error {fmt(err)}; final LayerNorm's "
            f"||J|| vs L: slope Pre-LN {pre.mean:+.2f}, Post-LN {post.mean:+.2f} (theory -0.5, 0)")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, (a, b) = figure(2)
    for kind, marker, size in (("layernorm", "o", 60), ("rmsnorm", "x", 22)):
        rows = [r for r in d["unit"] if r["kind"] == kind]
        x = np.array([r["sqrt_d_over_norm"] for r in rows])
        a.scatter(x, [r["power"] for r in rows], marker=marker, s=size, zorder=3,
                  facecolors="none" if marker == "o" else COLORS[kind],
                  edgecolors=COLORS[kind] if marker == "o" else None,
                  label=f"{kind}: power iteration")
    grid = np.logspace(np.log10(min(r["sqrt_d_over_norm"] for r in d["unit"])),
                       np.log10(max(r["sqrt_d_over_norm"] for r in d["unit"])), 50)
    eps = result.config["eps"]
    a.plot(grid, grid, "k:", lw=1, label="sqrt(d) / ||x|| (Lemma 3)")
    a.plot(grid, 1 / np.sqrt(grid**-2 + eps), "k-", lw=0.8, alpha=0.5, label="with eps")
    a.set_xscale("log")
    a.set_yscale("log")
    style(a, "||J||_2 against sqrt(d)/||x||", "sqrt(d) / ||x||_2", "spectral norm of J")
    L = np.asarray(d["depths"], dtype=float)
    for p in ("pre", "post"):
        jac = np.asarray(d["stream"][p]["jac"])
        b.errorbar(L, jac.mean(axis=0), yerr=stats.standard_error(jac),
                   fmt="o-", capsize=3, color=COLORS[p], label=f"{p}-LN: final LayerNorm")
    pre0 = np.asarray(d["stream"]["pre"]["jac"]).mean(axis=0)[0]
    b.plot(L, pre0 * np.sqrt((1 + L[0]) / (1 + L)), ":", color=COLORS["pre"],
           label="1/sqrt(1 + L)")
    from matplotlib.ticker import NullFormatter, NullLocator

    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xticks(L, [str(int(v)) for v in L])
    b.xaxis.set_minor_locator(NullLocator())
    b.xaxis.set_minor_formatter(NullFormatter())
    style(b, "the final LayerNorm's ||J|| at initialization", "layers L", "mean ||J||_2 per token")
    return [save(fig, out_dir, "layernorm_jacobian.png")]


# ---- the claim register (normlab.lab.register) ---------------------------------------------
_LEMMA3 = ("\"||J_LN(x)||_2 = O(sqrt(d) / ||x||_2)\" (Lemma 3 as papers.md section 1 renders it "
           "[V])")
_UNIT: dict[str, Any] = dict(grid=("widths", "scales"), registered="2026-12-02")
_STREAM: dict[str, Any] = dict(
    grid=("depths",), seeds="seeds", registered="2026-12-02",
    seeds_from="3 (quick) and 10 (full) initializations, set with the experiment (55c2ce8), no "
               "pilot; never raised after a verdict")
REGISTER = (
    Record(id="jacobian-without-gain-is-symmetric", kind=IDENTITY,
           claim="Without a gain, LayerNorm's and RMSNorm's Jacobians are symmetric",
           where="the closed forms of LayerNorm's and RMSNorm's Jacobians", **_UNIT),
    Record(id="layernorm-jacobian-norm-closed-form", kind=IDENTITY,
           claim="||J_LN||_2 = 1 / sqrt(Var[x] + eps) = sqrt(d) / sqrt(||x - mean||^2 + d eps)",
           source=_LEMMA3, where="Xiong et al. 2020, Lemma 3", **_UNIT),
    Record(id="rmsnorm-jacobian-norm-closed-form", kind=IDENTITY,
           claim="||J_RMS||_2 = 1 / sqrt(mean(x^2) + eps) = sqrt(d) / sqrt(||x||^2 + d eps)",
           where="RMSNorm's closed form (Zhang & Sennrich 2019)", **_UNIT),
    Record(id="jacobian-with-gain-by-power-iteration", kind=IDENTITY,
           claim="With a gain gamma, power iteration on J^T J finds the Jacobian's largest "
                 "singular value, at most max|gamma| times the gain-free norm",
           where="the SVD of the Jacobian built from d VJPs", grid=("widths",),
           registered="2026-12-02"),
    Record(id="lemma-3-is-an-equality-up-to-eps", kind=IDENTITY,
           claim="Lemma 3 is an equality up to eps: ||J|| <= sqrt(d)/||x - mean|| (LN), "
                 "sqrt(d)/||x|| (RMSNorm)", source=_LEMMA3, where="Xiong et al. 2020, Lemma 3",
           **_UNIT),
    Record(id="uncentered-input-reads-the-centred-norm", kind=SHOWN,
           claim="For an uncentered input LayerNorm's norm follows ||x - mean||, not ||x||",
           where="the closed form beside Lemma 3", grid=("offsets",), registered="2026-12-02"),
    Record(id="pre-ln-final-layernorm-jacobian-shrinks-with-depth", kind=DERIVATION,
           claim="Pre-LN: the final LayerNorm's Jacobian shrinks as 1/sqrt(L) at initialization",
           source=_LEMMA3 + " with Lemma 2's Pre-LN stream, (1 + L/2) d <= E||x_L||^2 <= "
                            "(1 + 3L/2) d", where="Xiong et al. 2020, Lemmas 2-3 and Theorem 1",
           form="band", margin=PRE_SLOPE,
           margin_source="papers.md section 1's Pre-LN range for the last-layer gradient's "
                         "slope", **_STREAM),
    Record(id="post-ln-last-layernorm-jacobian-independent-of-depth", kind=DERIVATION,
           claim="Post-LN: the last LayerNorm's Jacobian does not depend on L",
           source=_LEMMA3 + " with Lemma 2's Post-LN E||x^{post,5}||^2 = (3/2) d",
           where="Xiong et al. 2020, Lemmas 2-3 and Theorem 1", form="band", margin=POST_SLOPE,
           margin_source="papers.md section 1's Post-LN range for the last-layer gradient's "
                         "slope", **_STREAM),
    Record(id="final-layernorm-input-follows-lemma-2", kind=SHOWN,
           claim="The final LayerNorm's input grows as Lemma 2 says (Pre-LN) and is 1.5 d "
                 "(Post-LN)", where="Xiong et al. 2020, Lemma 2", **_STREAM),
)

_COUNTED_ONCE = ("||J|| = sqrt(d) / ||x_L - mean|| is Lemma 3 (the identity rows), so the depth "
                 "slope of ||J|| is minus half that of the stream's E||x_L||^2, Lemma 2's: one "
                 "phenomenon counted twice (14e7772, the notes)")
_DERIVED: dict[str, Any] = dict(
    date="2026-12-03", commit="778a154", remeasure=False, before={"kind": "claim"},
    changed="kind claim -> derivation: decided as before against the same band, counted apart",
    why=_COUNTED_ONCE)
AMENDMENTS = (
    Amendment(
        id="pre-ln-final-layernorm-jacobian-shrinks-with-depth", **_DERIVED,
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                      "interval": [-0.5887284935140268, -0.557897104491934],
                      "measured": "log-log slope of ||J|| vs L: -0.573 [-0.589, -0.558] (n=3)"}}),
    Amendment(
        id="post-ln-last-layernorm-jacobian-independent-of-depth", **_DERIVED,
        results_before={
            "quick": {"status": "pass", "kind": "claim",
                      "interval": [-0.002838168393030174, 0.011921575554081687],
                      "measured": "log-log slope of ||J|| vs L: 0.00454 [-0.00284, 0.0119] "
                                  "(n=3)"}}),
    Amendment(
        id="uncentered-input-reads-the-centred-norm", date="2026-12-06", commit="e2916fb",
        remeasure=False, before={"kind": "claim"},
        changed="kind claim (never decided: passed None) -> shown (d4848ae); the full row before "
                "is from 33b19e9",
        why="the row has no published counterpart: it illustrates that Lemma 3 reads "
            "||x - mean||, context rather than a claim of the source",
        results_before={
            "quick": {"status": "shown", "kind": "claim",
                      "interval": None,
                      "measured": "||J|| ||x|| / sqrt(d) at mean offset 0: LN 1, RMS 1, 1: LN "
                                  "1.31, RMS 1, 10: LN 9.29, RMS 1"},
            "full": {"status": "shown", "kind": "claim",
                     "interval": None,
                     "measured": "||J|| ||x|| / sqrt(d) at mean offset 0: LN 1, RMS 1, 1: LN 1.42,"
                                 " RMS 1, 10: LN 9.78, RMS 1"}}),
)
