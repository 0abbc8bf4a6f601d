"""No import runs up the house from models/: the models (the checkpoint loader included) sit
below train/ and lab/ and import neither, at any depth of any function, and loading a checkpoint
brings neither into the process (the loader's memory check reads ``normlab._memory``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import normlab.models

MODELS = Path(normlab.models.__file__).parent
ABOVE = ("normlab.train", "normlab.lab")


def _package(path: Path) -> list[str]:
    """The package a file's relative imports start from: ["normlab", "models", "hf"]."""
    parts = ["normlab", *path.relative_to(MODELS.parent).with_suffix("").parts]
    return parts[:-1]  # a module's package, or an __init__'s own


def _imports(path: Path, text: str | None = None) -> list[str]:
    """Every module a file imports (relative imports resolved; function bodies too;
    ``importlib.import_module("...")`` and ``__import__("...")`` with a constant name)."""
    package = _package(path)
    text = path.read_text(encoding="utf-8") if text is None else text
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            out += [name] + [f"{name}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__")):
            out.append(node.args[0].value)
    return out


def test_no_module_under_models_imports_train_or_lab():
    files = sorted(MODELS.rglob("*.py"))
    assert MODELS / "hf" / "checkpoint.py" in files
    bad = [(str(p.relative_to(MODELS)), m) for p in files for m in _imports(p)
           if m.startswith(ABOVE)]
    assert not bad, bad
    # the scan resolves relative imports at every depth (a check that can fail)
    found = _imports(MODELS / "hf" / "checkpoint.py")
    assert "normlab.models.gpt.GPT" in found and "normlab._memory" in found
    assert "normlab.models.hf.families" in _imports(MODELS / "hf" / "__init__.py")


def test_the_scan_sees_a_lazy_upward_import():
    """The import checkpoint.py had (inside a function, three levels up) is found."""
    lazy = "def f():\n    from ...train.budget import format_bytes\n    return format_bytes\n"
    assert "normlab.train.budget.format_bytes" in _imports(MODELS / "hf" / "checkpoint.py", lazy)
    hidden = "import importlib\nm = importlib.import_module('normlab.lab.cli')\n"
    assert "normlab.lab.cli" in _imports(MODELS / "gpt.py", hidden)


def test_loading_a_checkpoint_imports_neither_train_nor_lab(tmp_path):
    pytest.importorskip("safetensors")
    from normlab.models import GPT, GPTConfig, save_hf

    cfg = GPTConfig(vocab_size=11, seq_len=8, n_layers=1, d_model=8, n_heads=2, norm="rmsnorm",
                    positions="rope", activation="swiglu", bias=False)
    path = save_hf(GPT(cfg, rng=np.random.default_rng(0)), tmp_path / "ck")
    code = ("import sys\n"
            "from normlab.models import load_hf, save_hf\n"
            f"save_hf(load_hf({str(path)!r}), {str(tmp_path / 'again')!r})\n"
            f"bad = [m for m in sys.modules if m.startswith({ABOVE!r})]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
