"""benchmarks/train_step.py runs on a tiny model (no timing is checked): a row per thread count,
best against best, the model FLOPs, the sgemm fraction and the per-op profile are printed."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_train_step_benchmark_prints_the_table_and_the_profile():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/train_step.py"), "--layers", "1",
                        "--width", "16", "--heads", "2", "--seq", "8", "--batch", "2", "--vocab",
                        "16", "--threads", "1", "--repeats", "2", "--profile"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^\s+1\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\d+%\s+\d+%$", out,
                     re.M), out
    assert "best against best" in out and "GFLOP of matrix multiplies" in out
    for category in ("matmuls: linear layers", "GELU", "norms", "AdamW",
                     "other: model glue, Python", "minor page faults"):
        assert category in out, category
    # heads up to 16 wide run attention's compiled kernel (products and softmax in one call);
    # wider ones the per-matrix products around the softmax kernel
    assert "attention: kernel (products and softmax)" in out or "attention: softmax" in out
    assert "peak memory above the post-import baseline" in out


def test_model_flops_count_the_linear_and_attention_products():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    argv, sys.argv = sys.argv, ["train_step.py"]
    environ = dict(os.environ)  # the script sets the thread variables at import: put them back
    try:
        import train_step
    finally:
        sys.argv = argv
        sys.path.remove(str(ROOT / "benchmarks"))
        os.environ.clear()
        os.environ.update(environ)
    cfg = train_step.GPTConfig(vocab_size=64, seq_len=64, n_layers=4, d_model=128, n_heads=4)
    flops, shapes = train_step.model_flops(cfg, 16, 64)
    linear = 6 * 1024 * (4 * (3 * 128 * 128 + 128 * 128 + 2 * 128 * 512) + 128 * 64)
    attention = 4 * 6 * 2 * 16 * 4 * 64 * 64 * 32
    assert sum(shapes.values()) == linear
    assert flops == linear + attention
