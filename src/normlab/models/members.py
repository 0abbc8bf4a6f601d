"""Ensembles: M models of one architecture as one model whose parameters carry a leading member
axis, trained in one pass (``normlab.train.Ensemble``).

``stack(models)`` builds that model from M built ``GPT``s: every parameter becomes an (M, ...)
array (member m's row of one (M, n) buffer, the gradients likewise) and each member's own model
is re-pointed at its row, so the member keeps its parameters, its optimizer runs over its own
contiguous row and its probes read its own model, while a forward of the stacked model on
idx (M, B, T) computes all members at once:

    matrix products       one batched product over the members (one sgemm per member, on the
                          member's rows: a member's product is its model's, bit for bit)
    element-wise ops      once over the (M, B, T, ...) tensor (GELU, residual adds, scales)
    attention             once over the M B sequences, on the path a member's own call takes
                          (the fused op, each sequence a SIMD lane of its own, else the
                          reference), its QK-norm with each member's gains (its max logit per
                          member); member by member with dropout
    norms                 LayerNorm and RMSNorm as one kernel launch, each member's rows with
                          its own parameters and its reduction order; the others member by member
    dropout, loss         member by member: each member's dropout generator and loss settings
                          (soft-cap, z-loss, label smoothing)

Every parameter gradient reduces over the axes its parameter was broadcast along (a member's
batch and positions), never over the members.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._checks import compute_dtype
from ..nn import Dropout, Module
from ..nn.attention import CausalSelfAttention
from .config import GPTConfig
from .gpt import GPT

# the model fields only the loss reads: they may differ between an ensemble's members
LOSS_FIELDS = ("final_softcap", "z_loss", "label_smoothing")


def shape_fields_differ(a: GPTConfig, b: GPTConfig) -> list[str]:
    """The fields (``model.<name>``) in which two members' models may not differ: all but
    ``LOSS_FIELDS``."""
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return [f"model.{k}" for k in da if k not in LOSS_FIELDS and da[k] != db[k]]


def stack(models: Sequence[GPT]) -> GPT:
    """One model computing ``models`` (GPTs of one architecture, built and flattened) at once:
    see the module's docstring. The members' models are re-pointed at the stacked buffers
    (their values unchanged); build the optimizers over their parameters afterwards."""
    models = list(models)
    if not models or not all(isinstance(m, GPT) for m in models):
        raise TypeError("models must be a non-empty list of GPT models")
    for i, other in enumerate(models[1:], 1):
        diff = shape_fields_differ(models[0].config, other.config)
        if diff:
            raise ValueError(f"models[{i}] differs from models[0] in {', '.join(diff)}: an "
                             f"ensemble's members share every field but {LOSS_FIELDS}")
    M, first = len(models), models[0]
    stacked = GPT.empty(first.config, dropout_rng=first.dropout_rng)
    names = list(first.parameters())
    shapes = {n: p.shape for n, p in first.parameters().items()}
    dtypes = {p.dtype for m in models for p in m.parameters().values()}
    if len(dtypes) != 1:
        raise ValueError(f"an ensemble's parameters must share one dtype; got "
                         f"{sorted(map(str, dtypes))}")
    dtype = dtypes.pop()
    total = sum(int(np.prod(s)) for s in shapes.values())
    P = np.empty((M, total), dtype)
    G = np.zeros((M, total), compute_dtype(dtype))
    spans, lo = {}, 0
    for n in names:
        hi = lo + int(np.prod(shapes[n]))
        spans[n] = (lo, hi)
        lo = hi
    for m, model in enumerate(models):
        params = model.parameters()
        for n in names:
            a, b = spans[n]
            P[m, a:b] = params[n].reshape(-1)
        _point(model, P[m], G[m], spans, shapes)
    _point_stacked(stacked, P, G, spans, shapes)
    stacked.member_losses = tuple({"softcap": m.config.final_softcap, "z_loss": m.config.z_loss,
                                   "label_smoothing": m.config.label_smoothing} for m in models)
    stacked.flat_parameters, stacked.flat_gradients = P, G
    rngs = tuple(m.dropout_rng for m in models)
    for mod in stacked.modules():
        mod.members = M
        if isinstance(mod, (Dropout, CausalSelfAttention)):
            mod.member_rngs = rngs
    return stacked


def _owners(model: GPT) -> list[tuple[str, Module, str]]:
    """``(dotted name, module, key)`` of every parameter, in ``parameters()``'s order."""
    out = []
    for prefix, mod in model.named_modules():
        for key in mod.params:
            out.append((f"{prefix}.{key}" if prefix else key, mod, key))
    return out


def _point(model: GPT, p: np.ndarray, g: np.ndarray, spans: dict, shapes: dict) -> None:
    """Make member ``model``'s parameters and gradients views of its rows ``p`` and ``g``."""
    for name, mod, key in _owners(model):
        a, b = spans[name]
        mod.params[key] = p[a:b].reshape(shapes[name])
        mod.grads[key] = g[a:b].reshape(shapes[name])


def _point_stacked(model: GPT, P: np.ndarray, G: np.ndarray, spans: dict, shapes: dict) -> None:
    """The stacked model's parameters and gradients: (M, ...) views of the (M, n) buffers."""
    M = P.shape[0]
    for name, mod, key in _owners(model):
        a, b = spans[name]
        mod.params[key] = P[:, a:b].reshape((M,) + shapes[name])
        mod.grads[key] = G[:, a:b].reshape((M,) + shapes[name])
