"""Linear and Embedding modules: parameters, gradient buffers, the last cache, precision hooks."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from ..functional import (
    LinearCache,
    embedding_backward,
    embedding_forward,
    linear_backward,
    linear_forward,
)
from .module import Module
from .numerics import FULL_PRECISION, Numerics


def _count(n: Any, name: str) -> int:
    return ck.integer(n, name, lo=1)


class Linear(Module):
    """``y = x W^T + b`` with W (out_features, in_features) drawn from N(0, std^2) and b = 0.

    ``numerics`` rounds the weight and the input before the product and the result after it;
    in the backward the incoming gradient (the GEMM operand) and the results dx and dW (the
    identity at full precision; see ``normlab.nn.numerics``).
    """

    numerics: Numerics = FULL_PRECISION

    def __init__(self, in_features: int, out_features: int, *, bias: bool = False,
                 rng: np.random.Generator | None, std: float = 0.02, dtype: DTypeLike = np.float32):
        super().__init__()
        in_features = _count(in_features, "in_features")
        out_features = _count(out_features, "out_features")
        std = ck.positive(std, "std")
        self.add_param("weight", _normal(rng, std, (out_features, in_features), dtype))
        if bias:
            self.add_param("bias", np.zeros(out_features, dtype))

    #: the forward's high-precision x and W, kept where the backward GEMMs quantize their own
    #: operands (``numerics.splits()``), else None
    _raw: tuple[np.ndarray, np.ndarray] | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        n = self.numerics
        w = self.params["weight"]
        out, self._cache = linear_forward(n.input(x), n.weight(w), self.params.get("bias"))
        self._raw = (x, w) if n.splits() else None
        return n.output(out)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        n = self.numerics
        g = n.grad(dout, "dout")
        if self._raw is None:
            dx, dweight, dbias = linear_backward(g, self._last_cache())
        else:
            dx, dweight, dbias = operand_backward(n, dout, g, self._last_cache(), self._raw)
        self.accumulate("weight", n.output(dweight, "dweight"))
        if "bias" in self.params:
            self.accumulate("bias", dbias)
        return n.output(dx, "dx")


def operand_backward(n: Numerics, dout: np.ndarray, g: np.ndarray, cache: LinearCache,
                     raw: tuple[np.ndarray, np.ndarray], key: str = "weight"
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A linear layer's backward whose GEMMs take their own operands (``Numerics.operand``):
    ``dx = dY_d Q_dgrad(W)`` and ``dW = Q_wgrad(dY)^T Q_wgrad(x)``, the wgrad operands along
    the token axis.

    Args:
        n: the layer's numerics (``n.splits(key)``).
        dout: dY (..., C_out), high precision; ``g``: dY as ``n.grad`` rounded it (dgrad's).
        cache: the forward's ``LinearCache`` (its rounded x rows and W).
        raw: the forward's high-precision x (..., C_in) and W (C_out, C_in); stacked members:
            (M, ..., C_in) and (M, C_out, C_in).
        key: the layer's weight key (``"head"`` for the tied head).

    Returns:
        dx (x's shape and dtype), dW (W's shape, at least float32), db (C_out,) or (M, C_out)
        from g, or None; as ``linear_backward``.
    """
    x, w = raw
    x2, wq, x_shape, x_dtype, has_bias, (weight_dt, bias_dt) = cache
    ct = wq.dtype
    wd = n.operand("dgrad.weight", w, key, wq).astype(ct, copy=False)
    gw = n.operand("wgrad.grad_output", dout, key, g)
    xw = n.operand("wgrad.input", x, key, x2.reshape(x_shape))
    lead = (wq.shape[0],) if wq.ndim == 3 else ()
    C_out, C_in = wq.shape[-2:]
    dy = g.reshape(*lead, -1, C_out).astype(ct, copy=False)  # (N, C_out) or (M, N, C_out)
    gy = gw.reshape(*lead, -1, C_out).astype(ct, copy=False)
    xx = xw.reshape(*lead, -1, C_in).astype(ct, copy=False)
    dx = dy @ wd  # (.., N, C_in)
    dweight = (np.swapaxes(gy, -1, -2) @ xx).astype(ck.compute_dtype(weight_dt), copy=False)
    dbias = None
    if has_bias:
        bt = ck.compute_dtype(bias_dt)
        dbias = (np.stack([ck.reduce_rows(d) for d in dy]) if lead
                 else ck.reduce_rows(dy)).astype(bt)
    return ck.out_cast(dx.reshape(x_shape), x_dtype), dweight, dbias


class Embedding(Module):
    """A (num_embeddings, dim) table drawn from N(0, std^2); ``forward(ids)`` gathers rows
    (of the table as ``numerics.param`` presents it: the low-precision copy of a master)."""

    numerics: Numerics = FULL_PRECISION

    def __init__(self, num_embeddings: int, dim: int, *, rng: np.random.Generator | None,
                 std: float = 0.02, dtype: DTypeLike = np.float32):
        super().__init__()
        num_embeddings = _count(num_embeddings, "num_embeddings")
        dim = _count(dim, "dim")
        std = ck.positive(std, "std")
        self.add_param("weight", _normal(rng, std, (num_embeddings, dim), dtype))

    def forward(self, ids: np.ndarray) -> np.ndarray:
        weight = self.numerics.param(self.params["weight"])
        if self.members:  # (M, V, C) tables, ids (M, ...): member m's rows of the (M V, C) table
            M, V, C = weight.shape
            ids = np.asarray(ids)
            if ids.ndim < 1 or ids.shape[0] != M:
                raise ValueError(f"ids must have a leading member axis of {M}; got {ids.shape}")
            offset = (np.arange(M) * V).reshape((M,) + (1,) * (ids.ndim - 1))
            flat, self._cache = embedding_forward(ids + offset, weight.reshape(M * V, C))
            return flat
        out, self._cache = embedding_forward(ids, weight)
        return out

    def backward(self, dout: np.ndarray) -> None:
        _, dweight = embedding_backward(dout, self._last_cache())
        self.accumulate("weight", dweight.reshape(self.params["weight"].shape))


def _normal(rng: np.random.Generator | None, std: float, shape: tuple[int, int],
            dtype: Any) -> np.ndarray:
    """Initial weights drawn from N(0, std^2); ``rng=None``: zeros, nothing drawn (the OS
    provides a zero array's pages only once written), for a model whose parameters a loader
    replaces (``GPT.empty``)."""
    if rng is None:
        return np.zeros(shape, dtype)
    ck.generator(rng)
    return (std * rng.standard_normal(shape)).astype(dtype)
