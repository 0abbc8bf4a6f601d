"""Conformance of the block dialects: edge-heavy vectors in bulk, the cases run against the
tools, and the disagreement classes.

**Vectors.** :func:`case_inputs` builds each case's inputs deterministically from a seed (a
``PCG64`` Generator): blocks of every kind in :data:`KINDS` (random, values over float32's whole
range, amax one float32 step either side of every power of two, amax at the element format's
max times a power of two, all-equal, zero and negative-zero blocks, blocks holding inf and NaN,
float32 subnormals, values near float32's max, values on the element grid's midpoints, bfloat16
values, normal amax small enough for the smallest scales), arranged into the matrices the tools
take: one large matrix for the block-local dialects (FP8 blocks, MX), many small tensors for
NVFP4's per-tensor scale (a NaN or inf in a tensor reaches every block through its amax, so those
go into a few tensors of their own). The bulk sizes are in :data:`CASES`; nothing but a digest
of the inputs and the counts is committed (``docs/conformance/block_results.json``), and a small
golden subset with the tools' outputs (``tests/precision/conformance/block_golden.json``).

**Cases** (:data:`CASES`): each names a tool, the normlab dialect that follows it, and the
parameters; :func:`normlab_outputs` computes normlab's elements and scales (or, for tools that
return only decoded values, the values). ``benchmarks/conformance_blocks.py`` runs the tools (in
the ``conformance`` venv, the sources pinned in ``benchmarks/conformance_sources.txt``), compares
bit for bit and classifies every disagreement with :data:`CLASSES`.

**Classes.** Every disagreeing block gets the first class whose predicate holds; each class
says whose it is (``"normlab defect"``, ``"dialect"``: a documented difference of definition,
``"tool defect"``) and keeps its first block as the reproducer. A disagreement no class
explains is ``"unexplained"``.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._checks import Array
from .blocks import fp8_block_quantize, fp8_row_quantize
from .formats import FloatFormat, get_format
from .hadamard import rht
from .nvfp4 import nvfp4_quantize
from .rounding import quantize
from .scaling import MX_INT_FORMATS, mx_quantize
from .tiles import Tiling

F32 = np.float32
F32_MAX = float(np.finfo(np.float32).max)
KINDS = ("randn", "wide", "pow2", "fmt_top", "equal", "zeros", "specials", "subnormal", "huge",
         "ties", "bf16", "small", "grid_edges")
FORMAT_VERSION = 1


class Case(NamedTuple):
    """One conformance case: a tool, the dialect that follows it, its parameters."""

    id: str
    tool: str  # te, torchao, deepgemm, microxcaling
    family: str  # nvfp4, fp8_blocks, fp8_rows, mx, rht
    params: dict[str, Any]
    blocks: int  # bulk blocks (tiles for 2D)
    block: int  # values per block along a side
    two_d: bool = False


def _nv(tool: str, name: str, blocks: int = 100_000, **p: Any) -> Case:
    return Case(f"nvfp4/{tool}/{name}", tool, "nvfp4", {"dialect": tool, **p}, blocks, 16,
                bool(p.get("two_d", False)))


def _fp8(tool: str, two_d: bool, pow2: bool | None) -> Case:
    shape = "128x128" if two_d else "1x128"
    name = f"fp8_blocks/{tool}/{shape}" + ("" if pow2 is None else f"/pow2={pow2}")
    return Case(name, tool, "fp8_blocks", {"dialect": tool, "two_d": two_d, "pow2": pow2},
                1024 if two_d else 100_000, 128, two_d)


MX_ELEMENTS = ("float8_e4m3fn", "float8_e5m2", "float6_e3m2fn", "float6_e2m3fn",
               "float4_e2m1fn")
MX_AO_RULES = ("floor", "rceil", "even", "ceil_amax")
MX_MX_ROUNDS = {"nearest": "nearest_away", "even": "nearest_even", "floor": "toward_zero"}
MX_MX_ELEMENTS = MX_ELEMENTS + tuple(MX_INT_FORMATS)

CASES: tuple[Case, ...] = (
    _nv("te", "1x16"),
    _nv("te", "16x16", two_d=True),
    _nv("te", "1x16/row", global_scale="row"),
    _nv("te", "1x16/4over6-mae", four_over_six="mae"),
    _nv("te", "1x16/4over6-mse-256", four_over_six="mse", e4m3_max=256),
    _nv("te", "16x16/4over6-mae-256", two_d=True, four_over_six="mae", e4m3_max=256),
    _nv("torchao", "1x16"),
    _nv("torchao", "1x16/single", global_scale="none"),
    *(_fp8(t, d, p) for t in ("deepgemm", "te") for d in (False, True) for p in (False, True)),
    _fp8("torchao", False, None),
    _fp8("torchao", True, None),
    *(Case(f"fp8_rows/torchao/pow2={p}", "torchao", "fp8_rows", {"pow2": p}, 100_000, 128)
      for p in (True, False)),
    *(Case(f"mx/torchao/{f}/{r}", "torchao", "mx", {"fmt": f, "scale_rule": r}, 100_000, 32)
      for f in MX_ELEMENTS for r in MX_AO_RULES),
    *(Case(f"mx/microxcaling/{f}/{r}", "microxcaling", "mx",
           {"fmt": f, "scale_rule": "floor", "rounding": MX_MX_ROUNDS[r], "round": r},
           100_000, 32) for f in MX_MX_ELEMENTS for r in MX_MX_ROUNDS),
    *(Case(f"mx/microxcaling/{f}/even/32x32", "microxcaling", "mx",
           {"fmt": f, "scale_rule": "floor", "rounding": "nearest_even", "round": "even"},
           4096, 32, True) for f in ("float8_e4m3fn", "float4_e2m1fn", "mxint8")),
    *(Case(f"mx/microxcaling/{f}/even/scale_bits={b}", "microxcaling", "mx",
           {"fmt": f, "scale_rule": "floor", "rounding": "nearest_even", "round": "even",
            "scale_bits": b}, 100_000, 32) for f in ("float8_e4m3fn", "float4_e2m1fn")
      for b in (5,)),
    Case("rht/te/bf16-values", "te", "rht", {"bf16": True}, 100_000, 16),
    Case("rht/te/float32", "te", "rht", {"bf16": False}, 100_000, 16),
)
CASE = {c.id: c for c in CASES}


# --- vectors ------------------------------------------------------------------------------------

def _element_format(case: Case) -> FloatFormat:
    if case.family == "nvfp4":
        return get_format("float4_e2m1fn")
    if case.family == "mx":
        f = case.params["fmt"]
        return MX_INT_FORMATS[f] if f in MX_INT_FORMATS else get_format(f)
    return get_format("float8_e4m3fn" if case.family != "rht" else "float32")


def _midpoints(fmt: FloatFormat) -> Array:
    """The midpoints between neighbouring non-negative values of fmt (small formats), else a
    few points at its top."""
    if fmt.bits > 8:
        return np.array([0.5, 0.75, 1.5], np.float64) * fmt.max_finite
    v = np.unique(np.abs(fmt.values()[np.isfinite(fmt.values())]))
    return (v[1:] + v[:-1]) / 2


def _scaled_uniform(rng: np.random.Generator, n: int, k: int, lo: Array, hi: Array) -> Array:
    """Values 2^U(lo, hi) x U(1, 2) with random signs, per block exponent range (n, k)."""
    e = rng.uniform(lo[:, None], hi[:, None], (n, k))
    with np.errstate(over="ignore"):
        return (rng.uniform(1, 2, (n, k)) * np.exp2(e) * rng.choice([-1.0, 1.0], (n, k)))


def edge_blocks(rng: np.random.Generator, n: int, k: int, fmt: FloatFormat,
                weights: Array | None = None) -> tuple[Array, Array]:
    """n blocks of k float32 values of the kinds in :data:`KINDS` (drawn with ``weights``):
    (blocks (n, k), kind index per block)."""
    w = np.ones(len(KINDS)) if weights is None else np.asarray(weights, np.float64)
    kind = rng.choice(len(KINDS), n, p=w / w.sum())
    x = np.zeros((n, k))
    for i, name in enumerate(KINDS):
        sel = np.flatnonzero(kind == i)
        if sel.size:
            x[sel] = _KIND[name](rng, sel.size, k, fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(F32), kind


def _randn(rng, n, k, fmt):
    return rng.standard_normal((n, k)) * np.exp2(rng.uniform(-20, 20, (n, 1)))


def _wide(rng, n, k, fmt):
    c = rng.uniform(-149, 127, n)
    spread = rng.uniform(0, 60, n)
    return _scaled_uniform(rng, n, k, np.clip(c - spread, -149, 126), np.clip(c, -148, 126.9))


def _amax_at(rng, n, k, amax):
    """Blocks whose largest magnitude is ``amax`` (at a random position), the rest below."""
    x = rng.uniform(-1, 1, (n, k)) * amax[:, None] * 0.999
    pos = rng.integers(0, k, n)
    x[np.arange(n), pos] = amax * rng.choice([-1.0, 1.0], n)
    return x


def _pow2(rng, n, k, fmt):
    j = rng.integers(-149, 128, n)
    m = rng.choice([1.0, 1 - 2.0**-24, 1 + 2.0**-23, 1 - 2.0**-23, 1 + 2.0**-22], n)
    a = np.minimum(np.exp2(j.astype(np.float64)) * m, F32_MAX)
    return _amax_at(rng, n, k, np.asarray(a, np.float32).astype(np.float64))


def _fmt_top(rng, n, k, fmt):
    top = fmt.max_finite
    j = rng.integers(-140, 120, n)
    m = rng.choice([1.0, 1 - 2.0**-24, 1 + 2.0**-23, 0.5 + 2.0**-24, 1.5, 1.25, 1.75], n)
    a = np.exp2(j.astype(np.float64)) * top * m
    a = np.clip(a, 2.0**-149, F32_MAX).astype(np.float32).astype(np.float64)
    return _amax_at(rng, n, k, a)


def _equal(rng, n, k, fmt):
    v = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-149, 127, n))
    return np.repeat(v[:, None], k, axis=1)


def _zeros(rng, n, k, fmt):
    x = np.zeros((n, k))
    sub = rng.integers(0, 3, n)
    x[sub == 1] = -0.0
    one = np.flatnonzero(sub == 2)
    x[one, rng.integers(0, k, one.size)] = rng.standard_normal(one.size)
    return x


def _specials(rng, n, k, fmt):
    x = _randn(rng, n, k, fmt)
    v = rng.choice([np.inf, -np.inf, np.nan], n)
    x[np.arange(n), rng.integers(0, k, n)] = v
    both = rng.random(n) < 0.2
    x[np.flatnonzero(both), 0] = np.nan
    return x


def _subnormal(rng, n, k, fmt):
    return _scaled_uniform(rng, n, k, np.full(n, -149.0), np.full(n, -126.5))


def _huge(rng, n, k, fmt):
    a = np.asarray(F32_MAX * rng.uniform(0.5, 1.0, n), np.float32).astype(np.float64)
    a[: max(n // 4, 1)] = F32_MAX
    return _amax_at(rng, n, k, a)


def _ties(rng, n, k, fmt):
    mids = _midpoints(fmt)
    j = rng.integers(-120, 110, n).astype(np.float64)
    x = rng.choice(mids, (n, k)) * rng.choice([-1.0, 1.0], (n, k))
    x *= 1 + rng.choice([0.0, 0.0, 2.0**-23, -(2.0**-23)], (n, k))
    x[:, 0] = fmt.max_finite * rng.choice([-1.0, 1.0], n)
    return x * np.exp2(j)[:, None]


def _grid_edges(rng, n, k, fmt):
    """amax = max x 2^j exactly; the other values one float32 step below and above the
    element grid's values and half its smallest subnormal, times 2^j."""
    v = np.unique(np.abs(fmt.values()[np.isfinite(fmt.values())])) if fmt.bits <= 8 else \
        np.exp2(np.arange(-8.0, 8.0))
    pts = np.concatenate([v[v > 0], [fmt.min_subnormal / 2]])
    m = rng.choice([1 - 2.0**-24, 1 + 2.0**-23, 1.0], (n, k))
    j = rng.integers(-100, 100, n).astype(np.float64)
    x = rng.choice(pts, (n, k)) * m * rng.choice([-1.0, 1.0], (n, k))
    x[:, 0] = fmt.max_finite
    return x * np.exp2(j)[:, None]


def _bf16(rng, n, k, fmt):
    return quantize(_randn(rng, n, k, fmt), "bfloat16") * np.exp2(rng.integers(-30, 30, (n, 1)))


def _small(rng, n, k, fmt):
    c = rng.uniform(-126, -100, n)
    return _scaled_uniform(rng, n, k, c - rng.uniform(0, 10, n), c)


_KIND: dict[str, Callable[..., Array]] = {
    "randn": _randn, "wide": _wide, "pow2": _pow2, "fmt_top": _fmt_top, "equal": _equal,
    "zeros": _zeros, "specials": _specials, "subnormal": _subnormal, "huge": _huge,
    "ties": _ties, "bf16": _bf16, "small": _small, "grid_edges": _grid_edges}
_QUIET = np.array([0.0 if k in ("specials", "huge") else 1.0 for k in KINDS])


def case_inputs(case: Case, seed: int = 0, blocks: int | None = None) -> list[Array]:
    """The case's input matrices (float32), built from ``seed``: ``blocks`` blocks (tiles for
    2D cases; default the case's bulk size)."""
    n = case.blocks if blocks is None else blocks
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(case.id.encode())]))
    fmt = _element_format(case)
    b = case.block
    if case.family == "rht":
        return [_rht_inputs(rng, n, b, bool(case.params["bf16"]))]
    if case.family == "nvfp4" and case.params.get("global_scale", "tensor") != "none":
        return _tensors(rng, n, case, fmt)
    return [_matrix(rng, n, case, fmt)]


def _rht_inputs(rng: np.random.Generator, n: int, b: int, bf16: bool) -> Array:
    """Groups of b values for the Hadamard transform: bfloat16 values within 10 binades of each
    other (TE's float32 GEMM sums them exactly), or the edge kinds in float32 (finite)."""
    if bf16:
        v = rng.standard_normal((n, b))
        v = np.sign(v) * np.clip(np.abs(v), 2.0**-6, 8)
        x = quantize(v, "bfloat16") * np.exp2(rng.integers(-60, 60, (n, 1)))
    else:
        x, _ = edge_blocks(rng, n, b, get_format("bfloat16"), _QUIET)
        x = np.where(np.isfinite(x), x, 0) * 2.0**-3  # room for the rotation's growth
    return x.astype(F32).reshape(-1, 8 * b)


def _matrix(rng: np.random.Generator, n: int, case: Case, fmt: FloatFormat,
            weights: Array | None = None) -> Array:
    """n blocks (tiles) in one matrix: 1D blocks 8 to a row (per-row FP8: one, a row is its
    block); 2D tiles 8 to a row of tiles (fewer for fewer tiles)."""
    b = case.block
    size = b * b if case.two_d else b
    cols = 1 if case.family == "fp8_rows" else min(8, n)
    n = -(-n // cols) * cols
    x, _ = edge_blocks(rng, n, size, fmt, weights)
    if not case.two_d:
        return x.reshape(n // cols, cols * b)
    t = Tiling((n // cols * b, cols * b), 1, b, True)
    return t.merge(x.reshape(n // cols, cols, size))


def _tensors(rng: np.random.Generator, n: int, case: Case, fmt: FloatFormat) -> list[Array]:
    """NVFP4 under a per-tensor scale: tensors of 32 blocks (16 tiles for 2D) of the quiet
    kinds, each times 2^U(-40, 40); one tensor in 25 gets an inf or NaN, one in 25 a block at
    float32's max, one in 25 is all zeros."""
    per = 16 if case.two_d else 32
    out = []
    for _ in range(-(-n // per)):
        t = _matrix(rng, per, case, fmt, _QUIET).astype(np.float64)
        r = rng.random()
        with np.errstate(over="ignore"):
            t *= np.exp2(rng.integers(-40, 41))
        if r < 0.04:
            t.flat[rng.integers(0, t.size)] = rng.choice([np.inf, -np.inf, np.nan])
        elif r < 0.08:
            t.flat[rng.integers(0, t.size)] = F32_MAX * rng.choice([-1.0, 1.0])
        elif r < 0.12:
            t[:] = 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            out.append(t.astype(F32))
    return out


# --- normlab's side -----------------------------------------------------------------------------

def normlab_outputs(case: Case, x: Array) -> dict[str, Array]:
    """normlab's results on one input matrix, as the tool's adapter returns them:
    ``elements`` and ``scales`` (grid layout), or ``values`` for the tools that return only
    decoded values (microxcaling, the RHT)."""
    p = case.params
    if case.family == "nvfp4":
        t = nvfp4_quantize(x, **p)
        return {"elements": t.elements, "scales": t.scales}
    if case.family == "fp8_blocks":
        t = fp8_block_quantize(x, **p)
        return {"elements": t.elements, "scales": t.scales}
    if case.family == "fp8_rows":
        r = fp8_row_quantize(x, pow2=p["pow2"])
        return {"elements": r.elements, "scales": r.scales}
    if case.family == "rht":
        return {"values": rht(x)}
    fmt = MX_INT_FORMATS.get(p["fmt"]) or get_format(p["fmt"])
    m = mx_quantize(x, fmt, scale_rule=p["scale_rule"], rounding=p.get("rounding",
                    "nearest_even"), two_d=case.two_d, scale_bits=p.get("scale_bits", 8))
    if case.tool == "microxcaling":  # it returns values only; the scales serve the classes
        return {"values": m.dequantize(), "normlab_scales": m.scales}
    return {"elements": m.elements, "scales": m.scales, "values": m.dequantize()}


# --- comparing and classifying -----------------------------------------------------------------

def bits(a: Any) -> Array:
    """float32 bit patterns, every NaN as 0x7FC00000 (payloads and signs of NaN not compared)."""
    b = np.ascontiguousarray(a, np.float32).view(np.uint32).copy()
    b[np.isnan(np.asarray(a, np.float32))] = 0x7FC00000
    return b


def digest(arrays: list[Array]) -> str:
    """sha256 (first 16 hex digits) of the arrays' float32 bit patterns and shapes."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(str(np.shape(a)).encode())
        h.update(bits(a).tobytes())
    return h.hexdigest()[:16]


def pack(a: Array) -> dict[str, Any]:
    """A float32 array for the golden file: its values in the narrowest of float8_e4m3fn,
    bfloat16 and float32 that holds every one exactly (NaN as NaN), zlib-compressed, base64."""
    import ml_dtypes

    a = np.asarray(a, np.float32)
    for name, dt in (("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
                     ("bfloat16", ml_dtypes.bfloat16), ("float32", np.float32)):
        with np.errstate(all="ignore"):
            c = a.astype(dt)
        if np.array_equal(bits(c.astype(np.float32)), bits(a)):
            raw = c.tobytes()
            return {"shape": list(a.shape), "dtype": name,
                    "data": base64.b64encode(zlib.compress(raw, 9)).decode()}
    raise AssertionError("float32 holds every float32")  # pragma: no cover


def unpack(spec: dict[str, Any]) -> Array:
    """The float32 array :func:`pack` stored."""
    import ml_dtypes

    dt = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "bfloat16": ml_dtypes.bfloat16,
          "float32": np.float32}[spec["dtype"]]
    raw = zlib.decompress(base64.b64decode(spec["data"]))
    return np.frombuffer(raw, dt).astype(np.float32).reshape(spec["shape"])


class BlockView(NamedTuple):
    """One disagreeing block as the class predicates see it."""

    x: Array  # the block's inputs (float32)
    ours: dict[str, Array]  # normlab's outputs there (elements, values: the block's; scales:
    #                         its scale, shape ())
    theirs: dict[str, Array]
    amax: float
    tensor_amax: float  # the amax its global scale comes from (NVFP4: the tensor's or the
    #                     row's; 0 for the dialects without one)
    fmt: FloatFormat
    rounding: str  # the element rounding of the case
    params: dict[str, Any]  # the case's parameters


class DisagreementClass(NamedTuple):
    """A named cause of disagreement: whose it is, and the predicate that finds it."""

    id: str
    verdict: str  # "normlab defect", "dialect", "tool defect"
    tools: tuple[str, ...]  # the tools (or "family:tool") it applies to
    text: str
    test: Callable[[BlockView], bool]


def _nonfinite(b: BlockView) -> bool:
    return not (bool(np.isfinite(b.x).all()) and np.isfinite(b.tensor_amax))


def _inf_block_finite_scale(b: BlockView) -> bool:
    """A block holding +-inf (and no NaN) to which the tool gives a finite scale where
    normlab's MX scale is NaN."""
    x = b.x
    if not (np.isinf(x).any() and not np.isnan(x).any()) or "scales" not in b.theirs:
        return False
    return bool(np.isnan(float(b.ours["scales"])) and np.isfinite(float(b.theirs["scales"])))


def _neg_zero_only(b: BlockView) -> bool:
    """Every disagreement is -0 against +0."""
    for key in ("elements", "values"):
        if key in b.ours:
            o, t = np.asarray(b.ours[key], np.float32), np.asarray(b.theirs[key], np.float32)
            diff = bits(o) != bits(t)
            if diff.any() and not bool(((o[diff] == 0) & (t[diff] == 0)).all()):
                return False
    return "scales" not in b.ours or bits(b.ours["scales"]).tolist() == bits(
        b.theirs["scales"]).tolist()


def _scale_code_zero(b: BlockView) -> bool:
    s = np.asarray(b.ours.get("scales", np.nan), np.float64)
    return bool(np.all(s == 2.0**-127))


def _near_pow2(b: BlockView) -> bool:
    """amax just below a power of two (within 2^-12 of it, not on it: a float32 log2 of a
    value that close to 2^k rounds up to k for |k| of float32's exponents), and normlab's
    rounding with the shared scale doubled reproduces every value of the tool's block (the
    tool's NaN scale where the doubled one leaves the shared exponent's range)."""
    a = b.amax
    if not np.isfinite(a) or a <= 0 or not 1 - 2.0**-12 < np.frexp(a)[0] < 1:
        return False
    X = 2.0 * float(b.ours["normlab_scales"])
    t = np.asarray(b.theirs["values"], np.float32)
    top = 2 ** (b.params.get("scale_bits", 8) - 1) - 1
    if X > 2.0**top:  # the doubled scale leaves the shared exponent's range: NaN
        return bool(np.isnan(t).all())
    with np.errstate(over="ignore", invalid="ignore"):
        v = quantize(b.x.astype(np.float64) / X, b.fmt, rounding=b.rounding, overflow="saturate")
        want = (v * X).astype(np.float32)
    same = (bits(want) == bits(t)) | ((want == 0) & (t == 0))
    if b.rounding == "toward_zero":  # with round='floor' also its binade error (below)
        same |= (np.abs(t) < np.abs(want)) & (np.sign(t) == np.sign(want))
    return bool(np.all(same))


def _floor_binade(b: BlockView) -> bool:
    """Every differing value smaller in magnitude than normlab's, same sign: truncation on the
    binade below (microxcaling's float32 log2 of the element itself)."""
    o, t = np.asarray(b.ours["values"], np.float64), np.asarray(b.theirs["values"], np.float64)
    d = bits(o) != bits(t)
    return bool(d.any() and np.all((np.abs(t[d]) < np.abs(o[d])) & (np.sign(t[d]) == np.sign(
        o[d]))))


def _rceil_low(b: BlockView) -> bool:
    """torchao 0.18 RCEIL: its scale one binade below normlab's (float32 log2)."""
    if "scales" not in b.theirs:
        return False
    o, t = float(b.ours["scales"]), float(b.theirs["scales"])
    return t == o / 2


def _values_differ_only(b: BlockView) -> bool:
    return "scales" in b.ours and bits(b.ours["scales"]).tolist() == bits(
        b.theirs["scales"]).tolist()


def _below_half_subnormal(b: BlockView) -> bool:
    """microxcaling rounds |v| just below half the smallest subnormal up (floor(|v| + 0.5) in
    float32)."""
    if "values" not in b.ours:
        return False
    o, t = np.asarray(b.ours["values"]), np.asarray(b.theirs["values"])
    d = bits(o) != bits(t)
    return bool(d.any() and (o[d] == 0).all() and (np.abs(t[d]) > 0).all())


def _value_2_128(b: BlockView) -> bool:
    """Every differing value is normlab's +-float32 max against the tool's +-inf: the MX value
    2^128 (round-up scale rules, amax next to float32's max)."""
    if "values" not in b.ours:
        return False
    o, t = np.asarray(b.ours["values"], np.float32), np.asarray(b.theirs["values"], np.float32)
    d = bits(o) != bits(t)
    return bool(d.any() and (np.abs(o[d]) == F32_MAX).all() and np.isinf(t[d]).all()
                and _values_differ_only(b))


def _sum_order(b: BlockView) -> bool:
    """The transform's values within the error bound of a float32 sum of its 16 terms in any
    order (15 u sum |x_i| / 4, u = 2^-24, plus 2^-149 per term for products x_i / 4 that
    fall below float32's normal range) of normlab's correctly rounded ones."""
    o, t = np.asarray(b.ours["values"], np.float64), np.asarray(b.theirs["values"], np.float64)
    bound = 15 * 2.0**-24 * np.sum(np.abs(b.x.astype(np.float64))) / 4 + 16 * 2.0**-149
    return bool(np.all(np.abs(o - t) <= bound))


def _zero_tensor(b: BlockView) -> bool:
    return b.tensor_amax == 0 and b.amax == 0


def _tiny_relative(b: BlockView) -> bool:
    """A block whose amax is below 2^-6 * 6 of the tensor's scale (torchao's clamped E4M3 block
    scale against TE's subnormal one)."""
    return bool(np.isfinite(b.tensor_amax) and b.tensor_amax > 0
                and b.amax / b.tensor_amax * 448 < 2.0**-6)


CLASSES: tuple[DisagreementClass, ...] = (
    DisagreementClass(
        "ao-inf-block", "tool defect", ("mx:torchao",),
        "torchao 0.18 gives a block holding inf a finite scale (2^120, or 2^127 under RCEIL, "
        "for E4M3) and the block finite values beside its inf; the OCP MX spec, normlab and "
        "torchao main give the NaN scale (the whole block NaN)", _inf_block_finite_scale),
    DisagreementClass(
        "rht-sum-order", "dialect", ("rht:te",),
        "the Hadamard transform's float32 sum: TE's reference is a float32 GEMM (its sum order "
        "the BLAS's), normlab's the exact transform rounded once; they differ where a group's "
        "float32 sum is inexact, within the float32 summation bound", _sum_order),
    DisagreementClass(
        "nonfinite-input", "dialect", ("te", "torchao", "deepgemm", "microxcaling"),
        "a block (for NVFP4: its tensor, or row) holding inf or NaN: each tool propagates it "
        "its own way (TE's reference writes a NaN element as 0; normlab keeps NaN)",
        _nonfinite),
    DisagreementClass(
        "negative-zero", "dialect", ("te", "torchao", "microxcaling"),
        "-0 against +0 only: TE's reference cast (cast_to_fp4x2) and microxcaling give +0 for "
        "-0 and for negatives that round to zero; normlab keeps the sign", _neg_zero_only),
    DisagreementClass(
        "mx-value-2^128", "dialect", ("mx:torchao",),
        "the MX value 2^128 (an element rounded up to 2^(emax + 1) under a round-up scale rule "
        "with amax next to float32's max): torchao's to_dtype gives inf, normlab's dequantize "
        "the nearest finite float32 (its max)", _value_2_128),
    DisagreementClass(
        "ao-zero-tensor", "tool defect", ("nvfp4:torchao",),
        "an all-zero tensor under a per-tensor scale: torchao divides 0 by 0 (NaN scales and "
        "elements); normlab's torchao dialect takes the per-tensor scale as 1", _zero_tensor),
    DisagreementClass(
        "ao-scale-code-0", "tool defect", ("mx:torchao",),
        "torchao 0.18's elements in blocks whose E8M0 scale code is 0 (amax below "
        "2^(emax - 126), normal or subnormal): it divides by a scale clamped to 2^-126 (FLOOR, "
        "EVEN, CEIL: values half of normlab's) or multiplies by 1 (RCEIL: zeros); fixed on "
        "torchao main", _scale_code_zero),
    DisagreementClass(
        "ao-rceil-log2", "tool defect", ("mx:torchao",),
        "torchao 0.18's eager RCEIL takes ceil(log2(amax / max)) with a float32 log2, which "
        "rounds down when amax / max is just above a power of two: its scale one binade low "
        "(normlab's rceil is the float32-bits rule of torchao main, TE and cuBLAS)", _rceil_low),
    DisagreementClass(
        "mx-log2-floor", "tool defect", ("microxcaling",),
        "microxcaling's floor(log2(amax)) with a float32 log2 rounds up for amax just below "
        "2^k (within half a float32 ulp of k in the log): the shared scale doubles, reproduced "
        "value for value by normlab's rule at twice the scale (NaN where that leaves the "
        "shared exponent's range; inf next to float32's max)",
        _near_pow2),
    DisagreementClass(
        "mx-floor-binade", "tool defect", ("mx:microxcaling:floor",),
        "microxcaling's round='floor' takes each element's exponent from a float32 "
        "log2, which rounds up for values just below 2^j: the element is truncated on the "
        "binade below (toward zero by more than an ulp)", _floor_binade),
    DisagreementClass(
        "mx-half-subnormal", "tool defect", ("microxcaling",),
        "microxcaling's floor(|v| + 0.5) in float32 rounds |v| just below half the smallest "
        "element subnormal up to it", _below_half_subnormal),
)


def block_views(case: Case, x: Array, ours: dict[str, Array], theirs: dict[str, Array]
                ) -> tuple[int, int, list[tuple[int, BlockView]]]:
    """(blocks, disagreeing values, [(block index, view)] of the disagreeing blocks)."""
    block = x.shape[-1] if case.family == "fp8_rows" else case.block
    tiling = Tiling.of(x.shape, block, -1, case.two_d)
    xs = tiling.split(x)
    nblk = int(np.prod(xs.shape[:-1]))
    xs = xs.reshape(nblk, -1)
    diff_blocks = np.zeros(nblk, bool)
    nvals = 0
    split: dict[str, tuple[Array, Array]] = {}
    for key in ("elements", "values", "scales", "normlab_scales"):
        if key not in ours:
            continue
        if key not in theirs:  # normlab's own, for the classes
            o = np.asarray(ours[key], np.float32)
            split[key] = (tiling.from_grid(o).reshape(-1), tiling.from_grid(o).reshape(-1))
            continue
        o, t = np.asarray(ours[key], np.float32), np.asarray(theirs[key], np.float32)
        if key == "scales":
            o, t = tiling.from_grid(o).reshape(-1), tiling.from_grid(t).reshape(-1)
        else:
            o, t = tiling.split(o).reshape(nblk, -1), tiling.split(t).reshape(nblk, -1)
            nvals += int(np.count_nonzero(bits(o) != bits(t)))
        d = bits(o) != bits(t)
        diff_blocks |= d if d.ndim == 1 else d.any(axis=1)
        split[key] = (o, t)
    with np.errstate(invalid="ignore"):
        amax = np.max(np.abs(xs), axis=1)
        g = np.zeros(nblk)
        if case.family == "nvfp4":
            mode = case.params.get("global_scale", "tensor")
            if mode == "tensor":
                g[:] = np.max(np.abs(x)) if x.size else 0.0
            elif mode == "row":
                g = np.repeat(np.max(np.abs(x), axis=-1), x.shape[-1] // case.block)
    fmt = _element_format(case)
    views = []
    for i in np.flatnonzero(diff_blocks):
        views.append((int(i), BlockView(xs[i], {k: v[0][i] for k, v in split.items()},
                                        {k: v[1][i] for k, v in split.items()},
                                        float(amax[i]), float(g[i]), fmt,
                                        case.params.get("rounding", "nearest_even"),
                                        case.params)))
    return nblk, nvals, views


def classify(case: Case, view: BlockView) -> str:
    """The first class of :data:`CLASSES` for the case's tool that explains the block."""
    keys = {case.tool, f"{case.family}:{case.tool}",
            f"{case.family}:{case.tool}:{case.params.get('round', '')}"}
    for c in CLASSES:
        if keys & set(c.tools) and c.test(view):
            return c.id
    return "unexplained"


# --- the page's tables ----------------------------------------------------------------------------

DIALECTS_BEGIN, DIALECTS_END = "<!-- BEGIN GENERATED: block-dialects -->", \
    "<!-- END GENERATED: block-dialects -->"
RESULTS_BEGIN, RESULTS_END = "<!-- BEGIN GENERATED: block-conformance -->", \
    "<!-- END GENERATED: block-conformance -->"
CLASSES_BEGIN, CLASSES_END = "<!-- BEGIN GENERATED: block-classes -->", \
    "<!-- END GENERATED: block-classes -->"


def dialects_table() -> str:
    """Every block dialect normlab names: its kind, parameters and source."""
    from .blocks import FP8_BLOCK_DIALECTS, FP8_ROW_SOURCE
    from .nvfp4 import NVFP4_DIALECTS

    rows = [("nvfp4", f"dialect={d!r}", src) for d, src in NVFP4_DIALECTS.items()]
    rows += [("fp8_blocks", f"dialect={d!r}", src) for d, src in FP8_BLOCK_DIALECTS.items()]
    rows += [("fp8_rows", "pow2", FP8_ROW_SOURCE),
             ("mx", "two_d, scale_bits, MX_INT_FORMATS", "OCP MX v1.0; microxcaling "
              "7bc4195 mx/mx_ops.py: _quantize_mx (axes, scale_bits, int8/int4/int2); "
              "TransformerEngine MXFP8BlockScaling(enable_2d_quantization) 32x32 weight tiles"),
             ("hadamard", "size, signs, scaling", "TransformerEngine reference_nvfp4.py: "
              "NVFP4QuantizerRef._build_hadamard_matrix, _apply_rht, get_wgrad_sign_vector")]
    lines = ["| kind | parameters | follows |", "|---|---|---|"]
    lines += [f"| `{k}` | {p} | {s} |" for k, p, s in rows]
    return "\n".join(lines)


def _verdicts(classes: dict[str, Any]) -> str:
    verdict = {c.id: c.verdict for c in CLASSES}
    if not classes:
        return "agree bit for bit"
    parts = []
    for cid, c in sorted(classes.items(), key=lambda kv: -kv[1]["blocks"]):
        parts.append(f"{c['blocks']} {cid} ({verdict.get(cid, 'unexplained')})")
    return "; ".join(parts)


def results_table(results: dict[str, Any]) -> str:
    """The bulk conformance table: per case the blocks run, the blocks that agree bit for bit,
    and the disagreeing blocks by class."""
    v = results["versions"]
    tools = ", ".join(f"{k} {v[k]}" for k in ("torch", "torchao", "numpy", "python"))
    pins = ", ".join(f"{k}@{v[k][:7]}" for k in sorted(v) if "/" in k)
    lines = [f"Tools: {tools}; sources {pins}. Inputs: "
             f"{sum(r['blocks'] for r in results['cases'].values()):,} blocks in "
             f"{len(results['cases'])} cases, built from seed 0 "
             f"(``block_conformance.case_inputs``).", "",
             "| case | blocks | agree | disagreeing blocks by class |", "|---|---|---|---|"]
    for cid, r in results["cases"].items():
        agree = r["blocks"] - r["disagreeing_blocks"]
        lines.append(f"| {cid} | {r['blocks']:,} | {agree:,} | {_verdicts(r['classes'])} |")
    return "\n".join(lines)


def classes_table(results: dict[str, Any]) -> str:
    """Every disagreement class: whose it is, the cases it occurs in, one reproducer."""
    lines = ["| class | whose | what | cases | reproducer |", "|---|---|---|---|---|"]
    for c in CLASSES:
        where = [cid for cid, r in results["cases"].items() if c.id in r["classes"]]
        if not where:
            continue
        first = next((w for w in where if "reproducer" in results["cases"][w]["classes"][c.id]),
                     where[0])
        rep = results["cases"][first]["classes"][c.id].get("reproducer", {"x": []})
        x = ", ".join(rep["x"][:4]) + (", ..." if len(rep["x"]) > 4 else "")
        lines.append(f"| {c.id} | {c.verdict} | {c.text} | {len(where)} | {first}: x = "
                     f"[{x}] (float32 bits; the whole block in block_results.json) |")
    unexplained = [cid for cid, r in results["cases"].items() if "unexplained" in r["classes"]]
    lines.append(f"| unexplained | - | disagreements no class explains | {len(unexplained)} | "
                 f"{', '.join(unexplained) or 'none'} |")
    return "\n".join(lines)


def fill_page(page: str, results: dict[str, Any]) -> str:
    """``page`` with its block tables (between their markers) rewritten."""
    from .conformance import _replace

    page = _replace(page, DIALECTS_BEGIN, DIALECTS_END, dialects_table())
    page = _replace(page, RESULTS_BEGIN, RESULTS_END, results_table(results))
    return _replace(page, CLASSES_BEGIN, CLASSES_END, classes_table(results))
