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


def test_nothing_outside_the_lab_imports_the_lab():
    """The core never imports the lab (at any depth, lazily included); what a training run
    executes of the lab is keyed in tests/lab/test_identity.py."""
    root = LAB.parent
    outside = [(p.name, m) for p in sorted(root.rglob("*.py")) if LAB not in p.parents
               for m in _imports(p) if m.startswith("normlab.lab")]
    assert not outside, outside
