"""A test-only PyTorch implementation of normlab's decoder-only model, written independently with
torch ops and autograd. It reads the parameters by normlab's dotted names, so the same weights go
into both; parity tests compare the loss, the logits and every parameter gradient."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from normlab.models import GPTConfig, deepnorm_alpha


def _norm(kind: str, x, p: dict, prefix: str, eps: float, offset: float = 0.0):
    C = x.shape[-1]
    if kind == "layernorm":
        return F.layer_norm(x, (C,), p[prefix + "weight"], p.get(prefix + "bias"), eps)
    if kind == "rmsnorm":
        return F.rms_norm(x, (C,), None, eps) * (offset + p[prefix + "weight"])
    if kind == "dyt":
        return p[prefix + "weight"] * torch.tanh(p[prefix + "alpha"] * x) + p[prefix + "bias"]
    if kind == "derf":  # zlab-princeton/Derf's Dynamic_erf
        z = p[prefix + "alpha"] * x + p[prefix + "shift"]
        return p[prefix + "weight"] * torch.erf(z) + p[prefix + "bias"]
    if kind == "centernorm":  # LayerNorm without its division
        y = (x - x.mean(-1, keepdim=True)) * p[prefix + "weight"]
        return y + p[prefix + "bias"] if prefix + "bias" in p else y
    return x


def _linear(x, p: dict, prefix: str):
    return F.linear(x, p[prefix + "weight"], p.get(prefix + "bias"))


def _inv_freq(cfg: GPTConfig, D: int):
    """RoPE's frequencies with the config's scaling, written after Meta's Llama 3.1 reference."""
    inv_freq = cfg.rope_base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    if cfg.rope_scaling == "linear":
        return inv_freq / cfg.rope_factor
    if cfg.rope_scaling == "llama3":
        low_wavelen = cfg.rope_original_max / cfg.rope_low_freq_factor
        high_wavelen = cfg.rope_original_max / cfg.rope_high_freq_factor
        out = []
        for f in inv_freq.tolist():
            wavelen = 2 * math.pi / f
            if wavelen < high_wavelen:
                out.append(f)
            elif wavelen > low_wavelen:
                out.append(f / cfg.rope_factor)
            else:
                smooth = (cfg.rope_original_max / wavelen - cfg.rope_low_freq_factor) / (
                    cfg.rope_high_freq_factor - cfg.rope_low_freq_factor)
                out.append((1 - smooth) * f / cfg.rope_factor + smooth * f)
        return torch.tensor(out, dtype=torch.float64)
    return inv_freq


def _rope(x, T: int, inv_freq):
    D = x.shape[-1]
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _attention(cfg: GPTConfig, x, p: dict, prefix: str, layer: int):
    B, T, _C = x.shape
    H, K, D = cfg.n_heads, cfg.kv_heads, cfg.head_dim
    q, k, v = _linear(x, p, prefix + "qkv.").split([H * D, K * D, K * D], dim=-1)
    if cfg.qk_norm != "none" and cfg.qk_norm_scope == "all":
        q = _norm(cfg.qk_norm, q, {"weight": p[prefix + "q_norm"]}, "", cfg.norm_eps)
        k = _norm(cfg.qk_norm, k, {"weight": p[prefix + "k_norm"]}, "", cfg.norm_eps)
    q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k, v = (a.view(B, T, K, D).transpose(1, 2).repeat_interleave(H // K, dim=1) for a in (k, v))
    per_head = cfg.qk_norm if cfg.qk_norm_scope == "head" else "none"
    if per_head == "rmsnorm":
        q = F.rms_norm(q, (D,), p[prefix + "q_norm"], cfg.norm_eps)
        k = F.rms_norm(k, (D,), p[prefix + "k_norm"], cfg.norm_eps)
    elif per_head == "layernorm":
        q = F.layer_norm(q, (D,), p[prefix + "q_norm"], None, cfg.norm_eps)
        k = F.layer_norm(k, (D,), p[prefix + "k_norm"], None, cfg.norm_eps)
    if cfg.positions == "rope":
        inv_freq = _inv_freq(cfg, D)
        q, k = _rope(q, T, inv_freq), _rope(k, T, inv_freq)
    scale = 1 / math.sqrt(D) if cfg.attn_scale is None else cfg.attn_scale
    if cfg.placement == "ngpt":  # NVIDIA/ngpt model.py: sqk * justnorm(q) after RoPE, sqrt(D)
        sqk = (p[prefix + "sqk"] * cfg.d_model ** 0.5).view(1, H, 1, D)
        q, k = sqk * _justnorm(q), sqk * _justnorm(k)
        scale = math.sqrt(D)
    s = q @ k.transpose(-1, -2) * scale
    if cfg.attn_softcap is not None:
        s = cfg.attn_softcap * torch.tanh(s / cfg.attn_softcap)
    if cfg.causal:
        t = torch.arange(T)
        hidden = t[None, :] > t[:, None]  # keys after the query
        W = cfg.window(layer)
        if W is not None:
            hidden |= t[None, :] <= t[:, None] - W  # keys W or more steps back
        s = s.masked_fill(hidden, float("-inf"))
    if cfg.attn_fn == "sigmoid":  # apple/ml-sigmoid-attention: the bias after the mask
        b = -math.log(cfg.seq_len) if cfg.attn_sigmoid_bias is None else cfg.attn_sigmoid_bias
        y = torch.sigmoid(s + b) @ v
    else:
        y = torch.softmax(s, dim=-1) @ v  # (B, H, T, D)
    y = y.transpose(1, 2).reshape(B, T, H * D)
    if cfg.attn_gate:  # qiuzh20/gated_attention: attn_output * torch.sigmoid(gate_score)
        y = y * torch.sigmoid(_linear(x, p, prefix + "gate."))
    return _linear(y, p, prefix + "proj.")


def _justnorm(x):
    """NVIDIA/ngpt model.py's ``justnorm``: x / x.norm(p=2, dim=-1, keepdim=True)."""
    return x / x.norm(p=2, dim=-1, keepdim=True)


def _mlp(cfg: GPTConfig, x, p: dict, prefix: str, layer: int):
    h = _linear(x, p, prefix + "fc.")
    if cfg.placement == "ngpt":  # NVIDIA/ngpt: suv * (suv_init_value / suv_init_scaling) sqrt(C)
        h = h * (p[prefix + "suv"] * cfg.d_model ** 0.5)
    if cfg.activation == "swiglu":
        gate, up = h.chunk(2, dim=-1)
        h = F.silu(gate) * up
    elif cfg.activation == "geglu":
        gate, up = h.chunk(2, dim=-1)
        h = F.gelu(gate, approximate="tanh") * up
    elif cfg.activation == "relu":
        h = F.relu(h)
    else:
        h = F.gelu(h, approximate="tanh" if cfg.activation == "gelu_tanh" else "none")
    return _linear(h, p, prefix + "proj.")


def _residual(cfg: GPTConfig, x, p: dict, prefix: str, branch, layer: int):
    def N(v, which="norm."):
        return _norm(cfg.norm, v, p, prefix + which, cfg.norm_eps, cfg.norm_offset)

    def Fn(v):
        return branch(cfg, v, p, prefix + "branch.", layer)

    placement = cfg.placement
    if placement == "mixln":  # pixeli99/MixLN: the first POST_NUM = floor(alpha L) layers Post-LN
        post = math.floor(cfg.mixln_fraction * cfg.n_layers + 1e-9)
        placement = "post" if layer < post else "pre"
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
    if placement == "branch":
        return x + N(Fn(x))
    if placement == "admin":
        return N(p[prefix + "omega"] * x + Fn(x))
    if placement == "lns":  # lmsdss/LayerNorm-Scaling: 1 / math.sqrt(layer_index + 1)
        return x + Fn(N(x) / math.sqrt(layer + 1))
    if placement == "ngpt":  # NVIDIA/ngpt Block.forward: lr = |alpha * (0.05 / base_scale)|
        lr = torch.abs(p[prefix + "alpha"] * (0.05 * cfg.d_model ** 0.5))
        A, B_ = _justnorm(x), _justnorm(Fn(x))
        return _justnorm(A + lr * (B_ - A))
    return x + Fn(x)


def logits_and_loss(cfg: GPTConfig, p: dict, idx: np.ndarray, targets: np.ndarray):
    """``(logits before the final cap, loss)`` of the model with parameters ``p``
    (name -> tensor)."""
    idx_t = torch.from_numpy(idx)
    T = idx.shape[1]
    x = F.embedding(idx_t, p["wte.weight"]) * cfg.embed_scale
    if cfg.positions == "learned":
        x = x + p["wpe.weight"][:T]
    for layer in range(cfg.n_layers):
        x = _residual(cfg, x, p, f"blocks.{layer}.attn.", _attention, layer)
        x = _residual(cfg, x, p, f"blocks.{layer}.mlp.", _mlp, layer)
    if cfg.norm != "none" and cfg.placement in ("pre", "sandwich", "rezero", "none", "branch",
                                                 "lns", "mixln"):  # a final norm
        x = _norm(cfg.norm, x, p, "norm_f.", cfg.norm_eps, cfg.norm_offset)
    head = p["wte.weight"] if cfg.tie_embeddings else p["head.weight"]
    logits = x @ head.T
    if cfg.placement == "ngpt":  # NVIDIA/ngpt GPT.forward: sz * (sz_init_value / sz_init_scaling)
        logits = logits * (p["sz"] * cfg.d_model ** 0.5)
    z = (
        logits
        if cfg.final_softcap is None
        else cfg.final_softcap * torch.tanh(logits / cfg.final_softcap)
    )
    t = torch.from_numpy(targets).reshape(-1)
    flat = z.reshape(-1, z.shape[-1])
    loss = F.cross_entropy(flat, t, label_smoothing=cfg.label_smoothing, ignore_index=-100)
    if cfg.z_loss:
        loss = loss + cfg.z_loss * torch.logsumexp(flat[t != -100], dim=-1).square().mean()
    return logits, loss


def profile_admin(cfg: GPTConfig, p: dict, idx: np.ndarray) -> list[float]:
    """Admin's omegas written after the official code's ``adaptive-profiling`` (Transformer-Clinic,
    fairseq/modules/transformer_layer.py): a running ratio starts at 1; at each sublayer omega is
    filled with it, then ratio = sqrt(np.var(residual * omega) + np.var(F(residual))), the
    variances over the flattened tensor. ``p`` is changed in place (omega filled); float64."""
    with torch.no_grad():
        T = idx.shape[1]
        x = F.embedding(torch.from_numpy(idx), p["wte.weight"]) * cfg.embed_scale
        if cfg.positions == "learned":
            x = x + p["wpe.weight"][:T]
        ratio, out = 1.0, []
        for layer in range(cfg.n_layers):
            for name, branch in (("attn", _attention), ("mlp", _mlp)):
                prefix = f"blocks.{layer}.{name}."
                p[prefix + "omega"].fill_(ratio)
                out.append(ratio)
                f = branch(cfg, x, p, prefix + "branch.", layer)
                ratio = float(np.sqrt(np.var((x * p[prefix + "omega"]).numpy().reshape(-1))
                                      + np.var(f.numpy().reshape(-1))))
                x = _norm(cfg.norm, p[prefix + "omega"] * x + f, p, prefix + "norm.",
                          cfg.norm_eps, cfg.norm_offset)
    return out


def loss_and_grads(cfg: GPTConfig, params: dict[str, np.ndarray], idx, targets):
    """torch's loss (float) and the gradient of every parameter (name -> ndarray)."""
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    logits, loss = logits_and_loss(cfg, p, idx, targets)
    loss.backward()
    return float(loss.detach()), logits.detach().numpy(), {k: t.grad.numpy() for k, t in p.items()}
