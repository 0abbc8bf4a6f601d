"""Applying updates to weights stored in a low-precision format.

With round-to-nearest an update d to a weight w is lost when |d| < ulp(w) / 2: a bfloat16 weight
of 1.0 (ulp below 1: 2^-8) ignores every update smaller than 2^-9, so a thousand updates of -1e-3
leave it at 1.0. Four ways to apply ``w <- w + d``, each computing in float32 and rounding once
to the weight format, as an in-place add on a low-precision tensor does:

* ``direct``:     w = round(w + d)                                   (no master copy)
* ``master``:     m = m + d in float32;  w = round(m)                 (fp32 master weights)
* ``kahan``:      y = d - c;  t = round(w + y);  c = round((t - w) - y);  w = t
                  (Kahan-compensated summation with the compensation c stored in the weight
                  format, as Zamirai et al. 2020 and optimi do)
* ``stochastic``: w = round_stochastic(w + d)                          (E[w] follows the sum)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import get_format
from .rounding import quantize

METHODS = ("direct", "master", "kahan", "stochastic")


class WeightUpdater:
    """Weights in a low-precision format, updated by one of METHODS.

    Args:
        w0: initial weights, float array of any shape (rounded to ``fmt``; the master copy keeps
            them in float32).
        fmt: the weight format (a name, FloatFormat or dtype), e.g. ``"bfloat16"``.
        method: ``"direct"``, ``"master"``, ``"kahan"`` or ``"stochastic"`` (module docstring).
        rng: a numpy Generator, required for ``"stochastic"``.

    Attributes:
        weight: the current weights, float32 values of ``fmt`` (w0's shape).
        master: the float32 master copy (``"master"`` only, else None).
        compensation: Kahan's running compensation c in ``fmt`` (``"kahan"`` only, else None).
    """

    def __init__(self, w0: Any, fmt: Any = "bfloat16", method: str = "master", *,
                 rng: np.random.Generator | None = None) -> None:
        w0 = ck.float_array(w0, "w0")
        self.fmt = get_format(fmt)
        ck.choice(method, "method", METHODS)
        if method == "stochastic":
            if rng is None:
                raise TypeError("method='stochastic' needs rng (a numpy.random.Generator)")
            ck.generator(rng)
        self.method = method
        self.rng = rng
        w32 = w0.astype(np.float32)
        self.weight: Array = quantize(w32, self.fmt)
        self.master: Array | None = w32.copy() if method == "master" else None
        self.compensation: Array | None = np.zeros_like(w32) if method == "kahan" else None

    def step(self, delta: Any) -> Array:
        """w <- w + delta (delta broadcastable to the weights); returns the new weights."""
        d = ck.float_array(delta, "delta").astype(np.float32, copy=False)
        try:
            shape = np.broadcast_shapes(d.shape, self.weight.shape)
        except ValueError:
            shape = None
        if shape != self.weight.shape:
            raise ValueError(f"delta must broadcast to the weights' shape {self.weight.shape}; "
                             f"got {d.shape}")
        if self.method == "direct":
            self.weight = quantize(self.weight + d, self.fmt)
        elif self.method == "master":
            self.master = self.master + d  # type: ignore[operator]  # an array for "master"
            self.weight = quantize(self.master, self.fmt)
        elif self.method == "kahan":
            y = d - self.compensation  # type: ignore[operator]  # an array for "kahan"
            t = quantize(self.weight + y, self.fmt)
            self.compensation = quantize((t - self.weight) - y, self.fmt)
            self.weight = t
        else:
            self.weight = quantize(self.weight + d, self.fmt, rounding="stochastic",
                                   rng=self.rng)
        return self.weight

    def __repr__(self) -> str:
        return f"WeightUpdater({self.fmt.name}, {self.method}, shape={self.weight.shape})"


def apply_updates(w0: Any, updates: Any, fmt: Any = "bfloat16", method: str = "master", *,
                  rng: np.random.Generator | None = None) -> Array:
    """Apply ``updates[0], updates[1], ...`` in turn (each broadcastable to w0) and return the
    final weights: ``WeightUpdater(w0, fmt, method, rng=rng)`` stepped over them."""
    u = WeightUpdater(w0, fmt, method, rng=rng)
    for d in updates:
        u.step(d)
    return u.weight
