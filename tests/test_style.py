"""The code-quality gate of issue 23 that no linter has: no function in src/ over 60 lines.

(Lines over 100 columns, lint and types are ``ruff check .`` and ``mypy``, which ``make test``
runs before pytest with the configuration in pyproject.toml.) ``python tests/test_style.py``
prints any offender.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
MAX_FUNCTION_LINES = 60


def long_functions(root: Path = SRC, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, str, int]]:
    """Every function (nested ones and methods too) of more than ``limit`` lines under ``root``:
    (path relative to root, name, lines), decorators not counted."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append((path.relative_to(root).as_posix(), node.name, n))
    return out


def test_the_function_length_counter_counts(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "m.py").write_text(f"def short():\n    pass\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == [("m.py", "long", 61)]
    method = "\n".join(f"        x{i} = {i}" for i in range(59))
    (tmp_path / "m.py").write_text(f"class A:\n    def ok(self):\n{method}\n")
    assert long_functions(tmp_path) == []  # 60 lines: within the limit


def test_no_function_in_src_is_over_60_lines():
    long = long_functions()
    assert not long, "\n".join(f"src/{p}:{name} has {n} lines (> 60)" for p, name, n in long)



if __name__ == "__main__":
    for p, name, n in long_functions():
        print(f"src/{p}:{name}: {n} lines")
