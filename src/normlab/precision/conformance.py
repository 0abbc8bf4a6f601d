"""Conformance vectors: normlab's rounding as golden data that other tools are run against.

The vectors file (``tests/precision/conformance/vectors.json``) is one JSON object:

    {"format_version": 1, "normlab": "0.1.0", "ml_dtypes": "0.7.0",
     "doc": "...",
     "inputs": {"float8_e4m3fn": ["3f880000", ...], "mx/float4_e2m1fn": [...], ...},
     "groups": [GROUP, ...]}

``inputs`` holds the input sets, float32 bit patterns as 8 hex digits, one set per format
(every group of a format rounds the same inputs) and one per MX element format.

An element GROUP rounds each input once, as ``quantize`` does:

    {"id": "float8_e4m3fn/nearest_even/default/subnormals",
     "kind": "element",
     "format": "float8_e4m3fn"           a name in FORMATS or DIALECTS, or
               {"exponent_bits": 4, "mantissa_bits": 3, "bias": 8, "inf_nan": "none"},
     "rounding": "nearest_even",          a name in ROUNDINGS (no stochastic rounding here)
     "overflow": null,                    null (the format's default), "saturate", "inf", "nan"
     "subnormals": true,                  false: results below the smallest normal become 0
     "inputs": "float8_e4m3fn",           the key of its input set
     "expected": ["3f800000", ...]}       the results' float32 bit patterns (7fc00000 for NaN:
                                          NaN payloads and signs are not compared)

An MX GROUP quantizes blocks of ``block_size`` consecutive inputs with one shared E8M0 scale
(``mx_quantize``; elements saturate, ties to even):

    {"id": "mx/float4_e2m1fn/floor", "kind": "mx", "format": "float4_e2m1fn",
     "scale_rule": "floor", "block_size": 32, "inputs": "mx/float4_e2m1fn",
     "expected_scales": [127, ...],      each block's E8M0 code (2^(code - 127); 255 is NaN)
     "expected": [...]}                  the dequantized values (element * scale), float32 bits

``make_vectors()`` builds the groups from normlab; ``check_group`` compares any tool's results
with a group; ``explain`` finds the normlab dialect (format, rounding, overflow, subnormals) that
reproduces a tool's results, which is how the conformance table names each difference.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

import ml_dtypes
import numpy as np

from .._checks import Array
from .formats import DIALECTS, FORMATS, FloatFormat, get_format
from .rounding import quantize
from .scaling import mx_quantize

FORMAT_VERSION = 1
NAN32 = 0x7FC00000
MX_RULES = ("floor", "ceil", "rceil", "even", "ceil_amax")
MX_ELEMENTS = ("float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn",
               "float4_e2m1fn")
_NEAREST_FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3",
                    "float8_e3m4", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
                    "float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn", "float8_e8m0fnu",
                    "unit_scaling_e4m3", "unit_scaling_e5m2")
_MODE_FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e4m3", "float8_e5m2")
_MODES = ("nearest_away", "nearest_toward_zero", "toward_zero", "up", "down")
_SATURATE_FORMATS = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3",
                     "float8_e4m3fnuz", "float8_e5m2fnuz", "unit_scaling_e4m3",
                     "unit_scaling_e5m2")


def to_hex(x: Array) -> list[str]:
    """float32 values as bit patterns (8 hex digits; every NaN as 7fc00000)."""
    b = np.asarray(x, np.float32).view(np.uint32).copy()
    b[np.isnan(np.asarray(x, np.float32))] = NAN32
    return [f"{int(v):08x}" for v in b]


def from_hex(h: Iterable[str]) -> Array:
    """float32 values from bit patterns."""
    return np.array([int(v, 16) for v in h], dtype=np.uint32).view(np.float32)


def format_of(spec: Any) -> FloatFormat:
    """A group's format: a name in FORMATS/DIALECTS or a dict of FloatFormat's fields."""
    if isinstance(spec, dict):
        return FloatFormat(**spec)
    return get_format(spec)


def probe(fmt: FloatFormat, limit: int = 24) -> Array:
    """Inputs that decide a rounding: the format's values, the midpoints between neighbours and
    the float32 numbers beside them, the overflow threshold and beyond, the specials; at most
    ``limit`` values of each kind, evenly spaced (16-bit formats have 65536 codes)."""
    v = fmt.values() if fmt.bits <= 16 else np.zeros(1)
    pos = np.unique(np.abs(v))
    top = fmt.max_finite + 2.0 ** (fmt.emax - fmt.mantissa_bits)
    pos_t = np.append(pos, top)
    mids = ((pos_t[1:] + pos_t[:-1]) / 2).astype(np.float32)
    inf = np.float32(np.inf)

    def spaced(a: Array) -> Array:
        return a[np.linspace(0, a.size - 1, min(a.size, limit)).astype(int)] if a.size else a

    mids = spaced(mids)
    with np.errstate(over="ignore"):
        edges = np.array([0.0, np.inf, np.nan, top, 2 * top, 1e30, fmt.min_subnormal / 2,
                          fmt.min_subnormal / 4, 0.75 * fmt.min_subnormal, 1e-45, 1.0, 1.5],
                         dtype=np.float32)
        x = np.concatenate([spaced(pos.astype(np.float32)), mids, np.nextafter(mids, inf),
                            np.nextafter(mids, np.float32(0)), edges]).astype(np.float32)
    x = np.concatenate([x, -x])
    _, first = np.unique(x.view(np.uint32), return_index=True)
    return x[np.sort(first)]


def inputs_of(vectors: dict[str, Any], group: dict[str, Any]) -> Array:
    """A group's inputs (float32)."""
    return from_hex(vectors["inputs"][group["inputs"]])


def element_group(fmt_name: str, x: Array, rounding: str = "nearest_even",
                  overflow: str | None = None, subnormals: bool = True) -> dict[str, Any]:
    """One element group on the input set ``fmt_name``, its expected results from quantize."""
    y = quantize(x, get_format(fmt_name), rounding=rounding, overflow=overflow,
                 subnormals=subnormals)
    gid = (f"{fmt_name}/{rounding}/{overflow or 'default'}/"
           f"{'subnormals' if subnormals else 'flush'}")
    return {"id": gid, "kind": "element", "format": fmt_name, "rounding": rounding,
            "overflow": overflow, "subnormals": subnormals, "inputs": fmt_name,
            "expected": to_hex(y)}


def mx_blocks(fmt: FloatFormat, k: int = 32) -> Array:
    """Blocks whose amax sits where scale rules part: max and its float32 neighbours, powers of
    two and their lower neighbours, the points where torchao's EVEN rule rounds up, zeros, a
    subnormal block and a NaN block; the other values of each block come from a seeded
    Generator."""
    rng = np.random.Generator(np.random.PCG64(2027))
    m = np.float32(fmt.max_finite)
    even_up = np.float32(2.0**fmt.emax * (2 - 2.0 ** -(fmt.mantissa_bits + 1)))
    inf, zero = np.float32(np.inf), np.float32(0)
    amaxes = np.array([m, np.nextafter(m, inf), np.nextafter(m, zero), 1.0,
                       np.nextafter(np.float32(2), zero), even_up, np.nextafter(even_up, zero),
                       7.0, 5.0, 3e-39, 0.0], dtype=np.float32)
    x = rng.standard_normal((amaxes.size, k)).astype(np.float32)
    x /= np.maximum(np.abs(x).max(axis=1, keepdims=True), np.float32(1e-30))
    x *= np.float32(0.999) * amaxes[:, None]
    x[:, 0] = amaxes * np.where(np.arange(amaxes.size) % 2, -1, 1).astype(np.float32)
    x = np.concatenate([x, np.full((1, k), 1.5, np.float32)])
    x[-1, 3] = np.nan
    return x.reshape(-1)


def mx_group(fmt_name: str, x: Array, rule: str, k: int = 32) -> dict[str, Any]:
    """One MX group, expected scales and values from ``mx_quantize``."""
    t = mx_quantize(x, get_format(fmt_name), block_size=k, scale_rule=rule)
    with np.errstate(invalid="ignore"):
        y = t.dequantize().astype(np.float32)
    return {"id": f"mx/{fmt_name}/{rule}", "kind": "mx", "format": fmt_name,
            "scale_rule": rule, "block_size": k, "inputs": f"mx/{fmt_name}",
            "expected_scales": _e8m0_codes(t.scales), "expected": to_hex(y)}


def _e8m0_codes(scales: Array) -> list[int]:
    s = np.asarray(scales, np.float64)
    _, e = np.frexp(np.where(np.isfinite(s), s, 1.0))
    return [255 if not np.isfinite(v) else int(c) + 126 for v, c in zip(s, e)]


def make_vectors() -> dict[str, Any]:
    """The golden vectors: every format under RNE, the other deterministic roundings and the
    flush of subnormals on the formats the other tools offer, saturation, and MX blocks."""
    import normlab

    sets = {n: probe(get_format(n)) for n in _NEAREST_FORMATS}
    sets.update({f"mx/{n}": mx_blocks(get_format(n)) for n in MX_ELEMENTS})
    groups = [element_group(n, sets[n]) for n in _NEAREST_FORMATS]
    groups += [element_group(n, sets[n], r) for n in _MODE_FORMATS for r in _MODES]
    groups += [element_group(n, sets[n], subnormals=False) for n in _MODE_FORMATS]
    groups += [element_group(n, sets[n], overflow="saturate") for n in _SATURATE_FORMATS]
    groups += [mx_group(n, sets[f"mx/{n}"], r) for n in MX_ELEMENTS for r in MX_RULES]
    return {"format_version": FORMAT_VERSION, "normlab": normlab.__version__,
            "ml_dtypes": ml_dtypes.__version__, "doc": "normlab.precision.conformance",
            "inputs": {k: to_hex(v) for k, v in sets.items()}, "groups": groups}


def same_bits(got: Array, want: Array) -> Array:
    """Elementwise: equal as float64 values with equal signs of zero, or both NaN."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    return both_nan | ((g == w) & (np.signbit(g) == np.signbit(w)))


def check_group(group: dict[str, Any], got: Any) -> dict[str, Any]:
    """A tool's results for a group against its expected values: ``{"status": "agree"|"differ",
    "n": inputs, "n_differ", "differ": [[index, float64 result as hex], ...]}``."""
    got = np.asarray(got, np.float64).reshape(-1)
    want = from_hex(group["expected"])
    ok = same_bits(got, want)
    bad = np.flatnonzero(~ok)
    return {"status": "differ" if bad.size else "agree", "n": int(want.size),
            "n_differ": int(bad.size),
            "differ": [[int(i), got[i:i + 1].view(np.uint64)[0].item().to_bytes(8, "big").hex()]
                       for i in bad]}


def tool_results(group: dict[str, Any], result: dict[str, Any]) -> Array:
    """The tool's full results for a group, rebuilt from a check (expected where it agreed)."""
    out = from_hex(group["expected"]).astype(np.float64)
    for i, h in result.get("differ", []):
        out[i] = np.frombuffer(bytes.fromhex(h), dtype=">f8")[0]
    return out


def _candidates(fmt: FloatFormat) -> list[tuple[str, FloatFormat]]:
    """Formats a tool's "E{E}M{M}" may be: the named ones with the same E and M, then the
    IEEE-style, fn, fnuz and all-finite encodings at biases 2^(E-1) - 1 and 2^(E-1)."""
    E, M = fmt.exponent_bits, fmt.mantissa_bits
    out = [(n, f) for n, f in itertools.chain(FORMATS.items(), DIALECTS.items())
           if (f.exponent_bits, f.mantissa_bits) == (E, M)]
    for bias, enc in itertools.product((2 ** (E - 1) - 1, 2 ** (E - 1)),
                                       ("ieee", "fn", "fnuz", "none")):
        try:
            f = FloatFormat(E, M, bias=bias, inf_nan=enc, name=f"E{E}M{M} bias {bias} {enc}")
        except ValueError:
            continue
        if all(f != g for _, g in out):
            out.append((f.name or "", f))
    if all(fmt != g for _, g in out):
        out.insert(0, (fmt.name or "", fmt))
    return out


def explain(vectors: dict[str, Any], group: dict[str, Any], got: Array
            ) -> dict[str, Any] | None:
    """The normlab dialect that reproduces a tool's results on an element group: the first
    (format, rounding, overflow, subnormals) with the same results on every input, or the
    closest one, with its count of unexplained inputs and the first of them
    (``example``: input, the tool's result, the dialect's). None for MX groups."""
    if group["kind"] != "element":
        return None
    x = inputs_of(vectors, group)
    fmt = format_of(group["format"])
    best: dict[str, Any] | None = None
    roundings = [group["rounding"]] + [r for r in ("nearest_even", "nearest_away",
                                                   "nearest_toward_zero", "toward_zero")
                                       if r != group["rounding"]]
    for (name, f), rounding, overflow, sub in itertools.product(
            _candidates(fmt), roundings, (group["overflow"], None, "saturate"),
            (group["subnormals"], not group["subnormals"])):
        if (overflow == "saturate") and f.inf_nan == "none":
            continue
        y = quantize(x, f, rounding=rounding, overflow=overflow, subnormals=sub)
        bad = np.flatnonzero(~same_bits(y, got))
        if best is None or bad.size < best["unexplained"]:
            ex = [float(x[bad[0]]), float(got[bad[0]]), float(y[bad[0]])] if bad.size else None
            best = {"format": name, "rounding": rounding, "overflow": overflow,
                    "subnormals": sub, "unexplained": int(bad.size), "example": ex,
                    "nan_only": bool(bad.size) and bool(np.isnan(x[bad]).all())}
        if bad.size == 0:
            break
    return best


def explain_mx(vectors: dict[str, Any], group: dict[str, Any], result: dict[str, Any]
               ) -> str:
    """Where an MX result differs: the blocks, their amax, whether the scales agree, and the
    ratio of the tool's values to normlab's there when it is one constant."""
    k = group["block_size"]
    x = inputs_of(vectors, group).astype(np.float64)
    idx = np.array([i for i, _ in result["differ"]], dtype=int)
    blocks = sorted({int(i) // k for i in idx} | {i for i, _ in result["scale_differ"]})
    amax = [float(np.max(np.abs(x[b * k:(b + 1) * k]))) for b in blocks]
    words = [f"blocks {blocks} (amax {', '.join(f'{a:.6g}' for a in amax)})"]
    words.append("scales differ" if result["scale_differ"] else "scales agree")
    if idx.size:
        got = tool_results(group, result)[idx]
        want = from_hex(group["expected"]).astype(np.float64)[idx]
        nz = want != 0
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.unique(got[nz] / want[nz])
        if nz.any() and ratio.size == 1:
            words.append(f"values there are normlab's x {ratio[0]:g}")
    return "; ".join(words)


def run_tool(vectors: dict[str, Any], fn: Callable[[dict[str, Any]], Any]
             ) -> dict[str, dict[str, Any]]:
    """``fn(group)`` returns the tool's results (float64-convertible, or for MX groups a pair
    (scales as E8M0 codes, values)) or None when the tool cannot express the group."""
    out: dict[str, dict[str, Any]] = {}
    for g in vectors["groups"]:
        try:
            got = fn(g)
        except Exception as exc:  # a tool that raises on a case: reported as such
            out[g["id"]] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:200]}
            continue
        if got is None:
            out[g["id"]] = {"status": "unsupported"}
        elif g["kind"] == "mx":
            codes, values = got
            r = check_group(g, values)
            bad_codes = [i for i, (a, b) in enumerate(zip(codes, g["expected_scales"]))
                         if int(a) != int(b)]
            r["scale_differ"] = [[i, int(codes[i])] for i in bad_codes]
            if bad_codes:
                r["status"] = "differ"
            out[g["id"]] = r
        else:
            out[g["id"]] = check_group(g, got)
    return out


def dump_vectors(vectors: dict[str, Any]) -> str:
    """The vectors file's text: one line per input set and per group, so diffs stay readable."""
    head = {k: v for k, v in vectors.items() if k not in ("inputs", "groups")}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "inputs": {')
    items = list(vectors["inputs"].items())
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}{',' if i < len(items) - 1 else ''}"
              for i, (k, v) in enumerate(items)]
    lines.append(" },")
    lines.append(' "groups": [')
    gs = vectors["groups"]
    lines += [f"  {json.dumps(g)}{',' if i < len(gs) - 1 else ''}" for i, g in enumerate(gs)]
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


# --- the tables of docs/numerics.md --------------------------------------------------------

BEGIN, END = "<!-- BEGIN GENERATED: conformance -->", "<!-- END GENERATED: conformance -->"
DBEGIN, DEND = "<!-- BEGIN GENERATED: dialects -->", "<!-- END GENERATED: dialects -->"


def _case(g: dict[str, Any]) -> str:
    if g["kind"] == "mx":
        return f"MX {g['format']}, scale {g['scale_rule']}"
    bits = [g["format"], g["rounding"]]
    if g["overflow"]:
        bits.append(f"overflow={g['overflow']}")
    if not g["subnormals"]:
        bits.append("flush")
    return ", ".join(bits)


def _dialect_words(e: dict[str, Any], g: dict[str, Any]) -> str:
    """What differs between the explaining dialect and the group's own settings."""
    parts = []
    if e["format"] != g["format"]:
        parts.append(f"format {e['format']}")
    if e["rounding"] != g["rounding"]:
        parts.append(e["rounding"])
    if e["overflow"] != g["overflow"]:
        parts.append(f"overflow={e['overflow'] or 'default'}")
    if e["subnormals"] != g["subnormals"]:
        parts.append("subnormals kept" if e["subnormals"] else "subnormals flushed")
    return ", ".join(parts) or "the same settings"


def _example(vectors: dict[str, Any], g: dict[str, Any], r: dict[str, Any]) -> str:
    if not r.get("differ") and r.get("scale_differ"):
        i, code = r["scale_differ"][0]
        return f"block {i}: scale code {code}, normlab {g['expected_scales'][i]}"
    i, _ = r["differ"][0]
    x = float(inputs_of(vectors, g)[i])
    got = float(tool_results(g, r)[i])
    want = float(from_hex(g["expected"])[i])
    return f"{x!r} -> {got!r} (normlab {want!r})"


def _row(vectors: dict[str, Any], tool: str, g: dict[str, Any], r: dict[str, Any]) -> str:
    if r["status"] == "agree":
        return f"| {tool} | {_case(g)} | agree ({r['n']}) | |"
    if r["status"] == "error":
        return f"| {tool} | {_case(g)} | error: {r['error']} | |"
    what = f"differ: {r['n_differ']} of {r['n']}"
    if r.get("scale_differ"):
        what += f", {len(r['scale_differ'])} scales"
    what += f"; e.g. {_example(vectors, g, r)}"
    e = explain(vectors, g, tool_results(g, r)) if g["kind"] == "element" else None
    if e is None:
        why = explain_mx(vectors, g, r)
    elif e["unexplained"] == 0:
        why = f"dialect: {_dialect_words(e, g)}"
    elif e["nan_only"]:
        why = (f"dialect: {_dialect_words(e, g)}; NaN has no code in the format: the tool "
               f"stores {e['example'][1]!r}")
    else:
        x, got, want = e["example"]
        why = (f"closest: {_dialect_words(e, g)}; {e['unexplained']} inputs unexplained, "
               f"e.g. {x!r} -> {got!r} (that dialect: {want!r})")
    return f"| {tool} | {_case(g)} | {what} | {why} |"


def conformance_table(vectors: dict[str, Any], results: dict[str, Any]) -> str:
    """The markdown table: every tool and supported case, agree / differ, and the dialect."""
    v = results["versions"]
    pkgs = ", ".join(f"{k} {v[k]}" for k in sorted(v))
    lines = [f"Tools: {pkgs}; normlab {vectors['normlab']}, vectors written with ml_dtypes "
             f"{vectors['ml_dtypes']}.", "",
             "| tool | case | result | explained by |", "|---|---|---|---|"]
    groups = {g["id"]: g for g in vectors["groups"]}
    for tool, res in results["tools"].items():
        unsupported = 0
        for gid, g in groups.items():
            r = res.get(gid, {"status": "unsupported"})
            if r["status"] == "unsupported":
                unsupported += 1
                continue
            lines.append(_row(vectors, tool, g, r))
        lines.append(f"| {tool} | the other {unsupported} cases | not supported | |")
    return "\n".join(lines)


def dialect_table() -> str:
    """Every named format and dialect: bits, bias, max, min normal, min subnormal, encoding."""
    lines = ["| name | E | M | bias | max | min normal | min subnormal | inf/NaN |",
             "|---|---|---|---|---|---|---|---|"]
    for name, f in itertools.chain(FORMATS.items(), DIALECTS.items()):
        lines.append(f"| {name} | {f.exponent_bits} | {f.mantissa_bits} | {f.bias} | "
                     f"{f.max_finite:.6g} | {f.min_normal:.6g} | {f.min_subnormal:.6g} | "
                     f"{f.inf_nan} |")
    return "\n".join(lines)


def _replace(page: str, begin: str, end: str, body: str) -> str:
    i, j = page.find(begin), page.find(end)
    if i < 0 or j < i:
        raise ValueError(f"the page needs the markers {begin} and {end}")
    return page[:i + len(begin)] + "\n" + body + "\n" + page[j:]


def fill_page(page: str, vectors: dict[str, Any], results: dict[str, Any]) -> str:
    """``page`` with its generated parts (between the markers) rewritten."""
    page = _replace(page, DBEGIN, DEND, dialect_table())
    return _replace(page, BEGIN, END, conformance_table(vectors, results))
