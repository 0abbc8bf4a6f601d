"""Sums accumulated in a low-precision format, chunked as hardware promotes partial sums.

    accumulate_sum(x, "bfloat16", chunk=128)

sums ``x`` along an axis the way a reduction with a bfloat16 accumulator does: inside each chunk
of ``chunk`` consecutive terms a running sum in the format (each addition done in float64 and
rounded once to the format, so the rounding is single: 53 >= 2p + 2 for every p <= 25), and the
chunks' partial sums added in the ``promote`` format (float32 by default), as fp8 GEMMs promote
their partial sums to float32 every 128 products (DeepSeek-V3's recipe; TransformerEngine's
split accumulator) and as fused norm and softmax kernels keep a per-thread partial in the input
type. ``chunk=None`` is one running sum over the whole axis: the accumulator stalls once its
half-ulp exceeds the terms (swamping), which is how a bfloat16 sum of 1000 ones stops at 256
(ml_dtypes' ``arr.sum()``) and a softmax row accumulated in 16 bits sums to less than 1.

This is the reference for the accumulation roles of the reductions; the statistics of the norms
and the softmax sums can be computed with it (``benchmarks/accumulation.py`` measures their
error against float64 by width, format and chunk).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import get_format
from .rounding import quantize


def accumulate_sum(x: Any, fmt: Any, *, axis: int = -1, chunk: int | None = None,
                   promote: Any = "float32", rounding: str = "nearest_even",
                   rng: np.random.Generator | None = None) -> Array:
    """Sum ``x`` along ``axis`` with a ``fmt`` accumulator, ``chunk`` terms at a time.

    Args:
        x: float array; the terms are first rounded to float32 (their storage type).
        fmt: the accumulator's format (a name in FORMATS, a FloatFormat or a dtype).
        axis: the reduced axis.
        chunk: terms per running sum in ``fmt`` (>= 1); None: the whole axis.
        promote: the format the chunks' partial sums are added in (float32 by default; the
            additions in float64, rounded once).
        rounding, rng: the accumulator's rounding (``quantize``'s modes; stochastic needs rng).

    Returns:
        float64 array of x's shape without ``axis``, holding values of ``promote`` (of ``fmt``
        when there is one chunk). An empty axis sums to 0.
    """
    x = ck.float_array(x, "x")
    fmt_ = get_format(fmt, "fmt")
    promote_ = get_format(promote, "promote")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension to sum along; got a scalar")
    ax = ck.integer(axis, "axis", lo=-x.ndim, hi=x.ndim - 1) % x.ndim
    n = x.shape[ax]
    k = n if chunk is None else ck.integer(chunk, "chunk", lo=1, hi=1 << 40)
    quantize(np.zeros(1, np.float32), fmt_, rounding=rounding, rng=rng)  # checks rounding/rng
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.moveaxis(x, ax, -1).astype(np.float32).astype(np.float64)
    total = np.zeros(terms.shape[:-1])
    for start in range(0, n, max(k, 1)):
        acc = np.zeros(terms.shape[:-1])
        for j in range(start, min(n, start + k)):
            acc = quantize(acc + terms[..., j], fmt_, rounding=rounding, rng=rng)
        total = acc if start == 0 else quantize(total + acc, promote_)
    return total
