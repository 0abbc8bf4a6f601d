"""normlab's own source as data: the import graph and a hash of what a module computes.

Both are read from the syntax tree, never by importing anything:

* :func:`import_graph` gives every module of the package the normlab modules it imports: at the
  top (``"import"``), inside a function (``"lazy"``), only for type checkers (``"typing"``, under
  ``if TYPE_CHECKING:``), or by a dotted name in a string (``"string"``: ``importlib`` and
  registries that name a module or a class as ``"normlab.nn.layers.LayerNorm"``; a string that
  is a dotted name as a whole, ``module`` or ``module:attribute``, not prose that mentions one),
  or by a name computed at run time (``"dynamic"``: ``importlib.import_module`` of anything but
  a constant, taken as an edge to every module of the caller's own package). Relative
  imports are resolved; ``from .pkg import name`` is an edge to ``pkg.name`` where that is a
  module, else to ``pkg``. Importing a module runs its parent packages' ``__init__`` first, so
  :func:`closure` adds them.
* :func:`module_hash` hashes a module's syntax tree with its docstrings left out (comments are not
  in the tree): an edit to prose changes nothing, a change of one character of code does.
  :func:`code_hash` combines the hashes of a set of modules by name.

The lab keys a training run's stored results by ``code_hash(closure(...))`` over the modules a
run imports (:mod:`normlab.lab.identity`), and the tests derive the house's layering from
:func:`import_graph` (``tests/test_house_layers.py``). Only the lab and the tests use this module.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parents[1]  # the installed normlab package
KINDS = ("import", "lazy", "typing", "string", "dynamic")
_DOTTED = re.compile(r"(normlab(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_]\w*)?")


class Edge(NamedTuple):
    """One import of a normlab module by another."""

    source: str  # the importing module ("normlab.models.block")
    target: str  # the imported module ("normlab.nn.layers")
    kind: str  # import / lazy / typing / string (KINDS)
    line: int  # the line of the import in the source's file


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """The dotted name of the module at ``path`` (a ``.py`` file under ``root``)."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.lru_cache(maxsize=4)
def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(node: ast.AST, package: str, known: dict[str, Path]) -> list[str]:
    """The normlab modules one import statement reaches."""
    out = []
    if isinstance(node, ast.Import):
        out = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = _resolve(node, package)
        for a in node.names:
            sub = f"{base}.{a.name}"
            out.append(sub if sub in known else base)
    return [_known_prefix(t, known) for t in out if t.split(".")[0] == "normlab"]


def _known_prefix(name: str, known: dict[str, Path]) -> str:
    """The longest prefix of a dotted name that is a module (a class's module for
    ``normlab.nn.layers.LayerNorm``)."""
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def _dynamic_import(node: ast.Call) -> bool:
    """``import_module(<not a constant>)``: a module named at run time."""
    if not node.args:
        return False
    f = node.func
    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return called == "import_module" and not isinstance(node.args[0], ast.Constant)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST, name: str, package: str, known: dict[str, Path]) -> list[Edge]:
    edges: list[Edge] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            k = kind
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                k = "lazy" if kind == "import" else kind
            elif isinstance(child, ast.If) and _is_type_checking(child):
                k = "typing"
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                edges.extend(Edge(name, t, k, child.lineno)
                             for t in _targets(child, package, known))
            elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                m = _DOTTED.fullmatch(child.value)  # a dotted name, not prose naming one
                target = _known_prefix(m.group(1), known) if m else ""
                if target in known:
                    edges.append(Edge(name, target, "string", child.lineno))
            elif isinstance(child, ast.Call) and _dynamic_import(child):
                edges.extend(Edge(name, t, "dynamic", child.lineno) for t in known
                             if t.startswith(package + "."))
            visit(child, k)

    visit(tree, "import")
    return edges


@functools.lru_cache(maxsize=4)
def import_graph(root: Path = PACKAGE) -> tuple[Edge, ...]:
    """Every import of a normlab module by a normlab module under ``root`` (:class:`Edge`), a
    module's imports of itself and docstrings' mentions left out."""
    known = modules(root)
    edges: list[Edge] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        _strip_docstrings(tree)
        edges += [e for e in _walk(tree, name, _package_of(name, path), known)
                  if e.target != name and e.target in known]
    return tuple(edges)


def closure(entries: Iterable[str], root: Path = PACKAGE,
            kinds: tuple[str, ...] = ("import", "lazy", "string", "dynamic")) -> set[str]:
    """The modules importing ``entries`` can run: each entry, its parent packages (their
    ``__init__`` runs first), and transitively what any of them imports by an edge of ``kinds``.
    An entry that is not a module of the package is refused by name."""
    known = modules(root)
    todo = list(entries)
    for e in todo:
        if e not in known:
            raise ValueError(f"entries: {e!r} is not a module of {root.name}")
    by_source: dict[str, list[str]] = {}
    for edge in import_graph(root):
        if edge.kind in kinds:
            by_source.setdefault(edge.source, []).append(edge.target)
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += by_source.get(m, [])
    return seen


def _strip_docstrings(tree: ast.AST) -> None:
    """Remove the docstring of the module and of every class and function, in place (a body
    left empty gets ``pass``, so the tree still compiles)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]


def source_hash(text: str, filename: str = "<source>") -> str:
    """A hash of Python source as it computes: its syntax tree without docstrings or comments,
    positions left out."""
    tree = ast.parse(text, filename)
    _strip_docstrings(tree)
    dump = ast.dump(tree, annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dump.encode()).hexdigest()


def module_hash(name: str, root: Path = PACKAGE) -> str:
    """:func:`source_hash` of the module ``name`` of the package under ``root``."""
    path = modules(root)[name]
    return source_hash(path.read_text(encoding="utf-8"), str(path))


def code_hash(names: Iterable[str], root: Path = PACKAGE, length: int = 16) -> str:
    """One hash of the modules ``names`` (by name and :func:`module_hash`), in sorted order:
    the first ``length`` hex digits."""
    h = hashlib.sha256()
    for name in sorted(set(names)):
        h.update(f"{name}\0{module_hash(name, root)}\0".encode())
    return h.hexdigest()[:length]


__all__ = ["KINDS", "PACKAGE", "Edge", "closure", "code_hash", "import_graph", "module_hash",
           "module_name", "modules", "source_hash"]
