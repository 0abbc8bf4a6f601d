"""``Monitor`` with per-block statistics: what a block-scaled dialect does to the watched tensors,
every ``every`` steps of training, as JSON lines.

``Monitor(model, every=N, path=..., blocks=("nvfp4", "mxfp8"))`` is ``normlab.torch.inspect``'s
Monitor (the same records, the same ``watch()`` and ``step()``) with, on each measured step, one
more key: ``"blocks"``, per watched tensor and per named dialect, the figures of
``normlab.precision.blockstats.block_stats`` (that module computes them; nothing here repeats
it):

* the distribution of the block scales: a histogram of their binades (floor(log2 s)), their
  smallest, median and largest values, the standard deviation of log2 s, the shares of blocks
  whose scale is zero, below the scale format's normal range or at its top;
* the share of the non-zero values scaled into the element format's top band ((4, 6] for E2M1);
* the blockwise dynamic range (log2 of max / min non-zero |x| per block: its maximum and
  median);
* for 1D blocks of a matrix, row-wise against column-wise: the share of values whose two
  quantizations differ and the norm of the difference relative to the tensor's;
* the quantization's error statistics.

``blocks``: dialect names of ``blockstats.WHAT_IF`` (``nvfp4``, ``nvfp4_16x16``, ``mxfp8``,
``mxfp4``, ``fp8_1x128``, ``fp8_128x128``) or a mapping from names to precisions (a
``Precision`` or its JSON form, any dialect of ``normlab.precision.SCALINGS``). ``block_tensors``:
the parameters to watch, names or ``fnmatch`` patterns (default: every parameter that is a matrix
or a stack of them, of any module: the weights a recipe quantizes); ``block_gradients`` adds
their gradients where they have one (``grad:<name>``; weights are ``weight:<name>``). A dialect
a tensor's shape cannot take (16x16 tiles of a vector) is left out for it. The statistics run on
a CPU copy in NumPy (float32), on the measured steps only; each line stays strict JSON (a
non-finite figure is null, as ``BlockStats.to_dict`` gives it).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..precision.blockstats import WHAT_IF, block_stats
from ..precision.policy import Precision
from .inspect import Monitor as _InspectMonitor


def _dialects(blocks: Any) -> dict[str, Precision]:
    """``blocks`` as name -> Precision (module docstring); refused by name before any work."""
    if blocks is None:
        return {}
    if isinstance(blocks, str):
        blocks = (blocks,)
    if isinstance(blocks, Mapping):
        items = list(blocks.items())
    elif isinstance(blocks, (list, tuple)):
        unknown = [b for b in blocks if b not in WHAT_IF]
        if unknown:
            raise ValueError(f"blocks: unknown dialect {unknown[0]!r}; names: "
                             f"{', '.join(WHAT_IF)} (or a mapping of names to precisions)")
        items = [(b, WHAT_IF[b]) for b in blocks]
    else:
        raise TypeError(f"blocks must be dialect names or a mapping of names to precisions; "
                        f"got {type(blocks).__name__}")
    out = {}
    for name, p in items:
        prec = p if isinstance(p, Precision) else Precision.from_value(p, f"blocks[{name!r}]")
        if prec.scaling is None:
            raise ValueError(f"blocks[{name!r}]: per-block statistics need a scaling dialect; "
                             f"got the unscaled {prec}")
        out[str(name)] = prec
    return out


def _watched(model: torch.nn.Module, patterns: Any) -> list[str]:
    """The parameter names ``patterns`` selects (default: the matrices); a pattern that matches
    no parameter is refused by name."""
    params = dict(model.named_parameters())
    if patterns is None:
        return [n for n, p in params.items() if p.dim() >= 2]
    if isinstance(patterns, str):
        patterns = (patterns,)
    if not isinstance(patterns, (list, tuple)) or not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"block_tensors must be parameter names or patterns; got {patterns!r}")
    out: list[str] = []
    for pat in patterns:
        hits = [n for n in params if fnmatch.fnmatchcase(n, pat)]
        if not hits:
            raise ValueError(f"block_tensors: {pat!r} matches no parameter of the model")
        out += [n for n in hits if n not in out]
    return out


class Monitor(_InspectMonitor):
    """``normlab.torch.inspect.Monitor`` with the per-block statistics of the named dialects
    on the watched parameters (module docstring); without ``blocks`` it is that Monitor.

    Args:
        model, every, path, stream: as ``normlab.torch.inspect.Monitor``.
        blocks: dialect names or a mapping of names to precisions; None: no block statistics.
        block_tensors: parameter names or patterns (default: every matrix parameter).
        block_gradients: also the gradients of the watched parameters.
        rng: for a dialect that rounds stochastically (default: a generator seeded 0).
    """

    def __init__(self, model: torch.nn.Module, every: int = 10, path: str | None = None, *,
                 stream: Any = None, blocks: Any = None, block_tensors: Any = None,
                 block_gradients: bool = False, rng: np.random.Generator | None = None):
        super().__init__(model, every, path, stream=stream)
        self.dialects = _dialects(blocks)
        self.block_tensors = _watched(model, block_tensors) if self.dialects else []
        if not isinstance(block_gradients, bool):
            raise TypeError(f"block_gradients must be True or False; got {block_gradients!r}")
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
        self.block_gradients = block_gradients
        self.rng = np.random.default_rng(0) if rng is None else rng

    def block_record(self) -> dict[str, dict[str, Any]]:
        """The per-block statistics now: ``{"weight:<name>": {dialect: figures}, ...}`` (and
        ``"grad:<name>"`` with ``block_gradients``)."""
        params = dict(self.model.named_parameters())
        out: dict[str, dict[str, Any]] = {}
        for name in self.block_tensors:
            p = params[name]
            views: list[tuple[str, torch.Tensor]] = [(f"weight:{name}", p)]
            if self.block_gradients and p.grad is not None:
                views.append((f"grad:{name}", p.grad))
            for key, t in views:
                x = t.detach().float().cpu().numpy()
                out[key] = {d: block_stats(x, prec, rng=self.rng, rowcol=x.ndim >= 2).to_dict()
                            for d, prec in self.dialects.items()
                            if x.ndim >= 2 or not getattr(prec.scaling, "two_d", False)}
        return out

    def _keep(self, rec: dict) -> dict:
        if self.dialects:
            rec["blocks"] = self.block_record()
        return super()._keep(rec)


__all__ = ["Monitor"]
