"""Run the block dialects' conformance cases through the tools they follow, bit for bit.

    .venv-conformance/bin/python benchmarks/conformance_blocks.py --sources /path/to/mirrors
    python benchmarks/conformance.py table      # the generated tables of docs/numerics.md

Tools: TransformerEngine's Python references (``NVFP4QuantizerRef`` and the Hadamard transform
of ``reference_nvfp4.py``, ``BlockwiseQuantizerReference``), DeepGEMM's ``deep_gemm/utils/
math.py``, microxcaling's ``mx/`` (CPU path, ``custom_cuda=False``), read from the commits
pinned in ``benchmarks/conformance_sources.txt`` (``--sources DIR``: DIR/<owner>+<name>/repo or
DIR/<owner>+<name>, a git directory or work tree at that commit; their code is read, never
copied here), and torchao 0.18.0 from the ``conformance`` extra (its blockwise FP8 reference
functions are read from its installed ``kernels.py`` without importing Triton). Only
``normlab.precision`` is imported from normlab.

For every case of ``normlab.precision.block_conformance.CASES`` it builds the edge-heavy bulk
vectors from the seed, runs the tool and normlab, compares elements, scales and values bit for
bit, classifies each disagreeing block, and writes ``docs/conformance/block_results.json``
(counts, digests, one reproducer per class) and the small golden subset with the tools' outputs
``tests/precision/conformance/block_golden.json``.
"""

from __future__ import annotations

import argparse
import ast
import enum
import json
import os
import platform
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from normlab.precision import block_conformance as B  # noqa: E402

SOURCES_FILE = ROOT / "benchmarks" / "conformance_sources.txt"
RESULTS = ROOT / "docs" / "conformance" / "block_results.json"
GOLDEN = ROOT / "tests" / "precision" / "conformance" / "block_golden.json"
GOLDEN_BLOCKS = {"nvfp4": 32, "fp8_blocks": 8, "fp8_rows": 8, "mx": 32, "rht": 16}
GOLDEN_TILES = {"nvfp4": 16, "fp8_blocks": 1, "mx": 4}  # 2D cases
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def pinned() -> dict[str, str]:
    """repository -> commit from the sources file."""
    out = {}
    for line in SOURCES_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            repo, commit = line.split()[:2]
            out[repo] = commit
    return out


class Sources:
    """The pinned repositories' files, read with git at their commits."""

    def __init__(self, root: Path) -> None:
        self.root, self.commits = root, pinned()

    def git_dir(self, repo: str) -> Path:
        base = self.root / repo.replace("/", "+")
        return base / "repo" if (base / "repo").exists() else base

    def show(self, repo: str, path: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self._dot_git(repo)), "show",
                               f"{self.commits[repo]}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    def _dot_git(self, repo: str) -> Path:
        d = self.git_dir(repo)
        return d / ".git" if (d / ".git").exists() else d

    def extract(self, repo: str, path: str, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        arch = subprocess.run(["git", "--git-dir", str(self._dot_git(repo)), "archive",
                               self.commits[repo], path], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=arch.stdout, check=True)


def _module(name: str, src: str, extra: dict[str, Any] | None = None) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(extra or {})
    sys.modules[name] = m
    exec(compile(src, name, "exec"), m.__dict__)  # the pinned tool's own code, run as is
    return m


def load_te(src: Sources) -> tuple[types.ModuleType, types.ModuleType]:
    """TE's NVFP4 and blockwise-FP8 references, their package imports stubbed (the
    ``Quantizer`` base class and the GEMM enums are all they take from TE)."""
    for n in ("transformer_engine", "transformer_engine.pytorch",
              "transformer_engine.pytorch.custom_recipes", "references"):
        m = types.ModuleType(n)
        m.__path__ = []  # type: ignore[attr-defined]
        sys.modules[n] = m
    qt = types.ModuleType("transformer_engine.pytorch.quantized_tensor")

    class Quantizer:
        def __init__(self, rowwise: bool = True, columnwise: bool = True) -> None:
            self.rowwise_usage, self.columnwise_usage = rowwise, columnwise

    qt.QuantizedTensorStorage, qt.Quantizer = type("QuantizedTensorStorage", (), {}), Quantizer
    sys.modules[qt.__name__] = qt
    gemm = types.ModuleType("transformer_engine.pytorch.custom_recipes.gemm")
    gemm.GEMMType = enum.Enum("GEMMType", "FPROP DGRAD WGRAD")
    gemm.MMParams = object
    sys.modules[gemm.__name__] = gemm
    pkg = sys.modules["transformer_engine.pytorch.custom_recipes"]
    pkg.gemm = gemm
    te = "NVIDIA/TransformerEngine"
    pkg.reference_utils = _module("transformer_engine.pytorch.custom_recipes.reference_utils",
                                  src.show(te, "transformer_engine/pytorch/custom_recipes/"
                                           "reference_utils.py"))
    nv = _module("te_reference_nvfp4", src.show(
        te, "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py"))
    _module("references.quantize_scale_calc",
            src.show(te, "tests/pytorch/references/quantize_scale_calc.py"))
    bw = _module("te_blockwise_reference",
                 src.show(te, "tests/pytorch/references/blockwise_quantizer_reference.py"))
    return nv, bw


def load_torchao_blockwise() -> types.ModuleType:
    """torchao's blockwise FP8 torch references, read from its installed kernels.py (the
    module imports Triton at its top; these two functions need only torch)."""
    import torch
    import torchao.prototype.blockwise_fp8_training as pkg
    from torchao.float8.config import e4m3_dtype

    tree = ast.parse(Path(os.path.dirname(pkg.__file__), "kernels.py").read_text())
    want = ("torch_blockwise_scale_act_quant_lhs", "torch_blockwise_scale_weight_quant")
    body = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in want) or (
        isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "EPS")]
    return _module("torchao_blockwise_ref", ast.unparse(ast.Module(body=body, type_ignores=[])),
                   {"torch": torch, "e4m3_dtype": e4m3_dtype})


class Tools:
    """Each tool's adapter: inputs (float32 numpy) -> outputs as ``normlab_outputs`` returns
    them."""

    def __init__(self, src: Sources, tmp: Path) -> None:
        import torch

        self.torch = torch
        self.nv, self.bw = load_te(src)
        self.dg = _module("deepgemm_math", src.show("deepseek-ai/DeepGEMM",
                                                    "deep_gemm/utils/math.py"))
        self.ao_bw = load_torchao_blockwise()
        src.extract("microsoft/microxcaling", "mx", tmp)
        sys.path.insert(0, str(tmp))
        import mx.mx_ops

        self.mx = mx.mx_ops

    def run(self, case: B.Case, x: np.ndarray) -> dict[str, np.ndarray]:
        return getattr(self, f"{case.family}_{case.tool}")(case, self.torch.from_numpy(x))

    def nvfp4_te(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        torch, p = self.torch, case.params
        row = p.get("global_scale") == "row"
        ga = xt.abs().amax(dim=1).float() if row else torch.max(torch.abs(xt)).float().view(1)
        fos = p.get("four_over_six")
        q, s = self.nv.NVFP4QuantizerRef._quantize_blockwise_reference(
            xt, ga, 16, 16 if case.two_d else 1, pow_2_scales=False, row_scaled_nvfp4=row,
            nvfp4_use_4over6=fos is not None, nvfp4_e4m3_max=p.get("e4m3_max", 448),
            nvfp4_4over6_err_mode=(fos or "mae").upper(), eps=0.0)
        s = s.float().numpy()
        return {"elements": _fp4(q.numpy()), "scales": s[::16] if case.two_d else s}

    def nvfp4_torchao(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4
        from torchao.prototype.mx_formats.nvfp4_tensor import (
            nvfp4_quantize,
            per_tensor_amax_to_scale,
        )

        torch = self.torch
        pts = None
        if case.params.get("global_scale", "tensor") == "tensor":
            pts = per_tensor_amax_to_scale(torch.max(torch.abs(xt)))
        s, d = nvfp4_quantize(xt.contiguous(), 16, pts)
        el = f4_unpacked_to_f32(unpack_uint4(d)).numpy().reshape(xt.shape)
        return {"elements": el, "scales": s.float().numpy().reshape(xt.shape[0], -1)}

    def fp8_blocks_deepgemm(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        f = self.dg.per_block_cast_to_fp8 if case.two_d else self.dg.per_token_cast_to_fp8
        q, s = f(xt, bool(case.params["pow2"]))
        return {"elements": q.float().numpy(), "scales": s.numpy()}

    def fp8_blocks_te(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        r = self.bw.BlockwiseQuantizerReference().quantize(
            xt, self.torch.float8_e4m3fn, return_transpose=False, eps=0.0,
            pow_2_scales=bool(case.params["pow2"]),
            quant_tile_shape=(128, 128) if case.two_d else (1, 128), munge_scale_shapes=False)
        return {"elements": r.data.float().numpy(), "scales": r.scale.numpy()}

    def fp8_blocks_torchao(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        if case.two_d:
            q, s = self.ao_bw.torch_blockwise_scale_weight_quant(xt.contiguous(), 128)
        else:
            q, s = self.ao_bw.torch_blockwise_scale_act_quant_lhs(xt.contiguous(), 128)
        return {"elements": q.float().numpy(), "scales": s.contiguous().numpy()}

    def fp8_rows_torchao(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        from torchao.float8.float8_utils import amax_to_scale, to_fp8_saturated

        torch = self.torch
        am = torch.amax(torch.abs(xt), dim=-1, keepdim=True)
        s = amax_to_scale(am, torch.float8_e4m3fn, bool(case.params["pow2"]))
        q = to_fp8_saturated(xt.to(torch.float32) * s, torch.float8_e4m3fn)
        return {"elements": q.float().numpy(), "scales": s.numpy()}

    def mx_torchao(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        from torchao.prototype.mx_formats.config import ScaleCalculationMode as M
        from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
        from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

        torch = self.torch
        dt = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
              "float6_e2m3fn": DTYPE_FP6_E2M3, "float6_e3m2fn": DTYPE_FP6_E3M2,
              "float4_e2m1fn": torch.float4_e2m1fn_x2}[case.params["fmt"]]
        mode = {"floor": M.FLOOR, "rceil": M.RCEIL, "even": M.EVEN,
                "ceil_amax": M.CEIL}[case.params["scale_rule"]]
        scale, data = to_mx(xt.contiguous(), dt, 32, mode)
        v = to_dtype(data, scale, dt, 32, torch.float32).numpy().reshape(xt.shape)
        code = scale.view(torch.uint8).numpy().astype(np.int64).reshape(xt.shape[0], -1)
        s = np.where(code == 255, np.nan, np.ldexp(1.0, code - 127)).astype(np.float32)
        return {"scales": s, "values": v}

    def mx_microxcaling(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        names = {"float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2",
                 "float6_e3m2fn": "fp6_e3m2", "float6_e2m3fn": "fp6_e2m3",
                 "float4_e2m1fn": "fp4_e2m1", "mxint8": "int8", "mxint4": "int4",
                 "mxint2": "int2"}
        p = case.params
        y = self.mx._quantize_mx(xt.clone(), p.get("scale_bits", 8), names[p["fmt"]],
                                 shared_exp_method="max",
                                 axes=[-2, -1] if case.two_d else [-1], block_size=32,
                                 round=p["round"], flush_fp32_subnorms=False, custom_cuda=False)
        return {"values": y.numpy()}

    def rht_te(self, case: B.Case, xt: Any) -> dict[str, np.ndarray]:
        ru = sys.modules["transformer_engine.pytorch.custom_recipes.reference_utils"]
        q = self.nv.NVFP4QuantizerRef(dtype=ru.Fp4Formats.E2M1, with_rht=True)
        return {"values": q._apply_rht(xt).numpy()}


def _fp4(packed: np.ndarray) -> np.ndarray:
    p = packed.astype(np.uint8)
    codes = np.empty((p.shape[0], p.shape[1] * 2), np.uint8)
    codes[:, ::2], codes[:, 1::2] = p & 15, p >> 4
    return E2M1[codes]


def run_case(tools: Tools, case: B.Case, inputs: list[np.ndarray]) -> dict[str, Any]:
    """Counts, digests and classes of one case over its inputs."""
    blocks = values = 0
    classes: dict[str, dict[str, Any]] = {}
    ours_all, theirs_all = [], []
    for x in inputs:
        with np.errstate(all="ignore"):
            ours, theirs = B.normlab_outputs(case, x), tools.run(case, x)
        ours_all += [ours[k] for k in sorted(theirs) if k in ours]
        theirs_all += [theirs[k] for k in sorted(theirs) if k in ours]
        nblk, _, views = B.block_views(case, x, ours, theirs)
        blocks += nblk
        values += int(np.count_nonzero(np.isfinite(x) | ~np.isfinite(x)))
        for _, v in views:
            cid = B.classify(case, v)
            c = classes.setdefault(cid, {"blocks": 0, "values": 0, "reproducer": _repro(v)})
            c["blocks"] += 1
            c["values"] += _differing_values(v)
    return {"tool": case.tool, "blocks": blocks, "values": values,
            "disagreeing_blocks": sum(c["blocks"] for c in classes.values()),
            "disagreeing_values": sum(c["values"] for c in classes.values()),
            "input_digest": B.digest(inputs), "normlab_digest": B.digest(ours_all),
            "tool_digest": B.digest(theirs_all), "classes": classes}


def _differing_values(v: B.BlockView) -> int:
    n = 0
    for k in ("elements", "values"):
        if k in v.ours:
            n += int(np.count_nonzero(B.bits(v.ours[k]) != B.bits(v.theirs[k])))
    return n


def _repro(v: B.BlockView) -> dict[str, Any]:
    """The block's inputs and both sides' outputs, float32 as hex bit patterns."""
    def hx(a: Any) -> list[str]:
        return [f"{int(b):08x}" for b in np.atleast_1d(B.bits(a))]

    out: dict[str, Any] = {"x": hx(v.x), "amax": v.amax, "tensor_amax": v.tensor_amax}
    for k in v.ours:
        out[f"normlab_{k}"] = hx(v.ours[k])
        out[f"tool_{k}"] = hx(v.theirs[k])
    return out


def golden_case(tools: Tools, case: B.Case) -> dict[str, Any]:
    """The small golden subset: inputs from seed 1, the tool's outputs, and the positions
    where normlab's differ (each such block is classified in the bulk results)."""
    n = (GOLDEN_TILES if case.two_d else GOLDEN_BLOCKS)[case.family]
    inputs = B.case_inputs(case, seed=1, blocks=n)
    outs, diff = [], []
    for i, x in enumerate(inputs):
        with np.errstate(all="ignore"):
            theirs, ours = tools.run(case, x), B.normlab_outputs(case, x)
        outs.append({k: B.pack(a) for k, a in theirs.items() if k in ours})
        for k in theirs:
            if k in ours:
                d = np.flatnonzero(B.bits(ours[k]) != B.bits(theirs[k]))
                diff += [[i, k, int(j)] for j in d]
    return {"seed": 1, "blocks": n, "input_digest": B.digest(inputs), "outputs": outs,
            "differ": diff}


def one_reproducer_per_class(results: dict[str, Any]) -> None:
    """Keep each class's reproducer in the first case (in CASES order) that has the class."""
    seen: set[str] = set()
    for r in results["cases"].values():
        for cid, c in r["classes"].items():
            if cid in seen:
                c.pop("reproducer", None)
            elif "reproducer" in c:
                seen.add(cid)


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {p: version(p) for p in ("torch", "torchao")}
    out["numpy"], out["python"] = np.__version__, platform.python_version()
    out.update(pinned())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sources", type=Path, default=Path(os.environ.get(
        "NORMLAB_SOURCES", "/work/.mirror")))
    p.add_argument("--only", nargs="*", default=None, help="case ids (prefixes) to run")
    p.add_argument("--blocks", type=int, default=None, help="bulk blocks per case (a quick "
                   "look; the committed results use each case's size)")
    p.add_argument("--tmp", type=Path, default=Path("/tmp/normlab-conformance-sources"))
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--golden", type=Path, default=GOLDEN)
    p.add_argument("--merge", action="store_true", help="update the named cases in the "
                   "existing files, keep the others")
    p.add_argument("--golden-only", action="store_true", help="rewrite the golden subset of "
                   "the named cases only (the bulk results as they are)")
    args = p.parse_args(argv)
    tools = Tools(Sources(args.sources), args.tmp)
    cases = [c for c in B.CASES if not args.only or any(c.id.startswith(o) for o in args.only)]
    results = {"format_version": B.FORMAT_VERSION, "versions": versions(), "cases": {}}
    golden: dict[str, Any] = {"format_version": B.FORMAT_VERSION, "cases": {}}
    if args.merge:
        results["cases"] = json.loads(args.results.read_text())["cases"]
        golden["cases"] = json.loads(args.golden.read_text())["cases"]
    for case in cases:
        golden["cases"][case.id] = golden_case(tools, case)
        if args.golden_only:
            continue
        r = run_case(tools, case, B.case_inputs(case, 0, args.blocks))
        results["cases"][case.id] = r
        cls = {k: v["blocks"] for k, v in r["classes"].items()}
        print(f"{case.id:<48} {r['blocks']:>7} blocks, {r['disagreeing_blocks']:>6} differ "
              f"{cls}", flush=True)
    if args.golden_only:
        results["cases"] = json.loads(args.results.read_text())["cases"]
    one_reproducer_per_class(results)
    order = {c.id: i for i, c in enumerate(B.CASES)}
    for d in (results, golden):
        d["cases"] = dict(sorted(d["cases"].items(), key=lambda kv: order.get(kv[0], 1 << 30)))
    if not args.no_write:
        for path, data, indent in ((args.results, results, 1), (args.golden, golden, None)):
            path.parent.mkdir(parents=True, exist_ok=True)
            sep = None if indent else (",", ":")
            path.write_text(json.dumps(data, indent=indent, sort_keys=True, separators=sep)
                            + "\n")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
