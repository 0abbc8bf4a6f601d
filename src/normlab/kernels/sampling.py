"""The Markov source's walk (``normlab.train.data.MarkovSource.sample``) in one compiled loop.

Each of the B chains draws its next symbol by the inverse CDF of its context's row: the count of
the row's cumulative probabilities that the uniform exceeds. The reference
(``normlab.train.data.markov_walk``) does it with one NumPy pass per time step over all chains
(about 30 small operations per batch); this loop makes the same comparisons on the same
float64 values and the same integer updates, so its symbols are the reference's, bit for bit
(``tests/train/test_data.py``).
"""

from __future__ import annotations

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
    n_ctx, V = cdf.shape
    _walk(cdf, ctx, uniforms, out, order, V, n_ctx)
