"""The ensemble benchmark's figures in docs/training.md are the ones the runs printed
(docs/benchmarks/train_ensemble.txt, and the benchmark shape's run beside it): the table after
``<!-- from PATH -->`` holds exactly the file's result lines, cell for cell; each run compares
two versions of the code (``--compare``), each result line naming the code it measured."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"
RUN = "docs/benchmarks/train_ensemble.txt"
RUNS = (RUN, "docs/benchmarks/train_ensemble_bench.txt")


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
    """The cells of every result line of the run (the code measured, then a shape's name)."""
    return [line.split() for line in text.splitlines()
            if line.split()[1:2] in (["lab"], ["bench"], ["long"])]


@pytest.mark.parametrize("run", RUNS)
def test_the_table_is_the_run(run):
    text = (ROOT / run).read_text()
    assert text.startswith("$ ") and "benchmarks/train_ensemble.py" in text.splitlines()[0]
    assert "--compare" in text.splitlines()[0]
    rows = result_rows(text)
    assert rows and all(len(r) == 14 for r in rows)
    assert len({r[0] for r in rows}) == 2  # before and after, side by side
    pairs = [rows[i:i + 2] for i in range(0, len(rows), 2)]  # each (shape, M) by both versions
    assert all(len({r[0] for r in p}) == 2 and len({tuple(r[1:3]) for r in p}) == 1
               for p in pairs)
    assert table_after_marker(DOC.read_text(), run) == rows


def test_the_goal_rows_were_measured():
    """The engine's goals read the lab shape at 8 members and the benchmark shape's best
    against PyTorch: both are in the committed runs."""
    shapes = {tuple(r[1:3]) for run in RUNS for r in result_rows((ROOT / run).read_text())}
    assert ("lab", "8") in shapes and ("bench", "1") in shapes


def test_a_changed_figure_is_caught():
    doc = (f"<!-- from {RUN} -->\n| code | shape | M |\n|---|---|---|\n| abc | lab | 1 | 16.93 |"
           f"\n\nafter\n")
    run = "code shape M alone\nabc   lab      1    16.93\n"
    assert table_after_marker(doc, RUN) == result_rows(run)
    assert table_after_marker(doc.replace("16.93", "16.94"), RUN) != result_rows(run)
    with pytest.raises(AssertionError, match="one"):
        table_after_marker(doc, "docs/no/such/file.txt")


PROFILE = "docs/benchmarks/profile_ensemble.txt"


def profile_rows(text: str) -> list[list[str]]:
    """The cells of every phase line of benchmarks/profile_ensemble.py's table (the phase's
    name, which may hold spaces, in its first 22 columns; then one figure per version)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("phase "))
    return [[line[:22].strip(), *line[22:].split()] for line in lines[start + 1:]
            if line.strip() and not line.startswith(("#", "$"))]


def test_the_profile_table_is_the_run():
    text = (ROOT / PROFILE).read_text()
    assert text.startswith("$ ") and "benchmarks/profile_ensemble.py" in text.splitlines()[0]
    assert "--compare" in text.splitlines()[0]
    rows = profile_rows(text)
    assert [r[0] for r in rows][-2:] == ["other", "total"] and all(len(r) == 3 for r in rows)
    assert table_after_marker(DOC.read_text(), PROFILE) == rows


def test_a_changed_profile_figure_is_caught():
    run = ("$ python benchmarks/profile_ensemble.py --compare a b\nshape lab\n"
           f"{'phase':22}{'a':>16}{'b':>16}\n{'linear products':22}{1.5:>16.3f}{1.25:>16.3f}\n")
    doc = (f"<!-- from {PROFILE} -->\n| phase | a | b |\n|---|---|---|\n"
           f"| linear products | 1.500 | 1.250 |\n")
    assert table_after_marker(doc, PROFILE) == profile_rows(run)
    assert table_after_marker(doc.replace("1.250", "1.260"), PROFILE) != profile_rows(run)
