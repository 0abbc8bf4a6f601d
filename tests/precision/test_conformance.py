"""The conformance suite: the committed golden vectors are what normlab computes, agree with
ml_dtypes wherever ml_dtypes defines the result, and the committed table in docs/numerics.md is
what the table script writes from the committed raw results of the other tools."""

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from normlab.precision import FORMATS, quantize
from normlab.precision import conformance as C

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "precision" / "conformance" / "vectors.json"
RESULTS = ROOT / "docs" / "conformance" / "tool_results.json"
PAGE = ROOT / "docs" / "numerics.md"


@pytest.fixture(scope="module")
def vectors():
    return json.loads(VECTORS.read_text())


def test_committed_vectors_are_what_normlab_writes(vectors):
    """Inputs and expected results (the versions in the header are where it was written)."""
    made = json.loads(C.dump_vectors(C.make_vectors()))
    assert made["inputs"] == vectors["inputs"] and made["groups"] == vectors["groups"]
    assert vectors["format_version"] == C.FORMAT_VERSION


def test_the_vectors_cover_every_named_format_rule_and_mode(vectors):
    ids = {g["id"] for g in vectors["groups"]}
    for name in FORMATS:
        if name not in ("float32", "tfloat32"):
            assert f"{name}/nearest_even/default/subnormals" in ids
    for rule in C.MX_RULES:
        assert f"mx/float4_e2m1fn/{rule}" in ids
    for mode in ("nearest_away", "nearest_toward_zero", "toward_zero", "up", "down"):
        assert f"float8_e4m3/{mode}/default/subnormals" in ids


def test_vectors_agree_with_ml_dtypes_where_it_defines_the_result(vectors,
                                                                  ml_dtypes_before_0_7):
    """Round to nearest even with the format's own overflow is ml_dtypes' float32 cast; the
    documented departures: NaN in the formats without NaN (ml_dtypes stores -0 there), and
    before ml_dtypes 0.7 E8M0 of the float32 subnormals in (2^-127, 1.5 2^-127)."""
    checked = 0
    for g in vectors["groups"]:
        if (g["kind"] != "element" or g["rounding"] != "nearest_even" or g["overflow"]
                or not g["subnormals"] or g["format"] not in FORMATS):
            continue
        x = C.inputs_of(vectors, g)
        dtype = getattr(ml_dtypes, g["format"], None) or np.dtype(g["format"])
        with np.errstate(invalid="ignore", over="ignore"):
            ml = x.astype(dtype).astype(np.float32)
        keep = np.ones(x.shape, bool)
        if FORMATS[g["format"]].inf_nan == "none":
            keep = ~np.isnan(x)
        if g["format"] == "float8_e8m0fnu" and ml_dtypes_before_0_7:
            keep = ~((x > 2.0**-127) & (x < 1.5 * 2.0**-127))
        ok = C.same_bits(C.from_hex(g["expected"])[keep], ml[keep])
        assert ok.all(), (g["id"], x[keep][~ok][:5])
        checked += 1
    assert checked == 13


def test_mx_vectors_scales_and_values(vectors):
    """Each block's code is its scale's E8M0 code, and the values are element * scale."""
    for g in vectors["groups"]:
        if g["kind"] != "mx":
            continue
        x = C.inputs_of(vectors, g)
        t = C.mx_quantize(x, g["format"], block_size=g["block_size"], scale_rule=g["scale_rule"])
        codes = np.array(g["expected_scales"])
        with np.errstate(invalid="ignore"):
            want = np.where(codes == 255, np.nan, np.ldexp(1.0, codes - 127))
        np.testing.assert_array_equal(t.scales.astype(np.float64), want)
        assert C.same_bits(C.from_hex(g["expected"]), t.dequantize()).all()


def test_check_and_explain_find_a_simulated_dialect(vectors):
    """A 'tool' that saturates e4m3fn (PyTorch's cast) differs on the default group, and explain
    names overflow='saturate'; one that rounds ties away is found too; a tool whose results
    are off by one code somewhere is left unexplained."""
    g = next(g for g in vectors["groups"] if g["id"] == "float8_e4m3fn/nearest_even/default/"
             "subnormals")
    x = C.inputs_of(vectors, g)
    sat = quantize(x, "float8_e4m3fn", overflow="saturate")
    r = C.check_group(g, sat)
    assert r["status"] == "differ" and r["n_differ"] > 0
    np.testing.assert_array_equal(C.tool_results(g, r), sat.astype(np.float64))
    e = C.explain(vectors, g, C.tool_results(g, r))
    assert e["unexplained"] == 0 and e["overflow"] == "saturate" and e["format"] == g["format"]
    away = quantize(x, "float8_e4m3fn", rounding="nearest_away")
    e = C.explain(vectors, g, C.tool_results(g, C.check_group(g, away)))
    assert e["unexplained"] == 0 and e["rounding"] == "nearest_away"
    bent = quantize(x, "float8_e4m3fn").astype(np.float64)
    i = int(np.flatnonzero(bent == 1.0)[0])
    bent[i] = 1.125
    e = C.explain(vectors, g, C.tool_results(g, C.check_group(g, bent)))
    assert e["unexplained"] == 1 and e["example"] == [1.0, 1.125, 1.0]
    assert C.check_group(g, C.from_hex(g["expected"]))["status"] == "agree"


def test_committed_table_is_what_the_script_writes_from_the_raw_results(vectors):
    results = json.loads(RESULTS.read_text())
    page = PAGE.read_text()
    assert C.fill_page(page, vectors, results) == page
    assert {"torch", "torchao.mx", "unit_scaling", "pychop"} <= set(results["tools"])
    r = subprocess.run([sys.executable, "benchmarks/conformance.py", "check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_page_needs_its_markers(vectors):
    with pytest.raises(ValueError, match="markers"):
        C.fill_page("no markers here", vectors, json.loads(RESULTS.read_text()))
