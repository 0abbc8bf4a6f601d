"""Per-module precision for ``normlab.torch.emulate``: keep named modules (the head, the router,
the first and last blocks) in another precision, as TransformerEngine's recipes and torchao's
``module_filter_fn`` do, written as data.

``emulate(model, policy, overrides=[(pattern, value), ...])`` is an ordered list. An op runs in
the precision of the **first** entry whose ``pattern`` matches the module that made the call or
one of the modules around it (list the specific before the general); an op that no entry
matches runs under ``policy``. The residual-stream rounding of a ``stream`` module follows that
module's entry.

* ``pattern``: a module name as ``model.named_modules()`` spells it, with shell wildcards
  (``fnmatch``: ``*`` matches across dots; ``"*.mlp.gate"``), and negative list indices counted
  from the end of a ``ModuleList`` or ``Sequential`` (``"model.layers.-1"`` is the last
  decoder layer, whatever the depth). A pattern that matches no module is refused by name
  (a ValueError), so a misspelt name is never silently a no-op.
* ``value``: a ``PrecisionPolicy`` or a preset name (every role of that policy), or a mapping
  from roles (``params``, ``compute``, ``activations``, ``gradients``) to a ``Precision``, a
  format name or a ``Precision``'s JSON form: the region's policy is ``policy`` with those roles
  replaced (``{"compute": "bfloat16"}``). ``"fp32"`` keeps a region in float32.

A recipe names its overrides as a constant, e.g. the NVFP4 recipe's "the head and the last two
layers in bf16":

    KEEP_EDGES_BF16 = [("lm_head", "amp_bf16"), ("model.layers.-1", "amp_bf16"),
                       ("model.layers.-2", "amp_bf16")]
    with emulate(model, "fp8_hybrid", overrides=KEEP_EDGES_BF16) as em: ...
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
from collections.abc import Mapping
from typing import Any

import torch

from ..precision.policy import Precision, PrecisionPolicy, get_policy
from ..precision.roles import APPLIED_ROLES


def region_policy(value: Any, base: PrecisionPolicy, where: str) -> PrecisionPolicy:
    """The policy of one override's ``value`` (module docstring) over ``base``."""
    if isinstance(value, PrecisionPolicy):
        return value
    if isinstance(value, str):
        try:
            return get_policy(value)
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a PrecisionPolicy, a preset name or a mapping of roles "
                        f"({', '.join(APPLIED_ROLES)}); got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in APPLIED_ROLES)
    if unknown:
        raise ValueError(f"{where}: unknown roles {unknown}; the roles emulate applies are "
                         f"{', '.join(APPLIED_ROLES)}")
    try:
        roles: dict[str, Any] = {
            k: v if isinstance(v, Precision) else Precision(**v) if isinstance(v, Mapping)
            else Precision(v) for k, v in value.items()}
    except (TypeError, ValueError) as exc:  # a role's format or Precision's fields
        raise type(exc)(f"{where}: {exc}") from None
    ops = () if {"compute", "gradients"} & set(roles) else base.operands  # GEMM operands refine
    return dataclasses.replace(base, name=f"{base.name}+{'+'.join(sorted(roles))}", **roles,
                               operands=ops, keep_layers=())  # the roles they replace


def _lists(model: torch.nn.Module) -> dict[str, int]:
    """The length of every ModuleList and Sequential, by name."""
    return {n: len(m) for n, m in model.named_modules()
            if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential))}


def _spellings(name: str, lists: dict[str, int]) -> list[str]:
    """``name`` with each index into a list also written from the end (``layers.3`` of four:
    ``layers.-1``): every combination."""
    parts = name.split(".") if name else []
    options: list[tuple[str, ...]] = []
    for i, p in enumerate(parts):
        parent = ".".join(parts[:i])
        if p.isdigit() and parent in lists:
            options.append((p, str(int(p) - lists[parent])))
        else:
            options.append((p,))
    return [".".join(c) for c in itertools.product(*options)] if parts else [""]


def resolve(model: torch.nn.Module, overrides: Any, base: PrecisionPolicy
            ) -> tuple[list[PrecisionPolicy], dict[str, int]]:
    """(each entry's policy, the entry of every module name an entry covers): a module is
    covered by the first entry matching it or a module around it. Refused before any work: an
    entry that is not a (pattern, value) pair, a pattern that matches no module, a bad value."""
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, (list, tuple)):
        raise TypeError(f"overrides must be a list of (module pattern, policy) pairs; got "
                        f"{type(overrides).__name__}")
    names = [n for n, _ in model.named_modules()]
    lists = _lists(model)
    spelt = {n: _spellings(n, lists) for n in names}
    policies, matched = [], []
    for i, entry in enumerate(overrides):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and
                isinstance(entry[0], str)):
            raise TypeError(f"overrides[{i}] must be a (module pattern, policy) pair; got "
                            f"{entry!r}")
        pattern, value = entry
        hits = {n for n in names if any(fnmatch.fnmatchcase(s, pattern) for s in spelt[n])}
        if not hits:
            raise ValueError(f"overrides[{i}]: pattern {pattern!r} matches no module of the "
                             f"model (its modules: {', '.join(repr(n) for n in names[1:6])}"
                             f"{', ...' if len(names) > 6 else ''})")
        policies.append(region_policy(value, base, f"overrides[{i}] ({pattern!r})"))
        matched.append(hits)
    region: dict[str, int] = {}
    for n in names:
        around = [n] + [".".join(n.split(".")[:k]) for k in range(n.count(".") + 1)]
        hit = [i for i, hits in enumerate(matched) if any(a in hits for a in around if a)]
        if hit:
            region[n] = min(hit)
    return policies, region


__all__ = ["region_policy", "resolve"]
