"""Per-block statistics of a block-scaled dialect on any array: what a recipe would do to a
tensor, on a CPU, before it is run.

:func:`block_stats` quantizes x under a precision (any dialect of ``SCALINGS``: NVFP4, MX, block
FP8, per-row FP8, a Hadamard-rotated one, or per-tensor scaling as one block) and reports:

* **the block scales' distribution**: a histogram of their binades (floor(log2 s) of the stored
  scale), their smallest, median and largest values, the standard deviation of log2 s, and the
  share of blocks whose scale is zero, not finite, below the scale format's normal range (E4M3
  subnormals under 2^-6 for NVFP4; E8M0's bottom code 2^-127 for MX) or at its top (E4M3's 448);
  TransformerEngine#2801 asks for these, its debug tools have the standard deviation only
  in an open PR;
* **the top band**: the share of the non-zero values that the block scale maps into the element
  format's last interval (prev(max), max], (4, 6] for E2M1, before rounding: the values that
  4over6's map-to-4 candidate would represent more closely (a value at 4.62 rounds to 4, 13%
  off; arXiv:2512.02010);
* **the blockwise dynamic range**: per block log2(max |x| / min non-zero |x|) over the dialect's
  blocks, 0 for a block of zeros (TransformerEngine's ``max_blockwise_dynamic_range``: its
  maximum over blocks; here also the median);
* **row-wise against column-wise**: for 1D blocks, a matrix quantized with blocks along its rows
  and again along its columns (as a weight is read by the forward and by the data-gradient GEMM)
  gives two different tensors; the share of values that differ and the norm of the difference
  relative to x's (0 for 2D tiles, which are the same both ways);
* the quantization's error statistics (``ErrorStats``).

:func:`what_if` runs a set of dialects on one array (``WHAT_IF``: NVFP4 as TE computes it in 1x16
blocks and 16x16 tiles, MXFP8 and MXFP4 with the round-up scale, FP8 in DeepSeek-V3's 1x128 and
128x128 blocks); ``normlab inspect`` reports them for a checkpoint's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .. import _checks as ck
from .._checks import Array
from .formats import FloatFormat
from .policy import Precision
from .scaling import ErrorStats, MXTensor, ScaledTensor
from .tiles import Tiling

#: The dialects :func:`what_if` runs by default (``Precision.from_value`` forms).
WHAT_IF: dict[str, Any] = {
    "nvfp4": {"format": "float4_e2m1fn", "scaling": {"kind": "nvfp4"}},
    "nvfp4_16x16": {"format": "float4_e2m1fn", "scaling": {"kind": "nvfp4", "two_d": True}},
    "mxfp8": {"format": "float8_e4m3fn", "scaling": {"kind": "mx", "scale_rule": "rceil"}},
    "mxfp4": {"format": "float4_e2m1fn", "scaling": {"kind": "mx", "scale_rule": "rceil"}},
    "fp8_1x128": {"format": "float8_e4m3fn", "scaling": {"kind": "fp8_blocks"}},
    "fp8_128x128": {"format": "float8_e4m3fn",
                    "scaling": {"kind": "fp8_blocks", "two_d": True}},
}
HIST_LO, HIST_HI = -140, 130  # the scale histogram's binades (clipped to this range)


class BlockStats(NamedTuple):
    """:func:`block_stats`'s figures for one dialect on one array."""

    dialect: str  # the precision's description
    blocks: int
    scale_binades: dict[int, int]  # floor(log2 s) -> blocks, finite positive scales
    scale_min: float
    scale_median: float
    scale_max: float
    scale_log2_std: float
    scales_zero: float  # shares of the blocks
    scales_nonfinite: float
    scales_low: float  # below the scale format's normal range (module docstring)
    scales_top: float  # at the scale format's largest value
    top_band: float  # share of the non-zero finite values scaled into (prev(max), max]
    top_band_interval: tuple[float, float]
    dynamic_range_max: float  # log2(max / min non-zero |x|) over blocks (bits)
    dynamic_range_median: float
    rowcol_differ: float | None  # share of values differing row-wise vs column-wise (1D)
    rowcol_rel_diff: float | None  # ||Q_rows - Q_cols|| / ||x||
    error: ErrorStats

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (binade keys as strings; non-finite figures as None)."""
        out = self._asdict()
        out["scale_binades"] = {str(k): v for k, v in self.scale_binades.items()}
        out["error"] = dict(self.error._asdict())
        out["top_band_interval"] = list(self.top_band_interval)
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in out.items()}


def _precision(p: Any) -> Precision:
    if isinstance(p, Precision):
        return p
    return Precision.from_value(p)


class _Blocks(NamedTuple):
    """The per-block view of a quantized tensor: its tiling, stored scales and encode scales
    (grid layout), the element format, and the scale format's name."""

    tiling: Tiling
    scales: Array
    encode: Array
    fmt: FloatFormat
    scale_format: str  # "e4m3", "e8m0", "float32"


def _blocks_of(q: Any, x: Array, kind: str) -> tuple[_Blocks, Array]:
    """(_Blocks, the array its blocks cut: x, or the rotated x for a Hadamard dialect)."""
    if hasattr(q, "inner") and hasattr(q, "signs"):  # a RotatedTensor
        from .hadamard import rht

        return _blocks_of(q.inner, rht(x, q.axis, size=q.size, signs=q.signs), kind)
    if isinstance(q, MXTensor):
        s = q.scales.astype(np.float64)
        with np.errstate(divide="ignore"):
            return _Blocks(q.tiling, s, 1.0 / s, q.fmt, "e8m0"), x
    if isinstance(q, ScaledTensor):
        t = Tiling.of((x.size,), max(x.size, 1))
        return _Blocks(t, np.array([q.decode]), np.array([q.scale]), q.fmt, "float32"), \
            x.reshape(-1)
    fmt_name = "e4m3" if getattr(q, "global_scale", None) is not None or kind == "nvfp4" \
        else "float32"
    return _Blocks(q.tiling, np.asarray(q.scales, np.float64), np.asarray(q.encode if hasattr(
        q, "encode") else q.scales, np.float64), q.fmt, fmt_name), x


def _scale_figures(s: Array, scale_format: str) -> dict[str, Any]:
    s = s.reshape(-1)
    n = max(s.size, 1)
    pos = s[np.isfinite(s) & (s > 0)]
    binades: dict[int, int] = {}
    if pos.size:
        e = np.clip(np.floor(np.log2(pos)).astype(int), HIST_LO, HIST_HI)
        vals, counts = np.unique(e, return_counts=True)
        binades = {int(v): int(c) for v, c in zip(vals, counts)}
    low = {"e4m3": lambda a: (a > 0) & (a < 2.0**-6), "e8m0": lambda a: a == 2.0**-127}.get(
        scale_format, lambda a: np.zeros(a.shape, bool))
    top = {"e4m3": 448.0, "e8m0": 2.0**127}.get(scale_format, np.inf)
    with np.errstate(invalid="ignore"):
        return {
            "scale_binades": binades,
            "scale_min": float(pos.min()) if pos.size else np.nan,
            "scale_median": float(np.median(pos)) if pos.size else np.nan,
            "scale_max": float(pos.max()) if pos.size else np.nan,
            "scale_log2_std": float(np.std(np.log2(pos))) if pos.size else np.nan,
            "scales_zero": float(np.count_nonzero(s == 0)) / n,
            "scales_nonfinite": float(np.count_nonzero(~np.isfinite(s))) / n,
            "scales_low": float(np.count_nonzero(low(s))) / n,
            "scales_top": float(np.count_nonzero(s == top)) / n,
        }


def _dynamic_range(xb: Array) -> tuple[float, float]:
    """(max, median) over blocks of log2(max / min non-zero |x|), a block without a non-zero
    finite value counting 0 (TransformerEngine's ``compute_max_blockwise_dynamic_range``)."""
    a = np.abs(xb.astype(np.float64)).reshape(-1, xb.shape[-1])
    a = np.where(np.isfinite(a), a, 0.0)
    hi = a.max(axis=-1) if a.size else np.zeros(0)
    lo = np.where(a > 0, a, np.inf).min(axis=-1) if a.size else np.zeros(0)
    keep = hi > 0
    dr = np.zeros(hi.shape)
    dr[keep] = np.log2(hi[keep]) - np.log2(lo[keep])
    return (float(dr.max()), float(np.median(dr))) if dr.size else (0.0, 0.0)


def _top_band(b: _Blocks, x: Array) -> tuple[float, tuple[float, float]]:
    fmt = b.fmt
    lo = fmt.max_finite - 2.0 ** (fmt.emax - fmt.mantissa_bits)
    enc = b.tiling.expand(b.encode)
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.abs(x.astype(np.float64) * enc)
    keep = np.isfinite(v) & (v > 0)
    n = int(np.count_nonzero(keep))
    share = float(np.count_nonzero(keep & (v > lo) & (v <= fmt.max_finite))) / n if n else 0.0
    return share, (float(lo), float(fmt.max_finite))


def _rowcol(p: Precision, x: Array, rng: np.random.Generator | None
            ) -> tuple[float | None, float | None]:
    """1D blocks: x (as a matrix, leading axes flattened) quantized along its rows and along
    its columns; None for vectors."""
    if x.ndim < 2:
        return None, None
    m = x.reshape(-1, x.shape[-1])
    with np.errstate(all="ignore"):
        rows = p.apply(m, rng=rng, axis=-1)
        cols = p.apply(np.ascontiguousarray(m.T), rng=rng, axis=-1).T
    both = np.isfinite(rows) & np.isfinite(cols)
    diff = (rows != cols) & both
    n = max(int(np.count_nonzero(both)), 1)
    norm = float(np.linalg.norm(np.where(np.isfinite(m), m, 0.0).astype(np.float64)))
    d = float(np.linalg.norm(np.where(both, rows.astype(np.float64) - cols, 0.0)))
    return float(np.count_nonzero(diff)) / n, (d / norm if norm > 0 else 0.0)


def block_stats(x: Any, precision: Any, *, rng: np.random.Generator | None = None,
                rowcol: bool = True) -> BlockStats:
    """The per-block statistics (module docstring) of x under ``precision`` (a ``Precision``,
    its JSON form, or a preset-like dict from :data:`WHAT_IF`).

    Args:
        x: float array (a block dialect's blocks run along its last axis, or its last two).
        precision: the dialect and element format.
        rng: for stochastic rounding (the precision's).
        rowcol: compute the row-wise / column-wise disagreement (a second quantization).

    Returns:
        BlockStats.
    """
    x = ck.float_array(x, "x")
    p = _precision(precision)
    if p.scaling is None:
        raise ValueError("precision: per-block statistics need a scaling dialect (nvfp4, mx, "
                         "fp8_blocks, ...); got an unscaled precision")
    with np.errstate(all="ignore"):
        q = p.quantize(x, rng=rng)
    inner = p.scaling.scaling if p.scaling.kind == "hadamard" else p.scaling  # type: ignore
    b, xr = _blocks_of(q, x, inner.kind)
    dr_max, dr_med = _dynamic_range(b.tiling.split(xr.astype(np.float32)))
    top, interval = _top_band(b, xr)
    rc = _rowcol(p, x, rng) if rowcol else (None, None)
    return BlockStats(dialect=p.scaling.describe(), blocks=int(b.scales.size),
                      **_scale_figures(b.scales, b.scale_format), top_band=top,
                      top_band_interval=interval, dynamic_range_max=dr_max,
                      dynamic_range_median=dr_med, rowcol_differ=rc[0], rowcol_rel_diff=rc[1],
                      error=q.stats(x))


def what_if(x: Any, dialects: Mapping[str, Any] | None = None, *,
            rng: np.random.Generator | None = None, rowcol: bool = True
            ) -> dict[str, BlockStats]:
    """:func:`block_stats` of x under each of ``dialects`` (name -> precision; default
    :data:`WHAT_IF`); a dialect the array's shape cannot take (2D tiles of a vector) is left
    out."""
    x = ck.float_array(x, "x")
    out = {}
    for name, p in (WHAT_IF if dialects is None else dialects).items():
        prec = _precision(p)
        if x.ndim < 2 and getattr(prec.scaling, "two_d", False):
            continue
        out[name] = block_stats(x, prec, rng=rng, rowcol=rowcol)
    return out


def format_stats(stats: Mapping[str, BlockStats]) -> str:
    """A text table of :func:`what_if`'s result, one line per dialect."""
    head = (f"{'dialect':<13}{'blocks':>8}{'scale binades':>16}{'log2 sd':>9}{'zero':>7}"
            f"{'low':>7}{'top':>7}{'band':>7}{'DR max':>8}{'row/col':>9}{'rel err':>9}")
    lines = [head]
    for name, s in stats.items():
        b = sorted(s.scale_binades)
        span = f"{b[0]}..{b[-1]}" if b else "-"
        rc = "-" if s.rowcol_differ is None else f"{100 * s.rowcol_differ:.1f}%"
        lines.append(f"{name:<13}{s.blocks:>8}{span:>16}{s.scale_log2_std:>9.2f}"
                     f"{100 * s.scales_zero:>6.1f}%{100 * s.scales_low:>6.1f}%"
                     f"{100 * s.scales_top:>6.1f}%{100 * s.top_band:>6.1f}%"
                     f"{s.dynamic_range_max:>8.1f}{rc:>9}{s.error.rel_error:>9.4f}")
    return "\n".join(lines)
