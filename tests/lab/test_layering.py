"""The core never imports the lab, matplotlib or rich."""

import ast
import subprocess
import sys
from pathlib import Path

import normlab.lab


def test_core_does_not_import_the_lab():
    code = ("import sys, normlab, normlab.functional, normlab.nn, normlab.testing\n"
            "bad = [m for m in ('normlab.lab', 'matplotlib', 'rich') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lab_imports_plotting_lazily():
    code = ("import sys, normlab.lab.framework, normlab.lab.experiments.dropout\n"
            "assert 'matplotlib' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_report_needs_no_test_oracles():
    """`make demo` installs the lab extra only: the report's commands and every experiment load
    without torch or transformers."""
    code = ("import sys, importlib\n"
            "from normlab.lab import framework\n"
            "import normlab.lab.commands.report, normlab.lab.commands.run\n"
            "for name in framework.registry():\n"
            "    framework.load(name)\n"
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


LAB = Path(normlab.lab.__file__).parent


def _imports(path: Path) -> list[str]:
    """The normlab modules a lab file imports (relative imports resolved), at any depth."""
    package = "normlab." + ".".join(path.relative_to(LAB.parent).with_suffix("").parts)
    package = package.rsplit(".", 1)[0] if path.name != "__init__.py" else package[:-9]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out += [name] + [f"{name}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_the_sweep_never_imports_the_commands():
    """No import runs back up the house: lab/sweep sits below lab/commands."""
    bad = [(p.name, m) for p in sorted((LAB / "sweep").glob("*.py")) for m in _imports(p)
           if m.startswith("normlab.lab.commands")]
    assert not bad, bad
    # the scan resolves relative imports (a check that can fail): task.py's ``from ..allocator``
    assert "normlab.lab.allocator.keep_freed_memory" in _imports(LAB / "sweep" / "task.py")


def test_no_function_in_the_lab_runs_over_60_lines():
    """The 60-line limit of the experiments (test_experiment.py) holds for the whole of lab/."""
    long = []
    for path in sorted(LAB.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = n.end_lineno - n.lineno + 1
                if lines > 60:
                    long.append((str(path.relative_to(LAB)), n.name, lines))
    assert not long, long


def _file_of(module: str) -> str | None:
    """The package file (relative to normlab/) that defines ``module`` or, for an imported
    name, the module it comes from."""
    root, parts = LAB.parent, module.split(".")[1:]
    for k in range(len(parts), -1, -1):
        stem = "/".join(parts[:k])
        for rel in (stem + ".py", f"{stem}/__init__.py".lstrip("/")):
            if (root / rel).is_file():
                return rel
    return None


def test_the_training_hash_covers_every_source_a_training_run_executes():
    """An experiment's sweep store is keyed by framework.training_hash: the package without
    normlab.lab, plus the lab's modules that run the training (TRAINING_LAB). Nothing outside the
    lab imports the lab, and what the run's path through the lab (the task a worker executes,
    the runner that groups points into ensembles, the store and its ids, the allocator) imports
    from the lab is covered too; the report's own modules are not."""
    from normlab.lab import framework

    root = LAB.parent
    covered = {p.relative_to(root).as_posix() for p in framework.training_files()}
    assert {"train/trainer.py", "kernels/rounding.py", "lab/sweep/task.py"} <= covered
    assert not {"lab/results.py", "lab/framework.py", "lab/experiments/warmup.py",
                "lab/experiments/notes/warmup.md"} & covered
    outside = [(p.name, m) for p in sorted(root.rglob("*.py")) if LAB not in p.parents
               for m in _imports(p) if m.startswith("normlab.lab")]
    assert not outside, outside
    path = ["lab/sweep/task.py", "lab/sweep/runner.py", "lab/sweep/store.py",
            "lab/sweep/spec.py", "lab/allocator.py"]
    seen = [(rel, m, _file_of(m)) for rel in path for m in _imports(root / rel)
            if m.startswith("normlab.")]
    assert ("lab/sweep/task.py", "normlab.lab.allocator", "lab/allocator.py") in seen
    assert all(f in covered for _, _, f in seen), [s for s in seen if s[2] not in covered]
