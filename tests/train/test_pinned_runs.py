"""Existing runs reproduce bit for bit: short runs of several placements, norms and precision
presets, and shortened versions of the lab recipes that read the per-step metrics, against the
results recorded before the measurements moved into probes (``data/pinned_runs.json``, written by
``data/record_pinned.py`` with the code of commit da85eb3 and the reductions' fast-math flags of
today's kernels, ``kernels._common.REDUCE``, which changed the last bits of every run once).
Every loss, metric, evaluation and the final parameters (a SHA-256 of their bytes) must be equal,
and the records' keys in the same order.

The runs are made in a process of their own under :mod:`normlab.portable`'s environment (the one
the recording was made under), with an empty numba cache: the last bits of a float32 run depend on
the instruction set NumPy, OpenBLAS and numba choose, and this pins it, so the comparison holds on
any x86-64 machine with AVX2.

Compiled in the process or loaded from numba's disk cache, the kernels give the same bits
(``tests/kernels/test_cache_bits.py``); the runs here compile in their process."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from normlab import portable
from normlab.train import TrainConfig, Trainer

PINNED = json.loads((Path(__file__).parent / "data" / "pinned_runs.json").read_text())


def _digest(params: dict) -> str:
    h = hashlib.sha256()
    for p in params.values():  # in the model's order; by value, not by name
        h.update(np.ascontiguousarray(p).tobytes())
    return h.hexdigest()


def _run_all(out: Path) -> None:
    """Every pinned case's run, from its recorded config, as the test compares it."""
    runs = {}
    for name, case in PINNED.items():
        t = Trainer(TrainConfig.from_dict(case["config"]))
        got = json.loads(json.dumps(t.run().to_dict()))  # through JSON, as the store keeps it
        got["params_sha256"] = _digest(t.params)
        runs[name] = got
    out.write_text(json.dumps(runs))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    why = portable.unsupported()
    if why is not None:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("pinned")
    env = portable.environ()
    env["NUMBA_CACHE_DIR"] = str(tmp / "numba")  # compiled in the process, as recorded
    subprocess.run([sys.executable, __file__, str(tmp / "runs.json")], env=env, check=True,
                   timeout=900)
    return json.loads((tmp / "runs.json").read_text())


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_run_reproduces_its_pinned_result_bit_for_bit(name, runs):
    case = PINNED[name]
    got = dict(runs[name])
    want = case["result"]
    config = got.pop("config")
    assert "probes" not in config  # the default probes are left out: the config as recorded
    # the same run: a field added since the recording (with its default) is not a difference
    assert set(want["config"]) <= set(config)
    assert TrainConfig.from_dict(config) == TrainConfig.from_dict(want["config"])
    for key in ("config", "wall_time_s", "tokens_per_s"):
        got.pop(key, None)
        want = {k: v for k, v in want.items() if k != key}
    assert list(got) == list(want)
    for step, (a, b) in enumerate(zip(got["history"], want["history"])):
        assert list(a) == list(b), f"step {step}: the record's keys"
        assert a == b, f"step {step}"
    assert got == want


if __name__ == "__main__":
    _run_all(Path(sys.argv[1]))
