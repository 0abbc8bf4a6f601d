"""Transformer blocks with every norm placement and the decoder-only model (forward reads down,
backward reads up)."""

from .block import Block, Residual, deepnorm_alpha, deepnorm_beta, make_norm
from .config import NORMS, PLACEMENTS, POSITIONS, GPTConfig
from .gpt import GPT, LossParts
from .hf import load_hf, save_hf
from .members import stack

__all__ = [
    "GPT",
    "NORMS",
    "PLACEMENTS",
    "POSITIONS",
    "Block",
    "GPTConfig",
    "LossParts",
    "Residual",
    "deepnorm_alpha",
    "deepnorm_beta",
    "load_hf",
    "make_norm",
    "save_hf",
    "stack",
]
