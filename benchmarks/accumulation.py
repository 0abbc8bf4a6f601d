"""Accumulation precision inside reductions: error against float64 by width, format and chunk.

    python benchmarks/accumulation.py            # measure, write docs/accumulation/results.json
    python benchmarks/accumulation.py --table    # the table of docs/numerics.md from that file
    python benchmarks/accumulation.py --widths 64 256 --rows 2 --out /tmp/acc.json   # small

Three reductions, each summed with ``normlab.precision.accumulate_sum`` (a running sum in the
accumulator format, ``chunk`` terms at a time, partial sums promoted to float32):

* ``rms``: RMSNorm's statistic mean(x^2) of rows x ~ N(0, sigma^2), sigma = 1e-3 (a small
  variance, pytorch/pytorch#189581); reported as the ratio of the output scale
  rsqrt(ms + eps) with the low-precision ms to the float64 one, eps = 1e-6 (1 = exact).
* ``softmax``: the sum of a softmax row (probabilities exact, from logits N(0, 1)) accumulated
  in the format, as a row-sum check does (tenstorrent/tt-metal#52045; 1 = exact).
* ``dot``: a matrix product's inner sum of K products of N(0, 1) inputs; relative error
  |s - s64| / sqrt(sum of squared products) (0 = exact).

Each figure is the mean over ``--rows`` rows drawn from one seeded Generator.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from normlab.precision.accumulate import accumulate_sum  # noqa: E402

RESULTS = ROOT / "docs" / "accumulation" / "results.json"
PAGE = ROOT / "docs" / "numerics.md"
BEGIN, END = "<!-- BEGIN GENERATED: accumulation -->", "<!-- END GENERATED: accumulation -->"
SIGMA, EPS = 1e-3, 1e-6


def measure(kind: str, width: int, fmt: str, chunk: int | None, rows: int,
            rng: np.random.Generator) -> float:
    if kind == "rms":
        x = (SIGMA * rng.standard_normal((rows, width))).astype(np.float32)
        sq = (x.astype(np.float64) ** 2).astype(np.float32)
        ms = accumulate_sum(sq, fmt, chunk=chunk) / width
        ms64 = np.mean(x.astype(np.float64) ** 2, axis=-1)
        return float(np.mean(np.sqrt((ms64 + EPS) / (ms + EPS))))
    if kind == "softmax":
        z = rng.standard_normal((rows, width))
        p = np.exp(z - z.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return float(np.mean(accumulate_sum(p, fmt, chunk=chunk)))
    a = rng.standard_normal((rows, width)).astype(np.float32)
    b = rng.standard_normal((rows, width)).astype(np.float32)
    prod = a.astype(np.float64) * b  # exact: 24-bit significands
    s = accumulate_sum(prod, fmt, chunk=chunk)
    exact = prod.sum(axis=-1)
    return float(np.mean(np.abs(s - exact) / np.sqrt((prod ** 2).sum(axis=-1))))


def run(widths: list[int], formats: list[str], chunks: list[int | None], rows: int,
        seed: int) -> dict[str, Any]:
    out = []
    for kind in ("rms", "softmax", "dot"):
        for fmt in formats:
            for chunk in chunks:
                for width in widths:
                    rng = np.random.Generator(np.random.PCG64([seed, width]))
                    v = measure(kind, width, fmt, chunk, rows, rng)
                    out.append({"kind": kind, "format": fmt, "chunk": chunk, "width": width,
                                "value": v})
    return {"numpy": np.__version__, "python": platform.python_version(), "rows": rows,
            "seed": seed, "sigma": SIGMA, "eps": EPS, "results": out}


def table(res: dict[str, Any]) -> str:
    """One row per (reduction, format, chunk), one column per width."""
    widths = sorted({r["width"] for r in res["results"]})
    head = "| reduction | accumulator | chunk | " + " | ".join(f"{w}" for w in widths) + " |"
    lines = [f"Mean over {res['rows']} rows (seed {res['seed']}); rms: output-scale ratio "
             f"(sigma {res['sigma']:g}, eps {res['eps']:g}); softmax: the row's sum; dot: "
             f"relative error. 1, 1 and 0 are exact.", "", head,
             "|" + "---|" * (3 + len(widths))]
    keys: dict[tuple[str, str, Any], dict[int, float]] = {}
    for r in res["results"]:
        keys.setdefault((r["kind"], r["format"], r["chunk"]), {})[r["width"]] = r["value"]
    for (kind, fmt, chunk), vals in keys.items():
        cells = " | ".join(f"{vals[w]:.4g}" if w in vals else "" for w in widths)
        lines.append(f"| {kind} | {fmt} | {chunk or 'none'} | {cells} |")
    return "\n".join(lines)


def fill_page(page: str, res: dict[str, Any]) -> str:
    i, j = page.find(BEGIN), page.find(END)
    if i < 0 or j < i:
        raise ValueError(f"the page needs the markers {BEGIN} and {END}")
    return page[:i + len(BEGIN)] + "\n" + table(res) + "\n" + page[j:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    p.add_argument("--formats", nargs="+", default=["bfloat16", "float16"])
    p.add_argument("--chunks", nargs="+", default=["none", "32", "128"])
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--table", action="store_true", help="write the page's table from --out")
    args = p.parse_args(argv)
    if args.table:
        PAGE.write_text(fill_page(PAGE.read_text(), json.loads(args.out.read_text())))
        print(f"wrote {PAGE.relative_to(ROOT)}")
        return 0
    chunks = [None if c == "none" else int(c) for c in args.chunks]
    res = run(args.widths, args.formats, chunks, args.rows, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
