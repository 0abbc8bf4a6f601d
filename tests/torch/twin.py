"""normlab's decoder-only model as a plain torch.nn.Module, for the emulate twin tests: the
functions of tests/models/torch_gpt.py (written independently of normlab), arranged as modules
(an embedding, one module per residual sublayer), with attention through
``F.scaled_dot_product_attention``. Nothing in it knows about precision."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import torch_gpt


def _attention(cfg, x, p, prefix, layer):
    B, T, _C = x.shape
    H, D = cfg.n_heads, cfg.head_dim
    q, k, v = torch_gpt._linear(x, p, prefix + "qkv.").split([H * D, H * D, H * D], dim=-1)
    q, k, v = (a.view(B, T, H, D).transpose(1, 2) for a in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(D))
    return torch_gpt._linear(y.transpose(1, 2).reshape(B, T, H * D), p, prefix + "proj.")


class Embed(torch.nn.Module):
    def __init__(self, cfg, p):
        super().__init__()
        self.cfg, self.p = cfg, p

    def forward(self, idx):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)  # the table read as an embedding, as GPT-2's
        return F.embedding(idx, self.p["wte.weight"]) + F.embedding(pos, self.p["wpe.weight"])


class Sublayer(torch.nn.Module):
    def __init__(self, cfg, p, prefix, branch, layer):
        super().__init__()
        self.cfg, self.p, self.prefix, self.branch, self.layer = cfg, p, prefix, branch, layer

    def forward(self, x):
        return torch_gpt._residual(self.cfg, x, self.p, self.prefix, self.branch, self.layer)


class TwinGPT(torch.nn.Module):
    """Parameters by normlab's names (``named`` maps them); forward(idx, targets) -> loss."""

    def __init__(self, cfg, params: dict[str, np.ndarray]):
        super().__init__()
        self.cfg = cfg
        self.flat = torch.nn.ParameterDict(
            {k.replace(".", "__"): torch.nn.Parameter(torch.tensor(v)) for k, v in params.items()})
        self.named = {k: self.flat[k.replace(".", "__")] for k in params}
        self.embed = Embed(cfg, self.named)
        subs = []
        for i in range(cfg.n_layers):
            subs.append(Sublayer(cfg, self.named, f"blocks.{i}.attn.", _attention, i))
            subs.append(Sublayer(cfg, self.named, f"blocks.{i}.mlp.", torch_gpt._mlp, i))
        self.layers = torch.nn.ModuleList(subs)

    def forward(self, idx, targets):
        p, cfg = self.named, self.cfg
        x = self.embed(idx)
        for m in self.layers:
            x = m(x)
        x = torch_gpt._norm(cfg.norm, x, p, "norm_f.", cfg.norm_eps)
        head = p["wte.weight"] if cfg.tie_embeddings else p["head.weight"]
        logits = x @ head.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
