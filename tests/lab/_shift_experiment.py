"""``shift-and-scale``: LayerNorm forgets a token's mean and scale, RMSNorm only its scale.

A new experiment written the way the lab's are (card, config, measure, judge, plot), kept beside
the tests to hold the framework to its promise: a complete experiment in well under 150 lines.
Measured with normlab's ``layer_norm_forward`` and ``rms_norm_forward`` in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normlab.functional import layer_norm_forward, rms_norm_forward
from normlab.lab.framework import Card, Check, fmt

CARD = Card(
    name="shift-and-scale",
    title="Shift and scale of a token: LayerNorm vs RMSNorm",
    citation="Ba, Kiros & Hinton 2016; Zhang & Sennrich 2019, section 3",
    claim="LayerNorm's output does not change when a constant is added to every feature of a "
          "token or the token is scaled; RMSNorm's does not change under scaling but does under "
          "a shift.",
    published="re-centering and re-scaling invariance of LayerNorm; RMSNorm keeps re-scaling "
              "invariance only (Zhang & Sennrich, Table 1)",
    method="float64 tokens of `width` features, shifted by each of `shifts` and scaled by each "
           "of `scales`; eps 1e-12 so that eps does not blur an exact invariance.",
    explanation="LayerNorm subtracts the token's mean before dividing by its spread, so a shift "
                "cancels; RMSNorm divides by the root mean square without centering, so a shift "
                "changes what it divides by.",
)

EXACT, VISIBLE = 1e-12, 1e-2  # "no effect" in float64; "a visible effect" on unit-scale outputs
EPS_BLUR = 1e-9  # a scale a changes eps's share: y moves by about eps / (2 a^2 var) x |y|


@dataclass(frozen=True)
class Config:
    width: int = 64  # C: features per token
    tokens: int = 256  # tokens drawn
    shifts: tuple[float, ...] = (0.5, 3.0)  # c added to every feature of a token
    scales: tuple[float, ...] = (0.1, 10.0)  # a multiplying every feature of a token
    seed: int = 0  # seed of the tokens


SIZES = {"tiny": {"tokens": 16, "width": 16}, "quick": {}, "full": {"tokens": 4096}}


def measure(config: Config, ctx) -> dict:
    x = np.random.default_rng(config.seed).normal(size=(config.tokens, config.width))  # (N, C)
    gamma, beta = np.ones(config.width), np.zeros(config.width)
    norms = {"layernorm": lambda v: layer_norm_forward(v, gamma, beta, eps=1e-12)[0],
             "rmsnorm": lambda v: rms_norm_forward(v, gamma, eps=1e-12)[0]}
    data = {}
    for i, (name, norm) in enumerate(norms.items()):
        y = norm(x)
        data[name] = {"shift": [float(np.abs(norm(x + c) - y).max()) for c in config.shifts],
                      "scale": [float(np.abs(norm(a * x) - y).max()) for a in config.scales]}
        ctx.progress(i + 1, len(norms), name)
    return data


def judge(data: dict, config: Config) -> list[Check]:
    ln, rms = data["layernorm"], data["rmsnorm"]

    def show(v):
        return ", ".join(fmt(x) for x in v)

    return [
        Check(claim="LayerNorm ignores a shift of the token",
              published="invariant (Ba et al. 2016)",
              measured=f"max |dy| = {show(ln['shift'])} at c = {config.shifts}",
              rule=f"< {EXACT:g}",
              passed=max(ln["shift"]) < EXACT, source="Ba et al. 2016 [V]"),
        Check(claim="RMSNorm does not", published="not invariant (Zhang & Sennrich, Table 1)",
              measured=f"max |dy| = {show(rms['shift'])}", rule=f"> {VISIBLE:g} at every c",
              passed=min(rms["shift"]) > VISIBLE, source="Zhang & Sennrich 2019 [V]"),
        Check(claim="both ignore a scale of the token", published="invariant (both papers)",
              measured=f"LayerNorm {show(ln['scale'])}; RMSNorm {show(rms['scale'])}",
              rule=f"< {EPS_BLUR:g} (eps's own share)",
              passed=max(ln["scale"] + rms["scale"]) < EPS_BLUR,
              source="Zhang & Sennrich 2019 [V]"),
    ]


def headline(data: dict, config: Config) -> str:
    return (f"shift moves LayerNorm by {fmt(max(data['layernorm']['shift']))}, RMSNorm by "
            f"{fmt(max(data['rmsnorm']['shift']))}; scale moves either by at most "
            f"{fmt(max(data['layernorm']['scale'] + data['rmsnorm']['scale']))}")


def plot(result, out_dir) -> list[str]:
    from normlab.lab.plotting import figure, save, style

    d, cfg = result.data, result.config
    fig, (a,) = figure()
    for name, color in (("layernorm", "#1f77b4"), ("rmsnorm", "#d62728")):
        a.plot(cfg["shifts"], np.maximum(d[name]["shift"], 1e-18), "o-", color=color, label=name)
    a.set_yscale("log")
    style(a, "output change under a shift", "shift c", "max |N(x + c) - N(x)|")
    return [save(fig, out_dir, "shift_and_scale.png")]
