"""The counts and lists the documentation's prose states, generated from the registries.

A value stands between ``<!-- gen:KEY -->`` and ``<!-- /gen -->`` in README.md or a docs/*.md
page (``Hugging Face checkpoints of <!-- gen:families.count -->seven<!-- /gen --> families``);
KEY names its generator in ``GENERATORS``. The markers are HTML comments: GitHub and the site
show the value alone.

    python tools/doc_values.py           # rewrite every marked value (make tables runs it)
    python tools/doc_values.py --check   # exit status 1, naming each stale value

``tests/test_docs_values.py`` fails when a marked value differs from its generator, and when a
count of families is typed outside the markers.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"(<!-- gen:([\w.]+) -->)(.*?)(<!-- /gen -->)", re.S)
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve")


def number(n: int) -> str:
    """A count as prose writes it: a word up to twelve, digits above."""
    return WORDS[n] if 0 <= n < len(WORDS) else str(n)


def _families() -> tuple[str, ...]:
    from normlab.models.hf import FAMILIES

    return tuple(FAMILIES)


def _without_notebooks() -> list[str]:
    from normlab.lab import framework

    return [n for n in framework.registry() if not framework.load(n).CARD.notebooks]


GENERATORS: dict[str, Callable[[], str]] = {
    # the checkpoint families normlab.models.hf reads and writes (its family table)
    "families.count": lambda: number(len(_families())),
    "families.names": lambda: ", ".join(_families()),
    # the lab's experiments whose card names no companion notebook
    "experiments.without_notebooks": lambda: ", ".join(f"`{n}`" for n in _without_notebooks())
    or "none",
}


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold marked values: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def marked(text: str) -> list[tuple[str, str]]:
    """(KEY, value) of every marked value in ``text``, in order."""
    return [(m.group(2), m.group(3)) for m in MARKED.finditer(text)]


def render(text: str, values: dict[str, str] | None = None) -> str:
    """``text`` with every marked value generated again; an unknown KEY is a ValueError."""
    values = {} if values is None else values

    def value(m: re.Match) -> str:
        key = m.group(2)
        if key not in GENERATORS:
            raise ValueError(f"unknown generated value {key!r}; known: {', '.join(GENERATORS)}")
        if key not in values:
            values[key] = GENERATORS[key]()
        return f"{m.group(1)}{values[key]}{m.group(4)}"

    return MARKED.sub(value, text)


def stale(root: Path = ROOT) -> list[str]:
    """'page: KEY' for every marked value that differs from its generator."""
    values: dict[str, str] = {}
    out = []
    for page in pages(root):
        text = page.read_text(encoding="utf-8")
        fresh = dict(marked(render(text, values)))
        out += [f"{page.relative_to(root)}: {k}" for k, v in marked(text) if fresh[k] != v]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for line in bad:
            print(f"stale: {line} (run python tools/doc_values.py)", file=sys.stderr)
        return 1 if bad else 0
    from normlab._files import atomic_write

    values: dict[str, str] = {}
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(text, values)
        if new != text:
            atomic_write(page, new)
            print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
