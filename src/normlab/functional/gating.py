"""The sigmoid output gate of gated attention (Qiu et al. 2025, "Gated Attention for Large
Language Models: Non-linearity, Sparsity, and Attention-Sink-Free", arXiv 2505.06708:
the G1 position, an element-wise, head-specific, multiplicative sigmoid gate on the output of
scaled dot-product attention, before the output projection):

    out = y * sigmoid(g)          y: the heads' outputs (B, T, H D); g = x W_g, the gate logits

where x is the attention's input (the normalized hidden states) and W_g (H D, C) a projection of
its own. The official code (github.com/qiuzh20/gated_attention) and transformers' Qwen3-Next
(``models/qwen3_next/modeling_qwen3_next.py``, ``Qwen3NextAttention.forward``:
``attn_output = attn_output * torch.sigmoid(gate)``, the gate rows interleaved with q's in
``q_proj``) compute the same product; ``nn.CausalSelfAttention(gate=True)`` holds W_g as its own
``gate`` projection.

Backward, with s = sigmoid(g):

    dy = dout * s                 dg = dout * y * s (1 - s)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .activations import _sigmoid


class SigmoidGateCache(NamedTuple):
    """Saved: the gated input and sigmoid(g), both in the compute dtype."""

    y: Array  # (...) the input that is gated, compute dtype
    s: Array  # (...) sigmoid(g), compute dtype
    dtype: np.dtype  # the output dtype (y's)


def sigmoid_gate_forward(y: Array, g: Array) -> tuple[Array, SigmoidGateCache]:
    """``y * sigmoid(g)`` element by element.

    Args:
        y: float array (B, T, H D) or any shape: the values gated.
        g: float array of y's shape: the gate logits.

    Returns:
        out (y's shape and dtype); cache for ``sigmoid_gate_backward``.
    """
    y = ck.float_array(y, "y")
    g = ck.float_array(g, "g")
    ck.same_shape(g, "g", y.shape, "the shape of y")
    ct = ck.compute_dtype(y.dtype)
    yc = y.astype(ct, copy=False)
    s = _sigmoid(g.astype(ct, copy=False))
    return ck.out_cast(yc * s, y.dtype), SigmoidGateCache(yc, s, y.dtype)


def sigmoid_gate_backward(dout: Array, cache: SigmoidGateCache) -> tuple[Array, Array]:
    """Gradients of the gate: ``(dy, dg)`` in y's dtype."""
    ck.cache(cache, SigmoidGateCache, "sigmoid_gate")
    y, s, dtype = cache
    dout = ck.float_array(dout, "dout")
    ck.same_shape(dout, "dout", y.shape, "the shape of the forward's output")
    d = dout.astype(y.dtype, copy=False)
    dy = d * s
    dg = dy * y * (1.0 - s)
    return ck.out_cast(dy, dtype), ck.out_cast(dg, dtype)
