"""The ensemble benchmark's figures in docs/training.md are the ones the run printed
(docs/benchmarks/train_ensemble.txt): the table after ``<!-- from PATH -->`` holds exactly the
file's result lines, cell for cell."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"
RUN = "docs/benchmarks/train_ensemble.txt"


def table_after_marker(text: str, path: str) -> list[list[str]]:
    """The body rows (cells) of the table that follows ``<!-- from path -->`` in ``text``."""
    lines = [line.strip() for line in text.splitlines()]
    marker = f"<!-- from {path} -->"
    assert lines.count(marker) == 1, f"one {marker!r} expected"
    rows = []
    for line in lines[lines.index(marker) + 1:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    assert len(rows) > 2, f"no table after {marker!r}"
    return rows[2:]  # (the header and the separator)


def result_rows(text: str) -> list[list[str]]:
    """The cells of every result line of the run (a shape's name first)."""
    return [line.split() for line in text.splitlines()
            if line.split()[:1] in (["lab"], ["bench"], ["long"])]


def test_the_table_is_the_run():
    text = (ROOT / RUN).read_text()
    assert text.startswith("$ ") and "benchmarks/train_ensemble.py" in text.splitlines()[0]
    rows = result_rows(text)
    assert {r[0] for r in rows} == {"lab", "bench", "long"} and all(len(r) == 13 for r in rows)
    assert table_after_marker(DOC.read_text(), RUN) == rows


def test_a_changed_figure_is_caught():
    doc = (f"<!-- from {RUN} -->\n| shape | M |\n|---|---|\n| lab | 1 | 16.93 |\n\nafter\n")
    run = "shape M alone\nlab      1    16.93\n"
    assert table_after_marker(doc, RUN) == result_rows(run)
    assert table_after_marker(doc.replace("16.93", "16.94"), RUN) != result_rows(run)
    with pytest.raises(AssertionError, match="one"):
        table_after_marker(doc, "docs/no/such/file.txt")
