"""accumulate_sum: a running sum in a low format, chunked, against a scalar loop written from the
definition, the swamping facts of precision.md, and the accumulation table of docs/numerics.md."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from normlab.precision import accumulate_sum, quantize

ROOT = Path(__file__).resolve().parents[2]


def _loop(terms, fmt, chunk):
    """The definition, one scalar at a time: each addition in float64, rounded once."""
    total, n = 0.0, len(terms)
    k = n if chunk is None else chunk
    for start in range(0, n, k):
        acc = 0.0
        for t in terms[start:start + k]:
            acc = float(quantize(np.float64(acc + float(np.float32(t))), fmt))
        total = acc if start == 0 else float(quantize(np.float64(total + acc), "float32"))
    return total


@pytest.mark.parametrize("fmt", ["bfloat16", "float16", "float8_e4m3fn"])
@pytest.mark.parametrize("chunk", [None, 1, 7, 32])
def test_matches_the_scalar_definition(fmt, chunk):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 100)) * np.exp(rng.uniform(-3, 3, (3, 100)))
    got = accumulate_sum(x, fmt, chunk=chunk)
    want = [_loop(row, fmt, chunk) for row in x]
    np.testing.assert_array_equal(got, want)


def test_swamping_facts():
    """1000 ones in bfloat16 stop at 256 (ml_dtypes' arr.sum()); chunks of 128 promoted to
    float32 recover 1000; float32 accumulation is exact here; an axis other than the last."""
    ones = np.ones(1000, np.float32)
    assert accumulate_sum(ones, "bfloat16") == 256.0
    assert accumulate_sum(ones, "bfloat16", chunk=128) == 1000.0
    assert accumulate_sum(ones, "float32") == 1000.0
    m = np.ones((1000, 2), np.float32)
    np.testing.assert_array_equal(accumulate_sum(m, "bfloat16", axis=0), [256.0, 256.0])
    assert accumulate_sum(np.zeros((2, 0)), "bfloat16").tolist() == [0.0, 0.0]


def test_stochastic_accumulation_keeps_growing():
    """Stochastic rounding does not stall: its sum of 1000 ones is near 1000 (Higham's
    harmonic-series point), nearest-even stops at 256."""
    s = accumulate_sum(np.ones((4, 1000)), "bfloat16", rounding="stochastic",
                       rng=np.random.default_rng(1))
    assert (np.abs(s - 1000) < 100).all()


def test_bad_arguments():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="chunk"):
        accumulate_sum(x, "bfloat16", chunk=0)
    with pytest.raises(ValueError, match="fmt: unknown format"):
        accumulate_sum(x, "bf16")
    with pytest.raises(ValueError, match="axis"):
        accumulate_sum(x, "bfloat16", axis=1)
    with pytest.raises(TypeError, match="needs rng"):
        accumulate_sum(x, "bfloat16", rounding="stochastic")
    with pytest.raises(ValueError, match="scalar"):
        accumulate_sum(np.float32(1), "bfloat16")


def _script():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import accumulation

    return accumulation


def test_committed_accumulation_table_is_generated_from_its_results():
    acc = _script()
    res = json.loads((ROOT / "docs" / "accumulation" / "results.json").read_text())
    page = (ROOT / "docs" / "numerics.md").read_text()
    assert acc.fill_page(page, res) == page


def test_accumulation_script_runs_small(tmp_path):
    out = tmp_path / "acc.json"
    r = subprocess.run([sys.executable, "benchmarks/accumulation.py", "--widths", "64",
                        "--rows", "1", "--chunks", "none", "--formats", "bfloat16", "--out",
                        str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert {x["kind"] for x in res["results"]} == {"rms", "softmax", "dot"}
