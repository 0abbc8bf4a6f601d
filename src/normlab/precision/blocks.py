"""Block-scaled tensors: tiles of a tensor sharing one scale, and FP8 in 1x128 and 128x128 blocks
as DeepGEMM, TransformerEngine and torchao compute it.

**Tiles** (``tiles.Tiling``): blocks of ``block`` consecutive values along one axis (1D blocks:
1x16 NVFP4, 1x32 MX, 1x128 FP8 activations) or ``block x block`` tiles of the last two axes (2D
blocks: 16x16 NVFP4 weights, 32x32 MXFP8 weights, 128x128 FP8 weights), a short last block or
tile padded with zeros. A per-tile value (a scale, an amax) lives in the *grid layout*: x's
shape with each tiled axis divided by the block, rounded up, in place.

**A block-scaled tensor** (:class:`BlockTensor`) holds the rounded elements, the scales as the
tool stores them, and per tile the multiplier that encoded the elements (``encode``) and the one
that decodes them (``decode``): ``dequantize() = elements * decode`` (one float32 product, as the
tools' dequantize and GEMM epilogues).

**Block FP8** (:class:`FP8BlockScaling`, kind ``"fp8_blocks"``): DeepSeek-V3's fine-grained FP8,
1x128 activation and gradient blocks and 128x128 weight blocks, in three dialects that differ in
the amax floor, in which scale is stored, in the power-of-two rule and in the arithmetic
(``FP8_BLOCK_DIALECTS`` gives each one's source):

=========  ===========  ======================  ===========================  ==================
dialect    amax floor   stored scale            power-of-two option          arithmetic
=========  ===========  ======================  ===========================  ==================
deepgemm   1e-4         decode amax / 448       UE8M0 ceil of the decode     float32, x * (1/sf)
te         0 (amax 0:   decode 1 / s, s = 448 /  floor of the encode s (on   float32, x * s
           s = 1)       amax                    by default in the recipe)
torchao    1e-12        decode 1 / s            none                         s from float64
=========  ===========  ======================  ===========================  ==================

:class:`FP8RowScaling` (kind ``"fp8_rows"``) is per-row FP8, torchao's ``Float8Linear`` rowwise
recipe (``ScalingGranularity.AXISWISE``): one scale per row along the reduction axis.

Every dialect computes in float32 as its tool does (float64 input is rounded to float32 first)
and rounds elements with ``quantize`` (saturating, to nearest even or stochastically).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FloatFormat, get_format
from .rounding import _check_rounding, quantize
from .scaling import (
    ErrorStats,
    ScalingDialect,
    _saturated_product,
    error_stats,
    register_scaling,
)
from .tiles import Tiling, block_amax

F32 = np.float32
F32_MAX = F32(np.finfo(np.float32).max)

class BlockTensor(NamedTuple):
    """A block-scaled tensor: the elements and, per tile (grid layout), its scales."""

    elements: Array  # x's shape, values of fmt (float32; float64 for float64 input)
    scales: Array  # per tile: the scale as the tool stores it (E4M3 values, E8M0 powers of two,
    #                float32 decode or encode scales)
    encode: Array  # per tile: the multiplier the elements were rounded after (float32)
    decode: Array  # per tile: the multiplier that decodes them: dequantize = elements * decode
    tiling: Tiling
    fmt: FloatFormat  # the element format
    global_scale: Array | None = None  # a second-level scale (NVFP4's), broadcast to the grid

    def dequantize(self) -> Array:
        """elements * decode, x's shape, one product per element in the elements' dtype (a
        finite product beyond its range is its largest finite value, never inf)."""
        d = self.tiling.expand(self.decode).astype(self.elements.dtype, copy=False)
        return _saturated_product(self.elements, d)

    def stats(self, x: Any) -> ErrorStats:
        """Error statistics against the original x."""
        return error_stats(x, self.dequantize(), self.fmt, self.tiling.expand(self.encode))


def as_float32(x: Any) -> tuple[Array, np.dtype]:
    """x (checked) as float32, and the dtype results come back in (float64 for float64 x)."""
    x = ck.float_array(x, "x")
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float32, copy=False), ck.compute_dtype(x.dtype)


def round_elements(v: Array, fmt: FloatFormat, rounding: str, rng: np.random.Generator | None,
                   sr_bits: int | None, quantizer: Callable | None = None) -> Array:
    """The scaled values v (float32) rounded to the element format, saturating (the tools'
    ``satfinite`` and clamps): to nearest even, or stochastically with ``sr_bits`` random
    bits."""
    q = quantizer or quantize
    kw: dict[str, Any] = {} if sr_bits is None else {"sr_bits": sr_bits}
    return q(v, fmt, rounding=rounding, overflow="saturate", rng=rng, **kw)


def _pack(tiling: Tiling, q: Array, out_dtype: np.dtype, scales: Array, encode: Array,
          decode: Array, fmt: FloatFormat, global_scale: Array | None = None) -> BlockTensor:
    """A BlockTensor from split-layout elements and per-block values."""
    elements = tiling.merge(q).astype(out_dtype, copy=False)
    g = tiling.to_grid
    return BlockTensor(elements, g(scales), g(encode), g(decode), tiling, fmt,
                       None if global_scale is None else g(global_scale))


# --- FP8 in blocks: DeepGEMM, TransformerEngine, torchao --------------------------------------

TE_COMMIT = "d0067d0da6cb01811b8072a7d304f0e00344ce2b"
TORCHAO = "torchao 0.18.0"
DEEPGEMM_COMMIT = "54e22612409371d6364144b69086735beb54e98b"

#: Each FP8 block dialect's source: the tool, its version or commit, file and function.
FP8_BLOCK_DIALECTS = {
    "deepgemm": f"deepseek-ai/DeepGEMM@{DEEPGEMM_COMMIT[:7]} deep_gemm/utils/math.py: "
                "per_token_cast_to_fp8 (1x128), per_block_cast_to_fp8 (128x128), "
                "ceil_to_ue8m0 (use_ue8m0=True)",
    "te": f"NVIDIA/TransformerEngine@{TE_COMMIT[:7]} tests/pytorch/references/"
          "blockwise_quantizer_reference.py: BlockwiseQuantizerReference (the reference its "
          "kernels are tested equal to), quantize_scale_calc.py: scale_from_amax_tensor; "
          "recipe Float8BlockScaling (power_2_scale=True, amax_epsilon=0.0)",
    "torchao": f"{TORCHAO} torchao/prototype/blockwise_fp8_training/kernels.py: "
               "torch_blockwise_scale_act_quant_lhs (1x128), torch_blockwise_scale_weight_quant "
               "(128x128)",
}
FP8_ROW_SOURCE = (f"{TORCHAO} torchao/float8/float8_utils.py: amax_to_scale, "
                  "_round_scale_down_to_power_of_2, to_fp8_saturated; float8_training_tensor.py: "
                  "hp_tensor_and_scale_to_float8 (Float8LinearRecipeName.ROWWISE: "
                  "round_scales_to_power_of_2=True), dequantize _data / _scale")
_POW2_DEFAULT = {"deepgemm": False, "te": True, "torchao": False}


def ceil_to_ue8m0(sf: Array) -> Array:
    """DeepGEMM's ``ceil_to_ue8m0``: the float32 exponent field of |sf| plus one when its
    mantissa is not zero, clamped to 1..254, as a float32 power of two (NaN and inf give
    2^127)."""
    b = np.abs(sf.astype(F32)).view(np.uint32).astype(np.int64)
    e = ((b >> 23) & 0xFF) + ((b & 0x7FFFFF) != 0)
    return np.ldexp(F32(1), (np.clip(e, 1, 254) - 127).astype(np.int32)).astype(F32)


def floor_pow2_frexp(s: Array) -> Array:
    """TransformerEngine's power-of-two scale: ldexp(1, frexp(s).exponent - 1), s rounded down
    to a power of two (NaN gives 0.5, as torch.frexp's exponent 0)."""
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(s.astype(F32))
    return np.ldexp(F32(1), (e - 1).astype(np.int32)).astype(F32)


def _fp8_scales(a: Array, fmax: Any, dialect: str, pow2: bool) -> tuple[Array, Array, Array]:
    """(stored scale, encode, decode) per block from the float32 block amax ``a``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if dialect == "deepgemm":
            a = np.maximum(a, F32(1e-4))  # torch.clamp: NaN stays NaN (so does maximum)
            sf = (a / F32(fmax)).astype(F32)
            if pow2:
                sf = ceil_to_ue8m0(sf)
            return sf, (F32(1) / sf).astype(F32), sf
        if dialect == "te":
            s = (F32(fmax) / a).astype(F32)  # eps 0: max(amax, 0) is amax
            s = np.where(s == np.inf, F32_MAX, s).astype(F32)
            if pow2:
                s = floor_pow2_frexp(s)
                s = np.where(a == np.inf, F32(0), s).astype(F32)
            s = np.where(a == 0, F32(1), s).astype(F32)
            inv = (F32(1) / s).astype(F32)
            return inv, s, inv
        a64 = np.maximum(a.astype(np.float64), 1e-12)
        s = (float(fmax) / a64).astype(F32)  # float64 quotient, then float32
        inv = (F32(1) / s).astype(F32)
        return inv, s, inv


def fp8_block_quantize(x: Any, fmt: Any = "float8_e4m3fn", *, dialect: str = "deepgemm",
                       block: int = 128, two_d: bool = False, axis: int = -1,
                       pow2: bool | None = None, rounding: str = "nearest_even",
                       rng: np.random.Generator | None = None, sr_bits: int | None = None,
                       quantizer: Callable | None = None) -> BlockTensor:
    """FP8 in blocks of ``block`` along ``axis`` (1x128) or ``block x block`` tiles of the last
    two axes (``two_d``: 128x128), as ``dialect`` computes it (module docstring;
    ``FP8_BLOCK_DIALECTS`` gives the functions).

    Args:
        x: float array; float32 arithmetic (float64 input is rounded to float32 first).
        fmt: the element format (the tools' E4M3 is ``float8_e4m3fn``; 448 is its max, which
            every dialect takes from the format).
        dialect: ``"deepgemm"``, ``"te"`` or ``"torchao"``.
        pow2: power-of-two scales (DeepGEMM ``use_ue8m0``: UE8M0 ceil of the decode scale;
            TE ``power_2_scale``: floor of the encode scale); None: the tool's default (TE's
            recipe on, DeepGEMM off); torchao's blockwise FP8 has none.
        rounding, rng, sr_bits: the element rounding (``quantize``'s; saturating).

    Returns:
        BlockTensor; ``scales`` as the tool stores them (DeepGEMM ``sf``, TE ``scale_inv``,
        torchao the reciprocal scale), ``dequantize()`` = elements x that decode scale.
    """
    fmt = get_format(fmt)
    dialect = ck.choice(dialect, "dialect", tuple(FP8_BLOCK_DIALECTS))
    p2 = _POW2_DEFAULT[dialect] if pow2 is None else ck.flag(pow2, "pow2")
    if p2 and dialect == "torchao":
        raise ValueError("pow2: torchao's blockwise FP8 has no power-of-two scales (its "
                         "rowwise recipe has: fp8_rows)")
    _check_rounding(rounding)
    x32, out = as_float32(x)
    tiling = Tiling.of(x32.shape, block, axis, two_d)
    xb = tiling.split(x32)
    stored, enc, dec = _fp8_scales(block_amax(xb), fmt.max_finite, dialect, p2)
    with np.errstate(over="ignore", invalid="ignore"):
        v = (xb * enc[..., None]).astype(F32)
    q = round_elements(v, fmt, rounding, rng, sr_bits, quantizer)
    return _pack(tiling, q, out, stored, enc, dec, fmt)


@register_scaling
@dataclass(frozen=True)
class FP8BlockScaling(ScalingDialect):
    """FP8 in 1x``block`` blocks along ``axis`` (or ``block x block`` tiles of the last two
    axes with ``two_d``) as ``dialect`` computes it: DeepSeek-V3's recipe (``fp8_block_quantize``;
    ``FP8_BLOCK_DIALECTS`` names each dialect's source)."""

    dialect: str = "deepgemm"
    block: int = 128
    two_d: bool = False
    pow2: bool | None = None
    axis: int = -1
    kind: ClassVar[str] = "fp8_blocks"

    def __post_init__(self) -> None:
        ck.choice(self.dialect, "dialect", tuple(FP8_BLOCK_DIALECTS))
        ck.integer(self.block, "block", lo=1, hi=1 << 16)
        ck.flag(self.two_d, "two_d")
        if self.pow2 is not None:
            ck.flag(self.pow2, "pow2")
            if self.pow2 and self.dialect == "torchao":
                raise ValueError("pow2: torchao's blockwise FP8 has no power-of-two scales")
        ck.integer(self.axis, "axis", lo=-32, hi=31)

    @property
    def source(self) -> str:
        return FP8_BLOCK_DIALECTS[self.dialect]

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> BlockTensor:
        """x in the dialect's blocks along ``axis`` (default: the recipe's); the elements
        always saturate (``overflow``, ``state``: unused)."""
        return fp8_block_quantize(x, fmt, dialect=self.dialect, block=self.block,
                                  two_d=self.two_d, axis=self.axis if axis is None else axis,
                                  pow2=self.pow2, rounding=rounding, rng=rng, sr_bits=sr_bits,
                                  quantizer=quantizer)

    def describe(self) -> str:
        shape = f"{self.block}x{self.block}" if self.two_d else f"1x{self.block}"
        p2 = _POW2_DEFAULT[self.dialect] if self.pow2 is None else self.pow2
        return f"FP8 {shape} blocks ({self.dialect}{', power-of-two scales' if p2 else ''})"


def log2_floor_pow2(s: Array) -> Array:
    """torchao's ``_round_scale_down_to_power_of_2``: exp2(floor(log2(s))) with a float32
    log2 (here the float64 log2 rounded to float32: the correctly rounded float32 log2, which
    rounds up to k for s just below 2^k with |k| >= 2, so the scale doubles there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log2(s.astype(np.float64)).astype(F32)
        return np.exp2(np.floor(lg)).astype(F32)


class FP8RowTensor(NamedTuple):
    """Per-row FP8 (torchao rowwise): the elements and the encode scale s of each row (grid
    layout, ``tiling``); ``dequantize()`` = elements / s, a float32 division as
    ``Float8TrainingTensor``'s."""

    elements: Array  # x's shape, values of fmt
    scales: Array  # s per row (the grid layout: x's shape, the row axis of size 1)
    tiling: Tiling
    fmt: FloatFormat

    def dequantize(self) -> Array:
        """elements / s, x's shape."""
        s = self.tiling.expand(self.scales).astype(self.elements.dtype, copy=False)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.elements / s

    def stats(self, x: Any) -> ErrorStats:
        """Error statistics against the original x."""
        return error_stats(x, self.dequantize(), self.fmt, self.tiling.expand(self.scales))


def fp8_row_quantize(x: Any, fmt: Any = "float8_e4m3fn", *, axis: int = -1, pow2: bool = True,
                     rounding: str = "nearest_even", rng: np.random.Generator | None = None,
                     sr_bits: int | None = None,
                     quantizer: Callable | None = None) -> FP8RowTensor:
    """Per-row FP8 along ``axis`` as torchao's rowwise ``Float8Linear`` computes it
    (``FP8_ROW_SOURCE``): s = float32(max / max(amax, 1e-12)) from a float64 amax, rounded
    down to a power of two with a float32 log2 (``pow2``, the ROWWISE recipe's default),
    elements = saturate(float32(x * s)) rounded; ``dequantize()`` = elements / s."""
    fmt = get_format(fmt)
    _check_rounding(rounding)
    p2 = ck.flag(pow2, "pow2")
    x32, out = as_float32(x)
    if x32.ndim == 0:
        raise ValueError("x must have at least 1 dimension for rows; got a scalar")
    n = x32.shape[ck.integer(axis, "axis", lo=-x32.ndim, hi=x32.ndim - 1)]
    tiling = Tiling.of(x32.shape, max(n, 1), axis)
    xb = tiling.split(x32)
    a = np.maximum(block_amax(xb).astype(np.float64), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = (float(fmt.max_finite) / a).astype(F32)
        if p2:
            s = log2_floor_pow2(s)
        v = (xb * s[..., None]).astype(F32)
    q = round_elements(v, fmt, rounding, rng, sr_bits, quantizer)
    return FP8RowTensor(tiling.merge(q).astype(out, copy=False), tiling.to_grid(s), tiling, fmt)


@register_scaling
@dataclass(frozen=True)
class FP8RowScaling(ScalingDialect):
    """Per-row FP8: one scale per row along ``axis``, as torchao's rowwise ``Float8Linear``
    (``fp8_row_quantize``; ``pow2``: the ROWWISE recipe's power-of-two scales)."""

    pow2: bool = True
    axis: int = -1
    kind: ClassVar[str] = "fp8_rows"

    def __post_init__(self) -> None:
        ck.flag(self.pow2, "pow2")
        ck.integer(self.axis, "axis", lo=-32, hi=31)

    @property
    def source(self) -> str:
        return FP8_ROW_SOURCE

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> FP8RowTensor:
        """x with one scale per row along ``axis`` (default: the recipe's)."""
        return fp8_row_quantize(x, fmt, axis=self.axis if axis is None else axis,
                                pow2=self.pow2, rounding=rounding, rng=rng, sr_bits=sr_bits,
                                quantizer=quantizer)

    def describe(self) -> str:
        return f"FP8 per-row scales (torchao rowwise{', power-of-two' if self.pow2 else ''})"

