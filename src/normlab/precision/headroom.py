"""Precision headroom of a tensor: how much of it each low-precision format keeps.

``tensor_stats(x)`` returns a JSON-ready dict: amax, RMS, a histogram of floor(log2 |x|)
(``HIST_LO`` to ``HIST_HI``, clipped at the ends), and for each format and scaling of
``FORMAT_SCALINGS`` the fractions of the non-zero values that overflow (round past the largest
finite value), flush (round to zero) or lose precision (land among the subnormals), under round
to nearest, ties to even. The fractions are exact (no sampling): each is a count of the values
past a threshold, and on non-negative floats ``|x| > t`` is ``bits(|x|) >= B`` for one bit
pattern B (``_bound``), so the kernel reads the tensor twice (its extremes, then every count)
whatever the number of thresholds.

Formats are ``normlab.precision.FORMATS``' names; ``HEADROOM_FORMATS`` are the four that
``normlab inspect`` reports. Scalings (s multiplies x before the cast): ``none`` s = 1;
``tensor`` s = fmax / amax(x), the tensor's own amax (TransformerEngine's current scaling);
``delayed`` s = fmax / amax of the same tensor at the previous step (``delayed_amax``; this
tensor's own amax when it is not given); ``mx`` blocks of 32 along the last axis share
X = 2^(floor(log2 amax_block) - emax) (OCP MX v1.0), MXFP8 with float8_e4m3fn elements and MXFP4
with float4_e2m1fn.

The two passes run in ``normlab.kernels.headroom`` (numba, ``impl="kernel"``, the default where
numba imports); ``impl="reference"`` counts by the definitions in NumPy and float64. Both give
the same numbers.
"""

from __future__ import annotations

import math
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
_FINITE_BITS = 0x7F800000  # |x| bit patterns at or above: inf and NaN


def format_window(fmt: Any) -> dict:
    """A format's representable magnitudes as log2 bounds: smallest subnormal, smallest normal,
    largest finite."""
    f = get_format(fmt)
    return {"min_subnormal": float(np.log2(f.min_subnormal)),
            "min_normal": float(np.log2(f.min_normal)), "max": float(np.log2(f.max_finite))}



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


def _tests(fmt: Any, scale: float) -> list[tuple[float, bool]]:
    """The three counts behind a format's fractions, as (t, strict): |x| s past ``beyond``
    (overflow), past half the smallest subnormal (not flushed), at or past the top of the
    subnormals (normal)."""
    beyond, half_tiny, top_sub, tie_stays = _thresholds(fmt)
    return [(beyond / scale, tie_stays), (half_tiny / scale, True), (top_sub / scale, False)]


def _fractions(counts: Any, nonzero: int) -> dict:
    """The fractions from the three counts of ``_tests`` (over, kept, normal)."""
    over, kept, normal = counts
    n = max(nonzero, 1)
    return {"overflow": over / n, "flush": (nonzero - kept) / n, "subnormal": (kept - normal) / n}


def tensor_stats(x: Any, *, delayed_amax: float | None = None, impl: str = "kernel") -> dict:
    """amax, RMS, the log2 |x| histogram and the headroom of ``x`` in every format and scaling
    (``FORMAT_SCALINGS``); ``delayed_amax`` is the previous step's amax (None: this one's).
    Non-finite values are counted apart and left out of the rest. ``impl``: "kernel" (numba)
    or "reference" (NumPy), the same numbers."""
    x = ck.float_array(x, "x")
    ck.choice(impl, "impl", IMPLS)
    if delayed_amax is not None and not (isinstance(delayed_amax, (int, float, np.floating))
                                         and 0 <= delayed_amax < np.inf):
        raise ValueError(f"delayed_amax must be None or a finite number >= 0; got "
                         f"{delayed_amax!r}")
    shape = x.shape
    a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)  # (N,)
    census = _census_reference
    if impl == "kernel" and a.size:
        from .. import kernels

        census = _census_kernel if kernels.available() else census
    largest, smallest = _extremes(a, census is _census_kernel)
    amax = float(np.array([largest], np.uint32).view(np.float32)[0])
    delayed = amax if delayed_amax is None else delayed_amax
    plain = [(k, f, 1.0 if ref is None or ref <= 0 else get_format(f).max_finite / ref)
             for k, f, s in FORMAT_SCALINGS if s != "mx"
             for ref in [{"none": None, "tensor": amax, "delayed": delayed}[s]]]
    tests = [t for _, f, scale in plain for t in _tests(f, scale)]
    c = census(a, shape, (largest, smallest), tests)
    exponents = c["exponents"]  # (256,) non-zero values by float32 exponent field
    e = np.arange(256) - 127  # floor(log2 |x|) of each exponent field (0: subnormals, below)
    counts = np.bincount(np.clip(e, HIST_LO, HIST_HI - 1) - HIST_LO, weights=exponents,
                         minlength=HIST_HI - HIST_LO).astype(np.int64)
    rms = math.sqrt(c["squares"] / max(a.size, 1))
    nonzero = c["nonzero"]
    above = c["above"]
    formats = {k: _fractions(above[3 * i:3 * i + 3], nonzero) for i, (k, _, _) in
               enumerate(plain)}
    formats.update({k: _fractions(c["mx"][k], nonzero) for k, _, s in FORMAT_SCALINGS
                    if s == "mx"})
    return {
        "shape": list(shape), "size": int(a.size), "amax": amax, "rms": rms,
        "nonfinite": c["nonfinite"], "zeros": int(a.size - nonzero - c["nonfinite"]),
        "hist": {"lo": HIST_LO, "counts": counts.tolist()},
        "formats": {k: formats[k] for k, _, _ in FORMAT_SCALINGS},
    }


def _extremes(a: np.ndarray, kernel: bool) -> tuple[int, int]:
    """(largest, smallest non-zero) finite |x| of the float32 values ``a`` as bit patterns
    (0xFFFFFFFF as the smallest where there is none)."""
    if kernel:
        from ..kernels import headroom as kh

        largest, smallest = kh.extremes(a.view(np.uint32))
        return int(largest), int(smallest)
    bits = _magnitude_bits(a)
    return int(bits.max(initial=0)), int(bits[bits != 0].min(initial=0xFFFFFFFF))


def _magnitude_bits(a: np.ndarray) -> np.ndarray:
    """|x| of the float32 values ``a`` as bit patterns, the non-finite ones as 0 (a new array)."""
    bits = a.view(np.uint32) & np.uint32(0x7FFFFFFF)
    bits[bits >= _FINITE_BITS] = 0
    return bits


def _mx() -> list[tuple[str, str]]:
    return [(k, f) for k, f, s in FORMAT_SCALINGS if s == "mx"]


def _census_reference(a: np.ndarray, shape: tuple, extremes: tuple[int, int],
                      tests: list[tuple[float, bool]]) -> dict:
    """The counts of ``tensor_stats`` by their definitions, in NumPy and float64: how many
    non-zero finite |x| exceed each (t, strict) of ``tests``; per MX format, how many
    v = |x| / X do, X the block's shared scale (``scaling.mx_scale``, floor rule); and the sum
    of the squares in the kernel's order (``_sum_squares``). ``extremes`` is not needed here."""
    bits = _magnitude_bits(a)
    mag = bits.view(np.float32)
    v = mag[bits != 0].astype(np.float64)
    blocks = _mx_blocks(bits, shape)  # (n, 32)
    block_max = blocks.max(axis=1, initial=0).view(np.float32)
    mx = {}
    for key, fmt in _mx():
        w = blocks.view(np.float32).astype(np.float64) / mx_scale(block_max, fmt)[:, None]
        beyond, half_tiny, top_sub, tie_stays = _thresholds(fmt)
        mx[key] = (int(np.count_nonzero(w > beyond if tie_stays else w >= beyond)),
                   int(np.count_nonzero(w > half_tiny)), int(np.count_nonzero(w >= top_sub)))
    return {"nonfinite": int(np.count_nonzero(a.view(np.uint32) & np.uint32(0x7FFFFFFF)
                                              >= _FINITE_BITS)),
            "nonzero": int(v.size), "exponents": np.bincount(bits[bits != 0] >> 23,
                                                             minlength=256),
            "above": [int(np.count_nonzero(v > t if strict else v >= t)) for t, strict in tests],
            "mx": mx, "squares": _sum_squares(blocks)}


def _sum_squares(blocks: np.ndarray) -> float:
    """The sum of the squares of the (n, 32) blocks' values (bit patterns) in float64, in the
    kernel's order: lane j adds the squares at positions j, j + 8, ... of the padded rows in
    turn (NumPy adds the rows of a reduction over axis 0 one after another), then the lanes
    are added as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7))."""
    v = blocks.view(np.float32).astype(np.float64).reshape(-1, 8)
    s = (v * v).sum(axis=0)
    return float(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])))


def _bound(t: float, strict: bool) -> int:
    """The bit pattern B with ``|x| > t`` (strict) or ``|x| >= t`` equal to ``bits >= B`` for
    every non-zero finite float32 |x| (t >= 0): one past the largest float32 f <= t, or f itself
    when t is f and the test is not strict."""
    big = float(np.finfo(np.float32).max)
    if t > big:
        return _FINITE_BITS
    f = np.float32(t)
    if float(f) > t:
        f = np.nextafter(f, np.float32(0))
    b = int(np.array([f], np.float32).view(np.uint32)[0])
    return max(b + (0 if float(f) == t and not strict else 1), 1)


def _mx_test(t: float, strict: bool) -> tuple[int, int]:
    """An MX test for ``kernels.headroom.census``: (t's float32 bits, 1 if strict else 0); t
    is a normal float32 for every MX format's tests (small dyadic values)."""
    t32 = np.float32(t)
    assert float(t32) == t and t32 >= np.finfo(np.float32).tiny, "an MX test is a float32"
    return int(np.array([t32]).view(np.uint32)[0]), int(strict)


def _census_kernel(a: np.ndarray, shape: tuple, extremes: tuple[int, int],
                   tests: list[tuple[float, bool]]) -> dict:
    """``_census_reference``'s counts from ``kernels.headroom.census``: each test as a bound on
    the bit patterns (``_bound``); the bounds that no value lies on either side of are settled
    from the extremes, the others counted in one pass."""
    from ..kernels import headroom as kh

    largest, smallest = extremes
    bounds = np.array([_bound(t, s) for t, s in tests], np.int64)
    live = np.unique(bounds[(bounds > smallest) & (bounds <= largest)]).astype(np.uint32)
    above = np.zeros(live.size, np.int64)
    exponents = np.zeros(256, np.int64)
    mx = _mx()
    mx_tests = [_mx_test(t, strict) for _, f in mx for t, strict in _tests(f, 1.0)]
    mx_counts = np.zeros((len(mx), 3), np.int64)
    last = shape[-1] if len(shape) else 1
    emax = np.array([get_format(f).emax for _, f in mx], np.int64)
    bits = np.array([b for b, _ in mx_tests], np.int64).reshape(len(mx), 3)
    # no k = e - emax below -127, no t 2^k below the normal range
    e_fast = max([int(m) - 127 for m in emax] +
                 [int(m) + 1 - (b >> 23) for m, row in zip(emax, bits) for b in row.tolist()])
    nonfinite, nonzero, squares = kh.census(
        a, last, live.view(np.float32), above, exponents, bits,
        np.array([p for _, p in mx_tests], np.int64).reshape(len(mx), 3), emax, e_fast,
        mx_counts)
    counted = dict(zip(live.tolist(), above.tolist()))
    return {"nonfinite": int(nonfinite), "nonzero": int(nonzero), "exponents": exponents,
            "squares": float(squares),
            "above": [0 if b > largest else int(nonzero) if b <= smallest else counted[b]
                      for b in bounds.tolist()],
            "mx": {k: tuple(int(v) for v in row) for (k, _), row in zip(mx, mx_counts)}}


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
