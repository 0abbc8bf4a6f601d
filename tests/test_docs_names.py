"""Every name the documentation gives resolves: each dotted ``normlab.…`` name, and each
backticked path that starts with a normlab module's name (``models.inspect.FORMATS``,
``train.budget``, ``framework.training_hash``), in docs/*.md, README.md, CONTRIBUTING.md and the
docstrings and comments of src/normlab, names a module or an attribute that exists (imported; a
module that cannot be imported here, torch's without torch, is read by its syntax tree)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import io
import re
import tokenize
from pathlib import Path

import pytest

from normlab.lab import codebase

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

FULL = re.compile(r"\bnormlab(?:[.:][A-Za-z_]\w*)+")  # normlab.nn.layers:Norm as well
TICKED = re.compile(r"`{1,2}([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`{1,2}")
# a path in a comment needs no backticks, but must start at a package of normlab's own
BARE = re.compile(r"(?<![\w.])((?:functional|models|train|precision|kernels|testing|lab)"
                  r"(?:\.[A-Za-z_]\w*)+)")
FILES = {"py", "md", "json", "toml", "png", "txt", "html", "ipynb", "yaml", "yml", "csv", "npz",
         "safetensors", "bin", "log", "sh"}
# first parts that are also variables in the prose (config.steps, module.set_impl, ...)
# (``precision.new_state``): such a name is read as a path only when its second part is a
# module (``precision.headroom.tensor_stats``)
VARIABLES = {"config", "module", "data", "report", "summary", "results", "entry", "compare",
             "inspect", "block", "checkpoint", "store", "task", "fields", "attention", "norms",
             "numerics", "policy", "precision", "optim", "scaling", "stats", "budget", "probes",
             "cache"}
# first parts that may name another library's module: the name resolves in either
OTHER = {"torch": "torch", "nn": "torch.nn", "optim": "torch.optim", "safetensors": "safetensors"}


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0].lineno, body[0].value.value


def texts() -> list[tuple[str, str, bool]]:
    """(where, text, is_comment) for every page, docstring and comment."""
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"), False) for p in PAGES]
    for path in codebase.modules().values():
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT)
        out += [(f"{rel}:{line}", text, False) for line, text in _docstrings(ast.parse(source))]
        out += [(f"{rel}:{t.start[0]}", t.string, True) for t in
                tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT]
    return out


def names_in(text: str, comment: bool = False) -> set[str]:
    """The dotted names of normlab a text gives: full (``normlab.x.y``, ``normlab.x:y``) and
    relative (``x.y`` in backticks whose first part is a normlab module's name)."""
    known = codebase.modules()
    last = {m.rpartition(".")[2] for m in known}
    found = {m.group(0).replace(":", ".") for m in FULL.finditer(text)}
    rel = [m.group(1) for m in TICKED.finditer(text)]
    if comment:
        rel += [m.group(1) for m in BARE.finditer(text)]
    for n in rel:
        first, second = n.split(".")[:2]
        if first not in last | set(OTHER) or first == "normlab" or \
                n.rpartition(".")[2] in FILES:
            continue
        if first in VARIABLES and not any(m.endswith(f".{first}.{second}") for m in known):
            continue
        found.add(n)
    return found


@functools.cache
def _tree(module: str) -> ast.Module:
    return ast.parse(codebase.modules()[module].read_text(encoding="utf-8"))


def _in_tree(body: list[ast.stmt], attrs: list[str]) -> bool:
    """``attrs`` (a name, then its attributes) defined in a module's or class's body: a def, a
    class, an assignment, an import, or ``self.<name> =`` in a method."""
    if not attrs:
        return True
    name, rest = attrs[0], attrs[1:]
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name == name:
            return not rest or (isinstance(node, ast.ClassDef) and _in_tree(node.body, rest))
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and not rest:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not rest and \
                any((a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
    return any(isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.value, ast.Name)
               and n.value.id == "self" for n in ast.walk(ast.Module(body=body,
                                                                    type_ignores=[]))
               if isinstance(n, ast.Attribute)) and not rest


def _has(obj: object, name: str) -> tuple[bool, object]:
    """``obj.name``, or a dataclass field / annotated attribute / ``self.name =`` of a class."""
    try:
        return True, getattr(obj, name)
    except AttributeError:
        pass
    if inspect.isclass(obj):
        if name in getattr(obj, "__dataclass_fields__", {}) or \
                any(name in getattr(k, "__annotations__", {}) for k in obj.__mro__):
            return True, None
        try:
            source = inspect.getsource(obj)
        except (OSError, TypeError):
            return False, None
        return re.search(rf"\bself\.{name}\s*[:=]", source) is not None, None
    return False, None


def _attrs(obj: object, attrs: list[str]) -> bool:
    """``obj.a.b...``; a function or class named through a module that is not a package must
    be defined there or exported by it (``__all__``): its home, not a module that merely imports
    it (``train.probes.residual_headroom``, not ``train.trainer.residual_headroom``)."""
    for a in attrs:
        owner = obj
        ok, obj = _has(obj, a)
        if not ok:
            return False
        if obj is None:  # a field: what follows is the value's attribute, not checked
            return True
        if inspect.ismodule(owner) and not hasattr(owner, "__path__") and \
                (inspect.isfunction(obj) or inspect.isclass(obj)) and \
                getattr(obj, "__module__", owner.__name__) != owner.__name__ and \
                a not in getattr(owner, "__all__", ()):
            return False
    return True


@functools.cache
def resolves(dotted: str) -> bool:
    """Whether ``normlab.a.b.c`` names a module of normlab or an attribute of one."""
    parts = dotted.split(".")
    known = codebase.modules()
    i = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in known), 0)
    if i == 0:
        return False
    module, attrs = ".".join(parts[:i]), parts[i:]
    try:
        obj = importlib.import_module(module)
    except ImportError:  # torch's modules without torch: by the syntax tree
        return _in_tree(_tree(module).body, attrs)
    return _attrs(obj, attrs)


def _external(dotted: str) -> bool | None:
    """Whether a name resolves in the other library its first part may name; None when that
    library is not installed here."""
    first, *rest = dotted.split(".")
    try:
        obj = importlib.import_module(OTHER[first])
    except ImportError:
        return None
    return _attrs(obj, rest)


def resolve_relative(name: str) -> bool | None:
    """A path relative to any normlab module of its first part's name (``hf.families`` ->
    ``normlab.models.hf.families``), or to the other library that name may mean."""
    first = name.split(".")[0]
    homes = [m for m in codebase.modules() if m.rpartition(".")[2] == first]
    if any(resolves(f"{h}.{name.partition('.')[2]}") for h in homes):
        return True
    return _external(name) if first in OTHER else False


# names that do not resolve yet, in files being changed by others, each with its reason
PENDING: dict[tuple[str, str], str] = {}


@functools.cache
def unresolved() -> tuple[tuple[str, str], ...]:
    """(where, name) of every name that does not resolve."""
    bad = []
    for where, text, comment in texts():
        for name in sorted(names_in(text, comment)):
            ok = resolves(name) if name.startswith("normlab.") or name == "normlab" else \
                resolve_relative(name)
            if ok is False:
                bad.append((where, name))
    return tuple(bad)


def test_every_name_in_the_docs_and_docstrings_resolves():
    bad = [(w, n) for w, n in unresolved() if (w.partition(":")[0], n) not in PENDING]
    assert not bad, "names that do not resolve:\n" + "\n".join(f"{w}: {n}" for w, n in bad)


def test_every_pending_name_is_still_there():
    """A pending name that resolves now, or is gone, is taken off the list."""
    still = {(w.partition(":")[0], n) for w, n in unresolved()}
    assert all(reason for reason in PENDING.values())
    assert set(PENDING) <= still, set(PENDING) - still


@pytest.mark.parametrize("text,name,ok", [
    ("see ``models.inspect.FORMATS``", "models.inspect.FORMATS", False),  # moved away
    ("``train.trainer.residual_headroom``", "train.trainer.residual_headroom", False),  # imported
    ("the key is `framework.training_hash`", "framework.training_hash", True),
    ("`train.budget` checks", "train.budget", True),
    ("normlab.nn.layers:Norm builds it", "normlab.nn.layers.Norm", True),
    ("normlab.functional.norms.register_nn", "normlab.functional.norms.register_nn", False),
    ("a field: `Check.kind`", None, None),  # a class's name is not a module's: not read
    ("`config.json` and `results.py`", None, None),  # files, not names
])
def test_the_names_are_found_and_judged(text, name, ok):
    """The scan can fail: a moved name is found and does not resolve."""
    found = names_in(text)
    if name is None:
        assert not found
        return
    assert found == {name}
    got = resolves(name) if name.startswith("normlab.") else resolve_relative(name)
    assert got is ok


def test_a_comment_names_a_path_without_backticks():
    assert names_in("# models.inspect.tensor_stats, no scaling", comment=True) == {
        "models.inspect.tensor_stats"}
    assert resolve_relative("precision.headroom.tensor_stats")
    assert not resolve_relative("models.inspect.tensor_statistics")


def test_dataclass_fields_and_instance_attributes_resolve():
    assert resolves("normlab.lab.framework.Check.kind")  # a dataclass field
    assert resolves("normlab.train.config.TrainConfig.with_overrides")
    assert not resolves("normlab.train.config.TrainConfig.no_such_field")
    assert dataclasses.is_dataclass(importlib.import_module("normlab.lab.framework").Check)
