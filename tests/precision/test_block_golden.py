"""The block dialects against the tools they follow: normlab bit for bit against the outputs
TransformerEngine's references, DeepGEMM, torchao 0.18 and microxcaling gave on the golden
subset (``conformance/block_golden.json``, written by benchmarks/conformance_blocks.py), every
difference at a position the bulk run classified; and, on the whole bulk (10^5 blocks per case),
normlab's outputs are the ones the tools were compared with (their digest), with every
disagreement in a class and none unexplained; the page's tables are generated from the
results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from normlab.precision import block_conformance as B

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "precision" / "conformance" / "block_golden.json"
RESULTS = ROOT / "docs" / "conformance" / "block_results.json"
PAGE = ROOT / "docs" / "numerics.md"

golden = json.loads(GOLDEN.read_text())
results = json.loads(RESULTS.read_text())


def test_every_case_was_run_and_nothing_is_unexplained():
    assert set(results["cases"]) == set(B.CASE) == set(golden["cases"])
    for cid, r in results["cases"].items():
        assert "unexplained" not in r["classes"], cid
        assert r["disagreeing_blocks"] == sum(c["blocks"] for c in r["classes"].values())
        assert r["blocks"] >= B.CASE[cid].blocks, cid
    versions = results["versions"]
    assert versions["torchao"] == "0.18.0" and versions["torch"].startswith("2.13.0")
    pinned = (ROOT / "benchmarks" / "conformance_sources.txt").read_text()
    for repo in ("NVIDIA/TransformerEngine", "deepseek-ai/DeepGEMM", "microsoft/microxcaling"):
        assert f"{repo}" in pinned and versions[repo] in pinned


def test_the_tools_dialects_agree_on_every_block_they_define():
    """The cases where normlab follows the tool have no class but the documented ones."""
    tool_defects = {c.id for c in B.CLASSES if c.verdict == "tool defect"}
    for cid, r in results["cases"].items():
        if cid.startswith(("fp8_blocks/", "fp8_rows/")) or cid == "rht/te/bf16-values":
            assert r["classes"] == {}, cid  # bit for bit on every block
        if cid.startswith("nvfp4/te/"):
            assert set(r["classes"]) <= {"negative-zero", "nonfinite-input"}, cid
        assert not (set(r["classes"]) & tool_defects) or cid.split("/")[1] in (
            "torchao", "microxcaling"), cid


@pytest.mark.parametrize("cid", list(B.CASE))
def test_golden_subset_bit_for_bit(cid):
    case, g = B.CASE[cid], golden["cases"][cid]
    inputs = B.case_inputs(case, seed=g["seed"], blocks=g["blocks"])
    assert B.digest(inputs) == g["input_digest"]
    differ = {(i, k, j) for i, k, j in g["differ"]}
    n = 0
    for i, (x, outs) in enumerate(zip(inputs, g["outputs"])):
        with np.errstate(all="ignore"):
            ours = B.normlab_outputs(case, x)
        for key, spec in outs.items():
            theirs = B.unpack(spec)
            d = np.flatnonzero(B.bits(ours[key]) != B.bits(theirs))
            assert {(i, key, int(j)) for j in d} == {t for t in differ if t[:2] == (i, key)}
            n += theirs.size
    assert n > 0


@pytest.mark.slow
@pytest.mark.parametrize("cid", list(B.CASE))
def test_bulk_outputs_are_the_ones_compared(cid):
    """normlab's outputs on the 10^5-block bulk, digested as the tools' run digested them."""
    case, r = B.CASE[cid], results["cases"][cid]
    inputs = B.case_inputs(case, 0)
    assert B.digest(inputs) == r["input_digest"]
    outs = []
    keys = ("elements", "scales", "values")
    for x in inputs:
        with np.errstate(all="ignore"):
            ours = B.normlab_outputs(case, x)
        want = _tool_keys(case)
        outs += [ours[k] for k in sorted(want) if k in keys]
    assert B.digest(outs) == r["normlab_digest"]


def _tool_keys(case: B.Case) -> set[str]:
    """The outputs each tool's adapter returns (compared with normlab's)."""
    if case.family == "rht" or case.tool == "microxcaling":
        return {"values"}
    if case.family == "mx":
        return {"scales", "values"}
    return {"elements", "scales"}


def test_page_tables_are_generated_from_the_results():
    page = PAGE.read_text()
    assert B.fill_page(page, results) == page
    with pytest.raises(ValueError, match="markers"):
        B.fill_page("no markers", results)
