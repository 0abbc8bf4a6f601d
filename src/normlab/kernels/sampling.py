"""The Markov source's walk (``normlab.train.data.MarkovSource.sample``) in one compiled loop.

Each of the B chains draws its next symbol by the inverse CDF of its context's row: the count of
the row's cumulative probabilities that the uniform exceeds. The reference
(``normlab.train.data.markov_walk``) does it with one NumPy pass per time step over all chains
(about 30 small operations per batch); this loop makes the same comparisons on the same
float64 values and the same integer updates, so its symbols are the reference's, bit for bit
(``tests/train/test_data.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True)
def _walk(cdf, ctx, uniforms, out, order, V, n_ctx):  # pragma: no cover - compiled
    for t in range(uniforms.shape[0]):
        for b in range(ctx.shape[0]):
            c, u = ctx[b], uniforms[t, b]
            n = 0
            for j in range(V):
                if u > cdf[c, j]:
                    n += 1
            out[b, order + t] = n
            ctx[b] = (c * V + n) % n_ctx


def markov_walk(cdf: np.ndarray, ctx: np.ndarray, uniforms: np.ndarray, out: np.ndarray,
                order: int) -> None:
    """As ``normlab.train.data.markov_walk``: continue the chains of contexts ``ctx`` (B,) for
    ``uniforms.shape[0]`` steps, writing symbol t into ``out[:, order + t]``; ``ctx`` ends as
    the last contexts."""
    _check(cdf, ctx, uniforms, out, order)
    n_ctx, V = cdf.shape
    _walk(cdf, ctx, uniforms, out, order, V, n_ctx)


def _check(cdf: Any, ctx: Any, uniforms: Any, out: Any, order: Any) -> None:
    """A ValueError naming the first argument that is not what the walk reads and writes."""
    def bad(name: str, a: Any, dtype: str, shape: str) -> ValueError:
        got = (f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__)
        return ValueError(f"{name} must be an ndarray of {dtype} with shape {shape}; got {got}")

    if not (isinstance(cdf, np.ndarray) and cdf.dtype == np.float64 and cdf.ndim == 2):
        raise bad("cdf", cdf, "float64", "(V^order, V)")
    if not (isinstance(ctx, np.ndarray) and ctx.dtype == np.int64 and ctx.ndim == 1):
        raise bad("ctx", ctx, "int64", "(B,)")
    B = ctx.shape[0]
    if not (isinstance(uniforms, np.ndarray) and uniforms.dtype == np.float64
            and uniforms.ndim == 2 and uniforms.shape[1] == B):
        raise bad("uniforms", uniforms, "float64", f"(steps, B = {B})")
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"order must be an integer >= 1; got {order!r}")
    if not (isinstance(out, np.ndarray) and out.dtype == np.int64 and out.ndim == 2
            and out.shape[0] == B and out.shape[1] >= order + uniforms.shape[0]):
        raise bad("out", out, "int64", f"(B = {B}, >= order + steps = "
                  f"{order + uniforms.shape[0]})")
    if B and (ctx.min() < 0 or ctx.max() >= cdf.shape[0]):
        raise ValueError(f"ctx must hold contexts in [0, {cdf.shape[0]}); got "
                         f"[{ctx.min()}, {ctx.max()}]")
