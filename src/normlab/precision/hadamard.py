"""The random Hadamard transform (RHT) before block quantization, and its inverse.

TransformerEngine's NVFP4 recipe rotates the two operands of the weight-gradient GEMM (the layer's
input and the output's gradient, along the token axis that GEMM sums over) in groups of 16 by

    T = diag(s) H_16 / 4,      H_16 the Sylvester Hadamard matrix (H_1 = [1],
                               H_2n = [[H_n, H_n], [H_n, -H_n]]), s = ``TE_SIGNS``

(``NVFP4QuantizerRef._build_hadamard_matrix`` and ``_apply_rht``: ``x.view(-1, 16) @ T``, the
fixed sign vector ``get_wgrad_sign_vector``), before it quantizes them in 1x16 blocks along the
same axis. T is orthogonal, so the GEMM of two rotated operands is the GEMM of the original ones;
spreading an outlier over 16 values lowers the block's amax relative to its other values. An
emulation rounds in the rotated basis and rotates back: ``rht_inverse(Q(rht(x)))``, which is
what :class:`HadamardScaling` (kind ``"hadamard"``) does around any block dialect, so that a
recipe names the operands it applies to by giving their roles this dialect.

Arithmetic: each group's transform is computed exactly in float64 by the fast Walsh-Hadamard
butterflies in a fixed order (exact whenever the 16 values span fewer than 2^25 binades
(float32 input); always for bfloat16 input spanning fewer than 41) and rounded once to x's
compute dtype: the exact transform correctly rounded. TE's reference is a float32 GEMM, whose
sum depends on the order the BLAS adds in; the two agree wherever that float32 sum is exact
(bfloat16 inputs within 12 binades, the setting of TE's exact tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FloatFormat
from .scaling import (
    ErrorStats,
    Quantized,
    ScalingDialect,
    ScalingState,
    error_stats,
    register_scaling,
    scaling_from_dict,
)

#: TransformerEngine's fixed sign vector (``get_wgrad_sign_vector``, reference_nvfp4.py at
#: d0067d0; torchao's ``hadamard_utils.DEFAULT_SIGN_VECTOR`` is stated to match it).
TE_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)
SIGNS = ("te", "none")

#: The operands of a linear layer's three GEMMs, by the names a recipe gives them
#: (``"<gemm>.<operand>"``): the forward y = x W^T, the data gradient dx = dy W and the weight
#: gradient dW = dy^T x.
GEMM_OPERANDS = ("fprop.input", "fprop.weight", "dgrad.grad_output", "dgrad.weight",
                 "wgrad.input", "wgrad.grad_output")
#: Where TransformerEngine's ``NVFP4BlockScaling`` applies the RHT (its column-wise operands:
#: the weight gradient's two inputs, along the token axis it sums over) and stochastic rounding
#: (the gradients only); 16x16 tiles go to the weights. A recipe gives these operands a
#: ``HadamardScaling`` and a stochastic ``Precision``.
TE_NVFP4_RHT_OPERANDS = ("wgrad.input", "wgrad.grad_output")
TE_NVFP4_SR_OPERANDS = ("dgrad.grad_output", "wgrad.grad_output")
TE_NVFP4_2D_OPERANDS = ("fprop.weight", "dgrad.weight")


def _signs(signs: str, size: int) -> Array:
    ck.choice(signs, "signs", SIGNS)
    if signs == "te":
        if size != 16:
            raise ValueError(f"signs='te' is TransformerEngine's 16-entry sign vector; size "
                             f"{size} needs signs='none'")
        return np.array(TE_SIGNS, np.float64)
    return np.ones(size)


def hadamard_matrix(size: int = 16, signs: str = "te") -> Array:
    """T = diag(s) H / sqrt(size) (float64, (size, size)): ``rht(x)`` is x @ T in groups.
    ``signs``: ``"te"`` (TE's fixed vector, size 16) or ``"none"`` (plain Hadamard)."""
    n = _check_size(size)
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return (_signs(signs, n)[:, None] * h) / np.sqrt(n)


def _check_size(size: Any) -> int:
    n = ck.integer(size, "size", lo=1, hi=1 << 12)
    if n & (n - 1):
        raise ValueError(f"size must be a power of two (a Sylvester Hadamard matrix); got {n}")
    return n


def _fwht(v: Array) -> Array:
    """The unnormalized Walsh-Hadamard transform along the last axis (length a power of two):
    v @ H, by butterflies in a fixed order (float64)."""
    n = v.shape[-1]
    out = v.copy()
    h = 1
    while h < n:
        w = out.reshape(out.shape[:-1] + (n // (2 * h), 2, h))
        a, b = w[..., 0, :].copy(), w[..., 1, :].copy()
        w[..., 0, :], w[..., 1, :] = a + b, a - b
        h *= 2
    return out


def _groups(x: Array, axis: int, n: int) -> tuple[Array, int]:
    """x with ``axis`` moved last and split into groups of n (its length must divide)."""
    ax = ck.integer(axis, "axis", lo=-x.ndim, hi=x.ndim - 1) % x.ndim
    if x.shape[ax] % n:
        raise ValueError(f"the rotated axis ({x.shape[ax]} values) must be a multiple of the "
                         f"Hadamard size {n}")
    xm = np.moveaxis(x, ax, -1)
    return xm.reshape(xm.shape[:-1] + (xm.shape[-1] // n, n)), ax


def _transform(x: Any, axis: int, size: int, signs: str, inverse: bool) -> Array:
    x = ck.float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("x must have at least 1 dimension to rotate; got a scalar")
    n = _check_size(size)
    s = _signs(signs, n)
    ct = ck.compute_dtype(x.dtype)
    g, ax = _groups(x.astype(np.float64), axis, n)
    with np.errstate(invalid="ignore", over="ignore"):
        y = _fwht(g) * s if inverse else _fwht(g * s)  # T^-1 = T^T = H diag(s) / sqrt(n)
        y = (y / np.sqrt(n)).astype(ct)
    return np.moveaxis(y.reshape(y.shape[:-2] + (-1,)), -1, ax)


def rht(x: Any, axis: int = -1, *, size: int = 16, signs: str = "te") -> Array:
    """The random Hadamard transform of x along ``axis`` in groups of ``size``: each group
    times T = diag(s) H / sqrt(size), computed exactly and rounded once to x's compute dtype
    (module docstring). The axis' length must be a multiple of ``size``. Returns x's shape."""
    return _transform(x, axis, size, signs, inverse=False)


def rht_inverse(y: Any, axis: int = -1, *, size: int = 16, signs: str = "te") -> Array:
    """The inverse of :func:`rht`: each group times T^T = H diag(s) / sqrt(size). Returns y's
    shape."""
    return _transform(y, axis, size, signs, inverse=True)


class RotatedTensor(NamedTuple):
    """A tensor quantized in the rotated basis: ``inner`` the quantized rotation, decoded by
    rotating ``inner.dequantize()`` back."""

    inner: Any  # the inner dialect's Quantized (of rht(x))
    axis: int
    size: int
    signs: str

    @property
    def elements(self) -> Array:
        """The rotated tensor's elements (x's shape)."""
        return self.inner.elements

    @property
    def fmt(self) -> FloatFormat:
        return self.inner.fmt

    def dequantize(self) -> Array:
        """rht_inverse(inner.dequantize()): x's shape."""
        return rht_inverse(self.inner.dequantize(), self.axis, size=self.size, signs=self.signs)

    def stats(self, x: Any) -> ErrorStats:
        """Errors against x; ``flushed`` and ``saturated`` as the rotated values were rounded."""
        e = error_stats(x, self.dequantize(), self.fmt)
        r = self.inner.stats(rht(x, self.axis, size=self.size, signs=self.signs))
        return e._replace(flushed=r.flushed, saturated=r.saturated)


@register_scaling
@dataclass(frozen=True)
class HadamardScaling(ScalingDialect):
    """``scaling`` (any block dialect) applied to x rotated by the RHT along the block axis
    (``rht``), the result rotated back: TransformerEngine's NVFP4 treatment of the
    weight-gradient operands. ``axis`` None: the inner dialect's axis."""

    scaling: Any = None
    size: int = 16
    signs: str = "te"
    axis: int | None = None
    kind: ClassVar[str] = "hadamard"

    def __post_init__(self) -> None:
        inner = scaling_from_dict(self.scaling, "hadamard.scaling")
        if inner is None:
            raise ValueError("hadamard.scaling: the dialect to apply after the rotation is "
                             "required (e.g. {'kind': 'nvfp4'})")
        object.__setattr__(self, "scaling", inner)
        _signs(self.signs, _check_size(self.size))
        if self.axis is not None:
            ck.integer(self.axis, "axis", lo=-32, hi=31)

    def _axis(self, axis: int | None) -> int:
        if axis is not None:
            return axis
        return self.axis if self.axis is not None else getattr(self.scaling, "axis", -1)

    def new_state(self, fmt: Any) -> ScalingState | None:
        return self.scaling.new_state(fmt)

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> RotatedTensor:
        """rht(x) quantized by the inner dialect along the same axis."""
        ax = self._axis(axis)
        q: Quantized = self.scaling.quantize(
            rht(x, ax, size=self.size, signs=self.signs), fmt, rounding=rounding,
            overflow=overflow, rng=rng, state=state, axis=ax, sr_bits=sr_bits,
            quantizer=quantizer)
        return RotatedTensor(q, ax, self.size, self.signs)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "scaling": self.scaling.to_dict(), "size": self.size,
                "signs": self.signs, "axis": self.axis}

    def describe(self) -> str:
        signs = "TE's signs" if self.signs == "te" else "no signs"
        return f"{self.size}-point Hadamard rotation ({signs}), then {self.scaling.describe()}"
