"""``normlab bench`` on a tiny size: every row present, the out= rows write into the caller's
buffer, the copy rows and ratios consistent (no timing is checked)."""

import io

import pytest

from normlab.lab.commands import bench


def test_bench_rows_and_ratios():
    stream = io.StringIO()
    res = bench.run(64, [32], 2, ["layer_norm", "rms_norm"], with_ref=True, stream=stream)
    d = res["widths"]["32"]
    assert d["copy_ms"] > 0 and d["fresh_copy_ms"] > 0
    for op in ("layer_norm", "rms_norm"):
        rows = d["ops"][op]
        assert set(rows) == {"fwd", "fwd out=", "fwd+bwd"}
        out = rows["fwd out="]
        assert out["reference_ms"] is None and out["torch_ms"] is None
        assert out["kernel_over_same_form_copy"] == pytest.approx(out["kernel_over_copy"])
        fwd = rows["fwd"]  # allocating: set against the copy into a fresh array
        assert fwd["kernel_over_same_form_copy"] == pytest.approx(fwd["kernel_over_fresh_copy"])
    text = stream.getvalue()
    assert "fwd out=" in text and "into a new array" in text
