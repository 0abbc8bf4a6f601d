"""Per-block statistics (precision.blockstats) against the quantities computed directly from the
dialects' own outputs and from their definitions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from normlab.precision import mx_quantize, nvfp4_quantize
from normlab.precision.blockstats import WHAT_IF, block_stats, format_stats, what_if

MX4 = {"format": "float4_e2m1fn", "scaling": {"kind": "mx"}}
NV = {"format": "float4_e2m1fn", "scaling": {"kind": "nvfp4"}}


def _x(shape=(64, 128), seed=0, spread=20):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, 0, shape[:-1] + (1,)))
            ).astype(np.float32)


def test_scale_histogram_counts_each_blocks_binade():
    x = _x()
    s = block_stats(x, MX4)
    scales = mx_quantize(x, "float4_e2m1fn").scales
    e, n = np.unique(np.floor(np.log2(scales)).astype(int), return_counts=True)
    assert s.scale_binades == dict(zip(e.tolist(), n.tolist()))
    assert s.blocks == scales.size == sum(s.scale_binades.values())
    assert s.scale_min == scales.min() and s.scale_max == scales.max()
    assert s.scale_log2_std == pytest.approx(np.std(np.log2(scales.astype(np.float64))))


def test_top_band_is_the_share_scaled_into_4_to_6():
    """Blocks of E2M1 under MX's floor rule with amax 6 (X = 1): the values in (4, 6] are the
    top band; 4 itself is not in it."""
    x = np.zeros((4, 32), np.float32)
    x[:, 0] = 6.0
    x[:, 1:9] = 4.5
    x[:, 9:13] = 4.0
    x[:, 13:] = 1.0
    s = block_stats(x, MX4, rowcol=False)
    assert s.top_band == pytest.approx(9 / 32) and s.top_band_interval == (4.0, 6.0)


def test_dynamic_range_is_tes_blockwise_definition():
    """log2(max |x|) - log2(min non-zero |x|) per block; all-zero blocks count 0."""
    x = np.zeros((3, 16), np.float32)
    x[0, :2] = [1.0, 2.0**-10]
    x[1, :3] = [3.0, -0.375, 0.0]
    s = block_stats(x, NV, rowcol=False)
    assert s.dynamic_range_max == 10.0 and s.dynamic_range_median == 3.0


def test_te_nvfp4_reports_scales_below_e4m3s_normal_range():
    x = _x(spread=40)
    te = block_stats(x, NV, rowcol=False)
    ao = block_stats(x, {**NV, "scaling": {"kind": "nvfp4", "dialect": "torchao"}}, rowcol=False)
    t = nvfp4_quantize(x)
    low = np.mean((t.scales > 0) & (t.scales < 2.0**-6))
    assert te.scales_low == pytest.approx(low) and te.scales_low > 0
    assert te.scales_zero == pytest.approx(np.mean(t.scales == 0))
    assert ao.scales_low == 0 and ao.scales_zero == 0


def test_row_and_column_quantization_disagree_for_1d_blocks_only():
    x = _x((64, 64), 1)
    one_d = block_stats(x, NV)
    assert 0 < one_d.rowcol_differ < 1 and one_d.rowcol_rel_diff > 0
    rows = nvfp4_quantize(x).dequantize()
    cols = nvfp4_quantize(x.T).dequantize().T
    assert one_d.rowcol_differ == pytest.approx(np.mean(rows != cols))
    two_d = block_stats(x, {**NV, "scaling": {"kind": "nvfp4", "two_d": True}})
    assert two_d.rowcol_differ == 0 and two_d.rowcol_rel_diff == 0
    assert block_stats(x[0], NV).rowcol_differ is None  # a vector has no columns


def test_what_if_runs_every_dialect_and_is_json():
    x = _x((128, 256), 2)
    stats = what_if(x)
    assert list(stats) == list(WHAT_IF)
    json.dumps({k: v.to_dict() for k, v in stats.items()})
    table = format_stats(stats)
    assert len(table.splitlines()) == 1 + len(WHAT_IF)
    vec = what_if(x[0])
    assert "nvfp4_16x16" not in vec and "nvfp4" in vec
    rot = block_stats(x, {"format": "float4_e2m1fn", "scaling": {"kind": "hadamard",
                                                                 "scaling": {"kind": "nvfp4"}}})
    assert rot.blocks == x.size // 16


def test_bad_arguments():
    with pytest.raises(ValueError, match="need a scaling dialect"):
        block_stats(_x(), "float8_e4m3fn")
    with pytest.raises(TypeError, match="x"):
        block_stats(np.arange(4), MX4)
