"""Precision headroom of a tensor: how much of it each low-precision format keeps.

``tensor_stats(x)`` returns a JSON-ready dict: amax, RMS, a histogram of floor(log2 |x|)
(``HIST_LO`` to ``HIST_HI``, clipped at the ends), and for each format and scaling of
``FORMAT_SCALINGS`` the fractions of the non-zero values that overflow (round past the largest
finite value), flush (round to zero) or lose precision (land among the subnormals), under round
to nearest, ties to even. The fractions are exact (no sampling): the tensor's float32 bit
patterns are counted by bucket (``_Magnitudes``) and only the values in the buckets next to a
threshold are compared one by one.

Formats are ``normlab.precision.FORMATS``' names; ``HEADROOM_FORMATS`` are the four that
``normlab inspect`` reports. Scalings (s multiplies x before the cast): ``none`` s = 1;
``tensor`` s = fmax / amax(x), the tensor's own amax (TransformerEngine's current scaling);
``delayed`` s = fmax / amax of the same tensor at the previous step (``delayed_amax``; this
tensor's own amax when it is not given); ``mx`` blocks of 32 along the last axis share
X = 2^(floor(log2 amax_block) - emax) (OCP MX v1.0), MXFP8 with float8_e4m3fn elements and MXFP4
with float4_e2m1fn.

The two passes over the bits run in ``normlab.kernels.headroom`` (numba, ``impl="kernel"``, the
default where numba imports) or in NumPy here (``impl="reference"``); both give the same counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _checks as ck
from .formats import get_format
from .scaling import mx_scale

HEADROOM_FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
FORMAT_SCALINGS: tuple[tuple[str, str, str], ...] = tuple(
    (f"{f}/{s}", f, s) for f in HEADROOM_FORMATS for s in ("none", "tensor", "delayed")
) + (("mxfp8", "float8_e4m3fn", "mx"), ("mxfp4", "float4_e2m1fn", "mx"))
HIST_LO, HIST_HI = -64, 32  # histogram bins floor(log2 |x|) in [LO, HI), clipped at the ends
MX_BLOCK = 32
IMPLS = ("kernel", "reference")

# a bucket keeps 23 - sh mantissa bits of |x|: 2^(31 - sh) buckets. Wide buckets (fewer to sum)
# for small tensors, narrow ones (fewer values to compare exactly) for large: the counts are
# exact either way
_SHIFT, _SHIFT_SMALL, _SMALL = 13, 18, 1 << 20


def _bucket_shift(size: int) -> int:
    return _SHIFT_SMALL if size < _SMALL else _SHIFT


def count_buckets_reference(bits: np.ndarray, shift: np.ndarray, counts: np.ndarray,
                            sh: int) -> None:
    """NumPy reference of ``normlab.kernels.headroom.count_buckets``: counts[key] += 1 for each
    non-zero value, key = (bits >> sh) - shift[i] for row i, clipped to the table."""
    keys = _keys(bits, shift, counts.size, sh)
    counts += np.bincount(keys[bits != 0], minlength=counts.size)


def gather_buckets_reference(bits: np.ndarray, shift: np.ndarray, table: np.ndarray,
                             m: int, sh: int) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of ``normlab.kernels.headroom.gather_buckets``: (flat positions, keys)
    of the ``m`` non-zero values whose bucket ``table`` marks, in order."""
    keys = _keys(bits, shift, table.size, sh).reshape(-1)
    pos = np.flatnonzero((bits.reshape(-1) != 0) & table[keys])
    assert pos.size == m, "m must be the marked buckets' count"
    return pos, keys[pos]


def _keys(bits: np.ndarray, shift: np.ndarray, size: int, sh: int) -> np.ndarray:
    keys = (bits >> np.uint32(sh)).astype(np.int64) - shift[:, None]
    return np.clip(keys, 0, size - 1)


def _passes(impl: str) -> tuple[Callable, Callable]:
    """(count, gather): the numba kernels or their NumPy references."""
    if impl == "kernel":
        from .. import kernels

        if kernels.available():
            from ..kernels import headroom as kh

            return kh.count_buckets, kh.gather_buckets
    return count_buckets_reference, gather_buckets_reference


def format_window(fmt: Any) -> dict:
    """A format's representable magnitudes as log2 bounds: smallest subnormal, smallest normal,
    largest finite."""
    f = get_format(fmt)
    return {"min_subnormal": float(np.log2(f.min_subnormal)),
            "min_normal": float(np.log2(f.min_normal)), "max": float(np.log2(f.max_finite))}


class _Magnitudes:
    """The non-zero finite magnitudes of a tensor (optionally divided by a power of two per
    block), counted by bucket of their float32 bit pattern (monotonic in the value), so that
    "how many exceed t" is a sum over buckets plus exact comparisons on the few values in the
    buckets next to t: the fractions are exact, and the tensor is read twice whatever the number
    of thresholds (numba kernels: one pass to count, one to gather)."""

    def __init__(self, bits: np.ndarray, shift: np.ndarray,
                 exact: Callable[[np.ndarray], np.ndarray], impl: str = "kernel",
                 sh: int = _SHIFT, counts: np.ndarray | None = None):
        # (n, block) uint32 |x| bits; (n,) int64 key shift; buckets of 23 - sh mantissa bits;
        # counts: the bucket counts where a pass already made them
        self.bits, self.shift, self.impl, self.sh = bits, shift, impl, sh
        self.size = 1 << (31 - sh)
        if counts is None:
            counts = np.zeros(self.size, np.int64)
            _passes(impl)[0](bits, shift, counts, sh)
        self.counts = counts
        self.above = np.concatenate([np.cumsum(self.counts[::-1])[::-1], [0]])  # >= bucket k
        self.exact = exact  # positions -> the exact (float64) values, for boundary buckets
        self.sub_keys: np.ndarray | None = None  # set by prepare
        self.sub_vals: np.ndarray | None = None

    def prepare(self, thresholds: list[float]) -> None:
        """Gather, once, the values in the buckets around every threshold."""
        table = np.zeros(self.size, np.bool_)
        for t in thresholds:
            k = _key(t, self.sh)
            table[max(k - 1, 0):k + 2] = True
        m = int(self.counts[table].sum())  # how many values the gather finds
        pos, self.sub_keys = _passes(self.impl)[1](self.bits, self.shift, table, m, self.sh)
        self.sub_vals = self.exact(pos)

    def count_above(self, t: float, strict: bool = True) -> int:
        """How many values exceed ``t`` (``>`` or, not strict, ``>=``); zeros never do."""
        if t < 0:
            t = 0.0
        k = _key(t, self.sh)
        if k - 1 >= self.size:
            return 0
        assert self.sub_keys is not None and self.sub_vals is not None  # prepare() first
        near = (self.sub_keys >= k - 1) & (self.sub_keys <= k + 1)
        v = self.sub_vals[near]
        near_count = np.count_nonzero(v > t if strict else v >= t)
        return int(self.above[min(k + 2, self.size)]) + int(near_count)


def _key(t: float, sh: int) -> int:
    """The bucket of a non-negative value (float32's largest finite beyond: past the last)."""
    f = np.float32(min(t, float(np.finfo(np.float32).max)))
    past = 1 if t > float(np.finfo(np.float32).max) else 0
    return int(np.array(f).view(np.uint32) >> sh) + past


def _thresholds(fmt: Any) -> tuple[float, float, float, bool]:
    """(beyond, half_tiny, top_sub, tie_stays): round to nearest (ties to even) leaves the format
    from max + ulp(max)/2 on (at the tie itself only when max is odd), sends |v| <= half the
    smallest subnormal to 0 and |v| >= min_normal - ulp/2 up to the normal range (the boundaries
    of ``normlab.precision.error_stats``)."""
    f = get_format(fmt)
    beyond = f.max_finite + 2.0 ** (f.emax - f.mantissa_bits - 1)
    half_tiny = f.min_subnormal / 2
    top_sub = f.min_normal - f.min_subnormal / 2 if f.subnormals else half_tiny
    return beyond, half_tiny, top_sub, f.inf_nan == "fn" and f.mantissa_bits > 0


def _fractions(m: _Magnitudes, nonzero: int, fmt: Any, scale: float) -> dict:
    """Fractions of the ``nonzero`` values of ``m`` that, times ``scale`` and rounded to
    ``fmt``, overflow (past the largest finite value), flush (to zero) or stay subnormal."""
    beyond, half_tiny, top_sub, tie_stays = _thresholds(fmt)
    over = m.count_above(beyond / scale, strict=tie_stays)
    not_flushed = m.count_above(half_tiny / scale)
    normal = m.count_above(top_sub / scale, strict=False)
    n = max(nonzero, 1)
    return {"overflow": over / n, "flush": (nonzero - not_flushed) / n,
            "subnormal": (not_flushed - normal) / n}


def tensor_stats(x: Any, *, delayed_amax: float | None = None, impl: str = "kernel") -> dict:
    """amax, RMS, the log2 |x| histogram and the headroom of ``x`` in every format and scaling
    (``FORMAT_SCALINGS``); ``delayed_amax`` is the previous step's amax (None: this one's).
    Non-finite values are counted apart and left out of the rest. ``impl``: "kernel" (numba)
    or "reference" (NumPy), the same numbers."""
    x = ck.float_array(x, "x")
    ck.choice(impl, "impl", IMPLS)
    if delayed_amax is not None and not (isinstance(delayed_amax, (int, float, np.floating))
                                         and delayed_amax >= 0):
        raise ValueError(f"delayed_amax must be None or a number >= 0; got {delayed_amax!r}")
    shape = x.shape
    a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)  # (N,)
    size = a.size
    sh = _bucket_shift(size)
    bits, nonfinite, nonzero, amax, counts0, block_max = _first_pass(a, shape, sh, impl)
    mag = bits.view(np.float32)  # (N,) |x|, non-finite as 0
    u = mag / np.float32(amax) if amax > 0 else mag  # in [0, 1]: no overflow in the squares
    rms = amax * float(np.sqrt(np.dot(u, u) / max(size, 1))) if amax > 0 else 0.0
    del u, a
    m = _Magnitudes(bits.reshape(1, -1), np.zeros(1, np.int64),
                    lambda pos: mag[pos].astype(np.float64), impl, sh, counts0)
    exponents = m.counts.reshape(256, -1).sum(axis=1)  # by float32 exponent field
    e = np.arange(256) - 127  # floor(log2 |x|) of each exponent field (0: subnormals, below)
    counts = np.bincount(np.clip(e, HIST_LO, HIST_HI - 1) - HIST_LO, weights=exponents,
                         minlength=HIST_HI - HIST_LO).astype(np.int64)
    out: dict[str, Any] = {
        "shape": list(shape), "size": int(size), "amax": amax, "rms": rms,
        "nonfinite": nonfinite, "zeros": int(size - nonzero - nonfinite),
        "hist": {"lo": HIST_LO, "counts": counts.tolist()}, "formats": {},
    }
    delayed = amax if delayed_amax is None else delayed_amax
    scales = {}
    for key, fmt, scaling in FORMAT_SCALINGS:
        fmax = get_format(fmt).max_finite
        ref = {"none": None, "tensor": amax, "delayed": delayed, "mx": None}[scaling]
        scales[key] = 1.0 if ref is None or ref <= 0 else fmax / ref
    plain = [(k, f) for k, f, sc in FORMAT_SCALINGS if sc != "mx"]
    m.prepare([t / scales[k] for k, f in plain for t in _thresholds(f)[:3]])
    for key, fmt in plain:
        out["formats"][key] = _fractions(m, nonzero, fmt, scales[key])
    del m
    blocks = _mx_blocks(bits, shape)
    for key, fmt, scaling in FORMAT_SCALINGS:
        if scaling == "mx":
            out["formats"][key] = _mx_fractions(blocks, block_max, nonzero, fmt, impl, sh)
    return out


def _first_pass(a: np.ndarray, shape: tuple, sh: int, impl: str) -> tuple:
    """(|x| bits with the non-finite values as 0, non-finite count, non-zero count, amax, the
    plain bucket counts, each MX block's amax as float32) of the float32 values ``a`` (shape
    ``shape``): one numba pass (``kernels.headroom.first_pass``) or NumPy's."""
    counts = np.zeros(1 << (31 - sh), np.int64)
    last = shape[-1] if len(shape) else 1
    if impl == "kernel" and a.size:
        from .. import kernels

        if kernels.available():
            from ..kernels import headroom as kh

            block_max = np.zeros(a.size // last * -(-last // MX_BLOCK), np.uint32)
            bits, nonfinite, nonzero, top = kh.first_pass(a.view(np.uint32), last, sh, counts,
                                                          block_max)
            amax = float(np.array([top], np.uint32).view(np.float32)[0])
            return (bits, int(nonfinite), int(nonzero), amax, counts,
                    block_max.view(np.float32))
    bits = a.view(np.uint32) & np.uint32(0x7FFFFFFF)  # (N,) |x| as bits, a new array
    bad = bits >= np.uint32(0x7F800000)
    nonfinite = int(np.count_nonzero(bad))
    if nonfinite:
        bits[bad] = 0
    _passes(impl)[0](bits.reshape(1, -1), np.zeros(1, np.int64), counts, sh)
    block_max = _mx_blocks(bits, shape).max(axis=1, initial=0).view(np.float32)
    amax = float(bits.view(np.float32).max(initial=0.0))
    return bits, nonfinite, int(np.count_nonzero(bits)), amax, counts, block_max


def _mx_blocks(bits: np.ndarray, shape: tuple) -> np.ndarray:
    """The (n, 32) blocks of bit patterns along the last axis, zero padded."""
    last = shape[-1] if len(shape) else 1
    if bits.size == 0:
        return np.zeros((0, MX_BLOCK), bits.dtype)
    rows = bits.reshape(-1, last)
    pad = (-last) % MX_BLOCK
    if pad:
        rows = np.concatenate([rows, np.zeros((rows.shape[0], pad), rows.dtype)], axis=1)
    return rows.reshape(-1, MX_BLOCK)


def _mx_fractions(blocks: np.ndarray, block_max: np.ndarray, nonzero: int, fmt: str,
                  impl: str, sh: int) -> dict:
    """The fractions under MX block scaling: blocks of 32 along the last axis (``_mx_blocks``,
    their amax ``block_max``) share X = 2^k, k = floor(log2 amax_block) - emax (OCP MX v1.0);
    v = |x| / X."""
    k = np.log2(mx_scale(block_max, fmt, "floor")).astype(np.int64)  # (n,) X = 2^k
    shift = np.ldexp(1.0, -k)  # (n,) 1 / X

    def exact(pos: np.ndarray) -> np.ndarray:
        v = blocks.reshape(-1)[pos].view(np.float32).astype(np.float64)
        return v * shift[pos // MX_BLOCK]

    m = _Magnitudes(blocks, k << (23 - sh), exact, impl, sh)  # keys of v = |x| / X
    m.prepare(list(_thresholds(fmt)[:3]))
    return _fractions(m, nonzero, fmt, 1.0)
