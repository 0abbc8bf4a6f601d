"""AdamW's update as one fused pass over flat buffers: the arithmetic of
``normlab.train.optim.AdamW.step``, bit for bit.

``AdamW.step`` in NumPy makes about twelve passes over every parameter (scale m, add, scale v,
square, add, sqrt, divide, add eps, divide, scale, decay, subtract, and a dot product for the
update's norm), each allocating a temporary. Here each element is read once (p, g, m, v) and
written once (p, m, v), every step in NumPy's order and rounding: the constants are rounded to
the buffers' dtype as NumPy rounds a Python float combined with a float32 array, and nothing is
contracted into a fused multiply-add. Only the squared norm of each parameter's update differs
from NumPy's ``vdot`` in its last bits: it is summed in blocks of 2048 in the buffers' dtype and
the blocks in float64 (a metric, not a result).

The buffers are 1-D and hold one or more parameters back to back; ``starts`` marks where each
begins (and the total length at the end), ``decay`` which of them are decayed. With a model's
parameters and gradients as views into two flat buffers (``normlab.nn.Module.flatten``) the
whole update is one call.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ._common import row_sumsq

_BLOCK = 2048  # elements per block: the update is held in an L1-resident scratch row


@njit(cache=True, error_model="numpy")
def _moments(g, m, v, u, b1, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, step):
    """m, v updated in place and u = m / (sqrt(v) / sqrt(1 - b2^t) + eps) * lr / (1 - b1^t)
    (four arrays: few enough for LLVM's overlap checks, so the loop vectorizes)."""
    for j in range(u.shape[0]):
        gj = g[j]
        mj = m[j] * b1 + one_m_b1 * gj
        vj = v[j] * b2 + one_m_b2 * (gj * gj)
        m[j] = mj
        v[j] = vj
        u[j] = mj / (np.sqrt(vj) / bc2_sqrt + eps) * step


@njit(cache=True, error_model="numpy")
def _apply(p, u, decayed, wd):
    """u <- u + lr wd p (decayed parameters), then p <- p - u."""
    if decayed:
        for j in range(u.shape[0]):
            uj = u[j] + wd * p[j]
            u[j] = uj
            p[j] = p[j] - uj
    else:
        for j in range(u.shape[0]):
            p[j] = p[j] - u[j]


@njit(cache=True, error_model="numpy")
def _adamw(p, g, m, v, starts, decay, b1, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, step, wd, sq):
    buf = np.empty(_BLOCK, p.dtype)
    for i in range(starts.shape[0] - 1):
        acc = 0.0
        for lo in range(starts[i], starts[i + 1], _BLOCK):
            hi = min(lo + _BLOCK, starts[i + 1])
            u = buf[: hi - lo]
            _moments(g[lo:hi], m[lo:hi], v[lo:hi], u, b1, one_m_b1, b2, one_m_b2, bc2_sqrt, eps,
                     step)
            _apply(p[lo:hi], u, decay[i], wd)
            acc += np.float64(row_sumsq(u, hi - lo))  # a block in the buffers' dtype, then float64
        sq[i] = acc


def adamw_update(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray,
                 starts: np.ndarray, decay: np.ndarray, *, lr: float, b1: float, b2: float,
                 eps: float, weight_decay: float, t: int) -> np.ndarray:
    """One AdamW update at step ``t`` (>= 1) of the flat buffers, in place:

        m <- b1 m + (1 - b1) g            v <- b2 v + (1 - b2) g^2
        p <- p - (m / (sqrt(v) / sqrt(1 - b2^t) + eps) * lr / (1 - b1^t) + lr wd p [decayed])

    Args:
        p, g, m, v: 1-D contiguous arrays of one float dtype (float32 or float64), one length.
        starts: (n + 1,) int64 offsets of the n parameters in the buffers, 0 first, length last.
        decay: (n,) bool, whether each parameter is decayed.

    Returns:
        (n,) float64: the squared norm of each parameter's update.
    """
    check_buffers(p, g, m, v, starts, decay)
    return update(p, g, m, v, np.asarray(starts, np.int64), np.asarray(decay, np.bool_), lr=lr,
                  b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, t=t)


def check_buffers(p: Any, g: Any, m: Any, v: Any, starts: Any, decay: Any) -> None:
    """``adamw_update``'s checks of its buffers and layout (a TypeError or ValueError naming
    the argument): an optimizer that steps the same buffers every time checks them once."""
    dt = getattr(p, "dtype", None)
    for name, a in (("p", p), ("g", g), ("m", m), ("v", v)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name} must be a NumPy array; got {type(a).__name__}")
        if a.dtype != dt or dt not in (np.float32, np.float64):
            raise TypeError(f"{name} must be float32 or float64 like p; got {a.dtype}")
        if a.ndim != 1 or a.shape != p.shape or not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a contiguous 1-D array of p's length {p.size}; "
                             f"got shape {a.shape}")
    starts = np.asarray(starts, np.int64)
    decay = np.asarray(decay, np.bool_)
    if (starts.ndim != 1 or starts.size < 1 or starts[0] != 0 or starts[-1] != p.size
            or np.any(np.diff(starts) < 0) or decay.shape != (starts.size - 1,)):
        raise ValueError("starts must rise from 0 to the buffers' length, with one decay flag per "
                         "parameter")


def update(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, starts: np.ndarray,
           decay: np.ndarray, *, lr: float, b1: float, b2: float, eps: float,
           weight_decay: float, t: int) -> np.ndarray:
    """``adamw_update`` on buffers that ``check_buffers`` accepted (``starts`` int64,
    ``decay`` bool), unchecked."""
    c = p.dtype.type
    bc1 = 1.0 - b1**t
    bc2_sqrt = math.sqrt(1.0 - b2**t)
    sq = np.empty(decay.size, np.float64)
    # A constant beyond the dtype's range (a learning rate of 1e39 in float32) rounds to inf, as
    # NumPy rounds it in the reference: the parameters become non-finite and the trainer stops
    # the run with that reason, so the cast's overflow warning says nothing more.
    with np.errstate(over="ignore"):
        consts = (c(b1), c(1.0 - b1), c(b2), c(1.0 - b2), c(bc2_sqrt), c(eps), c(lr / bc1),
                  c(lr * weight_decay))
    _adamw(p, g, m, v, starts, decay, *consts, sq)
    return sq


__all__ = ["adamw_update"]
