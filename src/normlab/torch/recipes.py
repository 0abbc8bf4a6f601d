"""A recipe's linear layer in ``normlab.torch.emulate``: each of its three GEMMs quantizes its own
two operands from the high-precision tensors, along that GEMM's reduction axis, in the
precision the policy gives that operand (``PrecisionPolicy.operand``; the ``nvfp4``,
``mxfp8_2d`` and ``fp8_blockwise`` presets), as TransformerEngine's recipes do:

==========  =========================  ===================================  =================
GEMM        product                    operands (reduction axis)            nvfp4
==========  =========================  ===================================  =================
fprop       y = x W^T                  x (C_in), W (C_in)                   1x16; 16x16 tiles
dgrad       dx = dY W                  dY (C_out), W (C_out)                1x16 SR; tiles
wgrad       dW = dY^T x                dY (tokens), x (tokens)              RHT 1x16 (SR on
                                                                            dY); RHT 1x16
==========  =========================  ===================================  =================

The weight is ``params(W)`` first (bfloat16 in the recipes); y, dx and dW are rounded to
``activations``; the bias and its gradient are float32. The wgrad operands are flattened to
(tokens, channels) and, where the token count is not a multiple of a block, padded with zero
tokens (a zero token adds nothing to dY^T x and, rotated, nothing to a block's amax but its
zeros); TransformerEngine requires multiples of 16 there instead. A product that is not a linear
layer (a batched product with a weight, a convolution) keeps ``normlab.torch.ops``' rules with the
roles ``compute`` and ``gradients``.

:func:`keep_overrides` turns a policy's ``keep_layers`` into ``emulate``'s per-module overrides
(``normlab.torch.overrides``), and :func:`keep_last` names the last layers and the head of a
model, as the recipes' option to keep them in bf16.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .. import _checks as ck
from ..precision.policy import Precision, PrecisionPolicy
from .ops import Job, along
from .quantize import apply


def _q(p: Precision, x: torch.Tensor, axis: int, rng: Any) -> torch.Tensor:
    """x in precision p with its blocks along ``axis`` (the GEMM's reduction axis), x's dtype."""
    if not p.rounds or x.numel() == 0:
        return x

    def one(t: torch.Tensor) -> torch.Tensor:
        return apply(p, t, rng=rng).to(t.dtype)
    return along(one, x, axis, True)


def _tokens(t: torch.Tensor, multiple: int) -> torch.Tensor:
    """t as (tokens, channels), zero tokens added up to a multiple of ``multiple``."""
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() != 1 else t[None]
    pad = (-t2.shape[0]) % multiple
    return F.pad(t2, (0, 0, 0, pad)) if pad else t2


def _transposable(a: Precision, b: Precision) -> bool:
    """Whether rounding W by ``a`` along its rows gives W rounded by ``b`` along its columns:
    one deterministic precision whose blocks, if any, are square tiles."""
    if a != b or a.rounding == "stochastic":
        return False
    s: Any = a.scaling
    return s is None or (getattr(s, "two_d", False) and s.kind in ("nvfp4", "mx", "fp8_blocks")
                         and getattr(s, "global_scale", "tensor") == "tensor")


def _block(p: Precision) -> int:
    s: Any = p.scaling
    inner = getattr(s, "scaling", None) or s
    for attr in ("block", "block_size"):
        if hasattr(inner, attr):
            return int(getattr(inner, attr))
    return 16 if inner is not None and inner.kind == "nvfp4" else 1


class RecipeLinear(torch.autograd.Function):
    """y = activations(Q(x) Q(params(W))^T + b), the backward's GEMMs on their own operands
    (module docstring); x (..., C_in), W (C_out, C_in), b (C_out,) or None."""

    @staticmethod
    def forward(ctx: Any, job: Job, x: torch.Tensor, w: torch.Tensor,
                b: torch.Tensor | None) -> torch.Tensor:
        r = job.rounder
        pol: PrecisionPolicy = r.policy
        wp = r("params", w, f"{job.site}/{job.keys[1]}")
        xq = _q(pol.operand("fprop.input"), x, -1, r.rng)
        wq = _q(pol.operand("fprop.weight"), wp, -1, r.rng)
        with torch._C.DisableTorchFunction():
            y = F.linear(xq, wq, b)
        # dgrad's weight is the forward's where the two precisions are one deterministic
        # rounding that a transpose leaves as it is (2D tiles, or no blocks): held, not redone
        same = _transposable(pol.operand("fprop.weight"), pol.operand("dgrad.weight"))
        ctx.save_for_backward(x.detach(), wp.detach(), wq.detach() if same else None)
        ctx.job, ctx.has_bias = job, b is not None
        return r.inplace("activations", y, f"{job.site}/output")

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple:
        job = ctx.job
        job.emulator.backward_ran()
        x, wp, wq = ctx.saved_tensors
        r, site = job.rounder, job.site
        pol: PrecisionPolicy = r.policy
        with torch._C.DisableTorchFunction():
            gd = _q(pol.operand("dgrad.grad_output"), dy, -1, r.rng)
            wd = wq if wq is not None else _q(pol.operand("dgrad.weight"), wp, 0, r.rng)
            dx = r.inplace("activations", (gd @ wd).to(torch.float32), f"{site}/dx").to(x.dtype)
            pg, px = pol.operand("wgrad.grad_output"), pol.operand("wgrad.input")
            m = max(_block(pg), _block(px))
            g2, x2 = _tokens(dy, m), _tokens(x, m)
            dw = r.inplace("activations", _q(pg, g2, 0, r.rng).transpose(0, 1) @
                           _q(px, x2, 0, r.rng), f"{site}/dweight")
            db = g2.sum(0) if ctx.has_bias else None
        return None, dx, dw, db


def linear_class(job: Job) -> type[torch.autograd.Function] | None:
    """:class:`RecipeLinear` where the region's policy sets GEMM operands, else None."""
    return RecipeLinear if job.rounder.policy.operands else None


def keep_overrides(policy: PrecisionPolicy) -> list[tuple[str, PrecisionPolicy]]:
    """``policy.keep_layers`` as ``emulate``'s overrides: each pattern to ``policy.kept()``."""
    if not isinstance(policy, PrecisionPolicy):
        raise TypeError(f"policy must be a PrecisionPolicy; got {type(policy).__name__}")
    kept = policy.kept()
    return [(p, kept) for p in policy.keep_layers]


def keep_last(policy: Any, last: int, *, layers: str = "*.h", head: str | None = "lm_head"
              ) -> PrecisionPolicy:
    """``policy`` (a PrecisionPolicy or a preset name) with its last ``last`` layers and the
    head in ``keep_layers``: ``"<layers>.-1"`` ... (negative indices count from the end of the
    ModuleList, ``normlab.torch.overrides``; ``layers`` defaults to GPT-2's ``transformer.h``),
    and ``head`` (None: not the head). For normlab's own model the names are explicit
    (``blocks.<i>``, ``head``: ``PrecisionPolicy.replace(keep_layers=...)``)."""
    from ..precision.policy import get_policy

    pol = get_policy(policy) if isinstance(policy, str) else policy
    if not isinstance(pol, PrecisionPolicy):
        raise TypeError(f"policy must be a PrecisionPolicy or a preset name; got {policy!r}")
    n = ck.integer(last, "last", lo=0)
    names = [f"{layers}.-{i}" for i in range(n, 0, -1)] + ([head] if head else [])
    return pol.replace(name=f"{pol.name}+keep{n}", keep_layers=(*pol.keep_layers, *names))


__all__ = ["RecipeLinear", "keep_last", "keep_overrides", "linear_class"]
