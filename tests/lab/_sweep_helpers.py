"""Shared by the sweep tests: a tiny base config as TOML, spec writing, file snapshots, a probe
that a pool worker runs."""

import os
from pathlib import Path

# A run of a few steps of a 1-layer, 16-wide model: well under a second once imports are done.
TINY_BASE = """
[base]
steps = {steps}
warmup = 1
batch_size = 4
eval_interval = 3
eval_batches = 1
[base.model]
n_layers = 1
d_model = 16
n_heads = 2
seq_len = 8
"""

FOUR_POINTS = """
[grid]
lr = [1e-3, 1e-2]
model.placement = ["pre", "post"]
"""


def write_spec(directory: Path, body: str = FOUR_POINTS, *, steps: int = 6, name: str = "spec.toml",
               head: str = "") -> Path:
    """``head`` (top-level keys such as seeds), the tiny [base], then ``body``."""
    path = Path(directory) / name
    path.write_text(head + TINY_BASE.format(steps=steps) + body)
    return path


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``root``: relative path -> (mtime_ns, contents)."""
    root = Path(root)
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def temp_files(root: Path) -> list[str]:
    return [str(p) for p in Path(root).rglob("*") if p.name.endswith(".tmp")]


def env_probe(arg):
    """What a pool worker sees: its thread variables, its pid."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
    return {"env": {k: os.environ.get(k) for k in names}, "pid": os.getpid(), "arg": arg}


def crash(arg):
    """A task whose worker process dies (as if killed)."""
    os._exit(3)
