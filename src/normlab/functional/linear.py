"""Linear (fully connected) layer, with PyTorch's weight layout (out_features, in_features).

    y = x W^T + b                  x (..., C_in), W (C_out, C_in), b (C_out,)

Backward, over the N = prod(leading shape) rows:

    dx = dy W          dW = dy^T x  (summed over rows)          db = sum over rows of dy

Every product is one 2-D matrix multiply on the rows flattened to (N, C): one BLAS call, no
per-batch loop.

An ensemble (``normlab.train.Ensemble``) stacks M models' weights along a leading member axis:
W (M, C_out, C_in), b (M, C_out), x (M, ..., C_in). The products are then batched matrix
multiplies over the member axis (NumPy calls the same sgemm once per member, on the member's own
rows, so a member's result is its single model's bit for bit), and each parameter gradient
reduces over the axes its parameter was broadcast along (a member's rows), not over the members.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


class LinearCache(NamedTuple):
    """Saved: the input rows and the weight as the product saw them; nothing is recomputed."""

    x2: Array  # (N, C_in) the input rows, compute dtype (needed for dW); (M, N, C_in) stacked
    weight: Array  # (C_out, C_in) compute dtype (needed for dx); (M, C_out, C_in) stacked
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
        x: (..., C_in) float array; (M, ..., C_in) with stacked weights.
        weight: (C_out, C_in), PyTorch's layout; or (M, C_out, C_in), M members' weights
            stacked (an ensemble), each applied to its member's slice ``x[m]``.
        bias: (C_out,) or None; (M, C_out) with stacked weights.

    Returns:
        out: (..., C_out) in x's dtype; cache for ``linear_backward``.
    """
    x = ck.float_array(x, "x")
    ck.at_least_nd(x, "x", 1)
    weight = ck.float_array(weight, "weight")
    if weight.ndim == 3:
        return _stacked_forward(x, weight, bias)
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


def _stacked_forward(x: Array, weight: Array, bias: Array | None) -> tuple[Array, LinearCache]:
    """``linear_forward`` of M members: weight (M, C_out, C_in), x (M, ..., C_in)."""
    M, C_out, C_in = weight.shape
    if x.ndim < 2 or x.shape[0] != M or x.shape[-1] != C_in:
        raise ValueError(f"x must have shape (M = {M}, ..., {C_in}) to match stacked weights "
                         f"{weight.shape}; got {x.shape}")
    if bias is not None:
        bias = ck.float_array(bias, "bias")
        if bias.shape != (M, C_out):
            raise ValueError(f"bias must have shape {(M, C_out)} to match stacked weights; got "
                             f"{bias.shape}")
    ct = ck.compute_dtype(x.dtype)
    x2 = x.reshape(M, -1, C_in).astype(ct, copy=False)  # (M, N, C_in)
    w = weight.astype(ct, copy=False)  # (M, C_out, C_in)
    out = x2 @ w.transpose(0, 2, 1)  # (M, N, C_out): one sgemm per member
    if bias is not None:
        out += bias.astype(ct, copy=False)[:, None, :]
    dtypes = (weight.dtype, None if bias is None else bias.dtype)
    cache = LinearCache(x2, w, x.shape, x.dtype, bias is not None, dtypes)
    return ck.out_cast(out.reshape(*x.shape[:-1], C_out), x.dtype), cache


def linear_backward(dout: Array, cache: LinearCache) -> tuple[Array, Array, Array | None]:
    """Gradients of the linear layer: ``(dx, dweight, dbias)``; dx in x's dtype, parameter
    gradients in at least float32 (dbias None without a bias); with stacked weights, one
    gradient per member, (M, C_out, C_in) and (M, C_out)."""
    ck.cache(cache, LinearCache, "linear")
    x2, w, x_shape, x_dtype, has_bias, (weight_dt, bias_dt) = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", (*x_shape[:-1], w.shape[-2]), "the shape of the forward's output")
    if w.ndim == 3:  # stacked members: batched products, gradients reduced per member
        dys = dout.reshape(w.shape[0], -1, w.shape[1]).astype(w.dtype, copy=False)  # (M, N, Co)
        dxs = dys @ w  # (M, N, C_in)
        dws = (dys.transpose(0, 2, 1) @ x2).astype(ck.compute_dtype(weight_dt), copy=False)
        dbs = (np.stack([ck.reduce_rows(d) for d in dys]).astype(ck.compute_dtype(bias_dt))
               if has_bias else None)
        return ck.out_cast(dxs.reshape(x_shape), x_dtype), dws, dbs
    dy = dout.reshape(-1, w.shape[0]).astype(w.dtype, copy=False)  # (N, C_out)
    dx = dy @ w  # (N, C_in)
    dweight = (dy.T @ x2).astype(ck.compute_dtype(weight_dt), copy=False)  # (C_out, C_in)
    dbias = ck.reduce_rows(dy).astype(ck.compute_dtype(bias_dt)) if has_bias else None
    return ck.out_cast(dx.reshape(x_shape), x_dtype), dweight, dbias
