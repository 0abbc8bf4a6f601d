"""Normalization and dropout modules: parameters, gradient buffers and the last cache."""

from __future__ import annotations

import numpy as np

from .. import _checks as ck
from ..functional import (
    batch_norm_backward,
    batch_norm_forward,
    dropout_backward,
    dropout_forward,
    dyt_backward,
    dyt_forward,
)
from ..functional.dyt import ALPHA_INIT
from .module import Module


def _width(C: int) -> int:
    return ck.integer(C, "the normalized width C", lo=1)


class LayerNorm(Module):
    """LayerNorm over the last axis: gamma = 1 and beta = 0 at init (``bias=False`` drops beta).
    ``impl``: "kernel" (the fused numba kernel, default) or "reference" (normlab.functional)."""

    def __init__(self, C: int, eps: float = 1e-5, *, bias: bool = True, dtype=np.float32,
                 impl: str = "kernel"):
        super().__init__()
        C = _width(C)
        self.eps = ck.positive(eps, "eps")
        self.add_param("gamma", np.ones(C, dtype))
        if bias:
            self.add_param("beta", np.zeros(C, dtype))
        self.set_impl(impl)

    def forward(self, x: np.ndarray) -> np.ndarray:
        out, self._cache = self.op("layer_norm_forward")(
            x, self.params["gamma"], self.params.get("beta"), self.eps
        )
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx, dgamma, dbeta = self.op("layer_norm_backward")(dout, self._last_cache())
        self.accumulate("gamma", dgamma)
        if "beta" in self.params:
            self.accumulate("beta", dbeta)
        return dx


class RMSNorm(Module):
    """RMSNorm over the last axis. ``offset=1`` is Gemma's ``(1 + w)`` with w initialized to 0;
    ``partial=p`` is pRMSNorm. ``impl``: "kernel" (default) or "reference"."""

    def __init__(self, C: int, eps: float = 1e-8, *, partial: float | None = None,
                 offset: float = 0.0, dtype=np.float32, impl: str = "kernel"):
        super().__init__()
        C = _width(C)
        self.eps = ck.positive(eps, "eps")
        self.partial, self.offset = partial, float(offset)
        self.add_param("weight", np.full(C, 1.0 - self.offset, dtype))
        self.set_impl(impl)

    def forward(self, x: np.ndarray) -> np.ndarray:
        out, self._cache = self.op("rms_norm_forward")(
            x, self.params["weight"], self.eps, partial=self.partial, offset=self.offset
        )
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx, dweight = self.op("rms_norm_backward")(dout, self._last_cache())
        self.accumulate("weight", dweight)
        return dx


class DyT(Module):
    """Dynamic Tanh: ``gamma * tanh(alpha * x) + beta``, alpha a learned scalar (init 0.5)."""

    def __init__(self, C: int, alpha_init: float = ALPHA_INIT, *, dtype=np.float32):
        super().__init__()
        C = _width(C)
        ck.real(alpha_init, "alpha_init")
        self.add_param("alpha", np.array(alpha_init, dtype))
        self.add_param("gamma", np.ones(C, dtype))
        self.add_param("beta", np.zeros(C, dtype))

    def forward(self, x: np.ndarray) -> np.ndarray:
        p = self.params
        out, self._cache = dyt_forward(x, p["alpha"], p["gamma"], p["beta"])
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx, dalpha, dgamma, dbeta = dyt_backward(dout, self._last_cache())
        self.accumulate("alpha", dalpha)
        self.accumulate("gamma", dgamma)
        self.accumulate("beta", dbeta)
        return dx


class BatchNorm(Module):
    """BatchNorm over every axis but the last, owning its running statistics (PyTorch
    conventions: ``momentum`` weighs the new batch, running variance unbiased, ``momentum=None``
    a cumulative average; ``track_running_stats=False`` uses batch statistics in eval too).

    ``forward(x, mask=None)``: ``mask`` (x's leading shape, bool) marks real positions.
    """

    def __init__(self, C: int, eps: float = 1e-5, momentum: float | None = 0.1, *,
                 track_running_stats: bool = True, dtype=np.float32):
        super().__init__()
        C = _width(C)
        self.eps = ck.positive(eps, "eps")
        self.momentum = momentum
        self.add_param("gamma", np.ones(C, dtype))
        self.add_param("beta", np.zeros(C, dtype))
        self.track_running_stats = bool(track_running_stats)
        stat_dtype = ck.compute_dtype(dtype)
        self.running_mean = np.zeros(C, stat_dtype) if track_running_stats else None
        self.running_var = np.ones(C, stat_dtype) if track_running_stats else None
        self.num_batches_tracked = 0

    def forward(self, x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        use_batch = self.training or not self.track_running_stats
        update = self.training and self.track_running_stats
        out, self._cache, mean, var = batch_norm_forward(
            x, self.params["gamma"], self.params["beta"],
            self.running_mean if update or not use_batch else None,
            self.running_var if update or not use_batch else None,
            training=use_batch, momentum=self.momentum, eps=self.eps, mask=mask,
            num_batches_tracked=self.num_batches_tracked,
        )
        if update:
            self.running_mean[...] = mean
            self.running_var[...] = var
            self.num_batches_tracked += 1
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx, dgamma, dbeta = batch_norm_backward(dout, self._last_cache())
        self.accumulate("gamma", dgamma)
        self.accumulate("beta", dbeta)
        return dx


class Dropout(Module):
    """Inverted dropout with its own generator: ``Dropout(p_drop, rng=np.random.default_rng(0))``."""

    def __init__(self, p_drop: float, *, rng: np.random.Generator):
        super().__init__()
        self.p_drop = ck.probability(p_drop, "p_drop")
        self.rng = ck.generator(rng)

    def forward(self, x: np.ndarray) -> np.ndarray:
        out, self._cache = dropout_forward(x, self.p_drop, training=self.training, rng=self.rng)
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dropout_backward(dout, self._last_cache())
