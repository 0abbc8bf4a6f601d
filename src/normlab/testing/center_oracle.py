"""The PyTorch twin of the centering-only norm (``normlab.functional.centernorm``), kept apart
from ``oracles`` so that the twin of one ablation norm stays beside its own history. Test-only:
importing it imports torch."""

import torch


def center_norm(x, weight=None, bias=None):
    """Centering only, LayerNorm without its division, written from torch's ops:
    ``(x - x.mean(-1, keepdim=True)) * weight + bias``, in float32/64."""
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    xc = x.to(ct)
    out = xc - xc.mean(-1, keepdim=True)
    if weight is not None:
        out = out * weight.to(ct)
    if bias is not None:
        out = out + bias.to(ct)
    return out.to(x.dtype)
