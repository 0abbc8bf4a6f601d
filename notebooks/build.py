"""Write the companion notebooks (``notebooks/*.ipynb``) from their sources (``notebooks/src/*.py``).

A source is a Python file in the "percent" format that Jupyter tools read: ``# %%`` starts a code
cell and ``# %% [markdown]`` a markdown cell whose lines are comments (``# `` is removed). The
notebooks are written with no outputs and fixed cell ids, so a rebuild of an unchanged source
gives the same file byte for byte, and ``tests/notebooks`` checks that the committed notebooks are
the build of their sources.

    python notebooks/build.py            # rebuild every notebook
    python notebooks/build.py --check    # exit 1 when a notebook differs from its source's build
"""  # noqa: E501 - its first line is the --help description, one line

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}


def parse(text: str) -> list[tuple[str, str]]:
    """The cells of a percent-format source: ``[(kind, source)]``, kind 'code' or 'markdown'."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# %%"):
            marker = line[4:].strip()
            if marker not in ("", "[markdown]"):
                raise ValueError(f"unknown cell marker {line!r}: use '# %%' or '# %% [markdown]'")
            cells.append(("markdown" if marker else "code", []))
            continue
        if not cells:
            if line.strip():
                raise ValueError("a source must start with a '# %%' cell marker")
            continue
        kind, lines = cells[-1]
        if kind == "markdown" and line.strip():
            if not line.startswith("#"):
                raise ValueError(f"a markdown cell's lines must be comments; got {line!r}")
            line = line[2:] if line.startswith("# ") else line[1:]
        elif kind == "markdown":
            line = ""
        lines.append(line)
    return [(kind, "\n".join(lines).strip("\n")) for kind, lines in cells]


def build(source: Path) -> nbformat.NotebookNode:
    """The notebook of one source file: outputs empty, execution counts None, ids cell-00, ..."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    for i, (kind, text) in enumerate(parse(source.read_text(encoding="utf-8"))):
        new = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        nb.cells.append(new(text, id=f"cell-{i:02d}"))
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def sources() -> list[Path]:
    return sorted(SOURCES.glob("*.py"))


def target(source: Path) -> Path:
    return HERE / f"{source.stem}.ipynb"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only compare: exit 1 when a notebook is not its source's build")
    args = parser.parse_args(argv)
    stale = []
    for src in sources():
        text = render(build(src))
        out = target(src)
        if args.check:
            if not out.exists() or out.read_text(encoding="utf-8") != text:
                stale.append(out.name)
        else:
            out.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run python notebooks/build.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
