"""benchmarks/size_cost.py plans an experiment's training without training: its first grid's
runs, steps and FLOPs, and the CPU hours at a rate calibrated on a store's finished runs."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def size_cost(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    environ = dict(os.environ)  # the script sets the thread variables at import: put them back
    import size_cost

    yield size_cost
    os.environ.clear()
    os.environ.update(environ)


def test_a_steps_flops_are_the_training_benchmarks_count(size_cost):
    from normlab.models import GPTConfig
    from normlab.train import TrainConfig

    model = GPTConfig(vocab_size=64, seq_len=64, n_layers=4, d_model=128, n_heads=4)
    linear = 6 * 1024 * (4 * (3 * 128 * 128 + 128 * 128 + 2 * 128 * 512) + 128 * 64)
    attention = 4 * 6 * 2 * 16 * 4 * 64 * 64 * 32  # as tests/benchmarks/test_train_step_script
    assert size_cost.step_flops(TrainConfig(model=model, batch_size=16)) == linear + attention


def test_the_first_grid_is_read_without_training(size_cost):
    from normlab.lab import framework as F
    from normlab.lab.experiments import dyt

    configs = size_cost.first_grid("dyt", "tiny", limit=60)
    config = F.configure(dyt, "tiny")
    assert configs and all(c.steps == config.base.steps for c in configs)
    assert len({c.seed for c in configs}) >= 2
    # an experiment measuring in-process past the limit is not estimated
    assert size_cost.first_grid("gradients-at-init", "quick", limit=0.05) is None


def test_the_table_uses_the_stores_rate(size_cost, tmp_path):
    # a store holding one finished run of deepnet-update's tiny grid, which took 2 CPU seconds
    configs = size_cost.first_grid("deepnet-update", "tiny", limit=60)
    assert configs
    run = tmp_path / "deepnet-update/sweep/abc/grid/runs/r0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(configs[0].to_dict()))
    (run / "status.json").write_text(json.dumps({"status": "done", "cpu_s": 2.0}))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/size_cost.py"), "--size", "tiny",
                        "--store", str(tmp_path), "--limit", "0.05", "dyt", "deepnet-update",
                        "gradients-at-init"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    rate = size_cost.step_flops(configs[0]) * configs[0].steps / 2.0
    assert f"rate: {rate / 1e9:.1f} GFLOP/s per worker, from 1 finished runs" in r.stdout
    dyt = re.search(r"^dyt\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+estimated", r.stdout, re.M)
    assert dyt, r.stdout
    assert re.search(r"^deepnet-update\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+estimated", r.stdout, re.M)
    assert re.search(r"^gradients-at-init\s+in-process \(not estimated\)", r.stdout, re.M)
