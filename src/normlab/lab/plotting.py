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


def save(fig: Any, out_dir: str | Path, name: str) -> str:
    """Write ``fig`` as ``out_dir/name`` (PNG, atomically: ``normlab._files.atomic_write``, so a
    FIFO, device or directory in its place is refused, never written into) and return the file
    name."""
    import io

    from .._files import atomic_write

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, dpi=100, format="png")
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
