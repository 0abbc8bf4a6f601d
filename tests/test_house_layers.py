"""The map equals the house: docs/architecture.md's layer tables are the rule, the import graph
read from the code (``normlab.lab.codebase.import_graph``: every kind, top-level, lazy, typing,
by a dotted string or a computed name) is the house, and every import must be allowed by the
map. The imports that still run up are named below, each with its reason; a named one that is no
longer in the code fails too, so the list only shrinks."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import pytest

from normlab.lab import codebase

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BELOW = "everything below"


class Allowed(NamedTuple):
    """An import that runs up, allowed by name until it is fixed."""

    source: str  # the importing module (or a package: every module under it)
    target: str  # the imported module (or a package: every module under it)
    kinds: tuple[str, ...]  # codebase.KINDS
    reason: str


EXCEPTIONS = (
    Allowed("normlab.precision.headroom", "normlab.kernels", ("lazy",),
            "tensor_stats' default impl='kernel' runs the numba passes of kernels.headroom for "
            "its callers below kernels (normlab.torch's Monitor and inspect); the fix, kernels "
            "owning tensor_stats' fast path as an OPS entry that the callers choose as they do "
            "kernels.quantize, edits kernels/, torch/inspect.py and models/inspect.py"),
    Allowed("normlab.lab.contract", "normlab.lab.sweep.executors", ("import",),
            "framework split pending: the contract's RunContext checks an executor's name with "
            "sweep.executors.check_executor"),
    Allowed("normlab.lab.running", "normlab.lab", ("dynamic",),
            "load() imports the experiment the registry names, a module below it; the scan "
            "takes a computed name for every module of the package"),
    Allowed("normlab.lab.identity", "normlab.lab.sweep.task", ("string",),
            "the code a training run executes starts at the sweep's task module, named as an "
            "entry of the hash that keys the sweep stores (which import identity)"),
    Allowed("normlab.torch.checkpoint", "normlab.models.hf.families", ("lazy",),
            "inspect --torch refuses a stored tensor the model does not take, as load_hf does, "
            "and accepts the buffers load_hf skips: their names are the families' records "
            "(GPT-2's attn.masked_bias), read where the refusal is made"),
    Allowed("normlab.lab.sweep.executors", "normlab.lab.cli", ("lazy",),
            "executor_from_args raises the command line's UsageError for a bad --workers or "
            "--ray; UsageError lives in cli.py"),
)

# cycles through modules of different packages, by the packages they join
CYCLES = {
    frozenset({"normlab.lab", "normlab.lab.commands"}):
        "cli.py holds the command table, which imports each command by name, and UsageError, "
        "which the commands and the shared flags (arguments.py) raise: one floor of the lab",
}


# ---- the map ------------------------------------------------------------------------------------
class Row(NamedTuple):
    units: tuple[str, ...]  # "train/", "_checks.py", "cli.py", "commands/"
    may: tuple[str, ...] | None  # the units it may import; None: everything below


def _rows(marker: str, text: str | None = None) -> list[Row]:
    """The table after ``<!-- {marker}`` in architecture.md, top to bottom."""
    text = DOC.read_text(encoding="utf-8") if text is None else text
    m = re.search(rf"<!-- {marker}\b.*?-->\n(.*?)<!-- end of {marker} -->", text, re.S)
    assert m, f"docs/architecture.md has no table marked {marker!r}"
    rows = []
    for line in m.group(1).splitlines()[2:]:  # after the header and the rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        units = tuple(re.findall(r"`([^`]+)`", cells[0]))
        may = None if cells[-1] == BELOW else (
            () if cells[-1] == "nothing" else tuple(re.findall(r"`([^`]+)`", cells[-1])))
        rows.append(Row(units, may))
    return rows


def _allowed(rows: list[Row]) -> dict[str, set[str]]:
    """unit -> the units it may import (its own floor's included)."""
    out = {}
    for i, row in enumerate(rows):
        below = {u for r in rows[i + 1:] for u in r.units}
        may = below if row.may is None else set(row.may)
        for u in row.units:
            out[u] = may | set(row.units)
    return out


def unit(module: str) -> str:
    """The row of a module: ``normlab.train.probes`` -> ``train/``, ``normlab._checks`` ->
    ``_checks.py``, ``normlab`` -> ``__init__.py``; inside the lab, ``lab:`` and the lab's row
    (``lab:cli.py``, ``lab:commands/``, ``lab:__init__.py``)."""
    parts = module.split(".")[1:]
    known = codebase.modules()
    if not parts:
        return "__init__.py"
    if parts[0] == "lab":
        rest = parts[1:]
        if not rest:
            return "lab:__init__.py"
        package = ".".join(["normlab", "lab", rest[0]])
        is_pkg = known[package].name == "__init__.py" if package in known else True
        return f"lab:{rest[0]}/" if is_pkg else f"lab:{rest[0]}.py"
    name = "normlab." + parts[0]
    return f"{parts[0]}/" if known[name].name == "__init__.py" else f"{parts[0]}.py"


def _rule() -> dict[str, set[str]]:
    """unit -> the units it may import, from both tables (the lab's floors prefixed "lab:")."""
    rule = _allowed(_rows("layers"))
    lab = _allowed(_rows("lab layers"))
    below_lab = rule.pop("lab/")
    for u, may in lab.items():
        rule[f"lab:{u}"] = {f"lab:{m}" for m in may} | below_lab - {"lab/"}
    return rule


def _excepted(e: codebase.Edge) -> Allowed | None:
    def under(name: str, prefix: str) -> bool:
        return name == prefix or name.startswith(prefix + ".")

    return next((a for a in EXCEPTIONS if under(e.source, a.source) and under(e.target, a.target)
                 and e.kind in a.kinds), None)


def upward(edges, rule: dict[str, set[str]]) -> list[codebase.Edge]:
    """The edges whose target's row the source's row may not import (a module without a row is
    left to test_the_map_lists_every_package_and_module_once)."""
    return [e for e in edges if unit(e.source) in rule and unit(e.target) in rule
            and unit(e.target) not in rule[unit(e.source)]]


def _where(e: codebase.Edge) -> str:
    path = codebase.modules()[e.source].relative_to(ROOT / "src")
    return f"{path}:{e.line} imports {e.target} ({e.kind}): {unit(e.source)} -> {unit(e.target)}"


# ---- the tests ----------------------------------------------------------------------------------
def test_the_map_lists_every_package_and_module_once():
    core, lab = _rows("layers"), _rows("lab layers")
    listed = [u for r in core for u in r.units] + [f"lab:{u}" for r in lab for u in r.units]
    assert len(listed) == len(set(listed)), "a row appears twice"
    actual = {unit(m) for m in codebase.modules()} | {"lab/"}
    assert set(listed) == actual, (f"not in the map: {sorted(actual - set(listed))}; "
                                   f"in the map only: {sorted(set(listed) - actual)}")
    for name in ("torch/", "portable.py", "_checks.py", "_files.py", "testing/", "lab/"):
        assert name in listed


def test_each_row_may_import_only_rows_below_it():
    for marker in ("layers", "lab layers"):
        rows = _rows(marker)
        for i, row in enumerate(rows):
            below = {u for r in rows[i + 1:] for u in r.units}
            assert row.may is None or set(row.may) <= below, (marker, row)


def test_no_import_runs_up():
    bad = [e for e in upward(codebase.import_graph(), _rule()) if _excepted(e) is None]
    assert not bad, "imports against docs/architecture.md's layers:\n" + "\n".join(
        sorted({_where(e) for e in bad}))


def test_the_rule_catches_an_upward_import():
    """The check can fail: an edge up the house (functional naming nn, the sweep importing the
    commands, the core importing the lab) is found, one down is not."""
    E = codebase.Edge
    edges = [E("normlab.functional.norms", "normlab.nn.layers", "string", 1),
             E("normlab.lab.sweep.store", "normlab.lab.commands.run", "lazy", 2),
             E("normlab.train.trainer", "normlab.lab.framework", "lazy", 3),
             E("normlab.testing.oracles", "normlab.kernels", "typing", 4),
             E("normlab.nn.layers", "normlab.functional.norms", "import", 5)]
    assert [e.line for e in upward(edges, _rule())] == [1, 2, 3, 4]


def test_every_named_exception_is_still_in_the_code():
    edges = codebase.import_graph()
    for a in EXCEPTIONS:
        assert a.reason and set(a.kinds) <= set(codebase.KINDS)
        hits = [e for e in upward(edges, _rule()) if _excepted(e) is a]
        assert hits, f"{a.source} -> {a.target} no longer runs up: remove it from EXCEPTIONS"


def _cycles(edges) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def _package(module: str) -> str:
    return module if codebase.modules()[module].name == "__init__.py" else \
        module.rpartition(".")[0]


def test_no_cycle_between_modules_of_different_packages():
    """Over the imports that run (typing ones left out) and leaving out the named exceptions:
    a cycle is allowed inside one package only, or where CYCLES names its packages."""
    edges = [e for e in codebase.import_graph() if e.kind != "typing" and _excepted(e) is None]
    bad = []
    for comp in _cycles(edges):
        packages = frozenset(_package(m) for m in comp)
        if len(packages) > 1 and packages not in CYCLES:
            bad.append(sorted(comp))
    assert not bad, bad
    assert [c for c in _cycles(edges) if frozenset(map(_package, c)) in CYCLES] or not CYCLES


def test_the_core_has_no_cycle_at_all():
    """Outside the lab no module imports, at any depth, one that imports it back (the circles
    attention <-> softmax and probes <-> trainer are gone)."""
    edges = [e for e in codebase.import_graph() if e.kind != "typing"
             and not e.source.startswith("normlab.lab") and _excepted(e) is None]
    assert _cycles(edges) == []
    E = codebase.Edge
    assert _cycles([E("a.x", "a.y", "lazy", 1), E("a.y", "a.x", "import", 2)]) == [{"a.x", "a.y"}]


@pytest.mark.parametrize("module,forbidden", [
    ("normlab.functional.norms", ("normlab.nn", "normlab.testing")),  # they register themselves
    ("normlab.functional.softmax", ("normlab.functional.attention",)),  # causal_mask lives here
    ("normlab.train.probes", ("normlab.train.trainer",)),  # residual_headroom lives in probes
])
def test_the_fixed_circles_stay_fixed(module, forbidden):
    """No edge that runs (typing ones aside) from these modules to the ones they used to name."""
    targets = {e.target for e in codebase.import_graph() if e.source == module
               and e.kind != "typing"}
    assert targets and not {t for t in targets if t.startswith(forbidden)}
