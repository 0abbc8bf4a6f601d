"""Pointwise activations: GELU (exact erf form and GPT-2's tanh form), ReLU, SwiGLU.

    GELU, exact:   y = x * Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
                   dy/dx = Phi(x) + x * phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
    GELU, tanh:    y = x (1 + t) / 2,  t = tanh(u),  u = sqrt(2/pi) (x + 0.044715 x^3)
                   dy/dx = (1 + t) / 2 + x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) / 2
    ReLU:          y = max(x, 0)           dy/dx = [x > 0]
    SwiGLU:        y = silu(a) * b,  silu(a) = a * s,  s = sigmoid(a)      (Shazeer 2020)
                   da = dy * b * s * (1 + a (1 - s))          db = dy * silu(a)

The names follow PyTorch: ``approximate="none"`` is ``F.gelu``'s exact form, ``"tanh"`` GPT-2's.
NumPy has no vectorized erf, so the exact form calls ``math.erf`` per element: correct to double
precision but slow; it is the reference a compiled kernel replaces.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
_ERF = np.frompyfunc(math.erf, 1, 1)


def _approximate(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' (exact, erf) or 'tanh'; got {approximate!r}")
    return approximate


class GeluCache(NamedTuple):
    """Saved: the input and Phi(x) (exact) or tanh(u) (tanh form), both in the compute dtype."""

    x: Array  # (...) the input, compute dtype
    s: Array  # (...) Phi(x) for the exact form, t = tanh(u) for the tanh form
    approximate: str  # "none" or "tanh"
    dtype: np.dtype  # x's dtype as given


def gelu_forward(x: Array, *, approximate: str = "none") -> tuple[Array, GeluCache]:
    """GELU (Hendrycks & Gimpel 2016), elementwise.

    Args:
        x: float array of any shape.
        approximate: "none" (exact, ``x * Phi(x)``) or "tanh" (GPT-2's approximation).

    Returns:
        out (x's shape and dtype); cache for ``gelu_backward``.
    """
    x = ck.float_array(x, "x")
    approximate = _approximate(approximate)
    ct = ck.compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)
    v = xc.reshape(-1)  # (N,) a view: in-place NumPy needs arrays, and a 0-d one gives scalars
    if approximate == "tanh":
        s = v * v  # in place from here on: u = sqrt(2/pi) (x + 0.044715 x^3)
        s *= ct.type(_GELU_CUBIC * _SQRT_2_OVER_PI)
        s += ct.type(_SQRT_2_OVER_PI)
        s *= v
        np.tanh(s, out=s)  # t = tanh(u)
        out = s + ct.type(1)
        out *= v
        out *= ct.type(0.5)
    else:
        # math.erf per value (frompyfunc on an array returns an object array, not a float)
        erf = _ERF(v.astype(np.float64) * _SQRT_HALF).astype(np.float64)  # type: ignore[union-attr]
        s = (0.5 * (1.0 + erf)).astype(ct, copy=False)  # Phi(x)
        out = v * s
    out, s = out.reshape(x.shape), s.reshape(x.shape)
    return ck.out_cast(out, x.dtype), GeluCache(xc, s, approximate, x.dtype)


def gelu_backward(dout: Array, cache: GeluCache) -> Array:
    """Gradient of GELU: ``dx`` (one input), in x's dtype."""
    ck.cache(cache, GeluCache, "gelu")
    x, s, approximate, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", x.shape, "the shape of the forward's output")
    ct = x.dtype
    dy = dout.astype(ct, copy=False).reshape(-1)  # (N,) views, as in the forward
    x, s = x.reshape(-1), s.reshape(-1)
    if approximate == "tanh":
        local = x * x  # in place from here on
        local *= ct.type(3 * _GELU_CUBIC * _SQRT_2_OVER_PI)
        local += ct.type(_SQRT_2_OVER_PI)  # du/dx
        local *= x
        local *= ct.type(1) - s * s  # x (1 - t^2) du/dx
        local += s
        local += ct.type(1)
        local *= ct.type(0.5)
    else:
        local = x * x
        local *= ct.type(-0.5)
        np.exp(local, out=local)
        local *= ct.type(_INV_SQRT_2PI)  # phi(x)
        local *= x
        local += s
    local *= dy
    return ck.out_cast(local.reshape(dout.shape), dtype)


class ReluCache(NamedTuple):
    """Saved: where the input was positive (one byte per value)."""

    positive: Array  # x.shape bool, x > 0
    dtype: np.dtype  # x's dtype


def relu_forward(x: Array) -> tuple[Array, ReluCache]:
    """ReLU, elementwise: ``max(x, 0)``; the gradient at 0 is 0 (as PyTorch).

    Args:
        x: float array of any shape.

    Returns:
        out (x's shape and dtype); cache for ``relu_backward``.
    """
    x = ck.float_array(x, "x")
    positive = x > 0
    return np.where(positive, x, x.dtype.type(0)), ReluCache(positive, x.dtype)


def relu_backward(dout: Array, cache: ReluCache) -> Array:
    """Gradient of ReLU: ``dx`` (one input), in x's dtype."""
    ck.cache(cache, ReluCache, "relu")
    positive, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", positive.shape, "the shape of the forward's output")
    return np.where(positive, dout, 0).astype(dtype, copy=False)


class SwiGLUCache(NamedTuple):
    """Saved: both inputs and sigmoid(a), compute dtype; silu(a) is recomputed."""

    a: Array  # (...) the gate input
    b: Array  # (...) the linear input
    s: Array  # (...) sigmoid(a)
    dtype: np.dtype  # output dtype (a's)


def _sigmoid(a: Array) -> Array:
    """1 / (1 + exp(-a)) without overflow: exp of -|a| only."""
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(a.dtype, copy=False)


def swiglu_forward(a: Array, b: Array) -> tuple[Array, SwiGLUCache]:
    """SwiGLU's gated product: ``silu(a) * b`` (the gate and the up projection of a SwiGLU MLP).

    Args:
        a: float array, the gate (passed through SiLU).
        b: float array of a's shape.

    Returns:
        out (a's shape and dtype); cache for ``swiglu_backward``.
    """
    a = ck.float_array(a, "a")
    b = ck.float_array(b, "b")
    ck.same_shape(b, "b", a.shape, "the shape of a")
    ct = ck.compute_dtype(a.dtype)
    ac, bc = a.astype(ct, copy=False), b.astype(ct, copy=False)
    s = _sigmoid(ac)
    out = ac * s * bc
    return ck.out_cast(out, a.dtype), SwiGLUCache(ac, bc, s, a.dtype)


def swiglu_backward(dout: Array, cache: SwiGLUCache) -> tuple[Array, Array]:
    """Gradients of SwiGLU: ``(da, db)`` in a's dtype."""
    ck.cache(cache, SwiGLUCache, "swiglu")
    a, b, s, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", a.shape, "the shape of the forward's output")
    dy = dout.astype(a.dtype, copy=False)
    da = dy * b * s * (1.0 + a * (1.0 - s))
    db = dy * a * s
    return ck.out_cast(da, dtype), ck.out_cast(db, dtype)
