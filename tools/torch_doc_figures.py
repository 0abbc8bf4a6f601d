"""Write the tables of docs/torch.md that follow a ``<!-- from PATH -->`` marker from PATH: the
exhaustive quantize run's counts and the emulate benchmark's table, as those runs printed them
(tests/torch/test_torch_docs_figures.py checks that they are equal).

    python tools/torch_doc_figures.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "torch.md"
LINE = re.compile(r"^(\S+)\s+(\S+)\s+mismatches\s+(\d+) of (\d+)\s+\((\d+) s\)")


def table(path: str) -> list[str]:
    text = (ROOT / path).read_text()
    if "exhaustive" in path:
        rows = [m.groups() for m in map(LINE.match, text.splitlines()) if m]
        head = ["| format | rounding | mismatches | inputs | seconds |", "|---|---|---|---|---|"]
        return head + [f"| {' | '.join(r)} |" for r in rows]
    return [line for line in text.splitlines() if line.startswith("|")]


def main() -> int:
    lines = DOC.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        out.append(lines[i])
        m = re.fullmatch(r"<!-- from (\S+) -->", lines[i])
        i += 1
        if m:
            while i < len(lines) and lines[i].startswith("|"):
                i += 1  # the old table
            out += table(m.group(1))
    DOC.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
