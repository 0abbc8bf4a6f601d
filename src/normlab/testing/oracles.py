"""PyTorch CPU as an oracle: the same ops computed by torch, with gradients from autograd.

torch is a test-only dependency (``pip install normlab[test]``); importing this module without it
raises ImportError. Arrays go in as NumPy (bfloat16 from ml_dtypes included) and come back as
NumPy arrays in the tensor's dtype (bfloat16 as ml_dtypes.bfloat16).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F

_TO_TORCH = {
    np.dtype(np.float64): torch.float64,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float16): torch.float16,
    np.dtype(ml_dtypes.bfloat16): torch.bfloat16,
}


def to_torch(a: np.ndarray, requires_grad: bool = False) -> torch.Tensor:
    """A torch tensor with the same dtype and values (bfloat16 travels through float32 exactly)."""
    a = np.asarray(a)
    if a.dtype not in _TO_TORCH:
        raise TypeError(f"no torch dtype for {a.dtype}")
    if a.dtype == np.dtype(ml_dtypes.bfloat16):
        t = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    else:
        t = torch.from_numpy(np.array(a, copy=True, order="C"))
    return t.requires_grad_(requires_grad)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.to(torch.float32).numpy().astype(ml_dtypes.bfloat16)
    return t.numpy().copy()


def vjp(
    fn: Callable[..., torch.Tensor], inputs: dict[str, np.ndarray], dout: np.ndarray,
    wrt: tuple[str, ...] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``fn(**tensors)`` and the gradients of ``sum(out * dout)`` for the inputs named in ``wrt``
    (default: all), by torch autograd."""
    wrt = tuple(inputs) if wrt is None else wrt
    tensors = {k: to_torch(v, requires_grad=k in wrt) for k, v in inputs.items()}
    out = fn(**tensors)
    out.backward(to_torch(np.asarray(dout).astype(np.asarray(dout).dtype)).to(out.dtype))
    # backward() filled the gradient of every tensor in wrt
    return to_numpy(out), {k: to_numpy(tensors[k].grad) for k in wrt}  # type: ignore[arg-type]


def layer_norm(x, weight=None, bias=None, *, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rms_norm(x, weight, *, eps=1e-8, partial=None, offset=0.0):
    """torch's fused ``F.rms_norm`` when it applies, else the composite in float32/64."""
    C = x.shape[-1]
    if partial is None and offset == 0.0:
        return F.rms_norm(x, (C,), weight, eps)
    k = C if partial is None else max(1, min(C, math.ceil(partial * C - 1e-9)))
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    xc = x.to(ct)
    rstd = torch.rsqrt(xc[..., :k].pow(2).mean(-1, keepdim=True) + eps)
    return (xc * rstd * (weight.to(ct) + offset)).to(x.dtype)


def dyt(x, alpha, weight, bias):
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    return (weight.to(ct) * torch.tanh(alpha.to(ct) * x.to(ct)) + bias.to(ct)).to(x.dtype)


def derf(x, alpha, shift, weight, bias):
    """Dynamic erf as the official code computes it (``weight * torch.erf(alpha * x + shift) +
    bias``, zlab-princeton/Derf ``Dynamic_erf``), in float32/64."""
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    z = alpha.to(ct) * x.to(ct) + shift.to(ct)
    return (weight.to(ct) * torch.erf(z) + bias.to(ct)).to(x.dtype)


def sigmoid_gate(y, g):
    """Gated attention's output gate, ``y * torch.sigmoid(g)`` (qiuzh20/gated_attention)."""
    return y * torch.sigmoid(g)


def _ct(t):
    """The compute dtype of a tensor: float32 for the 16-bit formats (normlab's rule)."""
    return torch.float32 if t.dtype in (torch.float16, torch.bfloat16) else t.dtype


def justnorm(x):
    """nGPT's unit-sphere normalization, NVIDIA/ngpt model.py ``Block.justnorm``:
    ``x / x.norm(p=2, dim=-1, keepdim=True)``."""
    xc = x.to(_ct(x))
    return (xc / xc.norm(p=2, dim=-1, keepdim=True)).to(x.dtype)


def ngpt_update(h, f, alpha):
    """nGPT's residual update, NVIDIA/ngpt ``Block.forward``: ``lr = torch.abs(alpha)``,
    ``A_norm = justnorm(h)``, ``B_norm = justnorm(h_att)``, ``res = A_norm + lr * (B_norm -
    A_norm)``, ``justnorm(res)``."""
    ct = _ct(h)
    hc, fc, lr = h.to(ct), f.to(ct), torch.abs(alpha.to(ct))
    a = hc / hc.norm(p=2, dim=-1, keepdim=True)
    b = fc / fc.norm(p=2, dim=-1, keepdim=True)
    res = a + lr * (b - a)
    return (res / res.norm(p=2, dim=-1, keepdim=True)).to(h.dtype)


def ngpt_qk(x, s, rope=None):
    """nGPT's normalized q or k, ``sqk * justnorm(rope(q))`` per head; s (H, D) viewed
    (H, 1, D); normlab's RoPE (the half-split pairs of ``functional.rope``) written in torch."""
    xc = x.to(_ct(x))
    if rope is not None:
        c, sn = (torch.from_numpy(np.asarray(t)).to(xc.dtype) for t in rope)
        D = xc.shape[-1]
        x1, x2 = xc[..., : D // 2], xc[..., D // 2 :]
        xc = torch.cat([x1 * c - x2 * sn, x2 * c + x1 * sn], dim=-1)
    n = xc / xc.norm(p=2, dim=-1, keepdim=True)
    return (s.to(xc.dtype).unsqueeze(1) * n).to(x.dtype)


def batch_norm(x, weight, bias, running_mean=None, running_var=None, *, training, momentum=0.1,
               eps=1e-5):
    """``F.batch_norm`` over every axis but the last (torch wants channels second). The running
    statistics tensors are updated in place, as torch does."""
    C = x.shape[-1]
    x2 = x.reshape(-1, C)
    out = F.batch_norm(x2, running_mean, running_var, weight, bias, training, momentum, eps)
    return out.reshape(x.shape)


def attention(q, k, v, q_norm_weight=None, k_norm_weight=None, *, qk_norm="none", eps=1e-6,
              rope=None, softcap=None, causal=True, window=None, sigmoid_bias=None):
    """Attention on (B, H, T, D) heads written with torch ops: optional per-head QK-norm (before
    RoPE), RoPE from normlab's ``rope_tables`` (cos, sin), soft-cap, then the causal mask (and a
    sliding ``window``); softmax over the keys, or with ``sigmoid_bias`` b sigmoid attention,
    ``torch.sigmoid(s + b)`` after the mask (apple/ml-sigmoid-attention's order)."""
    D = q.shape[-1]
    if qk_norm == "rmsnorm":
        q, k = F.rms_norm(q, (D,), q_norm_weight, eps), F.rms_norm(k, (D,), k_norm_weight, eps)
    elif qk_norm == "layernorm":
        q = F.layer_norm(q, (D,), q_norm_weight, None, eps)
        k = F.layer_norm(k, (D,), k_norm_weight, None, eps)
    if rope is not None:
        cos, sin = (torch.from_numpy(np.asarray(t)).to(q.dtype) for t in rope)

        def rotate(x):
            x1, x2 = x[..., : D // 2], x[..., D // 2 :]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

        q, k = rotate(q), rotate(k)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if causal:
        T = q.shape[-2]
        hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
        if window is not None:
            hidden |= torch.ones(T, T, dtype=torch.bool).tril(-window)
        s = s.masked_fill(hidden, float("-inf"))
    if sigmoid_bias is not None:
        return torch.sigmoid(s + sigmoid_bias) @ v
    return torch.softmax(s, dim=-1) @ v


def cross_entropy(logits, *, targets, softcap=None, z_loss=0.0, label_smoothing=0.0,
                  ignore_index=-100):
    """Mean cross-entropy of (..., V) logits with torch's ``F.cross_entropy``, after an optional
    final soft-cap, plus the z-loss ``z_loss * mean(logsumexp^2)`` over the scored positions."""
    V = logits.shape[-1]
    z = logits if softcap is None else softcap * torch.tanh(logits / softcap)
    t = torch.from_numpy(np.asarray(targets)).reshape(-1)
    flat = z.reshape(-1, V)
    loss = F.cross_entropy(flat, t, label_smoothing=label_smoothing, ignore_index=ignore_index)
    keep = t != ignore_index
    return loss + z_loss * torch.logsumexp(flat[keep], dim=-1).square().mean()


def embedding(weight, *, ids):
    return F.embedding(torch.from_numpy(np.asarray(ids)), weight)


def gelu(x, approximate="none"):
    return F.gelu(x, approximate=approximate)


def swiglu(a, b):
    return F.silu(a) * b
