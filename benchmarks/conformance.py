"""normlab's conformance suite: write the golden vectors, or the docs' tables from the tools'
raw results.

    python benchmarks/conformance.py generate   # tests/precision/conformance/vectors.json
    .venv-conformance/bin/python benchmarks/conformance_tools.py    # docs/conformance/...
    .venv-conformance/bin/python benchmarks/conformance_blocks.py   # docs/conformance/block_...
    python benchmarks/conformance.py table      # the generated parts of docs/numerics.md

``make conformance`` runs the element and MX steps; the block dialects' run needs the sources
pinned in benchmarks/conformance_sources.txt (its docstring says how). The tables are rebuilt
from the committed raw results files alone (``tests/precision/test_conformance.py`` checks that
the committed page is what this writes), so CI needs none of the other tools.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from normlab.precision import block_conformance as B  # noqa: E402
from normlab.precision import conformance as C  # noqa: E402

VECTORS = ROOT / "tests" / "precision" / "conformance" / "vectors.json"
RESULTS = ROOT / "docs" / "conformance" / "tool_results.json"
BLOCK_RESULTS = ROOT / "docs" / "conformance" / "block_results.json"
PAGE = ROOT / "docs" / "numerics.md"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["generate", "table", "check"])
    args = p.parse_args(argv)
    if args.command == "generate":
        VECTORS.parent.mkdir(parents=True, exist_ok=True)
        VECTORS.write_text(C.dump_vectors(C.make_vectors()))
        print(f"wrote {VECTORS.relative_to(ROOT)}")
        return 0
    vectors = json.loads(VECTORS.read_text())
    results = json.loads(RESULTS.read_text())
    page = C.fill_page(PAGE.read_text(), vectors, results)
    page = B.fill_page(page, json.loads(BLOCK_RESULTS.read_text()))
    if args.command == "check":
        ok = page == PAGE.read_text()
        print("docs/numerics.md is up to date" if ok else "docs/numerics.md is stale: run "
              "python benchmarks/conformance.py table")
        return 0 if ok else 1
    PAGE.write_text(page)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
