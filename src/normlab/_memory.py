"""Memory budgets below every layer that checks one: the memory this process may still allocate,
a model's parameter count from its sizes alone, bytes as text, and the error a budget raises.

``normlab.train.budget`` (a training run's estimate) and ``normlab.models.hf`` (a checkpoint's
model) both check against these before anything is allocated; neither imports the other.
"""

from __future__ import annotations

import math
import os
import resource
from typing import Protocol


class MemoryBudgetError(ValueError):
    """A run or a model that cannot fit; ``field`` is the field that lowers the estimate most
    (a config field such as ``model.n_layers``, or a checkpoint's ``num_hidden_layers``)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def format_bytes(n: float) -> str:
    """``1.5 GB`` (decimal units), ``inf`` for an estimate too large to compute."""
    if not math.isfinite(n):
        return "inf"
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if abs(n) < 1000 or unit == "EB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} EB"  # pragma: no cover


def available_memory() -> int | None:
    """Bytes this process may still allocate: the kernel's ``MemAvailable`` (or the free
    physical pages), lowered to the address-space limit when one is set; None when unknown."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            avail = soft if avail is None else min(avail, soft)
    except (ValueError, OSError):  # pragma: no cover - no such limit on this platform
        pass
    return avail


class ModelSizes(Protocol):
    """What ``count_parameters`` reads of a model's config (``GPTConfig`` has all of it)."""

    @property
    def vocab_size(self) -> int: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def n_layers(self) -> int: ...
    @property
    def d_model(self) -> int: ...
    @property
    def n_heads(self) -> int: ...
    @property
    def kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def hidden(self) -> int: ...
    @property
    def activation(self) -> str: ...
    @property
    def positions(self) -> str: ...
    @property
    def tie_embeddings(self) -> bool: ...


def parameter_count(*, V: int, T: int, L: int, C: int, H: int, K: int, D: int, F: int,
                    gated: bool, learned: bool, tied: bool) -> int:
    """The parameter count of a decoder of these sizes (V vocabulary, T positions, L layers, C
    width, H query and K key/value heads of width D, F the MLP's hidden width, ``gated``: two
    input projections): the weight matrices and tables exactly, norms and biases bounded from
    above. Python integers: no overflow whatever the sizes."""
    fc = 2 * F if gated else F
    per_layer = C * (H + 2 * K) * D + H * D * C + C * fc + F * C  # q k v, attention out, MLP
    # norms (at most 4, gain and bias), biases (q k v, out, MLP), QK-norms (over all of q, k)
    small = 8 * C + (H + 2 * K) * D + 2 * C + fc + 2 * (H + K) * D + 8
    tables = V * C + (T * C if learned else 0) + (0 if tied else V * C)
    return tables + L * (per_layer + small) + 2 * C


def count_parameters(model: ModelSizes) -> int:
    """The parameter count of ``model`` (a ``GPTConfig``): at least ``GPT(model).num_parameters()``
    and at most a few vectors per layer more (``parameter_count``)."""
    m = model
    return parameter_count(V=m.vocab_size, T=m.seq_len, L=m.n_layers, C=m.d_model, H=m.n_heads,
                           K=m.kv_heads, D=m.head_dim, F=m.hidden,
                           gated=m.activation in ("swiglu", "geglu"),
                           learned=m.positions == "learned", tied=m.tie_embeddings)


__all__ = ["MemoryBudgetError", "ModelSizes", "available_memory", "count_parameters",
           "format_bytes", "parameter_count"]
