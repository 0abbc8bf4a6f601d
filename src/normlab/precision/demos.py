"""The chapter's mixed-precision demonstrations (section 16.3, Listing 16.4), as functions.

* range: float16 overflows on 1e5 (max 65504) where bfloat16, with float32's exponent range,
  stays finite;
* loss scaling: a gradient of 1e-8 underflows to 0 in float16 (smallest subnormal 2^-24) and
  survives a scale of 2^16;
* summation: a bfloat16 running sum of 10,000 values in [0, 1) stalls at 256, where the spacing
  is 2 and every term is below half of it, while a float32 accumulator keeps going;
* the harmonic series stagnates under round-to-nearest: float16 at n = 513 (sum 7.0859375),
  bfloat16 at n = 65 (5.0625), e4m3fn at n = 9, e5m2 at n = 5 (Higham's demo_harmonic);
  stochastic rounding keeps it growing;
* updates: a bfloat16 weight of 1.0 does not move under 1000 updates of -1e-3; an fp32 master
  copy, Kahan compensation or stochastic rounding do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import get_format
from .master import METHODS, WeightUpdater
from .rounding import quantize, round_to_bfloat16


def fp16_overflows_but_bfloat16_keeps_range() -> tuple[Array, Array]:
    """[1e5, 1e30] rounded to float16 (both inf) and to bfloat16 (99840 and ~1e30)."""
    large = np.array([1e5, 1e30], dtype=np.float32)
    fp16 = quantize(large, "float16")
    bf16 = round_to_bfloat16(large)
    return fp16, bf16


def loss_scaled_gradient(gradient: Any, scale: float) -> Array:
    """The gradient after a float16 backward with loss scale S: round(g S) / S, in float32.

    Listing 16.4: ``(gradient * scale).astype(np.float16).astype(np.float32) / scale``.
    """
    g = ck.float_array(gradient, "gradient").astype(np.float32)
    s = np.float32(ck.positive(scale, "scale"))
    return quantize(g * s, "float16") / s


def tiny_gradient_survives_loss_scaling(gradient: float = 1e-8,
                                        scale: float = 2.0**16) -> tuple[float, float]:
    """(the gradient through float16 without scaling, with scaling): (0.0, ~1e-8)."""
    return float(loss_scaled_gradient(gradient, 1.0)), float(loss_scaled_gradient(gradient,
                                                                                   scale))


def running_sum(values: Any, fmt: Any, *, rounding: str = "nearest_even",
                rng: np.random.Generator | None = None) -> float:
    """s <- round(s + v) for each value in turn, s kept in ``fmt`` (one rounding per addition,
    the addition exact in float64)."""
    v = ck.float_array(values, "values").astype(np.float64).ravel()
    fmt = get_format(fmt)
    s = np.zeros((), np.float64)
    for x in v:  # a running sum is sequential by definition
        s = quantize(s + x, fmt, rounding=rounding, rng=rng)
    return float(s)


def bfloat16_running_sum(n: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """n values U(0, 1) stored in bfloat16, summed in a bfloat16 and in a float32 accumulator:
    (bfloat16 sum, float32 sum, exact sum). The bfloat16 sum stalls at 256."""
    u = round_to_bfloat16(np.random.default_rng(seed).random(n, dtype=np.float32))
    acc32 = np.float32(0)
    for x in u:  # sequential, like the bfloat16 accumulator
        acc32 = np.float32(acc32 + x)
    return running_sum(u, "bfloat16"), float(acc32), float(np.sum(u, dtype=np.float64))


def harmonic_stagnation(fmt: Any, *, rounding: str = "nearest_even",
                        rng: np.random.Generator | None = None,
                        max_terms: int = 1_000_000) -> tuple[int, float]:
    """Sum 1/n in ``fmt``, s <- round(s + round(1/n)), until a term no longer changes the sum.

    Returns (n, s): the first n whose term is lost and the partial sum s. Stochastic rounding
    does not stall: it runs all ``max_terms`` terms and returns (max_terms, s), as does a sum
    that has not stalled by then.
    """
    fmt = get_format(fmt)
    s = 0.0
    for n in range(1, max_terms + 1):
        term = float(quantize(np.float64(1.0 / n), fmt, rounding=rounding, rng=rng))
        new = float(quantize(np.float64(s + term), fmt, rounding=rounding, rng=rng))
        if new == s and rounding != "stochastic":
            return n, s
        s = new
    return max_terms, s


def update_stagnation(fmt: Any = "bfloat16", w0: float = 1.0, delta: float = -1e-3,
                      steps: int = 1000, seed: int = 0) -> dict[str, float]:
    """The final weight after ``steps`` updates of ``delta`` to ``w0`` stored in ``fmt``, for
    each method of ``WeightUpdater`` (direct, master, kahan, stochastic), and ``exact``."""
    out = {}
    for method in METHODS:
        rng = np.random.default_rng(seed) if method == "stochastic" else None
        u = WeightUpdater(np.array([w0]), fmt, method, rng=rng)
        for _ in range(steps):
            u.step(delta)
        out[method] = float(u.weight[0])
    out["exact"] = w0 + steps * delta
    return out
