"""Embedding lookup: row ``ids[...]`` of a table, and its scatter-add backward.

    y[..., :] = W[ids[...], :]                      ids (...) integers in [0, V), W (V, C)
    dW[v, :]  = sum over positions p with ids[p] = v of dy[p, :]        (scatter-add)

The scatter-add sorts the ids once and sums each run of equal ids with one ``np.add.reduceat``
(several times faster than ``np.add.at``); the order of the sums is fixed, so it is deterministic.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array


def token_ids(ids: Any, name: str, V: int, *, ignore_index: int | None = None) -> Array:
    """``ids`` as an integer ndarray with every value in [0, V) (or equal to ``ignore_index``),
    or a TypeError / ValueError naming ``name``."""
    arr = np.asarray(ids)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array of token ids; got dtype {arr.dtype}")
    valid = (arr >= 0) & (arr < V)
    if ignore_index is not None:
        valid |= arr == ignore_index
    if not valid.all():
        bad = arr[~valid].flat[0]
        allowed = f"[0, {V})" + ("" if ignore_index is None else f" or {ignore_index} (ignored)")
        raise ValueError(f"{name} must hold values in {allowed}; got {bad}")
    return arr


class EmbeddingCache(NamedTuple):
    """Saved: the ids and the table's shape; the gathered rows are not kept."""

    ids: Array  # (...) integer ids
    table_shape: tuple  # (V, C)
    grad_dtype: np.dtype  # dtype of dW: at least float32


def embedding_forward(ids: Array, weight: Array) -> tuple[Array, EmbeddingCache]:
    """Look up rows of ``weight``.

    Args:
        ids: (...) integer array, values in [0, V).
        weight: (V, C) float table.

    Returns:
        out: (..., C) in weight's dtype; cache for ``embedding_backward``.
    """
    weight = ck.float_array(weight, "weight")
    if weight.ndim != 2:
        raise ValueError(f"weight must be a (V, C) table; got shape {weight.shape}")
    ids = token_ids(ids, "ids", weight.shape[0])
    out = weight[ids]  # (..., C) a gathered copy
    return out, EmbeddingCache(ids, weight.shape, ck.compute_dtype(weight.dtype))


def embedding_backward(dout: Array, cache: EmbeddingCache) -> tuple[None, Array]:
    """Gradients of the lookup: ``(None, dweight)`` (ids have no gradient); dweight (V, C)."""
    ck.cache(cache, EmbeddingCache, "embedding")
    ids, (V, C), grad_dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", (*ids.shape, C), "the shape of the forward's output")
    flat = ids.reshape(-1)  # (N,)
    dweight = np.zeros((V, C), grad_dtype)
    if flat.size == 0:
        return None, dweight
    order = np.argsort(flat, kind="stable")  # positions grouped by id
    sorted_ids = flat[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])  # first of each run
    rows = dout.reshape(-1, C).astype(grad_dtype, copy=False)[order]  # (N, C) grouped by id
    dweight[sorted_ids[starts]] = np.add.reduceat(rows, starts, axis=0)
    return None, dweight
