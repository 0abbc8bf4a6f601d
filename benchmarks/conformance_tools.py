"""Run normlab's conformance vectors through the other tools and write their raw results.

    /work/venv-oracles/bin/python benchmarks/conformance_tools.py          # needs the tools
    python benchmarks/conformance.py table                                  # then the table

Tools (pinned in pyproject.toml's ``conformance`` extra, installed in a venv of their own):
PyTorch's casts (``x.to(torch.float8_e4m3fn)`` ...), torchao's MX (``to_mx`` with each
``ScaleCalculationMode``, and its fp4/fp6 element casts), unit-scaling's ``FPFormat.quantise``
and pychop's ``LightChop``. Each tool gets float32 inputs (pychop float64, its own precision;
the inputs are exact in both) and its results are compared, as float64 values, with the
vectors' expected results. Only ``normlab.precision.conformance`` is imported from normlab (no
numba needed). The results file records the tools' versions and, for every group and tool,
agree / differ (with the inputs that differ and the tool's results there) / unsupported.
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

from normlab.precision import conformance as C  # noqa: E402
from normlab.precision.formats import FloatFormat  # noqa: E402

VECTORS = ROOT / "tests" / "precision" / "conformance" / "vectors.json"
RESULTS = ROOT / "docs" / "conformance" / "tool_results.json"


def _element(vectors: dict[str, Any], g: dict[str, Any]) -> tuple[np.ndarray, FloatFormat]:
    return C.inputs_of(vectors, g), C.format_of(g["format"])


def torch_casts(vectors: dict[str, Any]):
    import torch

    dtypes = {n: getattr(torch, n) for n in ("bfloat16", "float16", "float8_e4m3fn",
                                             "float8_e5m2", "float8_e4m3fnuz",
                                             "float8_e5m2fnuz", "float8_e8m0fnu")}

    def run(g: dict[str, Any]):
        if g["kind"] != "element" or g["format"] not in dtypes:
            return None
        if g["rounding"] != "nearest_even" or not g["subnormals"]:
            return None  # a cast rounds to nearest even, keeping subnormals
        x, _ = _element(vectors, g)
        y = torch.from_numpy(x.copy()).to(dtypes[g["format"]]).to(torch.float64)
        return y.numpy()

    return run


def torchao_mx(vectors: dict[str, Any]):
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
    from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

    elems = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
             "float6_e2m3fn": DTYPE_FP6_E2M3, "float6_e3m2fn": DTYPE_FP6_E3M2,
             "float4_e2m1fn": torch.float4_e2m1fn_x2}
    modes = {"floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL,
             "even": ScaleCalculationMode.EVEN, "ceil_amax": ScaleCalculationMode.CEIL}

    def run(g: dict[str, Any]):
        if g["kind"] != "mx" or g["scale_rule"] not in modes:
            return None
        k = g["block_size"]
        x = torch.from_numpy(C.inputs_of(vectors, g).copy()).reshape(-1, k)
        dt = elems[g["format"]]
        scale, data = to_mx(x, dt, k, modes[g["scale_rule"]])
        y = to_dtype(data, scale, dt, k, torch.float32)
        codes = scale.view(torch.uint8).reshape(-1).numpy()
        return codes, y.reshape(-1).to(torch.float64).numpy()

    return run


def torchao_elements(vectors: dict[str, Any]):
    """torchao's own fp4/fp6 casts (the MX element casts), on the element groups."""
    import torch
    from torchao.prototype.mx_formats import kernels as K

    casts = {"float4_e2m1fn": (K.f32_to_f4_unpacked, K.f4_unpacked_to_f32),
             "float6_e2m3fn": (K.f32_to_f6_e2m3_unpacked, K.f6_e2m3_unpacked_to_f32),
             "float6_e3m2fn": (K.f32_to_f6_e3m2_unpacked, K.f6_e3m2_unpacked_to_f32)}

    def run(g: dict[str, Any]):
        if g["kind"] != "element" or g["format"] not in casts:
            return None
        if g["rounding"] != "nearest_even" or not g["subnormals"]:
            return None
        x, _ = _element(vectors, g)
        to, back = casts[g["format"]]
        return back(to(torch.from_numpy(x.copy()))).to(torch.float64).numpy()

    return run


def unit_scaling(vectors: dict[str, Any]):
    import torch
    from unit_scaling.formats import FPFormat

    def run(g: dict[str, Any]):
        if g["kind"] != "element" or not g["subnormals"]:
            return None
        if g["rounding"] not in ("nearest_even", "nearest_toward_zero"):
            return None  # unit-scaling rounds "nearest" (and stochastically)
        x, fmt = _element(vectors, g)
        if fmt.exponent_bits not in (4, 5) or fmt.bits != 8:
            return None  # its formats: E4M3 and E5M2 ("FPFormat(4, 3)", "FPFormat(5, 2)")
        f = FPFormat(fmt.exponent_bits, fmt.mantissa_bits, rounding="nearest")
        return f.quantise(torch.from_numpy(x.copy())).to(torch.float64).numpy()

    return run


_PYCHOP_RMODE = {"nearest_even": 1, "up": 2, "down": 3, "toward_zero": 4,
                 "nearest_toward_zero": 7, "nearest_away": 8}


def pychop(vectors: dict[str, Any]):
    from pychop.np.lightchop import LightChop_

    def run(g: dict[str, Any]):
        if g["kind"] != "element" or g["rounding"] not in _PYCHOP_RMODE:
            return None
        x, fmt = _element(vectors, g)
        if fmt.inf_nan != "ieee" and g["format"] not in ("float8_e4m3fn", "float8_e4m3fnuz"):
            return None  # IEEE-style formats only (run on two OCP/FNUZ groups to show why)
        ch = LightChop_(fmt.exponent_bits, fmt.mantissa_bits, rmode=_PYCHOP_RMODE[g["rounding"]],
                        subnormal=g["subnormals"])
        with np.errstate(all="ignore"):
            return np.asarray(ch(x.astype(np.float64)), dtype=np.float64)

    return run


TOOLS = {"torch": torch_casts, "torchao.mx": torchao_mx, "torchao.fp4_fp6": torchao_elements,
         "unit_scaling": unit_scaling, "pychop": pychop}
PACKAGES = {"torch": "torch", "torchao.mx": "torchao", "torchao.fp4_fp6": "torchao",
            "unit_scaling": "unit-scaling", "pychop": "pychop"}


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {p: version(p) for p in sorted(set(PACKAGES.values()))}
    out["numpy"] = np.__version__
    out["python"] = platform.python_version()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vectors", type=Path, default=VECTORS)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    args = p.parse_args(argv)
    vectors = json.loads(args.vectors.read_text())
    results: dict[str, Any] = {"versions": versions(), "package_of": PACKAGES, "tools": {}}
    for name in args.tools:
        res = C.run_tool(vectors, TOOLS[name](vectors))
        results["tools"][name] = res
        counts: dict[str, int] = {}
        for r in res.values():
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"{name:<16} {counts}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
