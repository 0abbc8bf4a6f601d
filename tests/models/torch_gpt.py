"""A test-only PyTorch implementation of normlab's decoder-only model, written independently with
torch ops and autograd. It reads the parameters by normlab's dotted names, so the same weights go
into both; parity tests compare the loss, the logits and every parameter gradient."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from normlab.models import GPTConfig, deepnorm_alpha


def _norm(kind: str, x, p: dict, prefix: str, eps: float):
    C = x.shape[-1]
    if kind == "layernorm":
        return F.layer_norm(x, (C,), p[prefix + "gamma"], p.get(prefix + "beta"), eps)
    if kind == "rmsnorm":
        return F.rms_norm(x, (C,), p[prefix + "weight"], eps)
    if kind == "dyt":
        return p[prefix + "gamma"] * torch.tanh(p[prefix + "alpha"] * x) + p[prefix + "beta"]
    return x


def _linear(x, p: dict, prefix: str):
    return F.linear(x, p[prefix + "weight"], p.get(prefix + "bias"))


def _rope(x, T: int, base: float):
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _attention(cfg: GPTConfig, x, p: dict, prefix: str):
    B, T, C = x.shape
    H, D = cfg.n_heads, cfg.head_dim
    qkv = _linear(x, p, prefix + "qkv.").view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, T, D)
    if cfg.qk_norm == "rmsnorm":
        q = F.rms_norm(q, (D,), p[prefix + "q_norm"], cfg.norm_eps)
        k = F.rms_norm(k, (D,), p[prefix + "k_norm"], cfg.norm_eps)
    elif cfg.qk_norm == "layernorm":
        q = F.layer_norm(q, (D,), p[prefix + "q_norm"], None, cfg.norm_eps)
        k = F.layer_norm(k, (D,), p[prefix + "k_norm"], None, cfg.norm_eps)
    if cfg.positions == "rope":
        q, k = _rope(q, T, cfg.rope_base), _rope(k, T, cfg.rope_base)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if cfg.attn_softcap is not None:
        s = cfg.attn_softcap * torch.tanh(s / cfg.attn_softcap)
    if cfg.causal:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    y = torch.softmax(s, dim=-1) @ v  # (B, H, T, D)
    return _linear(y.transpose(1, 2).reshape(B, T, C), p, prefix + "proj.")


def _mlp(cfg: GPTConfig, x, p: dict, prefix: str):
    h = _linear(x, p, prefix + "fc.")
    if cfg.activation == "swiglu":
        gate, up = h.chunk(2, dim=-1)
        h = F.silu(gate) * up
    elif cfg.activation == "relu":
        h = F.relu(h)
    else:
        h = F.gelu(h, approximate="tanh" if cfg.activation == "gelu_tanh" else "none")
    return _linear(h, p, prefix + "proj.")


def _residual(cfg: GPTConfig, x, p: dict, prefix: str, branch):
    def N(v, which="norm."):
        return _norm(cfg.norm, v, p, prefix + which, cfg.norm_eps)

    def Fn(v):
        return branch(cfg, v, p, prefix + "branch.")

    placement = cfg.placement
    if placement == "post":
        return N(x + Fn(x))
    if placement == "pre":
        return x + Fn(N(x))
    if placement == "sandwich":
        return x + N(Fn(N(x)), "norm_out.")
    if placement == "deepnorm":
        return N(deepnorm_alpha(cfg.n_layers) * x + Fn(x))
    if placement == "rezero":
        return x + p[prefix + "resweight"] * Fn(x)
    return x + Fn(x)


def logits_and_loss(cfg: GPTConfig, p: dict, idx: np.ndarray, targets: np.ndarray):
    """``(logits before the final cap, loss)`` of the model with parameters ``p`` (name -> tensor)."""
    idx_t = torch.from_numpy(idx)
    T = idx.shape[1]
    x = F.embedding(idx_t, p["wte.weight"])
    if cfg.positions == "learned":
        x = x + p["wpe.weight"][:T]
    for layer in range(cfg.n_layers):
        x = _residual(cfg, x, p, f"blocks.{layer}.attn.", _attention)
        x = _residual(cfg, x, p, f"blocks.{layer}.mlp.", _mlp)
    if cfg.final_norm:
        x = _norm(cfg.norm, x, p, "norm_f.", cfg.norm_eps)
    head = p["wte.weight"] if cfg.tie_embeddings else p["head.weight"]
    logits = x @ head.T
    z = logits if cfg.final_softcap is None else cfg.final_softcap * torch.tanh(logits / cfg.final_softcap)
    t = torch.from_numpy(targets).reshape(-1)
    flat = z.reshape(-1, z.shape[-1])
    loss = F.cross_entropy(flat, t, label_smoothing=cfg.label_smoothing, ignore_index=-100)
    if cfg.z_loss:
        loss = loss + cfg.z_loss * torch.logsumexp(flat[t != -100], dim=-1).square().mean()
    return logits, loss


def loss_and_grads(cfg: GPTConfig, params: dict[str, np.ndarray], idx, targets):
    """torch's loss (float) and the gradient of every parameter (name -> ndarray)."""
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    logits, loss = logits_and_loss(cfg, p, idx, targets)
    loss.backward()
    return float(loss.detach()), logits.detach().numpy(), {k: t.grad.numpy() for k, t in p.items()}
