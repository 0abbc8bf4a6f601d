"""The code-quality gate of issue 23 that no linter has: no function in src/ over 60 lines.

(Lines over 100 columns, lint and types are ``ruff check .`` and ``mypy``, which ``make test``
runs before pytest with the configuration in pyproject.toml.) The whole-tree gate is
``xfail(strict=False)`` until the lint pass after the merge splits the offenders in
:data:`KNOWN_LONG` (``python tests/test_style.py`` prints the current ones); then the mark is
removed. Meanwhile no *new* function over 60 lines gets in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
MAX_FUNCTION_LINES = 60

# Functions in src/ over 60 lines when the gate was written (file, function, lines). The lint
# pass splits them; the test lists what is left either way.
KNOWN_LONG = {
    ("normlab/functional/attention.py", "attention_forward"),
    ("normlab/functional/batchnorm.py", "batch_norm_forward"),
    ("normlab/lab/commands/bench.py", "run"),
    ("normlab/lab/commands/sweep.py", "main"),
    ("normlab/lab/commands/train.py", "_build"),
    ("normlab/lab/inspect_page.py", "render"),
    ("normlab/lab/sweep/runner.py", "run_sweep"),
    ("normlab/lab/sweep/spec.py", "parse_spec"),
    ("normlab/lab/sweep/summary.py", "summarize"),
    ("normlab/models/hf.py", "load_hf"),
    ("normlab/models/hf.py", "save_hf"),
    ("normlab/models/inspect.py", "inspect_model"),
    ("normlab/train/checkpoint.py", "check_run"),
    ("normlab/train/trainer.py", "train_step"),
}


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


@pytest.mark.xfail(strict=False, reason="issue 23: the functions in KNOWN_LONG are split in the "
                   "lint pass after the merge; remove this mark then")
def test_no_function_in_src_is_over_60_lines():
    long = long_functions()
    assert not long, "\n".join(f"src/{p}:{name} has {n} lines (> 60)" for p, name, n in long)


def test_no_new_function_over_60_lines():
    """Holds now: a function not in KNOWN_LONG over 60 lines fails at once."""
    new = [t for t in long_functions() if t[:2] not in KNOWN_LONG]
    assert not new, "\n".join(f"src/{p}:{name} has {n} lines (> 60)" for p, name, n in new)


if __name__ == "__main__":
    for p, name, n in long_functions():
        print(f"src/{p}:{name}: {n} lines")
