"""Plot helpers for the lab: matplotlib's object-oriented API with the Agg canvas.

matplotlib is imported inside the functions (it is an optional dependency of ``normlab[lab]``),
and ``pyplot`` is never used, so plotting changes no global backend state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# One colour per variant, the same in every figure.
COLORS = {
    "post": "#d62728",
    "pre": "#1f77b4",
    "deepnorm": "#2ca02c",
    "admin": "#9467bd",
    "sandwich": "#8c564b",
    "none": "#7f7f7f",
    "rezero": "#ff7f0e",
    "dyt": "#9467bd",
    "batchnorm": "#d62728",
    "batchnorm (masked)": "#ff9896",
    "layernorm": "#1f77b4",
    "rmsnorm": "#2ca02c",
    "prmsnorm": "#98df8a",
    "theory": "#000000",
    "fp16": "#d62728",
    "bfloat16": "#1f77b4",
    "float32": "#2ca02c",
}
ZERO_FLOOR = 1e-18  # where an exact zero is drawn on a log axis


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 4.6,
           height: float = 3.4) -> tuple[Any, list[Any]]:
    """A Figure and its axes (a flat list), ``width`` x ``height`` inches per panel."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def save(fig: Any, out_dir: str | Path, name: str, *,
         metadata: dict[str, str] | None = None) -> str:
    """Write ``fig`` as ``out_dir/name`` (PNG, atomically: ``normlab._files.atomic_write``, so a
    FIFO, device or directory in its place is refused, never written into) and return the file
    name. ``metadata``: PNG text chunks (the forest plot records the summary it was drawn from)."""
    import io

    from .._files import atomic_write

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, dpi=100, format="png", metadata=metadata)
    atomic_write(out / name, png.getvalue(), what="figure")
    return name


def floor_zeros(values: Any, floor: float = ZERO_FLOOR) -> np.ndarray:
    """Values for a log axis: exact zeros (and anything below ``floor``) drawn at ``floor``."""
    v = np.abs(np.asarray(values, dtype=float))
    return np.where(v < floor, floor, v)


def mark_zero_floor(ax: Any, floor: float = ZERO_FLOOR) -> None:
    """A dotted line and a label at the floor where exact zeros are drawn."""
    ax.axhline(floor, color="#999999", lw=0.8, ls=":")
    ax.annotate("exactly 0", (0.01, floor), xycoords=("axes fraction", "data"),
                xytext=(2, 3), textcoords="offset points", fontsize=7, color="#666666")


def moving_average(values: Any, window: int = 9) -> np.ndarray:
    """A trailing mean over ``window`` points for noisy per-step curves; None and non-finite
    values are skipped (NaN where a window has none)."""
    v = np.array([np.nan if x is None else float(x) for x in values])
    ok = np.isfinite(v)
    csum = np.concatenate([[0.0], np.cumsum(np.where(ok, v, 0.0))])
    cnt = np.concatenate([[0], np.cumsum(ok)])
    lo = np.maximum(np.arange(len(v)) + 1 - window, 0)
    hi = np.arange(len(v)) + 1
    n = cnt[hi] - cnt[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (csum[hi] - csum[lo]) / np.maximum(n, 1), np.nan)


def style(ax: Any, title: str, xlabel: str, ylabel: str, *, legend: bool = True) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3, which="both")
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


# ---- the forest plot of the verdicts -------------------------------------------------------
STATUS_COLORS = {"pass": "#2ca02c", "FAIL": "#d62728", "inconclusive": "#1f77b4",
                 "not judged": "#b0b0b0"}
FOREST_FILE = "verdicts.png"
KEY_FIELD = "normlab-forest-key"  # the PNG text chunk naming the summary it was drawn from


def forest_key(summary: dict[str, Any]) -> str:
    """A hash of what the forest plot draws from a summary (its experiments' rows): the PNG
    records it, so a test can tell a committed figure was drawn from the committed file."""
    import hashlib
    import json

    from .results import forest_rows

    drawn, listed = forest_rows(summary)
    text = json.dumps([drawn, listed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _short(text: str, n: int = 64) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3].rstrip() + "..."


def forest(summary: dict[str, Any], out_dir: str | Path, name: str = FOREST_FILE) -> str:
    """The forest plot of a report's verdicts (``results.forest_rows``), one line per counted row
    grouped by experiment, each on its own scale normalised to its margin
    (``results.forest_caption`` says how): written as ``out_dir/name``; returns the name."""
    from .results import FOREST_CLIP, forest_rows

    drawn, listed = forest_rows(summary)
    lines: list[tuple[str, Any]] = []  # ("head", experiment row) or ("row", forest row)
    for exp in summary["experiments"]:
        rows = [r for r in drawn if r["experiment"] == exp["name"]]
        if rows:
            lines.append(("head", exp))
            lines += [("row", r) for r in rows]
    n = max(len(lines), 1)
    fig, (ax,) = figure(width=13.0, height=1.3 + 0.24 * n)
    labels: list[str] = []
    texts: list[str] = []
    ys: list[float] = []
    for i, (what, item) in enumerate(lines):
        y = n - i
        ys.append(y)
        if what == "head":
            labels.append(f"{item['name']}: {item['verdict']}")
            texts.append("")
            ax.axhline(y + 0.5, color="#dddddd", lw=0.6)
        else:
            _forest_row(ax, y, item, FOREST_CLIP)
            claim = str(item["claim"])
            named = item["kind"] != "premise" or claim.lower().startswith("premise")
            labels.append(_short(claim if named else "premise: " + claim))
            texts.append(_short(item["text"], 60))
    _forest_axes(fig, ax, n, ys, labels, texts, [w for w, _ in lines], FOREST_CLIP)
    size = summary.get("size", "")
    title = f"The verdicts of the {size} report: each counted row's 95% interval against its margin"
    if not drawn:
        title += " (no row of this summary has an interval against a threshold)"
        ax.text(0.5, 0.5, "nothing to draw: the summary's rows have no interval against a "
                "threshold (a file written before the rows recorded them)", ha="center",
                va="center", transform=ax.transAxes, fontsize=9, color="#555555")
    elif listed:
        title += f";\n{len(listed)} counted row(s) decided from a single number are listed apart"
    ax.set_title(title, fontsize=10, loc="left")
    return save(fig, out_dir, name, metadata={KEY_FIELD: forest_key(summary)})


def _forest_row(ax: Any, y: float, r: dict[str, Any], clip: float) -> None:
    """One row: its bar, and its estimate (a dot; an arrow at the edge past the axis' end), open
    for a premise, grey for a claim not judged."""
    color = STATUS_COLORS[r["status"] if r["judged"] else "not judged"]
    face = "white" if r["kind"] == "premise" else color
    ax.plot([r["lo"], r["hi"]], [y, y], color=color, lw=2.2, solid_capstyle="butt")
    inside = abs(r["x"]) < clip
    ax.plot([r["x"]], [y], marker="o" if inside else (">" if r["x"] > 0 else "<"),
            ms=5.5 if inside else 7, color=color, markerfacecolor=face, markeredgewidth=1.4)


def _forest_axes(fig: Any, ax: Any, n: int, ys: list[float], labels: list[str],
                 texts: list[str], kinds: list[str], clip: float) -> None:
    """The axes: the claims at the left (the experiments' headers bold), each row's interval
    against its margin in its own units at the right, the margin at 0, the legend below."""
    from matplotlib.lines import Line2D

    ax.axvline(0, color="#000000", lw=1.0)
    ax.set_xlim(-clip - 0.5, clip + 0.5)
    ax.set_ylim(0.3, n + 0.7)
    ax.set_yticks(ys, labels, fontsize=7)
    for tick, what in zip(ax.get_yticklabels(), kinds):
        if what == "head":
            tick.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    right = ax.twinx()  # each row's interval against its margin, in its own units
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ys, texts, fontsize=7)
    right.tick_params(axis="y", length=0)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_xlabel("(value - margin) / half-width of the 95% interval, passing side to the right "
                  "(margin at 0)")
    handles = [Line2D([], [], color=c, lw=2.2, label=k) for k, c in STATUS_COLORS.items()]
    handles.append(Line2D([], [], color="#555555", marker="o", markerfacecolor="white", lw=0,
                          label="premise"))
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=len(handles),
               frameon=False)


def png_text(path: str | Path) -> dict[str, str]:
    """The text chunks (tEXt) of a PNG file: what :func:`save` recorded in ``metadata``."""
    import struct
    import zlib

    data = Path(path).read_bytes()
    out, i = {}, 8
    while i + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        i += 12 + length
    return out
