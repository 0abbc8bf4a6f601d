"""benchmarks/gpu_dialects.py without a GPU: its refusal (exit 2, one line), and its comparison
logic with the device forced to the CPU (every dialect equal; a changed bit caught; NaNs equal)."""

import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_dialects.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_dialects", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_refuses_in_one_line_without_cuda():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "no CUDA device" in r.stderr


def test_every_dialect_compared_on_the_cpu_is_equal():
    mod = _module()
    names = [n for n, _ in mod.dialects()]
    assert len(names) == len(set(names)) >= 40
    kinds = {getattr(p.scaling, "kind", None) for _, p in mod.dialects()}
    from normlab.torch.quantize import TORCH_SCALINGS
    assert set(TORCH_SCALINGS) | {None} == kinds  # every torch dialect, and unscaled formats
    pick = ["nvfp4 te 1x16 stochastic", "nvfp4 te 16x16", "delayed e5m2", "mx e4m3 rceil",
            "nvfp4 wgrad.grad_output", "fp8 rows"]
    out = io.StringIO()
    assert mod.run("cpu", names=pick, out=out) == 0
    lines = out.getvalue().splitlines()
    assert sorted(ln.split("  ")[0].strip() for ln in lines) == sorted(pick)
    assert all(ln.split("mismatches")[1].split()[0] == "0" for ln in lines)


def test_a_changed_bit_is_a_mismatch_and_the_exit_code_says_so(monkeypatch):
    mod = _module()

    def off_by_one_bit(p, t, **kw):
        y = mod.apply(p, t, **kw).clone()
        flat = y.view(-1).view(torch.int32)
        flat[0] ^= 1
        return y
    out = io.StringIO()
    assert mod.run("cpu", names=["nvfp4 te 1x16"], apply_device=off_by_one_bit, out=out) > 0
    monkeypatch.setattr(mod, "run", lambda device: 3)
    assert mod.main(["--device", "cpu"]) == 1
    monkeypatch.setattr(mod, "run", lambda device: 0)
    assert mod.main(["--device", "cpu"]) == 0


def test_two_nans_are_equal_and_a_nan_against_a_number_is_not():
    mod = _module()
    a = torch.tensor([np.nan, 1.0, -0.0])
    assert mod._mismatches(a, torch.tensor([-np.nan, 1.0, -0.0])) == 0
    assert mod._mismatches(a, torch.tensor([0.0, 1.0, 0.0])) == 2
