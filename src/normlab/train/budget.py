"""The memory a training run needs, estimated from its config alone and checked against the
machine before anything is allocated.

The estimate adds up, in bytes (w = 4 for float32 models, 8 for float64; P parameters):

    parameters, gradients      2 w P
    optimizer state            AdamW: 2 w P (m, v); SGD: w P (momentum)
    activations (one step)     w L (16 B T C + 3 B T F + 3 B H T^2) + 4 w B T V + (one layer again
                               for the backward's temporaries)
    evaluation                 16 E B T (the fixed validation batches, int64 x and y)
    data                       Markov: 3 * 8 V^(k+1) (transition table, its CDF, one temporary);
                               a text file: 9 bytes per byte of text (int64 ids and the text)
    history                    4 steps (1 KB + 128 L) (one Python record per step, and its
                               copies while the result is turned into JSON)

and, for a precision policy other than fp32, one more copy of the parameters and the activations
counted twice (the policy's rounded copies).
with F the MLP's hidden width (two of them for SwiGLU), E the validation batches and k the Markov
order. Parameters are counted from the architecture (the weight matrices exactly, norms and biases
bounded from above), activations from what the blocks cache; the sum is an upper estimate within a
small factor of what a run holds at its peak. :func:`check_memory` refuses a config whose estimate
exceeds the memory available (``MemAvailable``, and the address-space limit when one is set),
with the estimate, its largest parts and the config field (or command-line flag) that lowers it
most, before a single array is allocated.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any, NamedTuple

# below the models (the checkpoint loader checks its model against them too): re-exported here
from .._memory import MemoryBudgetError, available_memory, count_parameters, format_bytes
from .config import TrainConfig

MAX_MARKOV_CONTEXTS = 2**20  # the Markov source's table has V^k rows (as MarkovSource enforces)
# The fields that size a run, in the order they are named when several would help.
SIZE_FIELDS = ("model.n_layers", "model.d_model", "model.d_ff", "model.d_head", "model.vocab_size",
               "model.seq_len", "batch_size", "eval_batches", "markov_order", "steps")


class Estimate(NamedTuple):
    """A run's memory estimate in bytes, by part."""

    parameters: int  # parameters and their gradient buffers
    optimizer: int  # the optimizer's state
    activations: int  # what one training step holds at its peak
    evaluation: int  # the fixed validation batches
    data: float  # the data source (Markov tables, text ids); inf beyond any budget
    history: int  # the per-step records kept for the result

    @property
    def total(self) -> float:  # inf when the data part is
        return sum(self)

    def parts(self) -> str:
        """The largest parts, as text: ``activations 3.1 GB, parameters 1.0 GB``."""
        named = sorted(zip(self._fields, self), key=lambda kv: -kv[1])
        return ", ".join(f"{k} {format_bytes(v)}" for k, v in named[:3] if v > 0)


def step_flops(config: TrainConfig) -> float:
    """Matrix-multiply FLOPs of one training step (forward and backward) of ``config``'s model:
    every linear product (grouped KV heads and SwiGLU's two input projections counted) and
    attention's q k^T and p v over the full T x T, times 3 for the backward's two products."""
    m = config.model
    C, L, V, T, B = m.d_model, m.n_layers, m.vocab_size, m.seq_len, config.batch_size
    heads, kv = m.n_heads * m.head_dim, m.kv_heads * m.head_dim
    ffn = 3 if m.activation == "swiglu" else 2  # SwiGLU: two input projections
    per_token = 2 * (L * (C * (heads + 2 * kv) + heads * C + ffn * C * m.hidden) + C * V)
    attention = 2 * L * 2 * T * heads  # q k^T and p v per token (the full T x T product)
    return 3.0 * (per_token + attention) * B * T


def _markov_contexts(vocab: int, order: int) -> float:
    """V^k, as a float that is ``inf`` rather than a huge integer when it is astronomically
    large."""
    if order * math.log2(max(vocab, 2)) > 1000:
        return math.inf
    return float(vocab) ** order


def estimate(config: TrainConfig, *, text_bytes: int | None = None) -> Estimate:
    """The memory estimate of ``config`` (see the module's docstring). ``text_bytes``: the size of
    a ``data='file'`` corpus (default: the size of ``config.data_path`` when it exists)."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig; got {type(config).__name__}")
    m = config.model
    w = 8 if m.dtype == "float64" else 4
    B, T, C, V, L, H = config.batch_size, m.seq_len, m.d_model, m.vocab_size, m.n_layers, m.n_heads
    F = m.hidden * (2 if m.activation == "swiglu" else 1)
    P = count_parameters(m)
    per_layer = 16 * B * T * C + 3 * B * T * F + 3 * B * H * T * T
    activations = w * ((L + 1) * per_layer + 4 * B * T * V)
    data: float = 0
    if config.data == "markov":
        data = 3 * 8 * _markov_contexts(V, config.markov_order) * V
    elif config.data == "file":
        if text_bytes is None and config.data_path:
            try:
                text_bytes = os.stat(config.data_path).st_size
            except OSError:
                text_bytes = 0
        data = 9 * (text_bytes or 0)
    elif config.data == "pydoc":
        data = 9 * 500_000
    opt = (2 if config.optimizer == "adamw" else 1) * w * P
    params = 2 * w * P
    if config.precision != "fp32":  # rounded copies of the weights and of what the layers cache
        params, activations = params + w * P, 2 * activations
    return Estimate(params, opt, activations, 16 * config.eval_batches * B * T,
                    data if math.isfinite(data) else math.inf, 4 * config.steps * (1024 + 128 * L))


def _default(field: str) -> Any:
    from .config import default_model

    defaults = TrainConfig(model=default_model())
    if field.startswith("model."):
        return getattr(defaults.model, field[len("model."):])
    return getattr(defaults, field)


def _with(config: TrainConfig, field: str, value: Any) -> TrainConfig:
    if field.startswith("model."):
        return dataclasses.replace(
            config, model=dataclasses.replace(config.model, **{field[6:]: value})
        )
    return dataclasses.replace(config, **{field: value})


def _culprit(config: TrainConfig, total: float) -> str | None:
    """The size field whose reset to its default lowers the estimate most (None if none does)."""
    best, best_total = None, total
    for name in SIZE_FIELDS:
        default = _default(name)
        current = (
            getattr(config.model, name[6:]) if name.startswith("model.") else getattr(config, name)
        )
        if current == default:
            continue
        try:
            trial = estimate(_with(config, name, default)).total
        except (TypeError, ValueError):  # the default is inconsistent with the rest (n_heads, ...)
            continue
        if trial < best_total:
            best, best_total = name, trial
    return best


def check_memory(config: TrainConfig, *, available: int | None = None,
                 flag: Callable[[str], str] = str) -> Estimate:
    """The estimate of ``config``, or a :class:`MemoryBudgetError` when it exceeds ``available``
    bytes (default: :func:`available_memory`) or the Markov source's table limit. ``flag`` turns a
    config field (``model.n_layers``) into the name the user typed (``--n-layers``)."""
    est = estimate(config)
    if config.data == "markov":
        contexts = _markov_contexts(config.model.vocab_size, config.markov_order)
        if contexts > MAX_MARKOV_CONTEXTS:
            size = f"{contexts:.3g}" if math.isfinite(contexts) else "astronomically many"
            raise MemoryBudgetError(
                f"{flag('markov_order')} {config.markov_order}: the Markov source has "
                f"vocab_size^order = {config.model.vocab_size}^{config.markov_order} = {size} "
                f"contexts; at most 2^20 = {MAX_MARKOV_CONTEXTS} are accepted (lower "
                f"{flag('markov_order')} or {flag('model.vocab_size')})", field="markov_order")
    limit = available_memory() if available is None else available
    if limit is None or est.total <= limit:
        return est
    field = _culprit(config, est.total)
    value = None
    if field is not None:
        value = (
            getattr(config.model, field[6:])
            if field.startswith("model.")
            else getattr(config, field)
        )
    lead = f"{flag(field)} {value}: " if field is not None else ""
    hint = f"; lower {flag(field)}" if field is not None else ""
    raise MemoryBudgetError(f"{lead}the run needs about {format_bytes(est.total)} of memory "
                            f"({est.parts()}), more than the {format_bytes(limit)} available{hint}",
                            field=field)


__all__ = ["Estimate", "MemoryBudgetError", "available_memory", "check_memory", "count_parameters",
           "estimate", "format_bytes", "step_flops"]
