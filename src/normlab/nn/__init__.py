"""Thin stateful modules over ``normlab.functional``: parameters, gradient buffers (+=),
train/eval, the last cache."""

from .attention import CausalSelfAttention
from .identity import Identity
from .layers import BatchNorm, Derf, Dropout, DyT, LayerNorm, Norm, RMSNorm
from .linear import Embedding, Linear
from .mlp import ACTIVATIONS, MLP
from .module import Module
from .noise import ShiftNoise
from .numerics import FULL_PRECISION, Numerics

__all__ = [
    "ACTIVATIONS",
    "FULL_PRECISION",
    "MLP",
    "BatchNorm",
    "CausalSelfAttention",
    "Derf",
    "Dropout",
    "DyT",
    "Embedding",
    "Identity",
    "LayerNorm",
    "Linear",
    "Module",
    "Norm",
    "Numerics",
    "RMSNorm",
    "ShiftNoise",
]
