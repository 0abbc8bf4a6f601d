"""Where a precision policy rounds values inside a model: a small set of named hooks.

Modules keep float32 (or float64) arrays throughout; a low-precision format is emulated by
rounding values onto its grid at these documented points. This base class is the identity at
every point (full precision); a subclass built from a precision policy rounds where it says.

    weight(w)   a parameter as a matrix multiply reads it              (the compute format)
    input(x)    a matrix multiply's activation input                   (the compute format)
    output(y)   a matrix multiply's result, as the GEMM writes it      (the compute format)
    stream(x)   the residual stream after each residual add            (the activations format)
    grad(g)     an activation gradient in the backward, and a weight
                gradient as the GEMM writes it                         (the gradients format)

Saved activations are the rounded values (a Linear saves its rounded input), so the backward sees
what a low-precision forward would have kept.
"""

from __future__ import annotations

import numpy as np


class Numerics:
    """Full precision: every hook returns its argument unchanged (no copy)."""

    def weight(self, w: np.ndarray) -> np.ndarray:
        return w

    def input(self, x: np.ndarray) -> np.ndarray:
        return x

    def output(self, y: np.ndarray) -> np.ndarray:
        return y

    def stream(self, x: np.ndarray) -> np.ndarray:
        return x

    def grad(self, g: np.ndarray) -> np.ndarray:
        return g


FULL_PRECISION = Numerics()
