"""The figures docs/torch.md quotes are the ones its sources printed: the exhaustive quantize
run (docs/conformance/torch_exhaustive_quantize.txt) and the emulate benchmark
(docs/benchmarks/torch_emulate.txt). Each table in docs/torch.md that follows a marker
``<!-- from PATH -->`` must hold exactly PATH's figures."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "torch.md"
EXHAUSTIVE = "docs/conformance/torch_exhaustive_quantize.txt"
BENCHMARK = "docs/benchmarks/torch_emulate.txt"
LINE = re.compile(r"^(\S+)\s+(\S+)\s+mismatches\s+(\d+) of (\d+)\s+\((\d+) s\)")


def _table_after_marker(path: str) -> list[list[str]]:
    """The body rows (cells) of the table that follows ``<!-- from path -->`` in the doc."""
    lines = DOC.read_text().splitlines()
    marker = f"<!-- from {path} -->"
    assert lines.count(marker) == 1, f"docs/torch.md: one {marker!r} expected"
    rows = []
    for line in lines[lines.index(marker) + 1:]:
        if not line.strip():
            if rows:
                break
            continue
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    assert len(rows) > 2, f"no table after {marker!r}"
    return rows[2:]  # (the header and the separator)


def exhaustive_rows(text: str) -> list[list[str]]:
    """(format, rounding, mismatches, inputs, seconds) of every result line of the run."""
    return [list(m.groups()) for m in map(LINE.match, text.splitlines()) if m]


def test_exhaustive_counts_are_the_runs():
    text = (ROOT / EXHAUSTIVE).read_text()
    got = exhaustive_rows(text)
    assert got, "the run's file has no result lines"
    assert _table_after_marker(EXHAUSTIVE) == got
    formats = {row[0] for row in got}
    assert {"bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"} <= formats


def test_benchmark_figures_are_the_runs():
    text = (ROOT / BENCHMARK).read_text()
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")]
    assert rows and rows[0][0] == "step", "the benchmark's file has no table"
    assert _table_after_marker(BENCHMARK) == rows[1:]


def test_a_changed_figure_is_caught():
    text = "bfloat16         nearest_even  mismatches          0 of 4294967296  (44 s)\n"
    assert exhaustive_rows(text) == [["bfloat16", "nearest_even", "0", "4294967296", "44"]]
    assert exhaustive_rows(text.replace(" 0 of", " 3 of"))[0][2] == "3"
    with pytest.raises(AssertionError, match="one"):
        _table_after_marker("docs/no/such/file.txt")


def test_the_coverage_table_is_the_file():
    """docs/torch.md's coverage table is docs/conformance/torch_coverage.txt's (which
    tests/torch/test_torch_coverage.py keeps equal to the runs)."""
    path = "docs/conformance/torch_coverage.txt"
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in (ROOT / path).read_text().splitlines() if line.startswith("| ")]
    assert rows and rows[0][0] == "family"
    assert _table_after_marker(path) == rows[1:]
