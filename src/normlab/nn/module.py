"""A small stateful base: named parameters, gradient buffers that accumulate, train/eval.

Modules hold no calculus. ``forward`` calls a pure ``*_forward`` and keeps the cache of the last
call; ``backward`` calls the matching ``*_backward`` and *adds* the parameter gradients into
``self.grads`` (so tied or repeated parameters work), returning the input gradient.

An ensemble's modules (``normlab.train.Ensemble``; ``normlab.models.stack``) hold M models'
parameters stacked along a leading member axis, ``members = M`` (0: one model), and take inputs
with that leading axis; each parameter gradient reduces over the axes its parameter was broadcast
along, so that member m's gradient is the one its model alone would have.

Children are found among the attributes: a ``Module``, or a list/tuple of them. Parameter names
are dotted paths (``blocks.0.attn.norm.weight``), as in PyTorch's ``named_parameters``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._checks import compute_dtype


class Module:
    """Base class: ``params`` and ``grads`` are dicts of arrays with the same keys."""

    members: int = 0  # M > 0: the parameters are M members' (M, ...) stacked, inputs (M, ...)

    def __init__(self) -> None:
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        self.training: bool = True
        self.impl: str = "kernel"  # "kernel" (normlab.kernels) or "reference" (functional)
        self._cache: Any = None

    # ---- parameters ------------------------------------------------------------------------
    def add_param(self, name: str, value: np.ndarray) -> np.ndarray:
        """Register a parameter and a zeroed gradient buffer (at least float32)."""
        if "." in name:
            raise ValueError(f"parameter name must not contain '.'; got {name!r}")
        value = np.asarray(value)
        self.params[name] = value
        self.grads[name] = np.zeros(value.shape, dtype=compute_dtype(value.dtype))
        return value

    def accumulate(self, name: str, grad: np.ndarray | np.floating | None) -> None:
        """Add ``grad`` into the buffer of parameter ``name`` (no-op for None)."""
        if grad is not None:
            self.grads[name] += grad

    def children(self) -> Iterator[tuple[str, Module]]:
        for attr, value in vars(self).items():
            if isinstance(value, Module):
                yield attr, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{attr}.{i}", item

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """``(dotted name, module)`` for this module (named ``prefix``, "" by default) and every
        descendant, depth first, as in PyTorch's ``named_modules``."""
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop(0)
            yield name, m
            stack[:0] = [(f"{name}.{c}" if name else c, child) for c, child in m.children()]

    def modules(self) -> Iterator[Module]:
        """This module and every descendant, depth first."""
        return (m for _, m in self.named_modules())

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, np.ndarray]]:
        for name, value in self.params.items():
            yield prefix + name, value
        for cname, child in self.children():
            yield from child.named_parameters(f"{prefix}{cname}.")

    def named_grads(self, prefix: str = "") -> Iterator[tuple[str, np.ndarray]]:
        for name, value in self.grads.items():
            yield prefix + name, value
        for cname, child in self.children():
            yield from child.named_grads(f"{prefix}{cname}.")

    def parameters(self) -> dict[str, np.ndarray]:
        """Every parameter of this module and its children, by dotted name."""
        return dict(self.named_parameters())

    def gradients(self) -> dict[str, np.ndarray]:
        """Every gradient buffer, by the same dotted names as ``parameters()``."""
        return dict(self.named_grads())

    def zero_grad(self) -> None:
        for _, g in self.named_grads():
            g.fill(0)

    def flatten(self) -> Module:
        """Move every parameter into one flat buffer and every gradient into another (when all
        parameters share a dtype, and the gradients too), each array becoming a view into its
        buffer, in the order of ``parameters()``: the optimizer then updates the model in one
        fused pass (``normlab.train.AdamW``). Values are unchanged; arrays obtained before are no
        longer the model's, so call it once the model is built. A no-op where the dtypes differ
        or an array is registered twice."""
        named = [(m, n) for m in self._modules_depth_first() for n in m.params]
        if (not named or len({m.params[n].dtype for m, n in named}) != 1
                or len({m.grads[n].dtype for m, n in named}) != 1
                or len({id(m.params[n]) for m, n in named}) != len(named)):
            return self
        total = sum(m.params[n].size for m, n in named)
        flat_p = np.empty(total, named[0][0].params[named[0][1]].dtype)
        flat_g = np.empty(total, named[0][0].grads[named[0][1]].dtype)
        lo = 0
        for m, n in named:
            p, g = m.params[n], m.grads[n]
            hi = lo + p.size
            flat_p[lo:hi] = p.reshape(-1)
            flat_g[lo:hi] = g.reshape(-1)
            m.params[n] = flat_p[lo:hi].reshape(p.shape)
            m.grads[n] = flat_g[lo:hi].reshape(g.shape)
            lo = hi
        return self

    def _modules_depth_first(self) -> Iterator[Module]:
        """This module and its descendants in the order ``named_parameters`` visits them."""
        yield self
        for _, child in self.children():
            yield from child._modules_depth_first()

    def load_parameters(self, values: dict[str, np.ndarray]) -> None:
        """Overwrite parameters in place from a dict with exactly the names of ``parameters()``."""
        own = self.parameters()
        missing, extra = set(own) - set(values), set(values) - set(own)
        if missing or extra:
            raise ValueError(
                f"parameters do not match: missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        for name, p in own.items():
            v = np.asarray(values[name])
            if v.shape != p.shape:
                raise ValueError(f"parameter {name} has shape {p.shape}; got {v.shape}")
            p[...] = v

    def replace_parameters(self, values: dict[str, np.ndarray]) -> None:
        """Make each array of ``values`` (by dotted names of ``parameters()``; any subset) the
        parameter itself, not a copy: a memory map of a checkpoint stays one. Each must have the
        shape and dtype of the parameter it replaces; every name and array is checked before any
        is replaced. Gradient buffers are kept. A flat buffer (``flatten``) no longer holds a
        replaced parameter: call ``flatten`` again if the optimizer needs one."""
        if not isinstance(values, dict):
            raise TypeError(f"values must be a dict of name -> array; got {type(values).__name__}")
        owners = {f"{prefix}.{key}" if prefix else key: (m, key)
                  for prefix, m in self.named_modules() for key in m.params}
        unknown = sorted(set(values) - set(owners))
        if unknown:
            raise ValueError(f"values names no parameter of this module: {unknown[:5]}")
        for name, v in values.items():
            m, key = owners[name]
            p = m.params[key]
            if not isinstance(v, np.ndarray) or v.shape != p.shape or v.dtype != p.dtype:
                got = (f"{v.dtype} {v.shape}" if isinstance(v, np.ndarray)
                       else type(v).__name__)
                raise ValueError(f"values[{name!r}] must be an ndarray of dtype {p.dtype} and "
                                 f"shape {p.shape} (the parameter's); got {got}")
        for name, v in values.items():
            m, key = owners[name]
            m.params[key] = v

    # ---- modes ------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        self.training = bool(mode)
        for _, child in self.children():
            child.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    # ---- implementation: fused kernels or the readable reference ------------------------------
    def set_impl(self, impl: str) -> Module:
        """Run this module and all its children on ``"kernel"`` (normlab.kernels, the default) or
        ``"reference"`` (normlab.functional, the NumPy code written next to the equations). Both
        agree within the tolerances of tests/kernels; see ``normlab.kernels``."""
        from ..kernels import check_impl

        self.impl = check_impl(impl)
        for _, child in self.children():
            child.set_impl(impl)
        return self

    def op(self, name: str) -> Callable[..., Any]:
        """The function ``name`` (e.g. "layer_norm_forward") of this module's implementation."""
        from ..kernels import resolve

        return resolve(self.impl, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, dout: np.ndarray) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- saved activations --------------------------------------------------------------------
    def forget(self) -> None:
        """Drop what this module alone saved for its backward (its last cache). A module that
        saves more overrides this and calls ``super().forget()``."""
        self._cache = None

    def release(self) -> None:
        """Drop every activation this module and its descendants saved, once the backward has
        used them (as autograd frees its graph): afterwards only parameters, gradients and
        optimizer state stay in memory."""
        for m in self.modules():
            m.forget()

    def _last_cache(self) -> Any:
        if self._cache is None:
            raise RuntimeError(f"{type(self).__name__}.backward called before forward")
        return self._cache
