"""NVFP4: E2M1 elements, an E4M3 scale per 16 values and a float32 scale per tensor (or per row),
as TransformerEngine and torchao compute it.

**TransformerEngine** (``NVFP4_DIALECTS["te"]``; the kernels in ``common/cast/nvfp4/`` are tested
bit for bit against the Python reference ``NVFP4QuantizerRef``):

    S_enc   = float32(448 * 6 / amax)  (at most float32's max; amax 0, or S_enc 0, gives 1)
    S_dec_b = e4m3(block_amax * float32(S_enc * float32(1/6)))   saturating RNE: subnormal E4M3
              scales are kept, a block of zeros gets scale 0
    enc_b   = min(float32(1 / float32(S_dec_b * float32(1 / S_enc))), float32's max)
    q       = e2m1(saturate(float32(x * enc_b)))                  RNE (or stochastic rounding)
    value   = q * float32(float32(S_dec_b * amax) * float32(1 / 2688))   (dequantize_fp4_kernel)

with 1x16 blocks along the reduction axis, or 16x16 tiles (``two_d``, TE's weights: the same
scale whether the weight or its transpose is read); ``global_scale="row"`` is TE's
``row_scaled_nvfp4`` (one amax per row). ``four_over_six`` is TE's ``nvfp4_4over6``
("Four Over Six", arXiv:2512.02010): each block is quantized twice, mapping its amax to 6 and to 4
(the E4M3 scale 1.5 times larger, from ``float32(block_amax / 6) * S_enc``), and keeps the one
with the smaller error against x (``"mae"``: sum |error|, ``"mse"``: sum error^2, summed in
float32 in index order, 16x16 tiles over rows in a tree; ties keep map-to-6), with
``e4m3_max`` 448 or 256 in S_enc (256 leaves the map-to-4 scale room below 448).

**torchao** (``NVFP4_DIALECTS["torchao"]``, ``nvfp4_quantize``): 1x16 blocks only,

    per_tensor_scale = float32(amax / 2688)                       (per_tensor_amax_to_scale)
    s_b = e4m3(clamp(float32(float32(block_amax / 6) / per_tensor_scale), 2^-6, 448))
    q   = e2m1(clamp(float32(x * float32(float32(1 / per_tensor_scale) / s_b)), +-6))
    value = q * float32(per_tensor_scale * s_b)                   (NVFP4Tensor.dequantize)

and ``global_scale="none"`` for its single-level form (s_b from block_amax / 6 alone). Its block
scales never go below 2^-6 (the smallest normal E4M3), TE's go down to 2^-9 and to 0, so the two
part on the low-amplitude blocks of a high-dynamic-range tensor; the order of the divisions
parts them on ties of the E4M3 cast. Where torchao divides 0 by 0 (an all-zero tensor under a
per-tensor scale: NaN everywhere) this dialect takes the per-tensor scale as 1 (zeros).

Both compute in float32 (float64 input is rounded to float32 first). Stochastic rounding of the
elements (TE's gradients) draws ``sr_bits`` random bits per element (``quantize``'s k-bit SR).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .blocks import (
    F32,
    F32_MAX,
    TE_COMMIT,
    TORCHAO,
    BlockTensor,
    Tiling,
    _pack,
    as_float32,
    block_amax,
    round_elements,
)
from .formats import FloatFormat, get_format
from .rounding import _check_rounding, quantize
from .scaling import ScalingDialect, register_scaling

E2M1 = get_format("float4_e2m1fn")
E4M3 = get_format("float8_e4m3fn")
BLOCK = 16

#: Each NVFP4 dialect's source: the tool, its commit or version, files and functions.
NVFP4_DIALECTS = {
    "te": f"NVIDIA/TransformerEngine@{TE_COMMIT[:7]} transformer_engine/pytorch/custom_recipes/"
          "reference_nvfp4.py: NVFP4QuantizerRef._quantize_blockwise_reference (and "
          "_quantize_blockwise_4over6_reference, cast_to_fp4x2); common/cast/nvfp4/"
          "core_nvfp4.cuh: compute_global_encode_scaling_factor_FP4, "
          "compute_decoding_scaling_factor; dequantize_nvfp4.cuh: dequantize_fp4_kernel",
    "torchao": f"{TORCHAO} torchao/prototype/mx_formats/nvfp4_tensor.py: nvfp4_quantize, "
               "per_tensor_amax_to_scale, NVFP4Tensor.dequantize / get_hp_scales",
}
GLOBAL_SCALES = ("tensor", "row", "none")
FOUR_OVER_SIX = ("mae", "mse")


def _e4m3(v: Array) -> Array:
    """A float32 cast to E4M3 as torch's ``.to(float8_e4m3fn)`` after the tools' clamps:
    nearest even, saturating, subnormals kept, NaN stays."""
    return quantize(v.astype(F32), E4M3, overflow="saturate")


def _global_amax(x32: Array, tiling: Tiling, xb: Array, mode: str) -> Array:
    """The global amax in split layout (broadcastable to the blocks' grid): the tensor's, or
    each row's (the values along the 1D block axis)."""
    if mode == "row":
        a = block_amax(xb)  # per block; a row is every block along the axis
        with np.errstate(invalid="ignore"):
            return np.max(a, axis=-1, keepdims=True) if a.shape[-1] else a
    with np.errstate(invalid="ignore"):
        g = np.max(np.abs(x32)) if x32.size else F32(0)
    return np.full((1,) * (xb.ndim - 1), g, F32)


def te_encode_scale(amax: Array, e4m3_max: int = 448) -> Array:
    """TransformerEngine's S_enc: float32(e4m3_max * 6 / amax), at most float32's max, 1 where
    amax or S_enc is 0 (``compute_global_encode_scaling_factor_FP4``; the reference gives
    float32's max for amax 0, which changes no element, scale or value). A NaN amax propagates
    as in the reference (the CUDA kernels' fmaxf and fminf skip NaN: not modelled)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.minimum((F32(e4m3_max * 6) / amax.astype(F32)).astype(F32), F32_MAX)
    return np.where((amax == 0) | (s == 0), F32(1), s).astype(F32)


def _te_plain(xb: Array, a: Array, ga: Array, s_enc: Array, e4m3_max: int,
              rnd: Callable[[Array], Array]) -> tuple[Array, Array, Array, Array]:
    """TE's default path: (elements, E4M3 block scales, encode, decode) in split layout."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mult = (s_enc * F32(1.0 / 6.0)).astype(F32)
        s_b = _e4m3(np.minimum(a * mult, F32_MAX))
        s_dec = (F32(1) / s_enc).astype(F32)
        enc = np.minimum((F32(1) / (s_b * s_dec).astype(F32)).astype(F32), F32_MAX)
        q = rnd((xb * enc[..., None]).astype(F32))
    return q, s_b, enc, _te_decode(s_b, ga, e4m3_max)


def _te_decode(s_b: Array, ga: Array, e4m3_max: int) -> Array:
    """TE's dequantize multiplier: float32(float32(S_dec_b * amax) * float32(1 / (6 E)))."""
    with np.errstate(invalid="ignore", over="ignore"):
        return ((s_b * ga).astype(F32) * F32(1.0 / (6 * e4m3_max))).astype(F32)


def _te_4over6(xb: Array, a: Array, ga: Array, s_enc: Array, e4m3_max: int, mode: str,
               tiling: Tiling, rnd: Callable[[Array], Array]
               ) -> tuple[Array, Array, Array, Array]:
    """TE's ``_quantize_blockwise_4over6_reference``: both candidates, the smaller error kept."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = ((a / F32(6)).astype(F32) * s_enc).astype(F32)
        g_dec = (F32(1) / s_enc).astype(F32)
        cands = []
        for s_b in (_e4m3((base * F32(1.5)).astype(F32)), _e4m3(base)):  # map-to-4, map-to-6
            enc = np.minimum((F32(1) / (s_b * g_dec).astype(F32)).astype(F32), F32_MAX)
            q = rnd((xb * enc[..., None]).astype(F32))
            cands.append((q, s_b, enc, _candidate_error(q, s_b, ga, xb, e4m3_max, mode)))
    (q4, s4, e4, err4), (q6, s6, e6, err6) = cands
    if tiling.two_d:
        err4, err6 = _tile_sum(err4, tiling.block), _tile_sum(err6, tiling.block)
    pick = err4 < err6  # ties keep map-to-6
    return (np.where(pick[..., None], q4, q6), np.where(pick, s4, s6),
            np.where(pick, e4, e6), _te_decode(np.where(pick, s4, s6), ga, e4m3_max))


def _candidate_error(q: Array, s_b: Array, ga: Array, xb: Array, e4m3_max: int,
                     mode: str) -> Array:
    """sum over a block's values (rows of 16 for 2D tiles: (..., k) with k = 16 or 256) of
    |value - x| or (value - x)^2, value = float32(float32(q * S_dec_b) * amax) / (6 E), in
    float32, one value after another; 2D tiles give one sum per row of 16."""
    denom = F32(6 * e4m3_max)
    n = q.shape[-1]
    rows = n // BLOCK
    qr = q.reshape(q.shape[:-1] + (rows, BLOCK))
    xr = xb.reshape(qr.shape)
    err = np.zeros(qr.shape[:-1], F32)
    for i in range(BLOCK):
        val = ((qr[..., i] * s_b[..., None]).astype(F32) * ga[..., None]).astype(F32)
        d = ((val / denom).astype(F32) - xr[..., i]).astype(F32)
        err = (err + (d * d if mode == "mse" else np.abs(d))).astype(F32)
    return err if rows > 1 else err[..., 0]


def _tile_sum(err: Array, b: int) -> Array:
    """A 16x16 tile's 16 row errors summed in TE's tree order (``_sum_4over6_2d_error``):
    rows 0-7 + 8-15, then 0-3 + 4-7, 0-1 + 2-3, 0 + 1."""
    r = err
    while r.shape[-1] > 1:
        h = r.shape[-1] // 2
        r = (r[..., :h] + r[..., h:]).astype(F32)
    return r[..., 0]


def _torchao(xb: Array, a: Array, ga: Array | None,
             rnd: Callable[[Array], Array]) -> tuple[Array, Array, Array, Array, Array | None]:
    """torchao's ``nvfp4_quantize``: (elements, E4M3 scales, encode, decode, per-tensor scale)
    in split layout."""
    tiny = F32(2.0**-6)  # torch.finfo(float8_e4m3fn).tiny
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bs = (a / F32(6)).astype(F32)
        if ga is None:
            s_b = _e4m3(np.clip(bs, tiny, F32(448)))
            enc = (F32(1) / s_b).astype(F32)
            dec, pts = s_b, None
        else:
            pts = (ga.astype(F32) / F32(2688)).astype(F32)
            pts = np.where(pts == 0, F32(1), pts).astype(F32)  # torchao: 0 / 0 (module docstring)
            s_b = _e4m3(np.clip((bs / pts).astype(F32), tiny, F32(448)))
            enc = ((F32(1) / pts).astype(F32) / s_b).astype(F32)
            dec = (pts * s_b).astype(F32)
        q = rnd(np.clip((xb * enc[..., None]).astype(F32), F32(-6), F32(6)))
    return q, s_b, enc, dec, pts


def nvfp4_quantize(x: Any, *, dialect: str = "te", two_d: bool = False, axis: int = -1,
                   global_scale: str = "tensor", four_over_six: str | None = None,
                   e4m3_max: int = 448, rounding: str = "nearest_even",
                   rng: np.random.Generator | None = None, sr_bits: int | None = None,
                   quantizer: Callable | None = None) -> BlockTensor:
    """NVFP4 quantization (module docstring) of x in 1x16 blocks along ``axis`` (or 16x16 tiles
    of the last two axes with ``two_d``, TE only).

    Args:
        x: float array (float32 arithmetic; float64 input is rounded to float32 first).
        dialect: ``"te"`` (TransformerEngine) or ``"torchao"``.
        global_scale: ``"tensor"`` (one float32 scale from the tensor's amax), ``"row"`` (TE's
            row-scaled NVFP4, 1D blocks) or ``"none"`` (torchao's single-level form).
        four_over_six: None, ``"mae"`` or ``"mse"``: TE's 4over6 block choice.
        e4m3_max: 448, or 256 with ``four_over_six`` (TE's ``nvfp4_e4m3_max``).
        rounding, rng, sr_bits: the element rounding (nearest even; stochastic with
            ``sr_bits`` random bits per element).

    Returns:
        BlockTensor: ``scales`` the E4M3 block scales, ``global_scale`` TE's amax (per tensor
        or row) or torchao's per-tensor scale, ``dequantize()`` as the tool decodes.
    """
    dialect, g_mode, fos, e_max = _check(dialect, two_d, global_scale, four_over_six, e4m3_max)
    _check_rounding(rounding)
    x32, out = as_float32(x)
    tiling = Tiling.of(x32.shape, BLOCK, axis, two_d)
    if g_mode == "row" and tiling.two_d:
        raise ValueError("global_scale='row' (row-scaled NVFP4) takes 1x16 blocks; two_d=True "
                         "was given")
    xb = tiling.split(x32)
    a = block_amax(xb)

    def rnd(v: Array) -> Array:
        return round_elements(v, E2M1, rounding, rng, sr_bits, quantizer)

    ga = None if g_mode == "none" else _global_amax(x32, tiling, xb, g_mode)
    if dialect == "torchao":
        q, s_b, enc, dec, pts = _torchao(xb, a, ga, rnd)
        return _pack(tiling, q, out, s_b, enc, dec, E2M1, _bcast(pts, a))
    assert ga is not None
    if fos is not None and rounding != "nearest_even":
        raise ValueError(f"four_over_six compares two round-to-nearest candidates (TE's "
                         f"reference); rounding={rounding!r} is not defined for it")
    s_enc = te_encode_scale(ga, e_max)
    if fos is None:
        q, s_b, enc, dec = _te_plain(xb, a, ga, s_enc, e_max, rnd)
    else:
        q, s_b, enc, dec = _te_4over6(xb, a, ga, s_enc, e_max, fos, tiling, rnd)
    return _pack(tiling, q, out, s_b, enc, dec, E2M1, _bcast(ga, a))


def _bcast(g: Array | None, a: Array) -> Array | None:
    return None if g is None else np.broadcast_to(g, a.shape).astype(F32)


def _check(dialect: Any, two_d: Any, global_scale: Any, four_over_six: Any,
           e4m3_max: Any) -> tuple[str, str, str | None, int]:
    """The NVFP4 options checked together (ValueError naming the one refused)."""
    dialect = ck.choice(dialect, "dialect", tuple(NVFP4_DIALECTS))
    two_d = ck.flag(two_d, "two_d")
    g = ck.choice(global_scale, "global_scale", GLOBAL_SCALES)
    fos = None if four_over_six is None else ck.choice(four_over_six, "four_over_six",
                                                       FOUR_OVER_SIX)
    e_max = ck.choice(e4m3_max, "e4m3_max", (448, 256))
    if dialect == "torchao":
        for bad, what in ((two_d, "two_d=True (16x16 tiles)"), (g == "row", "global_scale="
                          "'row'"), (fos is not None, "four_over_six"),
                          (e_max != 448, "e4m3_max=256")):
            if bad:
                raise ValueError(f"torchao's NVFP4 has 1x16 blocks with a per-tensor scale or "
                                 f"none; {what} is TransformerEngine's (dialect='te')")
    elif g == "none":
        raise ValueError("global_scale='none': TransformerEngine's NVFP4 always has a global "
                         "scale ('tensor' or 'row'); the single-level form is torchao's")
    if e_max != 448 and fos is None:
        raise ValueError("e4m3_max=256 applies to four_over_six only (TE's nvfp4_e4m3_max)")
    return dialect, g, fos, e_max


@register_scaling
@dataclass(frozen=True)
class NVFP4Scaling(ScalingDialect):
    """NVFP4 as ``dialect`` computes it (``nvfp4_quantize``; ``NVFP4_DIALECTS`` names each
    source): E2M1 elements, E4M3 scales per 16 values along ``axis`` (16x16 tiles with
    ``two_d``), a float32 scale per tensor or row; TE's 4over6 with ``four_over_six``."""

    dialect: str = "te"
    two_d: bool = False
    global_scale: str = "tensor"
    four_over_six: str | None = None
    e4m3_max: int = 448
    axis: int = -1
    kind: ClassVar[str] = "nvfp4"

    def __post_init__(self) -> None:
        _check(self.dialect, self.two_d, self.global_scale, self.four_over_six, self.e4m3_max)
        if self.two_d and self.global_scale == "row":
            raise ValueError("global_scale='row' (row-scaled NVFP4) takes 1x16 blocks; "
                             "two_d=True was given")
        ck.integer(self.axis, "axis", lo=-32, hi=31)

    @property
    def source(self) -> str:
        return NVFP4_DIALECTS[self.dialect]

    def quantize(self, x: Any, fmt: Any, *, rounding: str = "nearest_even",
                 overflow: str | None = "saturate", rng: np.random.Generator | None = None,
                 state: Any = None, axis: int | None = None, sr_bits: int | None = None,
                 quantizer: Callable | None = None) -> BlockTensor:
        """x in NVFP4 along ``axis`` (default: the recipe's); ``fmt`` must be E2M1."""
        f: FloatFormat = get_format(fmt)
        if f != E2M1:
            raise ValueError(f"NVFP4's elements are E2M1: the format must be float4_e2m1fn; "
                             f"got {f.name}")
        return nvfp4_quantize(x, dialect=self.dialect, two_d=self.two_d,
                              axis=self.axis if axis is None else axis,
                              global_scale=self.global_scale, four_over_six=self.four_over_six,
                              e4m3_max=self.e4m3_max, rounding=rounding, rng=rng,
                              sr_bits=sr_bits, quantizer=quantizer)

    def describe(self) -> str:
        shape = "16x16" if self.two_d else "1x16"
        extra = f", 4over6 {self.four_over_six.upper()}" if self.four_over_six else ""
        return (f"NVFP4 {shape} blocks ({self.dialect}, {self.global_scale} scale{extra})")
