"""Thin stateful modules over ``normlab.functional``: parameters, gradient buffers (+=),
train/eval, the last cache."""

from .layers import BatchNorm, Dropout, DyT, LayerNorm, RMSNorm
from .module import Module

__all__ = ["BatchNorm", "Dropout", "DyT", "LayerNorm", "Module", "RMSNorm"]
