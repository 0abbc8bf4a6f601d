"""The block-scaled dialects in torch operations: what ``normlab.torch.apply`` runs for them.

Each function is the dialect's ``qdq`` of a float32 tensor on its device, the same bits as
``normlab.precision``'s NumPy path (``tests/torch``), and is registered in
``normlab.torch.quantize.TORCH_SCALINGS`` under the dialect's kind when ``normlab.torch`` is
imported. A dialect without an entry here runs through its NumPy ``qdq`` on a CPU copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..precision.policy import Precision
from ..precision.scaling import ScalingState
from .quantize import TORCH_SCALINGS, TorchScaling, Workspace, mx_quantize


def mx_qdq(p: Precision, x: torch.Tensor, rng: np.random.Generator | None,
           state: ScalingState | None, work: Workspace | None) -> torch.Tensor:
    """MX blocks of float32 x along the recipe's axis (``MXScaling``)."""
    s: Any = p.scaling  # an MXScaling
    return mx_quantize(x, p.format, block_size=s.block_size, axis=s.axis,
                       scale_rule=s.scale_rule, rounding=p.rounding, rng=rng).dequantize()


TORCH_SCALINGS.update({
    "mx": TorchScaling(mx_qdq),
})

__all__ = ["mx_qdq"]
