"""``precision-basics``: range, underflow and loss scaling, lost updates, and summation in low
precision (Micikevicius et al. 2017; the chapter's Listing 16.4).

Every number comes from normlab's precision package (``quantize``, ``round_to_bfloat16``,
``WeightUpdater``, the ``demos``) and, for the gradient histogram, from normlab's own model and
trainer: the values a float16 gradient policy would round are recorded at the model's gradient
rounding point (``Numerics.grad``) in one backward pass at initialization and one after a short
training run on the Markov source.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._files import number
from ...nn import Numerics
from ...nn.numerics import numerics_scope
from ...precision import WeightUpdater, demos, get_format, quantize
from .. import stats
from ..contract import CLAIM, DERIVATION, IDENTITY, Amendment, Card, Check, Record
from ..formatting import fmt

CARD = Card(
    name="precision-basics",
    title="Precision basics: fp16 range and loss scaling, lost updates, bf16 summation",
    citation="Micikevicius et al. 2017, 'Mixed Precision Training' (ICLR 2018); the chapter, "
             "section 16.3 and Listing 16.4; ml_dtypes' bfloat16 summation example",
    claim="float16 overflows above 65504 and flushes small gradients to zero, which loss scaling "
          "fixes; bfloat16 keeps float32's range but rounds coarsely, so small updates and long "
          "sums are lost without float32 master weights and accumulators.",
    published="fp16 max 65504, min subnormal 2^-24; SSD: a further 31% of activation gradients "
              "(beyond the 66.8% already 0) lost in fp16 without scaling; updates below "
              "2^-11 |w| lost in fp16",
    method="normlab.precision (quantize, WeightUpdater, demos); gradients of normlab's tiny model "
           "recorded at the gradient rounding point, at init and after `train_steps` AdamW steps.",
    explanation="Range and precision fail differently. float16's 5 exponent bits overflow at "
                "65504 and underflow below 2^-24, and a small model's gradients sit mostly below "
                "float16's normal range: multiplying the loss by S shifts the whole histogram "
                "right by log2 S octaves, into range, and dividing the gradients by S afterwards "
                "undoes it. bfloat16 has float32's exponent range but 8 significant bits, so an "
                "update smaller than half an ulp of the weight, or a term smaller than half the "
                "spacing of a running sum, is rounded away: float32 master weights and float32 "
                "accumulators keep them.",
    short="fp16 range and loss scaling; lost updates without fp32 master weights; bf16 sums "
          "stall at 256",
    notebooks=("16.3-mixed-precision.ipynb", "16.5-exercises.ipynb"),
)


@dataclass(frozen=True)
class Config:
    scales: tuple[float, ...] = (1.0, 8.0, 128.0, 1024.0, 32768.0, 65536.0)  # loss scales S
    train_steps: int = 100  # training steps before the second gradient snapshot
    batch: int = 16  # sequences per batch of the tiny model (normlab train's default model)
    update_steps: int = 1000  # updates applied to one weight in the stagnation demo
    sum_terms: int = 10_000  # values U(0, 1) in the bfloat16 running sum
    seeds: int = 4  # models (seed, seed + 1, ...) whose gradients the counted checks read
    seed: int = 0  # seeds the model, its data, and the random values


SIZES = {
    "tiny": {"train_steps": 3, "batch": 4, "update_steps": 200, "sum_terms": 1_000, "seeds": 2},
    "quick": {},
    "full": {"train_steps": 600},
}

FP16, BF16 = get_format("float16"), get_format("bfloat16")


class _Recorder(Numerics):
    """Full precision, but keeps a copy of every value passed through the gradient hook (the
    backward's gradient operands: what a policy's ``gradients`` format rounds)."""

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def grad(self, g: np.ndarray, *key) -> np.ndarray:
        self.seen.append(np.array(g, dtype=np.float32).ravel())
        return g


def _gradients(trainer, rng) -> np.ndarray:
    """Every value at the gradient rounding point of one backward pass of the trainer's model."""
    model, rec = trainer.model, _Recorder()
    with numerics_scope(model, rec):
        x, y = trainer.source.train_batch(trainer.config.batch_size,
                                          trainer.config.model.seq_len, rng)
        model.forward(x, y)
        model.zero_grad()
        model.backward(1.0)
    return np.concatenate(rec.seen)


def _underflow(g: np.ndarray, scales) -> list[dict]:
    nz = g[g != 0].astype(np.float32)
    rows = []
    for S in scales:
        q = quantize(nz * np.float32(S), "float16")  # what a float16 backward would store
        finite = np.isfinite(q)
        rows.append({"scale": S,
                     "flushed": float(np.mean(q == 0)),
                     "subnormal": float(np.mean(finite & (q != 0) & (np.abs(q) < FP16.min_normal))),
                     "overflow": float(np.mean(~finite))})
    return rows


def _histogram(g: np.ndarray) -> dict:
    nz = np.abs(g[g != 0]).astype(np.float64)
    edges = np.arange(-50, 20, 1.0)  # log2 bins
    counts, _ = np.histogram(np.log2(nz), bins=edges)
    return {"edges": edges, "counts": counts, "zeros": float(np.mean(g == 0)), "n": int(g.size),
            "max": float(nz.max()), "median": float(np.median(nz))}


def _model_gradients(cfg: Config, seed: int) -> dict:
    from ...train import TrainConfig, Trainer

    tc = dataclasses.replace(TrainConfig(), steps=max(cfg.train_steps, 1), batch_size=cfg.batch,
                             eval_interval=10**9, seed=seed)
    trainer = Trainer(tc)
    rng = np.random.default_rng([seed, 3])
    g0 = _gradients(trainer, rng)
    trainer.run(cfg.train_steps)
    g1 = _gradients(trainer, rng)
    m = tc.model
    return {"init": {"hist": _histogram(g0), "rows": _underflow(g0, cfg.scales)},
            "trained": {"hist": _histogram(g1), "rows": _underflow(g1, cfg.scales),
                        "steps": trainer.step,
                        "loss": float(trainer.history[-1]["loss"]) if trainer.history else None},
            "model": f"d={m.d_model}, L={m.n_layers}, T={m.seq_len}, V={m.vocab_size}, "
                     f"batch {cfg.batch}, {tc.data} data"}


def _trajectories(cfg: Config) -> dict:
    n = cfg.update_steps
    traj = {}
    for method in ("direct", "master"):
        u = WeightUpdater(np.array([1.0]), "bfloat16", method)
        w = [1.0]
        for _ in range(n):
            w.append(float(u.step(-1e-3)[0]))
        traj[method] = w
    vals = quantize(np.random.default_rng(cfg.seed).random(cfg.sum_terms, dtype=np.float32),
                    "bfloat16").astype(np.float64)
    s_bf, s_32 = 0.0, np.float32(0)
    bf, f32 = [], []
    for v in vals:
        s_bf = float(quantize(np.float64(s_bf + v), "bfloat16"))
        s_32 = np.float32(s_32 + np.float32(v))
        bf.append(s_bf)
        f32.append(float(s_32))
    return {"updates": traj, "sum_bf16": bf, "sum_fp32": f32, "sum_exact": float(vals.sum())}


def measure(config: Config, ctx) -> dict:
    cfg = config
    fp16, bf16 = demos.fp16_overflows_but_bfloat16_keeps_range()
    g_plain, g_scaled = demos.tiny_gradient_survives_loss_scaling(1e-8, 2.0**16)
    grads = []
    for i in range(cfg.seeds):
        grads.append(_model_gradients(cfg, cfg.seed + i))
        ctx.progress(2 * (i + 1) / cfg.seeds, 4, f"gradients of model {i + 1}/{cfg.seeds}")
    stag_bf = demos.update_stagnation("bfloat16", 1.0, -1e-3, cfg.update_steps // 2)
    stag_fp = demos.update_stagnation("float16", 1.0, 2.0**-12, cfg.update_steps)
    ctx.progress(3, 4, "updates and sums")
    tr = _trajectories(cfg)
    harm16 = demos.harmonic_stagnation("float16")
    harm_bf = demos.harmonic_stagnation("bfloat16")
    ctx.progress(4, 4, "done")
    return {"grads": grads[0], "grads_per_seed": grads, "traj": tr,
            "harmonic": {"float16": harm16, "bfloat16": harm_bf},
            "fp16_range": [FP16.min_subnormal, FP16.min_normal, FP16.max_finite],
            "range": {"float16": [float(v) for v in fp16], "bfloat16": [float(v) for v in bf16]},
            "tiny_gradient": [float(g_plain), float(g_scaled)],
            "stagnation": {"bfloat16": stag_bf, "float16": stag_fp}}


def _row(rows: list[dict], S: float) -> dict:
    return next(r for r in rows if r["scale"] == S)


def judge(data: dict, config: Config) -> list[Check]:
    return _format_checks(data) + _gradient_checks(data, config) + _update_checks(data, config)


def _format_checks(data: dict) -> list[Check]:
    fp16 = np.array([number(v) for v in data["range"]["float16"]])
    bf16 = np.array(data["range"]["bfloat16"])
    g_plain, g_scaled = data["tiny_gradient"]
    fmt_ok = (FP16.max_finite == 65504.0 and FP16.min_normal == 2.0**-14
              and FP16.min_subnormal == 2.0**-24)
    range_ok = bool(np.all(np.isinf(fp16)) and np.all(np.isfinite(bf16))
                    and np.all(np.abs(bf16 / np.array([1e5, 1e30]) - 1) <= 2.0**-8))
    return [
        Check(claim="float16's range: max 65504, smallest normal 2^-14, smallest subnormal 2^-24",
              published="65504; 6.1e-5; 6.0e-8 (Micikevicius et al.; the chapter)",
              measured=f"{FP16.max_finite:g}; {FP16.min_normal:.3g}; {FP16.min_subnormal:.3g} "
              f"(bfloat16 max {BF16.max_finite:.3g})", rule="exact", passed=fmt_ok,
              source="Micikevicius et al. 2017 [S]; chapter 16.3", kind=IDENTITY,
              id="float16-range-constants"),
        Check(claim="[1e5, 1e30] overflow in float16 but stay finite in bfloat16 (Listing 16.4)",
              published="float16: inf, inf; bfloat16 keeps float32's range",
              measured=f"float16 {fp16.tolist()}; bfloat16 {bf16.tolist()}",
              rule="float16 both inf; bfloat16 both finite within 2^-8 relative", passed=range_ok,
              source="chapter Listing 16.4", kind=IDENTITY,
              id="large-values-overflow-float16-not-bfloat16"),
        Check(claim="a gradient of 1e-8 underflows in float16 and survives a loss scale of 2^16",
              published="0 without scaling; recovered with scaling (Listing 16.4)",
              measured=f"{g_plain:g} unscaled; {g_scaled:.6g} with S = 2^16",
              rule="0 exactly, then within float16's half-ulp (2^-11) of 1e-8",
              passed=g_plain == 0.0 and abs(g_scaled / 1e-8 - 1) <= 2.0**-11,
              source="chapter Listing 16.4", kind=IDENTITY,
              id="tiny-gradient-survives-loss-scale"),
    ]


# Margins, fixed before measuring, with where they come from:
BELOW_MIN = 0.1  # "many values were below the minimum representable range" (Micikevicius et al.
#                  2017, Fig. 3: about 31% of SSD's activation gradients): judged as a tenth or
#                  more, the lab's threshold, below the paper's 31%
RECOVER_MAX = 0.1  # loss scaling "recovers" the flushed values: a scale of 1024 or more leaves
#                    under a tenth of them flushed (the lab's threshold; NVIDIA's guide: x32K
#                    recovers all but 0.1%)


def _gradient_stats(data: dict, cfg: Config) -> dict:
    """Per model (seed): the unscaled flushed and below-normal fractions, at init and after
    training, and the largest ratio flushed(S >= 1024) / flushed(1); Student-t intervals over the
    models, of each phase and of the worse of the two (the statistic a check reads)."""
    per = data["grads_per_seed"]
    big = [S for S in cfg.scales if S >= 1024]
    out: dict[str, Any] = {}
    values: dict[str, dict[str, list[float]]] = {}
    for when in ("init", "trained"):
        plain = [_row(g[when]["rows"], 1.0) for g in per]
        values[when] = {
            "flushed": [p["flushed"] for p in plain],
            "below": [p["flushed"] + p["subnormal"] for p in plain],
            "scaled": [max(_row(g[when]["rows"], S)["flushed"] for S in big)
                       / max(_row(g[when]["rows"], 1.0)["flushed"], 1e-300) for g in per],
        }
        out[when] = {k: stats.mean_interval(v) for k, v in values[when].items()}
    i, t = values["init"], values["trained"]
    out["worst"] = {  # per model, the phase nearer the claim's margin
        "flushed": stats.mean_interval(np.minimum(i["flushed"], t["flushed"])),
        "below": stats.mean_interval(np.minimum(i["below"], t["below"])),
        "scaled": stats.mean_interval(np.maximum(i["scaled"], t["scaled"])),
    }
    out["no_overflow"] = all(r["overflow"] == 0 for g in per for d in (g["init"], g["trained"])
                             for r in d["rows"])
    return out


def _pct(iv) -> str:
    mean, lo, hi = (fmt(100 * v, spec=".3g") for v in (iv.mean, iv.lo, iv.hi))
    return f"{mean}% [{lo}%, {hi}%] (n={iv.n})"


def _gradient_checks(data: dict, cfg: Config) -> list[Check]:
    st, n = _gradient_stats(data, cfg), len(data["grads_per_seed"])
    trained = data["grads"]["trained"]
    w = st["worst"]
    S16 = 65536.0 if 65536.0 in cfg.scales else max(cfg.scales)
    paper = "Micikevicius et al. 2017, Fig. 3 and section 3.2 [S]"
    scaled = Check.decided(
        claim="loss scaling moves them into range without overflow",
        published="scales 8 to 32K used; 8 sufficed for SSD, bigLSTM needed 128; x32K recovers "
                  "all but 0.1% (NVIDIA's guide)",
        interval=w["scaled"], threshold=RECOVER_MAX, side=stats.BELOW,
        measured="flushed at S >= 1024 / flushed unscaled, per model, the larger of init and "
                 f"trained: {w['scaled'].text()} (init {st['init']['scaled'].text()}, trained "
                 f"{st['trained']['scaled'].text()}); overflow: "
                 f"{'none' if st['no_overflow'] else 'some'} up to S = {S16:g}",
        rule=f"the {stats.T_METHOD} interval over models < {RECOVER_MAX:g}, and nothing "
             "overflows at any S or model", source="Micikevicius et al. 2017 [S]",
        margin_source="the lab's threshold (a tenth), fixed before measuring",
        kind=DERIVATION, id="loss-scale-recovers-flushed-gradients")
    if not st["no_overflow"]:  # an overflow fails the claim whatever the ratio
        scaled.passed, scaled.inconclusive = False, False
    return [
        Check.superiority(
            claim="without loss scaling float16 flushes some real gradients to zero",
            published="SSD: 66.8% of activation gradients were 0 in fp32, fp16 zeroes a further "
                      "31%",
            interval=w["flushed"], side=stats.ABOVE, margin=0.0,
            measured=f"over {n} models, the smaller of init and trained: {_pct(w['flushed'])} "
                     f"(init {_pct(st['init']['flushed'])}, after {trained['steps']} steps "
                     f"{_pct(st['trained']['flushed'])})",
            rule=f"superiority: the {stats.T_METHOD} interval over models of the flushed "
                 "fraction > 0", source=paper,
            margin_source="'some': any fraction above none",
            note="a different model and data than the paper's SSD: compare the mechanism, not "
                 "the percentage", kind=DERIVATION, id="float16-flushes-some-gradients"),
        Check.decided(
            claim="real gradients fall below float16's normal range",
            published="most of fp16's range unused, many values below its minimum (Fig. 3)",
            interval=w["below"], threshold=BELOW_MIN, side=stats.ABOVE,
            measured=f"below 2^-14, the smaller of init and trained: {_pct(w['below'])} (init "
                     f"{_pct(st['init']['below'])}, trained {_pct(st['trained']['below'])})",
            rule=f"the {stats.T_METHOD} interval over models > {BELOW_MIN:g}", source=paper,
            margin_source="the lab's threshold (a tenth), below the paper's 31%",
            kind=DERIVATION, id="gradients-below-float16-normal-range"),
        scaled,
    ]


def _update_checks(data: dict, cfg: Config) -> list[Check]:
    stag_bf, stag_fp = data["stagnation"]["bfloat16"], data["stagnation"]["float16"]
    harm16, harm_bf = data["harmonic"]["float16"], data["harmonic"]["bfloat16"]
    tr, n_up = data["traj"], cfg.update_steps
    sum_bf, sum_32, exact = tr["sum_bf16"][-1], tr["sum_fp32"][-1], tr["sum_exact"]
    return [
        Check(claim="without fp32 master weights a bfloat16 weight stops moving",
              published="updates below half an ulp are lost (chapter 16.3; Micikevicius et al.)",
              measured=f"1.0 + {n_up // 2} x (-1e-3): direct {stag_bf['direct']:g}, master "
              f"{stag_bf['master']:g}, exact {stag_bf['exact']:g}",
              rule="direct == 1.0 exactly; master == the exact result rounded once to bfloat16",
              passed=stag_bf["direct"] == 1.0
              and stag_bf["master"] == float(quantize(np.float64(stag_bf["exact"]), "bfloat16")),
              source="chapter 16.3; normlab.precision.master", kind=IDENTITY,
              id="bfloat16-weight-stops-without-master"),
        Check(claim="float16: an update of 2^-12 to a weight of 1 is lost; an fp32 master keeps it",
              published=
                  f"1 + {n_up} x 2^-12 = {1 + n_up * 2.0**-12:.9g} with a master copy, 1 without "
              "(papers.md section 11, reproduction G)",
              measured=f"direct {stag_fp['direct']:.9g}, master {stag_fp['master']:.9g}",
              rule="exact equality", passed=stag_fp["direct"] == 1.0
              and stag_fp["master"] == 1 + n_up * 2.0**-12, source="Micikevicius et al. 2017 [D]",
              kind=IDENTITY, id="float16-update-lost-without-master"),
        Check(claim="a bfloat16 running sum of values in [0, 1) stalls at 256",
              published="256 (the spacing there is 2; every term is below half of it)",
              measured=f"bfloat16 sum {sum_bf:g}; float32 {sum_32:.6g}; exact {exact:.6g}",
              rule="bfloat16 == 256 exactly; float32 within 1e-4 relative of exact",
              passed=sum_bf == 256.0 and abs(sum_32 / exact - 1) < 1e-4,
              source="ml_dtypes README; chapter 16.3",
              kind=IDENTITY, id="bfloat16-sum-stalls-at-256"),
        Check(claim="the harmonic series stagnates under round-to-nearest",
              published="float16 at n = 513 (7.0859375), bfloat16 at n = 65 (5.0625) (Higham)",
              measured=f"float16 at n = {harm16[0]} ({harm16[1]:g}); bfloat16 at n = {harm_bf[0]} "
              f"({harm_bf[1]:g})", rule="exact equality with Higham's values",
              passed=(int(harm16[0]), float(harm16[1])) == (513, 7.0859375)
              and (int(harm_bf[0]), float(harm_bf[1])) == (65, 5.0625),
              source="Higham's demo_harmonic", kind=IDENTITY, id="harmonic-series-stagnates"),
    ]


def headline(data: dict, config: Config) -> str:
    st = _gradient_stats(data, config)
    return (f"fp16 flushes {_pct(st['init']['flushed'])} of nonzero gradients at init "
            f"({_pct(st['init']['below'])} below 2^-14); S >= 1024 leaves "
            f"{st['init']['scaled'].text(2)} of that; "
            f"bf16 weight stuck at {data['stagnation']['bfloat16']['direct']:g}; "
            f"bf16 sum {data['traj']['sum_bf16'][-1]:g}")


def plot(result, out_dir) -> list[str]:
    from ..plotting import COLORS, figure, save, style

    d = result.data
    fig, axes = figure(2, 2, width=4.6, height=3.3)
    a, b, c, e = axes
    lo, mn, hi = (np.log2(v) for v in d["fp16_range"])
    for key, color in (("init", COLORS["pre"]), ("trained", COLORS["post"])):
        h = d["grads"][key]["hist"]
        edges = np.asarray(h["edges"])
        counts = np.asarray(h["counts"], dtype=float)
        a.stairs(counts / counts.sum(), edges, color=color, label=key)
    a.axvspan(edges[0], lo - 1, color="#d62728", alpha=0.12, label="flushed to 0 in fp16")
    a.axvspan(lo - 1, mn, color="#ff7f0e", alpha=0.12, label="fp16 subnormal")
    a.axvline(hi, color="k", lw=0.8, ls=":")
    a.annotate("fp16 max", (hi, 0), xytext=(-40, 40), textcoords="offset points", fontsize=7)
    style(a, "gradients of the tiny model vs fp16's range", "log2 |g|", "fraction")
    rows = d["grads"]["init"]["rows"]
    S = [r["scale"] for r in rows]
    b.plot(S, [max(r["flushed"], 1e-7) for r in rows], "o-", color=COLORS["fp16"],
           label="flushed to 0")
    b.plot(S, [max(r["subnormal"], 1e-7) for r in rows], "s-", color="#ff7f0e",
           label="subnormal (precision lost)")
    b.plot(S, [max(r["overflow"], 1e-7) for r in rows], "^-", color="k", label="overflow (inf)")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    style(b, "loss scaling (gradients at init; 0 drawn at 1e-7)", "loss scale S",
          "fraction of nonzero values")
    up = d["traj"]["updates"]
    c.plot(up["direct"], color=COLORS["bfloat16"], label="bf16 weight, no master")
    c.plot(up["master"], color=COLORS["float32"], label="bf16 weight from fp32 master")
    style(c, "w <- w - 1e-3, stored in bfloat16", "update", "weight")
    e.plot(d["traj"]["sum_fp32"], color=COLORS["float32"], label="float32 accumulator")
    e.plot(d["traj"]["sum_bf16"], color=COLORS["bfloat16"], label="bfloat16 accumulator")
    e.axhline(256, color="k", lw=0.8, ls=":")
    style(e, "running sum of U(0,1) values", "terms", "sum")
    return [save(fig, out_dir, "precision_basics.png")]


# ---- the claim register (normlab.lab.register) ---------------------------------------------
_PAPER = "Micikevicius et al. 2017 (ICLR 2018)"
_GRADS = ("scales", "train_steps", "batch")
_SEEDS_FROM = ("set with the first interval rule (847cbac, 2026-12-02), from no pilot the "
               "history records; never raised after a verdict")
_FIG3 = ("\"much of the FP16 representable range was left unused, while many values were below "
         "the minimum representable range and became zeros\" (papers.md 11 [S]: SSD, 66.8% of "
         "the activation gradients 0 in FP32, FP16 zeroes a further 31%)")
REGISTER = (
    Record(id="float16-range-constants", kind=IDENTITY,
           claim="float16's range: max 65504, smallest normal 2^-14, smallest subnormal 2^-24",
           where=f"{_PAPER}, section 3; the chapter 16.3", registered="2026-11-29"),
    Record(id="large-values-overflow-float16-not-bfloat16", kind=IDENTITY,
           claim="[1e5, 1e30] overflow in float16 but stay finite in bfloat16 (Listing 16.4)",
           where="the chapter, Listing 16.4", registered="2026-11-29"),
    Record(id="tiny-gradient-survives-loss-scale", kind=IDENTITY,
           claim="a gradient of 1e-8 underflows in float16 and survives a loss scale of 2^16",
           where="the chapter, Listing 16.4", registered="2026-11-29"),
    Record(id="float16-flushes-some-gradients", kind=DERIVATION,
           claim="without loss scaling float16 flushes some real gradients to zero",
           source=_FIG3, where=f"{_PAPER}, Fig. 3 and section 3.2", form="superiority",
           margin=(0.0,), side="above", margin_source="'some': any fraction above none",
           grid=_GRADS, seeds="seeds", seeds_from=_SEEDS_FROM, registered="2026-12-03"),
    Record(id="gradients-below-float16-normal-range", kind=DERIVATION,
           claim="real gradients fall below float16's normal range", source=_FIG3,
           where=f"{_PAPER}, Fig. 3", form="threshold", margin=(BELOW_MIN,), side="above",
           margin_source="the lab's threshold (a tenth), below the paper's 31%", grid=_GRADS,
           seeds="seeds", seeds_from=_SEEDS_FROM, registered="2026-11-29"),
    Record(id="loss-scale-recovers-flushed-gradients", kind=DERIVATION,
           claim="loss scaling moves them into range without overflow",
           source="\"32K recovers all but 0.1% without overflow\" (papers.md 11 [S], SSD)",
           where=f"{_PAPER}, section 3.2", form="threshold", margin=(RECOVER_MAX,),
           side="below", margin_source="the lab's threshold (a tenth), fixed before measuring",
           grid=_GRADS, seeds="seeds", seeds_from=_SEEDS_FROM, registered="2026-11-29"),
    Record(id="bfloat16-weight-stops-without-master", kind=IDENTITY,
           claim="without fp32 master weights a bfloat16 weight stops moving",
           where="the chapter 16.3", grid=("update_steps",), registered="2026-11-29"),
    Record(id="float16-update-lost-without-master", kind=IDENTITY,
           claim="float16: an update of 2^-12 to a weight of 1 is lost; an fp32 master keeps it",
           where="papers.md section 11, reproduction G", grid=("update_steps",),
           registered="2026-11-29"),
    Record(id="bfloat16-sum-stalls-at-256", kind=IDENTITY,
           claim="a bfloat16 running sum of values in [0, 1) stalls at 256",
           where="ml_dtypes README; the chapter 16.3", grid=("sum_terms",),
           registered="2026-11-29"),
    Record(id="harmonic-series-stagnates", kind=IDENTITY,
           claim="the harmonic series stagnates under round-to-nearest",
           where="Higham's demo_harmonic", registered="2026-11-29"),
    Record(id="fp16-zeroes-a-further-31-percent-of-ssd-gradients", kind=CLAIM,
           claim="without loss scaling fp16 zeroes a further 31% of SSD's activation gradients",
           source="\"Multibox SSD: 66.8% of activation-gradient values were 0; converting to FP16 "
                  "zeroes a further 31%\" (papers.md 11 [S], from NVIDIA's guide quoting the "
                  "paper)", where=f"{_PAPER}, Fig. 3 and section 4.3", registered="2026-12-07",
           untested="the share is of SSD's activation gradients on VOC: the lab has no SSD, and "
                    "the tiny GPT's share on the Markov source (2-4%) is of another histogram, "
                    "so it neither confirms nor refutes 31%"),
)


def _before(quick: dict, full: dict) -> dict:
    return {"quick": {**quick, "kind": CLAIM}, "full": {**full, "kind": CLAIM}}


_TAUTOLOGY = ("lab-audit.md (8ed4d62), row 6 and section 2: all three counted rows are "
              "tautologies. ")
AMENDMENTS = (
    Amendment(
        id="float16-flushes-some-gradients", date="2026-12-07",
        changed="kind claim -> derivation: counted apart, no longer in the verdict",
        why=_TAUTOLOGY + "'Some > 0' holds for any model whose gradients span fp16's 30 "
            "binades and more; the paper's comparable number (a further 31% of SSD's "
            "gradients) is judged against '> 0' only, and is registered on its own as not "
            "tested", before={"kind": "claim"}, commit="8ed4d62",
        results_before=_before(
            {"status": "pass", "interval": [0.019523622719723265, 0.026681351551288736],
             "measured": "over 4 models, the smaller of init and trained: 2.31% [1.95%, 2.67%] "
                         "(n=4) (init 3.61% [3.51%, 3.7%] (n=4), after 100 steps 2.31% "
                         "[1.95%, 2.67%] (n=4))"},
            {"status": "pass", "interval": [0.024970798186698385, 0.037415805271761644],
             "measured": "over 4 models, the smaller of init and trained: 3.12% [2.5%, 3.74%] "
                         "(n=4) (init 3.61% [3.51%, 3.7%] (n=4), after 600 steps 3.12% [2.5%, "
                         "3.74%] (n=4))"})),
    Amendment(
        id="gradients-below-float16-normal-range", date="2026-12-07",
        changed="kind claim -> derivation: counted apart, no longer in the verdict",
        why=_TAUTOLOGY + "The tenth is the lab's own threshold on the lab's own model's "
            "gradient histogram (78% below 2^-14), not a number of the paper",
        before={"kind": "claim"}, commit="8ed4d62",
        results_before=_before(
            {"status": "pass", "interval": [0.7758655451152425, 0.7831561838191483],
             "measured": "below 2^-14, the smaller of init and trained: 78% [77.6%, 78.3%] "
                         "(n=4) (init 78% [77.6%, 78.3%] (n=4), trained 95.1% [94.9%, 95.3%] "
                         "(n=4))"},
            {"status": "pass", "interval": [0.7758655451152425, 0.7831561838191483],
             "measured": "below 2^-14, the smaller of init and trained: 78% [77.6%, 78.3%] "
                         "(n=4) (init 78% [77.6%, 78.3%] (n=4), trained 84.9% [83.4%, 86.4%] "
                         "(n=4))"})),
    Amendment(
        id="loss-scale-recovers-flushed-gradients", date="2026-12-07",
        changed="kind claim -> derivation: counted apart, no longer in the verdict",
        why=_TAUTOLOGY + "'Scaling recovers' is binade arithmetic: S >= 1024 shifts every value "
            "ten binades up, so only values below 2^-34 stay flushed, a property of the "
            "histogram the row's own measurement fixes",
        before={"kind": "claim"}, commit="8ed4d62",
        results_before=_before(
            {"status": "pass", "interval": [0.0015068248267866534, 0.009254395366733014],
             "measured": "flushed at S >= 1024 / flushed unscaled, per model, the larger of init "
                         "and trained: 0.00538 [0.00151, 0.00925] (n=4) (init 0.00149 "
                         "[0.000938, 0.00204] (n=4), trained 0.00538 [0.00151, 0.00925] "
                         "(n=4)); overflow: none up to S = 65536"},
            {"status": "pass", "interval": [0.01886326165829902, 0.06665636039123718],
             "measured": "flushed at S >= 1024 / flushed unscaled, per model, the larger of init "
                         "and trained: 0.0428 [0.0189, 0.0667] (n=4) (init 0.00149 [0.000938, "
                         "0.00204] (n=4), trained 0.0428 [0.0189, 0.0667] (n=4)); overflow: "
                         "none up to S = 65536"})),
)
