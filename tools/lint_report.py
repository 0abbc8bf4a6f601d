"""What the lint and type pass has left to fix, by file: ``python tools/lint_report.py``.

Prints (1) ruff's violations per rule, marking the ones ``ruff check --fix`` repairs safely,
(2) ruff's violations per file, split into auto-fixable and by hand, (3) mypy's errors per file
and per error code, (4) the functions in src/ over 60 lines (tests/test_style.py). The order of
the pass: ``ruff check --fix .`` (safe fixes only), then the rest by hand, file by file.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff() -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                        "--output-format", "json", "."], cwd=ROOT, capture_output=True, text=True)
    return json.loads(r.stdout or "[]")


def mypy() -> list[tuple[str, str]]:
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    found = re.findall(r"^([^:\n]+\.py):\d+: error: .*\[([a-z-]+)\]$", r.stdout, re.M)
    return [(path, code) for path, code in found]


def main() -> int:
    items = ruff()
    safe = {i["code"] for i in items if i.get("fix") and i["fix"].get("applicability") == "safe"}
    by_rule = collections.Counter(i["code"] for i in items)
    print(f"ruff: {len(items)} violations ('*': `ruff check --fix` repairs them)")
    for code, n in by_rule.most_common():
        print(f"  {n:5d} {code}{' *' if code in safe else ''}")
    by_file: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for i in items:
        fixable = bool(i.get("fix")) and i["fix"].get("applicability") == "safe"
        by_file[Path(i["filename"]).relative_to(ROOT).as_posix()][0 if fixable else 1] += 1
    print("ruff by file (auto-fixable, by hand):")
    for f, (a, b) in sorted(by_file.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {a:4d} {b:4d}  {f}")
    errors = mypy()
    print(f"mypy: {len(errors)} errors")
    for code, n in collections.Counter(c for _, c in errors).most_common():
        print(f"  {n:5d} {code}")
    print("mypy by file:")
    for f, n in collections.Counter(p for p, _ in errors).most_common():
        print(f"  {n:4d}  {f}")
    sys.path.insert(0, str(ROOT / "tests"))
    from test_style import long_functions

    print("functions in src/ over 60 lines:")
    for p, name, n in long_functions():
        print(f"  {n:4d}  src/{p}:{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
