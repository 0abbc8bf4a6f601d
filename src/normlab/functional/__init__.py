"""Pure math: ``*_forward(inputs..., *, options) -> (out, cache)`` and
``*_backward(dout, cache) -> gradients in the order of the forward's inputs``.

Written to be read next to the equations; ``normlab.kernels`` holds the fused fast paths with the
same contracts.
"""

from .batchnorm import BatchNormCache, batch_norm_backward, batch_norm_forward
from .dropout import DropoutCache, dropout_backward, dropout_forward
from .dyt import DyTCache, dyt_backward, dyt_forward
from .layernorm import LayerNormCache, layer_norm_backward, layer_norm_forward
from .rmsnorm import RMSNormCache, rms_norm_backward, rms_norm_forward

__all__ = [
    "BatchNormCache",
    "DropoutCache",
    "DyTCache",
    "LayerNormCache",
    "RMSNormCache",
    "batch_norm_backward",
    "batch_norm_forward",
    "dropout_backward",
    "dropout_forward",
    "dyt_backward",
    "dyt_forward",
    "layer_norm_backward",
    "layer_norm_forward",
    "rms_norm_backward",
    "rms_norm_forward",
]
