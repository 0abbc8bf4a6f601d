"""Linear (fully connected) layer, with PyTorch's weight layout (out_features, in_features).

    y = x W^T + b                  x (..., C_in), W (C_out, C_in), b (C_out,)

Backward, over the N = prod(leading shape) rows:

    dx = dy W          dW = dy^T x  (summed over rows)          db = sum over rows of dy

Every product is one 2-D matrix multiply on the rows flattened to (N, C): one BLAS call, no
per-batch loop.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class LinearCache(NamedTuple):
    """Saved: the input rows and the weight as the product saw them; nothing is recomputed."""

    x2: Array  # (N, C_in) the input rows, compute dtype (needed for dW)
    weight: Array  # (C_out, C_in) compute dtype (needed for dx)
    x_shape: tuple  # the input's shape (..., C_in)
    x_dtype: np.dtype  # the input's dtype: dx comes back in it
    has_bias: bool  # whether the forward had a bias (its gradient is None otherwise)
    param_dtypes: tuple  # dtypes of weight and bias as given (None where absent)


def check_weight(weight: Any, name: str, in_features: int) -> Array:
    """A float matrix of shape (C_out, in_features), or a clear error naming ``name``."""
    weight = ck.float_array(weight, name)
    if weight.ndim != 2 or weight.shape[1] != in_features:
        raise ValueError(
            f"{name} must have shape (out_features, {in_features}) to match the last axis of x "
            f"(PyTorch's layout); got {weight.shape}"
        )
    return weight


def linear_forward(x: Array, weight: Array, bias: Array | None = None) -> tuple[Array, LinearCache]:
    """``y = x @ weight.T + bias`` over the last axis of ``x`` (any leading shape).

    Args:
        x: (..., C_in) float array.
        weight: (C_out, C_in), PyTorch's layout.
        bias: (C_out,) or None.

    Returns:
        out: (..., C_out) in x's dtype; cache for ``linear_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    C_in = x.shape[-1]
    weight = check_weight(weight, "weight", C_in)
    C_out = weight.shape[0]
    bias = ck.param(bias, "bias", C_out, allow_none=True)
    ct = ck.compute_dtype(x.dtype)

    x2 = x.reshape(-1, C_in).astype(ct, copy=False)  # (N, C_in)
    w = weight.astype(ct, copy=False)  # (C_out, C_in)
    out = x2 @ w.T  # (N, C_out)
    if bias is not None:
        out += bias.astype(ct, copy=False)
    dtypes = (weight.dtype, None if bias is None else bias.dtype)
    cache = LinearCache(x2, w, x.shape, x.dtype, bias is not None, dtypes)
    return ck.out_cast(out.reshape(*x.shape[:-1], C_out), x.dtype), cache


def linear_backward(dout: Array, cache: LinearCache) -> tuple[Array, Array, Array | None]:
    """Gradients of the linear layer: ``(dx, dweight, dbias)``; dx in x's dtype, parameter
    gradients in at least float32 (dbias None without a bias)."""
    ck.cache(cache, LinearCache, "linear")
    x2, w, x_shape, x_dtype, has_bias, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", (*x_shape[:-1], w.shape[0]), "the shape of the forward's output")
    dy = dout.reshape(-1, w.shape[0]).astype(w.dtype, copy=False)  # (N, C_out)
    dx = dy @ w  # (N, C_in)
    dweight = (dy.T @ x2).astype(ck.compute_dtype(weight_dt), copy=False)  # (C_out, C_in)
    dbias = ck.reduce_rows(dy).astype(ck.compute_dtype(bias_dt)) if has_bias else None
    return ck.out_cast(dx.reshape(x_shape), x_dtype), dweight, dbias
