"""normlab's number formats on PyTorch tensors (the optional ``torch`` extra).

``quantize(t, fmt, ...)`` and ``mx_quantize(t, fmt, ...)`` are ``normlab.precision.quantize``
and ``mx_quantize`` written in torch operations, so they run on the tensor's device and return
the same bits. ``emulate(model, policy)`` applies a ``normlab.precision.PrecisionPolicy`` to an
unmodified ``torch.nn.Module`` and reports what it rounded; ``inspect(model, batch)`` and
``Monitor(model, every=N)`` give ``normlab inspect``'s per-tensor statistics;
``FirstNonFinite(model)`` finds the first inf or NaN of a step. See docs/torch.md.

    >>> import torch
    >>> from normlab.torch import quantize
    >>> quantize(torch.tensor([448.0, 464.0, 465.0]), "float8_e4m3fn")
    tensor([448., 448., nan])
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("normlab.torch needs PyTorch: pip install 'normlab[torch]'") from exc

from . import blocks  # noqa: F401  (the block dialects' torch operations, registered)
from .checkpoint import inspect_checkpoint, load_causal_lm
from .coverage import NotEmulatedError, NotEmulatedWarning
from .debug import FirstNonFinite, NonFiniteError
from .emulate import emulate
from .inspect import inspect
from .monitor import Monitor  # inspect's Monitor, with per-block statistics (blocks=)
from .optim import PolicyOptimizer
from .quantize import MXTensor, apply, mx_quantize, mx_scale, quantize, random_bits

__all__ = ["FirstNonFinite", "MXTensor", "Monitor", "NonFiniteError", "NotEmulatedError",
           "NotEmulatedWarning", "PolicyOptimizer", "apply", "emulate", "inspect",
           "inspect_checkpoint", "load_causal_lm", "mx_quantize", "mx_scale", "quantize",
           "random_bits"]
