"""What ``normlab.torch.emulate`` did with every operation that computes with a weight or is a
matrix product: one row per (module, op), as the run met them.

A row's ``status`` is one of:

* ``rounded``: the op runs on rounded operands (``rounded`` says which, by role);
* ``float32``: the op runs in float32 by the rules (``why`` says which rule): a product of two
  activations (normlab's attention computes q k^T and p v in float32), a norm (float32 on the
  rounded inputs, its gain and bias unrounded, as normlab's norms), an element-wise op with a
  parameter (a gain, a scale, a bias);
* ``not emulated``: an op that computes with a weight and that emulate has no rounding for (a
  recurrent cell, ``F.bilinear``, ``F.embedding_bag``, an attention option that the
  decomposition does not cover): a :class:`NotEmulatedWarning` names it once per row, or
  :class:`NotEmulatedError` stops the run at it under ``emulate(..., strict=True)``.

``Coverage.table()`` is the rows as a Markdown table.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

STATUSES = ("rounded", "float32", "not emulated")


class NotEmulatedWarning(UserWarning):
    """An op that computes with a weight ran unrounded: emulate has no rounding for it."""


class NotEmulatedError(RuntimeError):
    """Under ``emulate(..., strict=True)``: an op that computes with a weight that emulate has
    no rounding for."""


#: Functions that only read, move or describe a tensor (views, copies, metadata): a weight
#: passing through them is not a computation with it.
PASSIVE = frozenset({
    torch.Tensor.size, torch.Tensor.dim, torch.Tensor.numel, torch.Tensor.view,
    torch.Tensor.reshape, torch.reshape, torch.Tensor.transpose, torch.transpose, torch.Tensor.t,
    torch.t, torch.Tensor.permute, torch.permute, torch.Tensor.contiguous,
    torch.Tensor.chunk, torch.chunk, torch.Tensor.split, torch.split, torch.Tensor.unbind,
    torch.Tensor.__getitem__, torch.Tensor.expand, torch.Tensor.unsqueeze, torch.unsqueeze,
    torch.Tensor.squeeze, torch.squeeze, torch.Tensor.flatten, torch.flatten,
    torch.Tensor.unflatten, torch.Tensor.narrow, torch.Tensor.select, torch.Tensor.detach,
    torch.Tensor.clone, torch.clone, torch.Tensor.to, torch.Tensor.float, torch.Tensor.type_as,
    torch.Tensor.requires_grad_, torch.Tensor.data_ptr, torch.Tensor.stride,
    torch.Tensor.is_contiguous, torch.Tensor.__len__, torch.Tensor.__iter__,
    torch.Tensor.__hash__, torch.Tensor.__format__, torch.Tensor.__repr__,
    torch.Tensor.storage_offset, torch.Tensor.untyped_storage, torch.Tensor.element_size,
    torch.Tensor.new_empty, torch.Tensor.new_zeros, torch.Tensor.new_ones,
    torch.Tensor.new_full, torch.Tensor.new_tensor, torch.zeros_like, torch.ones_like,
    torch.empty_like, torch.full_like, torch.Tensor.index_select, torch.index_select,
    torch.cat, torch.stack, torch.Tensor.repeat, torch.Tensor.repeat_interleave,
    torch.repeat_interleave, torch.Tensor.view_as, torch.Tensor.expand_as,
    torch.Tensor.reshape_as, torch.Tensor.type, torch.Tensor.cpu, torch.Tensor.cuda,
    torch.Tensor.get_device, torch.Tensor.__setstate__, torch.Tensor.__reduce_ex__,
    torch.Tensor.__deepcopy__, torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.numpy,
    torch.Tensor.__bool__, torch.Tensor.__index__, torch.Tensor.is_floating_point,
    torch.Tensor.copy_, torch.Tensor.zero_, torch.Tensor.fill_, torch.Tensor.normal_,
    torch.Tensor.uniform_,
})

#: Norms: float32 on the rounded inputs; their gain and bias are not rounded.
NORMS = frozenset({F.layer_norm, F.group_norm, F.batch_norm, F.instance_norm,
                   F.local_response_norm, torch.layer_norm, torch.group_norm, torch.batch_norm,
                   *((F.rms_norm, torch.rms_norm) if hasattr(F, "rms_norm") else ())})

#: Element-wise functions: a parameter in them is a gain, a scale or a bias.
ELEMENTWISE = frozenset({
    torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__,
    torch.Tensor.mul_, torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__,
    torch.Tensor.add_, torch.sub, torch.Tensor.sub, torch.Tensor.__sub__,
    torch.Tensor.__rsub__, torch.div, torch.Tensor.div, torch.Tensor.__truediv__,
    torch.Tensor.__rtruediv__, torch.addcmul, torch.Tensor.addcmul, torch.addcdiv,
    torch.lerp, torch.where, torch.clamp, torch.Tensor.clamp, torch.maximum, torch.minimum,
    torch.neg, torch.Tensor.neg, torch.Tensor.__neg__, torch.exp, torch.Tensor.exp,
    torch.sigmoid, torch.Tensor.sigmoid, torch.tanh, torch.Tensor.tanh, torch.pow,
    torch.Tensor.pow, torch.Tensor.__pow__, torch.sqrt, torch.rsqrt, torch.abs,
    torch.Tensor.abs, torch.square, F.prelu, F.softplus, F.silu, F.gelu, F.relu,
    torch.Tensor.__iadd__, torch.Tensor.__imul__, torch.Tensor.exp_, torch.exp_,
    torch.Tensor.sum, torch.sum, torch.Tensor.mean, torch.mean, torch.Tensor.norm,
    torch.norm, torch.Tensor.max, torch.Tensor.min, torch.Tensor.amax, torch.amax,
})


class Coverage:
    """The rows of one emulate object, by (module, op), in the order the run met them."""

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, module: str, op: str, status: str, rounded: str = "", left: str = "",
            why: str = "") -> None:
        """One call of ``op`` in ``module`` (counted into its row, made at the first call);
        a ``not emulated`` row warns once, or raises under ``strict``."""
        row = self.rows.get((module, op))
        if row is not None:
            row["calls"] += 1
            return
        if status == "not emulated":
            text = f"emulate: {op} in {module or '(model)'} {why}; it ran in float32"
            if self.strict:
                raise NotEmulatedError(text + " (strict=True)")
            warnings.warn(text, NotEmulatedWarning, stacklevel=4)
        self.rows[(module, op)] = {"module": module, "op": op, "status": status,
                                   "rounded": rounded, "left": left, "why": why, "calls": 1}

    def __iter__(self) -> Any:
        return iter(list(self.rows.values()))

    def __len__(self) -> int:
        return len(self.rows)

    def table(self, *, columns: tuple[str, ...] = ("module", "op", "status", "rounded", "left",
                                                      "why", "calls")) -> str:
        """The rows as a Markdown table (``columns`` of each row)."""
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in self:
            lines.append("| " + " | ".join(_cell(row[c] if c != "module" or row[c] else "(model)")
                                           for c in columns) + " |")
        return "\n".join(lines)


def _cell(v: Any) -> str:
    text = str(v) if v != "" else "-"
    return text.replace("|", "\\|") if text else "-"


def scan(args: tuple, kwargs: dict, weight_name: Callable[[Any], str | None]) -> str | None:
    """The name of the first weight among ``args`` and ``kwargs`` (lists and tuples looked
    into), or None."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            for b in a:
                name = weight_name(b)
                if name is not None:
                    return name
        else:
            name = weight_name(a)
            if name is not None:
                return name
    return None


def op_name(func: Any) -> str:
    """A function's short name for the coverage ("linear", "lstm", "Tensor.__mul__")."""
    name = getattr(func, "__name__", None) or str(func)
    owner = getattr(func, "__objclass__", None) or getattr(func, "__self__", None)
    if owner is torch.Tensor or name.startswith("__"):
        return f"Tensor.{name}"
    return name


__all__ = ["ELEMENTWISE", "NORMS", "PASSIVE", "STATUSES", "Coverage", "NotEmulatedError",
           "NotEmulatedWarning", "op_name", "scan"]
