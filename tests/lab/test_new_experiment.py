"""A new experiment is its module plus one registry line: a throwaway experiment written to a
temporary module, added through the public registry (``normlab.lab.experiments.EXPERIMENTS``)
and nothing else, runs at its tiny size through the framework, ``normlab run``, ``normlab
list`` and ``normlab report``, with its cross-field rule refused at the command line."""

import json
import sys
import textwrap

import pytest

from normlab.lab import experiments
from normlab.lab import framework as E
from normlab.lab.cli import main as cli

MODULE = '''
"""A throwaway experiment: the mean of normal draws is near 0."""

from dataclasses import dataclass

import numpy as np

from normlab.lab import stats
from normlab.lab.framework import Card, Check

CARD = Card(name="throwaway", title="Mean of normal draws", citation="Gauss 1809",
            claim="The mean of N(0, 1) draws is near 0.", published="0",
            method="Draws per seed, a mean per seed.", short="the mean is near 0")


@dataclass(frozen=True)
class Config:
    draws: int = 1000  # normal draws per seed
    seeds: int = 8  # seeds: an interval over them
    seed: int = 0  # the first seed


SIZES = {"tiny": {"draws": 100, "seeds": 4}, "quick": {}, "full": {"draws": 100_000}}


def validate(config: Config) -> None:
    if config.seeds < 2:
        raise ValueError(f"seeds must be >= 2 (an interval over seeds); got {config.seeds}")


def memory(config: Config) -> dict[str, float]:
    return {"draws": 8.0 * config.draws}


def measure(config: Config, ctx) -> dict:
    means = [float(np.random.default_rng(config.seed + i).normal(size=config.draws).mean())
             for i in range(config.seeds)]
    ctx.progress(1, 1, "done")
    return {"means": means}


def judge(data: dict, config: Config) -> list[Check]:
    interval = stats.mean_interval(data["means"])
    return [Check.band(claim="the mean is within 0.5 of 0", published="0", interval=interval,
                       lo=-0.5, hi=0.5, source="Gauss 1809")]


def headline(data: dict, config: Config) -> str:
    return stats.mean_interval(data["means"]).text()


def plot(result, out_dir) -> list[str]:
    return []
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    (tmp_path / "throwaway_experiment.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = dict(experiments.EXPERIMENTS)
    reg["throwaway"] = "throwaway_experiment"  # the one registry line
    monkeypatch.setattr(experiments, "EXPERIMENTS", reg)
    yield tmp_path
    sys.modules.pop("throwaway_experiment", None)


def test_a_new_experiment_needs_its_module_and_one_registry_line(throwaway, capsys):
    out = throwaway / "out"
    o = E.run_experiment("throwaway", size="tiny", out_dir=out)
    assert o.result.verdict == E.REPRODUCED and o.result.checks[0].interval is not None
    assert json.loads((out / "throwaway" / "result.json").read_text())["verdict"] == E.REPRODUCED
    assert cli(["list"]) == 0 and "throwaway" in capsys.readouterr().out
    assert cli(["run", "throwaway", "--tiny", "--out", str(throwaway / "run")]) == 0
    assert cli(["run", "throwaway", "--tiny", "--seeds", "1", "--out", str(throwaway / "x")]) == 2
    assert "seeds must be >= 2" in capsys.readouterr().err
    assert cli(["report", "--tiny", "--only", "throwaway", "--out", str(throwaway / "rep")]) == 0
    summary = json.loads((throwaway / "rep" / "summary.json").read_text())
    assert [r["name"] for r in summary["experiments"]] == ["throwaway"]
    assert "Mean of normal draws" in (throwaway / "rep" / "report.html").read_text()


def test_the_new_experiment_passes_the_shape_rules_of_every_experiment(throwaway):
    """test_experiment.py's rules read the registry: the throwaway module meets them too."""
    import ast
    import inspect

    m = E.load("throwaway")
    tree = ast.parse(inspect.getsource(m))
    order = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
             and n.name in ("Config", "measure", "judge", "headline", "plot")]
    assert order == ["Config", "measure", "judge", "headline", "plot"]
    for size in E.SIZES:
        E.configure(m, size)
