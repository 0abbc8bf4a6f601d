"""The Transformer's position-wise MLP: ``proj(act(fc(x)))``, or a gated MLP with gate and up
stacked in one projection: SwiGLU's ``proj(silu(gate) * up)`` (Llama) or GeGLU's
``proj(gelu_tanh(gate) * up)`` (Gemma)."""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from .. import _checks as ck
from ..functional import (
    relu_backward,
    relu_forward,
    swiglu_backward,
    swiglu_forward,
)
from .linear import Linear
from .module import Module

ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "swiglu", "geglu")
GATED = ("swiglu", "geglu")


class MLP(Module):
    """x (B, T, C) -> fc -> activation -> proj -> (B, T, C), hidden width ``d_ff``.

    ``activation``: "gelu" (exact), "gelu_tanh" (GPT-2), "relu", "swiglu" or "geglu" (gated:
    then ``fc`` maps to 2 * d_ff, the gate rows first, the up rows second, and ``proj`` reads
    d_ff; GeGLU's GELU is the tanh form, Gemma's ``gelu_pytorch_tanh``).

    GeGLU, with g = gelu(a): out = g * b; da = gelu'(a) * (dout * b), db = dout * g.

    ``ngpt=True`` (nGPT, arXiv 2410.01131 section 2.4.2; NVIDIA/ngpt model.py ``suv``): fc's
    output u is multiplied by s_uv before the activation, ``suv`` (width,) stored at 1 and read
    times sqrt(C) (the code's ``suv_init_value / suv_init_scaling * n_embd ** 0.5``): s_u and
    s_v of a gated MLP are its gate and up halves (the code's SwiGLU takes silu of its second
    half, normlab's of its first: a permutation of fc's rows).
    """

    def __init__(
        self,
        C: int,
        d_ff: int,
        activation: str = "gelu_tanh",
        *,
        rng: np.random.Generator,
        bias: bool = False,
        std: float = 0.02,
        proj_std: float | None = None,
        dtype: DTypeLike = np.float32,
        ngpt: bool = False,
    ) -> None:
        super().__init__()
        ck.choice(activation, "activation", ACTIVATIONS)
        self.ngpt = ck.flag(ngpt, "ngpt")
        self.activation, self.d_ff = activation, d_ff
        width = 2 * d_ff if activation in GATED else d_ff
        self.fc = Linear(C, width, bias=bias, rng=rng, std=std, dtype=dtype)
        self.proj = Linear(d_ff, C, bias=bias, rng=rng, std=std if proj_std is None else proj_std,
                           dtype=dtype)
        if ngpt:  # nGPT's s_uv: stored 1, read times sqrt(C)
            self.suv_scale = float(np.sqrt(C))
            self.add_param("suv", np.ones(width, dtype))
        self._uv: np.ndarray | None = None  # ngpt: fc's output before s_uv

    def forget(self) -> None:
        super().forget()
        self._uv = None

    def _suv(self, like: np.ndarray) -> np.ndarray:
        """s_uv as it broadcasts against ``like`` (an ensemble's (M, 1.., width))."""
        w = self.params["suv"]
        s = w * w.dtype.type(self.suv_scale)
        return s.reshape(s.shape[:1] + (1,) * (like.ndim - 2) + s.shape[1:]) if self.members else s

    def forward(self, x: np.ndarray) -> np.ndarray:
        h = self.fc(x)  # (B, T, d_ff) or (B, T, 2 d_ff)
        if self.ngpt:
            self._uv, h = h, h * self._suv(h)
        if self.activation == "swiglu":
            h, self._cache = swiglu_forward(h[..., : self.d_ff], h[..., self.d_ff :])
        elif self.activation == "geglu":
            up = h[..., self.d_ff :]  # (B, T, d_ff)
            g, gelu_cache = self.op("gelu_forward")(h[..., : self.d_ff], approximate="tanh")
            self._cache = (gelu_cache, g, up)
            h = g * up  # (B, T, d_ff)
        elif self.activation == "relu":
            h, self._cache = relu_forward(h)
        else:
            gelu = self.op("gelu_forward")  # the kernel or the reference (Module.set_impl)
            approximate = "tanh" if self.activation == "gelu_tanh" else "none"
            h, self._cache = gelu(h, approximate=approximate)
        return self.proj(h)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dh = self.proj.backward(dout)  # (B, T, d_ff)
        cache = self._last_cache()
        if self.activation == "swiglu":
            dh = np.concatenate(swiglu_backward(dh, cache), axis=-1)  # (B, T, 2 d_ff)
        elif self.activation == "geglu":
            gelu_cache, g, up = cache
            dgate = self.op("gelu_backward")(dh * up, gelu_cache)  # (B, T, d_ff)
            dh = np.concatenate([dgate, (dh * g).astype(dgate.dtype, copy=False)], axis=-1)
        elif self.activation == "relu":
            dh = relu_backward(dh, cache)
        else:
            dh = self.op("gelu_backward")(dh, cache)
        if self.ngpt:
            uv, self._uv = self._uv, None
            k = self.suv_scale
            if self.members:
                ds = np.stack([ck.reduce_rows(d * u) for d, u in zip(dh, uv)])  # type: ignore
            else:
                ds = ck.reduce_rows(dh * uv)
            self.accumulate("suv", ds * k)
            dh = dh * self._suv(dh)
        return self.fc.backward(dh)
