"""Pure math: ``*_forward(inputs..., *, options) -> (out, cache)`` and
``*_backward(dout, cache) -> gradients in the order of the forward's inputs``.

Written to be read next to the equations; ``normlab.kernels`` holds the fused fast paths with the
same contracts.
"""

from .activations import (
    GeluCache,
    ReluCache,
    SwiGLUCache,
    gelu_backward,
    gelu_forward,
    relu_backward,
    relu_forward,
    swiglu_backward,
    swiglu_forward,
)
from .attention import AttentionCache, attention_backward, attention_forward, causal_mask
from .batchnorm import BatchNormCache, batch_norm_backward, batch_norm_forward
from .derf import DerfCache, derf_backward, derf_forward
from .dropout import DropoutCache, dropout_backward, dropout_forward
from .dyt import DyTCache, dyt_backward, dyt_forward
from .embedding import EmbeddingCache, embedding_backward, embedding_forward
from .layernorm import LayerNormCache, layer_norm_backward, layer_norm_forward
from .linear import LinearCache, linear_backward, linear_forward
from .losses import IGNORE_INDEX, CrossEntropyCache, cross_entropy_backward, cross_entropy_forward
from .noise import ShiftNoiseCache, shift_noise_backward, shift_noise_forward
from .rmsnorm import RMSNormCache, rms_norm_backward, rms_norm_forward
from .rope import RopeCache, rope_backward, rope_forward, rope_frequencies, rope_tables
from .softmax import SoftmaxCache, softmax_backward, softmax_forward

__all__ = [
    "IGNORE_INDEX",
    "AttentionCache",
    "BatchNormCache",
    "CrossEntropyCache",
    "DerfCache",
    "DropoutCache",
    "DyTCache",
    "EmbeddingCache",
    "GeluCache",
    "LayerNormCache",
    "LinearCache",
    "RMSNormCache",
    "ReluCache",
    "RopeCache",
    "ShiftNoiseCache",
    "SoftmaxCache",
    "SwiGLUCache",
    "attention_backward",
    "attention_forward",
    "batch_norm_backward",
    "batch_norm_forward",
    "causal_mask",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "derf_backward",
    "derf_forward",
    "dropout_backward",
    "dropout_forward",
    "dyt_backward",
    "dyt_forward",
    "embedding_backward",
    "embedding_forward",
    "gelu_backward",
    "gelu_forward",
    "layer_norm_backward",
    "layer_norm_forward",
    "linear_backward",
    "linear_forward",
    "relu_backward",
    "relu_forward",
    "rms_norm_backward",
    "rms_norm_forward",
    "rope_backward",
    "rope_forward",
    "rope_frequencies",
    "rope_tables",
    "shift_noise_backward",
    "shift_noise_forward",
    "softmax_backward",
    "softmax_forward",
    "swiglu_backward",
    "swiglu_forward",
]
