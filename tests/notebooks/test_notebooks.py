"""The companion notebooks: committed without outputs, built from their sources, and executed.

Each notebook asserts the numbers it states, so executing it is the test: a change in normlab that
moves a number fails here with the notebook's cell and assertion. The kernel is the running
interpreter (``sys.executable -m ipykernel_launcher``, no kernel spec registered anywhere) and
sees ``src/`` the way this process does, through PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
TIMEOUT_S = 600  # per cell: a guard against a hung kernel, not a timing check


def _load_build():
    """notebooks/build.py as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _ThisInterpreter(KernelSpecManager):
    """Every kernel name resolves to ipykernel on ``sys.executable``."""

    def get_kernel_spec(self, kernel_name):
        return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f",
                                "{connection_file}"],
                          display_name="normlab tests", language="python",
                          resource_dir=str(NOTEBOOKS))


def _kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in sys.path if p and Path(p).is_dir() and (Path(p) / "normlab").is_dir()]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).strip(os.pathsep)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # small arrays on shared cores: one thread wins
    env.setdefault("NUMBA_NUM_THREADS", "1")
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return env


def execute(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """Run a notebook top to bottom in a fresh kernel; (the executed notebook, seconds)."""
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name="python3", kernel_spec_manager=_ThisInterpreter())
    client = nbclient.NotebookClient(nb, km=km, timeout=TIMEOUT_S,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    t0 = time.perf_counter()
    client.execute(env=_kernel_env())
    return nb, time.perf_counter() - t0


def test_there_is_a_notebook_per_section():
    assert len(NAMES) >= 12, NAMES


def test_readme_table_lists_every_notebook():
    readme = (ROOT / "docs" / "notebooks.md").read_text(encoding="utf-8")  # the README's old table
    section = readme.split("## Learn with the chapters", 1)[1].split("\n## ", 1)[0]
    listed = sorted(line.split("`")[1] + ".ipynb" for line in section.splitlines()
                    if line.startswith("| `"))
    assert listed == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_stripped(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], (f"{name} cell {i} has outputs: strip them "
                                        "(notebooks/build.py)")
            assert cell.execution_count is None, f"{name} cell {i} has an execution count"
        assert "execution" not in cell.metadata, f"{name} cell {i} has execution metadata"


def _cells(nb) -> list[tuple[str, str, str]]:
    return [(c.cell_type, c.get("id", ""), c.source) for c in nb.cells]


def test_notebooks_are_the_build_of_their_sources():
    """Cell for cell (kind, id, source): independent of how an nbformat version lays out JSON."""
    build = _load_build()
    assert sorted(build.target(s).name for s in build.sources()) == NAMES
    stale = [build.target(s).name for s in build.sources()
             if _cells(nbformat.read(build.target(s), as_version=4)) != _cells(build.build(s))]
    assert not stale, f"rebuild with `python notebooks/build.py`: {stale}"


def test_build_parses_percent_cells():
    build = _load_build()
    cells = build.parse("# %% [markdown]\n# # Title\n#\n# text\n# %%\nx = 1\n\n# a comment\n")
    assert cells == [("markdown", "# Title\n\ntext"), ("code", "x = 1\n\n# a comment")]
    with pytest.raises(ValueError, match="cell marker"):
        build.parse("# %% [raw]\n")
    with pytest.raises(ValueError, match="must be comments"):
        build.parse("# %% [markdown]\nnot a comment\n")


def test_index_maps_every_experiment_to_notebooks():
    """Each card's notebooks exist; the experiments whose card names none are read from the
    registry (nothing here lists them) and are the ones the notebooks page names, a value
    generated from the same cards (tools/doc_values.py)."""
    from normlab.lab import framework

    index = {n: framework.load(n).CARD.notebooks for n in framework.registry()}  # on each card
    for experiment, notebooks in index.items():
        for nb in notebooks:
            assert nb in NAMES, f"{experiment}'s card: {nb}, which does not exist"
    without = [e for e, nbs in index.items() if not nbs]
    assert len(without) < len(index)  # the chapters teach most of the lab
    page = (ROOT / "docs" / "notebooks.md").read_text(encoding="utf-8")
    named = re.search(r"<!-- gen:experiments.without_notebooks -->(.*?)<!-- /gen -->", page)
    assert named, "docs/notebooks.md names no experiments without a notebook"
    assert re.findall(r"`([^`]+)`", named.group(1)) == without, \
        "docs/notebooks.md is stale: run python tools/doc_values.py"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_its_numbers_hold(name, record_property):
    nb, seconds = execute(NOTEBOOKS / name)
    record_property("seconds", round(seconds, 1))
    print(f"{name}: {seconds:.1f} s")
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors


def test_the_lab_sizes_a_notebook_quotes_are_read_from_the_configs():
    """A notebook's text never types the lab's quick or full size (depths, seeds, steps): it
    prints them from the experiment's config, so they cannot go stale when a size changes."""
    typed = []
    for src in sorted((ROOT / "notebooks" / "src").glob("*.py")):
        for i, line in enumerate(src.read_text().splitlines(), 1):
            if line.startswith("#") and re.search(r"(quick|full) size[^.;:]*\d", line):
                typed.append(f"{src.name}:{i}: {line}")
    assert not typed, typed
