"""Linear and Embedding modules: parameters, gradient buffers, the last cache, precision hooks."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from ..functional import (
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

    def forward(self, x: np.ndarray) -> np.ndarray:
        n = self.numerics
        out, self._cache = linear_forward(n.input(x), n.weight(self.params["weight"]),
                                          self.params.get("bias"))
        return n.output(out)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        n = self.numerics
        dx, dweight, dbias = linear_backward(n.grad(dout, "dout"), self._last_cache())
        self.accumulate("weight", n.output(dweight, "dweight"))
        if "bias" in self.params:
            self.accumulate("bias", dbias)
        return n.output(dx, "dx")


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
