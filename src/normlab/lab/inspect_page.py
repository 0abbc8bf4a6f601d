"""The HTML page of ``normlab inspect``: one self-contained file (inline SVG, no scripts) from
the dict of ``normlab.models.inspect.inspect_model``."""

from __future__ import annotations

import html
import math

from .formatting import fmt
from .html_page import page, table

# colours of the format windows drawn over the histograms
_COLOURS = {"bfloat16": "#1f77b4", "float16": "#2ca02c", "float8_e4m3fn": "#d62728",
            "float8_e5m2": "#9467bd", "float4_e2m1fn": "#8c564b"}
_FRACTIONS = ("overflow", "flush", "subnormal")


def _pct(v: float) -> str:
    return "0" if v == 0 else fmt(100 * v, spec=".2g") + "%"


def histogram_svg(stats: dict, formats: list[dict], width: int = 560, height: int = 120) -> str:
    """The log2 |x| histogram of one tensor with each format's window (smallest subnormal to
    largest finite, normal range solid) drawn under it, unscaled (scaling shifts the data)."""
    counts = stats["hist"]["counts"]
    lo = stats["hist"]["lo"]
    nz = [i for i, c in enumerate(counts) if c]
    if not nz:
        return "<em>all zeros</em>"
    first = min(nz[0], 0 - lo - 30)
    last = max(nz[-1] + 1, 16 - lo)
    n = last - first
    total = max(counts)
    bar_h = height - 14 * 5 - 16
    bw = width / n
    parts = [(f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" '
             f'font-size="9" font-family="sans-serif">')]
    for i in range(first, last):
        c = counts[i]
        if c:
            h = max(1.0, bar_h * math.sqrt(c / total))  # square root: the tails stay visible
            parts.append(f'<rect x="{(i - first) * bw:.1f}" y="{bar_h - h:.1f}" '
                         f'width="{bw * 0.9:.1f}" height="{h:.1f}" fill="#555">'
                         f'<title>2^{i + lo}: {c}</title></rect>')

    def x_of(e: float) -> float:
        return (e - lo - first) * bw

    seen = set()
    y = bar_h + 4
    for f in formats:
        fmt = f["format"]
        if fmt in seen:
            continue
        seen.add(fmt)
        w = f["window"]
        col = _COLOURS.get(fmt, "#999")
        a, b, c = x_of(w["min_subnormal"]), x_of(w["min_normal"]), x_of(w["max"] + 1)
        parts.append(f'<rect x="{a:.1f}" y="{y}" width="{max(b - a, 0):.1f}" height="8" '
                     f'fill="{col}" opacity="0.35"/>')
        parts.append(f'<rect x="{b:.1f}" y="{y}" width="{max(c - b, 0):.1f}" height="8" '
                     f'fill="{col}"/>')
        parts.append(f'<text x="{min(c + 3, width - 60):.1f}" y="{y + 8}">{fmt}</text>')
        y += 14
    for e in range(first + lo, last + lo):
        if e % 8 == 0:
            parts.append(f'<text x="{x_of(e):.1f}" y="{height - 2}">2^{e}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _layer_svg(layers: list[dict], width: int = 560, height: int = 160) -> str:
    """Residual RMS and max |x| by layer, log scale."""
    vals = [v for L in layers for v in (L["residual_rms"], L["residual_max"]) if v > 0]
    if not vals:
        return ""
    lo, hi = math.log10(min(vals)), math.log10(max(vals))
    hi = hi if hi > lo else lo + 1
    n = max(len(layers) - 1, 1)

    def X(i: float) -> float:
        return 30 + (width - 40) * i / n

    def Y(v: float) -> float:
        return 10 + (height - 30) * (1 - (math.log10(max(v, 1e-30)) - lo) / (hi - lo))

    out = [(f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" '
            f'font-size="10" font-family="sans-serif">')]
    for key, col in (("residual_rms", "#1f77b4"), ("residual_max", "#d62728")):
        pts = " ".join(f"{X(i):.1f},{Y(L[key]):.1f}" for i, L in enumerate(layers))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="2"/>')
    out.append(f'<text x="30" y="{height - 4}">layer 0 .. {len(layers) - 1}; blue RMS, red max |x| '
               f'(log scale, {10 ** lo:.3g} .. {10 ** hi:.3g})</text></svg>')
    return "".join(out)


def _tensors_section(result: dict, formats: list) -> str:
    """Per tensor and format, the fractions that overflow / flush / land among subnormals."""
    parts = []
    parts.append("<h2>Tensors: precision headroom</h2><p>Per tensor, the fraction of its non-zero "
                 "values that overflow / flush to zero / land among the subnormals (precision "
                 "lost) in each format and scaling. Rows with overflow are marked.</p>")
    keys = [f["key"] for f in formats]
    for kind in ("weight", "activation", "gradient"):
        names = [n for n, t in result["tensors"].items() if t["kind"] == kind]
        rows = []
        for n in names:
            t = result["tensors"][n]
            cells = [html.escape(n), "&times;".join(map(str, t["shape"])), fmt(t["amax"]),
                     fmt(t["rms"])]
            over = False
            for k in keys:
                fr = t["formats"][k]
                over |= fr["overflow"] > 0
                cells.append(" / ".join(_pct(fr[x]) for x in _FRACTIONS))
            rows.append(cells if not over
                        else [f'<span class="warn">{cells[0]}</span>'] + cells[1:])
        parts.append(f"<details open><summary>{kind}s ({len(names)})</summary>")
        parts.append(table(["tensor", "shape", "amax", "RMS"] + keys, rows))
        parts.append("</details>")
    return "".join(parts)


def _scale_svg(binades: dict, width: int = 220, height: int = 36) -> str:
    """A small bar chart of the block scales' binades (floor(log2 s) -> blocks)."""
    if not binades:
        return "-"
    keys = sorted(int(k) for k in binades)
    lo, hi = keys[0], keys[-1]
    n = hi - lo + 1
    top = max(binades.values())
    bw = width / max(n, 1)
    out = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" '
           f'font-size="8" font-family="sans-serif">']
    for k in keys:
        c = binades[str(k)] if str(k) in binades else binades[k]
        h = max(1.0, (height - 10) * c / top)
        out.append(f'<rect x="{(k - lo) * bw:.1f}" y="{height - 10 - h:.1f}" '
                   f'width="{max(bw * 0.9, 0.5):.1f}" height="{h:.1f}" fill="#555">'
                   f'<title>2^{k}: {c} blocks</title></rect>')
    out.append(f'<text x="0" y="{height - 1}">2^{lo}</text>'
               f'<text x="{width - 30}" y="{height - 1}">2^{hi}</text></svg>')
    return "".join(out)


def _blocks_section(blocks: dict) -> str:
    """Per dialect, each weight matrix's block statistics."""
    parts = ["<h2>Per-block statistics of the weights</h2><p>What each block dialect would do "
             "to every weight matrix: the distribution of its block scales (binades of the "
             "stored scale; the share of blocks whose scale is zero, below the scale format's "
             "normal range, or at its top), the share of values scaled into the element "
             "format's top band, the largest blockwise dynamic range (log2 max / min non-zero), "
             "how many values differ when the matrix is quantized row-wise and column-wise (1D "
             "blocks: the forward's and the data gradient's copies), and the relative error."
             "</p>"]
    for name, desc in blocks["dialects"].items():
        rows = []
        for tensor, per in blocks["tensors"].items():
            s = per.get(name)
            if s is None:
                continue
            band = s["top_band_interval"]
            rc = "-" if s["rowcol_differ"] is None else _pct(s["rowcol_differ"])
            rows.append([html.escape(tensor), str(s["blocks"]), _scale_svg(s["scale_binades"]),
                         fmt(s["scale_log2_std"], 2), _pct(s["scales_zero"]),
                         _pct(s["scales_low"]), _pct(s["scales_top"]),
                         f'{_pct(s["top_band"])} in ({fmt(band[0])}, {fmt(band[1])}]',
                         fmt(s["dynamic_range_max"], 3), rc, fmt(s["error"]["rel_error"], 3)])
        parts.append(f"<details open><summary>{html.escape(name)}: {html.escape(desc)}"
                     f"</summary>")
        parts.append(table(["weight", "blocks", "scale binades", "log2 s sd", "scale 0",
                            "scale low", "scale top", "top band", "max DR (bits)",
                            "row vs column", "rel. error"], rows))
        parts.append("</details>")
    return "".join(parts)


def render(result: dict, title: str) -> str:
    """The whole page."""
    cfg = result["model"]["config"]
    formats = result["formats"]
    css = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}"
           "table{border-collapse:collapse;font-size:12px;margin:.5em 0}"
           "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
           "th{background:#f3f3f3}td:first-child{text-align:left}.warn{background:#fdd}"
           "details{margin:.3em 0}summary{cursor:pointer}")
    parts = [f"<h1>normlab inspect: {html.escape(title)}</h1>"]
    parts.append(f"<p>{result['model']['parameters']:,} parameters; {cfg['n_layers']} layers, "
                 f"d_model {cfg['d_model']}, {cfg['n_heads']} heads "
                 f"({cfg['n_kv_heads'] or cfg['n_heads']} key/value), "
                 f"placement {cfg['placement']}, norm {cfg['norm']}; "
                 f"{result['tokens']['measured']} tokens measured, delayed scaling's amax from "
                 f"{html.escape(result['tokens']['delayed_from'])}.</p>")
    parts.append(f"<p>loss {result['loss']:.4f} (nll {result['nll']:.4f} nats/token); output mean "
                 f"log Z {result['output']['log_z']:.3f}, mean logit "
                 f"{result['output']['mean_logit']:.3f}</p>")

    parts.append("<h2>Loss under each precision policy (emulated)</h2>")
    rows = [[html.escape(k), fmt(v['loss'], spec=".5f"), fmt(v['delta'], spec="+.2e")]
            for k, v in result["policies"].items()]
    parts.append(table(["policy", "loss", "minus fp32"], rows))

    parts.append("<h2>Layers</h2>" + _layer_svg(result["layers"]))
    rows = []
    for L in result["layers"]:
        gains = "; ".join(f"{k} {fmt(g['mean'])}±{fmt(g['std'], 2)} "
                          f"[{fmt(g['min'])}, {fmt(g['max'])}]"
                          for k, g in L["norms"].items()) or "-"

        def heads(v: list[float]) -> str:
            return " ".join(fmt(x) for x in v)

        ratio = L["residual_max"] / L["residual_rms"] if L["residual_rms"] else float("nan")
        rows.append([str(L["layer"]), fmt(L["residual_rms"]), fmt(L["residual_max"]),
                     fmt(ratio, spec=".1f"), gains, heads(L["max_logit"]), heads(L["entropy"])])
    parts.append(table(["layer", "residual RMS", "max |x|", "max / RMS",
                         ("norm gains mean±std [min, max]"), "max attention logit per head",
                         "attention entropy per head (nats)"],
                        rows))

    parts.append(_tensors_section(result, formats))
    if "blocks" in result:
        parts.append(_blocks_section(result["blocks"]))
    parts.append("<h2>Histograms of log2 |x| with each format's window</h2>")
    for n, t in result["tensors"].items():
        parts.append(f"<details><summary>{html.escape(n)} ({t['kind']}, "
                     f"amax {fmt(t['amax'])})</summary>{histogram_svg(t, formats)}</details>")
    return page(title, parts, css=css)
