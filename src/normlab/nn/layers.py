"""Normalization and dropout modules: parameters, gradient buffers and the last cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from ..functional import (
    batch_norm_backward,
    batch_norm_forward,
    dropout_backward,
    dropout_forward,
)
from ..functional import derf as _derf
from ..functional.dyt import ALPHA_INIT
from ..functional.norms import GENERIC, NormEntry
from ..functional.norms import get as get_norm
from ..functional.norms import register_module as register_norm_module
from .module import Module


def _width(C: int) -> int:
    return ck.integer(C, "the normalized width C", lo=1)


class Norm(Module):
    """A norm module built from its registry entry (``normlab.functional.norms``): the entry's
    parameters as ``params`` (named ``weight``, ``bias``, ...), its forward options as attributes
    (``eps``, ...), and its op: the fused kernel when the entry names one (``impl="kernel"``, the
    default) or the functional reference (``impl="reference"``, and always for an entry without a
    kernel).

    ``Norm("rmsnorm", 64, eps=1e-6)`` is an RMSNorm; a norm registered elsewhere (a toy norm in a
    test) gets its module from this class without writing one. Unknown options are refused by
    name.
    """

    def __init__(self, entry: str | NormEntry, C: int, *, dtype: DTypeLike = np.float32,
                 impl: str = "kernel", **options: Any):
        super().__init__()
        self.entry = entry = entry if isinstance(entry, NormEntry) else get_norm(entry)
        C = _width(C)
        known = {**entry.options, **entry.module_options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"{entry.name}: unknown options {unknown}; accepted: {sorted(known)}")
        opts = {**known, **options}
        if "eps" in opts:
            opts["eps"] = ck.positive(opts["eps"], "eps")
        self.options = {k: opts[k] for k in entry.options}  # passed to the forward
        for k, v in opts.items():
            setattr(self, k, v)
        for p in entry.params:
            if p.flag is None or opts[p.flag]:
                shape = () if p.scalar else (C,)
                self.add_param(p.name, np.full(shape, p.initial(opts), dtype))
        self.set_impl(impl)

    def _ops(self) -> tuple[Callable, Callable]:
        e = self.entry
        if e.kernel is None:
            return e.forward, e.backward
        return self.op(f"{e.kernel}_forward"), self.op(f"{e.kernel}_backward")

    def forward(self, x: np.ndarray) -> np.ndarray:
        params = [self.params.get(n) for n in self.entry.param_names]
        op = self._ops()[0]
        grouped = self._member_ops(x, params)
        if grouped is not None:  # one launch, each member's rows with its own parameters
            out, cache = grouped[0](x, *params, **self.options)
            self._cache = ("grouped", cache)
            return out
        if self.members:  # member by member: each its own parameters and reduction
            outs, caches = [], []
            for m in range(self.members):
                out, cache = op(x[m], *[None if p is None else p[m] for p in params],
                                **self.options)
                outs.append(out)
                caches.append(cache)
            self._cache = ("each", caches)
            return np.stack(outs)
        out, self._cache = op(x, *params, **self.options)
        return out

    def _member_ops(self, x: np.ndarray, params: list) -> tuple[Callable, Callable] | None:
        """An ensemble's fused member kernels for this norm and these inputs, else None."""
        e = self.entry
        if not self.members or self.impl != "kernel" or e.kernel is None:
            return None
        from ..kernels import available

        if not available():
            return None
        from ..kernels.norms import MEMBER_OPS, members_native

        ops = MEMBER_OPS.get(e.kernel)
        return ops if ops is not None and members_native(x, *params) else None

    def backward(self, dout: np.ndarray) -> np.ndarray:
        op = self._ops()[1]
        if self.members and self._last_cache()[0] == "grouped":
            from ..kernels.norms import MEMBER_OPS

            dx, *dparams = MEMBER_OPS[str(self.entry.kernel)][1](dout, self._cache[1])
        elif self.members:
            per = [op(dout[m], c) for m, c in enumerate(self._last_cache()[1])]
            dx = np.stack([r[0] for r in per])
            dparams = [None if per[0][i] is None else np.stack([r[i] for r in per])
                       for i in range(1, len(per[0]))]
        else:
            dx, *dparams = op(dout, self._last_cache())
        for name, g in zip(self.entry.param_names, dparams, strict=True):
            if name in self.params:
                self.accumulate(name, g)
        return dx


class LayerNorm(Norm):
    """LayerNorm over the last axis: ``weight`` = 1 and ``bias`` = 0 at init (``bias=False``
    drops the bias). ``impl``: "kernel" (the fused numba kernel, default) or "reference"
    (normlab.functional)."""

    def __init__(self, C: int, *, eps: float = 1e-5, bias: bool = True,
                 dtype: DTypeLike = np.float32, impl: str = "kernel"):
        super().__init__("layernorm", C, eps=eps, bias=bias, dtype=dtype, impl=impl)


class RMSNorm(Norm):
    """RMSNorm over the last axis. ``offset=1`` is Gemma's ``(1 + w)`` with w initialized to 0;
    ``partial=p`` is pRMSNorm. ``impl``: "kernel" (default) or "reference"."""

    def __init__(self, C: int, *, eps: float = 1e-8, partial: float | None = None,
                 offset: float = 0.0, dtype: DTypeLike = np.float32, impl: str = "kernel"):
        super().__init__("rmsnorm", C, eps=eps, partial=partial, offset=float(offset),
                         dtype=dtype, impl=impl)


class DyT(Norm):
    """Dynamic Tanh: ``weight * tanh(alpha * x) + bias``, alpha a learned scalar (init 0.5)."""

    def __init__(self, C: int, *, alpha_init: float = ALPHA_INIT, dtype: DTypeLike = np.float32):
        ck.real(alpha_init, "alpha_init")
        super().__init__("dyt", C, alpha_init=alpha_init, dtype=dtype)


class Derf(Norm):
    """Dynamic erf (arXiv 2512.10938): ``weight * erf(alpha * x + shift) + bias``, alpha and
    shift learned scalars (init 0.5 and 0, the official code's ``Dynamic_erf``)."""

    def __init__(self, C: int, *, alpha_init: float = _derf.ALPHA_INIT,
                 shift_init: float = _derf.SHIFT_INIT, dtype: DTypeLike = np.float32):
        ck.real(alpha_init, "alpha_init")
        ck.real(shift_init, "shift_init")
        super().__init__("derf", C, alpha_init=alpha_init, shift_init=shift_init, dtype=dtype)


# the norm registry's module classes, registered here where they live (functional never names nn)
register_norm_module(GENERIC, Norm)
for _name, _cls in (("layernorm", LayerNorm), ("rmsnorm", RMSNorm), ("dyt", DyT),
                    ("derf", Derf)):
    register_norm_module(_name, _cls)


class BatchNorm(Module):
    """BatchNorm over every axis but the last (gain ``weight``, bias ``bias``), owning its
    running statistics (PyTorch
    conventions: ``momentum`` weighs the new batch, running variance unbiased, ``momentum=None``
    a cumulative average; ``track_running_stats=False`` uses batch statistics in eval too).

    ``forward(x, mask=None)``: ``mask`` (x's leading shape, bool) marks real positions.
    """

    def __init__(self, C: int, *, eps: float = 1e-5, momentum: float | None = 0.1,
                 track_running_stats: bool = True, dtype: DTypeLike = np.float32):
        super().__init__()
        C = _width(C)
        self.eps = ck.positive(eps, "eps")
        self.momentum = momentum
        self.add_param("weight", np.ones(C, dtype))
        self.add_param("bias", np.zeros(C, dtype))
        self.track_running_stats = bool(track_running_stats)
        stat_dtype = ck.compute_dtype(dtype)
        self.running_mean = np.zeros(C, stat_dtype) if track_running_stats else None
        self.running_var = np.ones(C, stat_dtype) if track_running_stats else None
        self.num_batches_tracked = 0

    def forward(self, x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        use_batch = self.training or not self.track_running_stats
        update = self.training and self.track_running_stats
        out, self._cache, mean, var = batch_norm_forward(
            x, self.params["weight"], self.params["bias"],
            self.running_mean if update or not use_batch else None,
            self.running_var if update or not use_batch else None,
            training=use_batch, momentum=self.momentum, eps=self.eps, mask=mask,
            num_batches_tracked=self.num_batches_tracked,
        )
        if update:  # only when tracking: both running statistics are arrays
            self.running_mean[...] = mean  # type: ignore[index]
            self.running_var[...] = var  # type: ignore[index]
            self.num_batches_tracked += 1
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx, dweight, dbias = batch_norm_backward(dout, self._last_cache())
        self.accumulate("weight", dweight)
        self.accumulate("bias", dbias)
        return dx


class Dropout(Module):
    """Inverted dropout with its own generator:
    ``Dropout(p_drop, rng=np.random.default_rng(0))``."""

    def __init__(self, p_drop: float, *, rng: np.random.Generator):
        super().__init__()
        self.p_drop = ck.probability(p_drop, "p_drop")
        self.rng = ck.generator(rng)

    # an ensemble's dropout: member m's masks from member m's generator, as its model draws them
    member_rngs: tuple[np.random.Generator, ...] = ()

    def forward(self, x: np.ndarray) -> np.ndarray:
        if self.members:
            outs, caches = zip(*(dropout_forward(x[m], self.p_drop, training=self.training,
                                                 rng=rng)
                                 for m, rng in enumerate(self.member_rngs)))
            self._cache = caches
            return np.stack(outs)
        out, self._cache = dropout_forward(x, self.p_drop, training=self.training, rng=self.rng)
        return out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if self.members:
            return np.stack([dropout_backward(dout[m], c)
                             for m, c in enumerate(self._last_cache())])
        return dropout_backward(dout, self._last_cache())
